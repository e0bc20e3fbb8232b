//! A fleet for the tests: a Redis, an authorization server, and replicas.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use mcp_agent::ServerSpec;
use mcp_agent::auth::{
    AuthProvider, AuthRegistry, Credentials, MemoryTokenStore, ShareError, SharedEntry,
    SharedTokens, StoredLogin, TokenStore,
};
use mcp_agent::config::SpecOrigin;
use mcp_agent::http::{HttpConnector, HttpOptions};
use mcp_agent::state::{OnError, RedisState, RedisTokens, SealKey, StateConfig};
use mcp_test_kit::bounded;
use mcp_test_kit::oauth::{AuthServer, CLIENT_ID, CLIENT_SECRET};
use mcp_test_kit::redis::RedisServer;
use serde_json::json;

/// The MCP server the specs name (never contacted: the tests ask the auth hooks only).
pub(crate) const MCP_URL: &str = "http://127.0.0.1:9/mcp";

/// The seal key of the fleet.
pub(crate) const KEY: [u8; 32] = [7; 32];

/// Another deployment's key.
pub(crate) const OTHER_KEY: [u8; 32] = [8; 32];

pub(crate) struct Fleet {
    pub(crate) redis: RedisServer,
    pub(crate) auth: AuthServer,
}

/// A Redis and an authorization server; `None` when the Redis peer is missing.
pub(crate) async fn fleet() -> Option<Fleet> {
    let redis = bounded(RedisServer::start()).await?;
    let auth = bounded(AuthServer::start())
        .await
        .expect("authorization server");
    Some(Fleet { redis, auth })
}

/// One replica: its own connector (pool, registry) and Redis connection.
pub(crate) struct Replica {
    pub(crate) connector: HttpConnector,
    pub(crate) tokens: Option<RedisTokens>,
}

impl Replica {
    pub(crate) fn registry(&self) -> &Arc<AuthRegistry> {
        self.connector.auth_registry()
    }
}

impl Fleet {
    /// A replica sharing tokens sealed with `key` (`on_error = closed`).
    pub(crate) async fn replica(&self, key: [u8; 32]) -> Replica {
        self.replica_with(Some(key), OnError::Closed, None).await
    }

    /// A replica sealing with `key` (none: sharing nothing), doing `on_error`, its clock
    /// `skew` ahead (negative: behind).
    pub(crate) async fn replica_with(
        &self,
        key: Option<[u8; 32]>,
        on_error: OnError,
        skew: Option<i64>,
    ) -> Replica {
        let connector = HttpConnector::new(HttpOptions::default()).expect("connector");
        let Some(key) = key else {
            return Replica {
                connector,
                tokens: None,
            };
        };
        let config = StateConfig {
            on_error,
            ..StateConfig::new(self.redis.url())
        };
        let state = bounded(RedisState::connect(&config)).await.expect("Redis");
        let tokens = RedisTokens::new(&state, SealKey::from_bytes(&key));
        let shared: Arc<dyn SharedTokens> = match skew {
            None => Arc::new(tokens.clone()),
            Some(secs) => Arc::new(Skewed {
                inner: tokens.clone(),
                secs,
            }),
        };
        connector.auth_registry().use_shared_tokens(shared);
        Replica {
            connector,
            tokens: Some(tokens),
        }
    }

    /// A spec with client credentials at this fleet's authorization server.
    pub(crate) fn cc_spec(&self) -> ServerSpec {
        cc_spec_at(&self.auth.token_url())
    }

    /// A spec with a user's login (`oauth` table) to [`MCP_URL`].
    pub(crate) fn login_spec(&self) -> ServerSpec {
        ServerSpec::from_json(
            &json!({
                "name": "upstream",
                "url": MCP_URL,
                "connect_timeout_seconds": 10,
                "auth": {"oauth": {"client_id": CLIENT_ID}}
            }),
            SpecOrigin::Operator,
        )
        .expect("a valid spec")
    }

    /// A login at this fleet's authorization server with a live refresh token and an access
    /// token that expires in `left` seconds, as `mcp-agent auth login` would store it.
    pub(crate) fn stored_login(&self, access: &str, left: u64) -> StoredLogin {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut login = StoredLogin::new(
            "upstream",
            MCP_URL,
            self.auth.issuer(),
            CLIENT_ID,
            self.auth.token_url(),
            MCP_URL,
            access.into(),
        );
        login.refresh_token = Some(self.auth.issue_refresh_token().into());
        login.obtained_at = now + left - 3600;
        login.expires_at = Some(now + left);
        login
    }

    /// The full Redis keys of the shared entries (not the leases).
    pub(crate) async fn entries(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.raw(redis::cmd("KEYS").arg("mcp-agent:oauth:*")).await;
        keys.sort();
        keys
    }

    /// Runs a command on a connection of the test's own.
    pub(crate) async fn raw<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let client = redis::Client::open(self.redis.url()).expect("URL");
        let mut connection = bounded(client.get_multiplexed_async_connection())
            .await
            .expect("a raw connection");
        bounded(cmd.query_async(&mut connection))
            .await
            .unwrap_or_else(|e| panic!("raw command: {e}"))
    }
}

/// A spec with client credentials at the token endpoint `token_url`.
pub(crate) fn cc_spec_at(token_url: &str) -> ServerSpec {
    ServerSpec::from_json(
        &json!({
            "name": "upstream",
            "url": MCP_URL,
            "connect_timeout_seconds": 10,
            "auth": {"oauth_client_credentials": {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "token_url": token_url,
            }}
        }),
        SpecOrigin::Operator,
    )
    .expect("a valid spec")
}

/// A store of logins of the replica's own, holding `login`.
pub(crate) async fn store_with(login: &StoredLogin) -> Arc<dyn TokenStore> {
    let store: Arc<dyn TokenStore> = Arc::new(MemoryTokenStore::new());
    store.save(login).await.unwrap();
    store
}

/// The `Authorization` value of `credentials`.
pub(crate) fn bearer(credentials: &Credentials) -> String {
    credentials
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// `n` concurrent `credentials()` on each of `hooks` (on the runtime's threads): every
/// `Authorization` value obtained.
pub(crate) async fn concurrent(hooks: &[Arc<dyn AuthProvider>], n: usize) -> Vec<String> {
    let mut tasks = Vec::new();
    for hook in hooks {
        for _ in 0..n {
            let hook = hook.clone();
            tasks.push(tokio::spawn(async move { hook.credentials().await }));
        }
    }
    let mut got = Vec::new();
    for task in tasks {
        let credentials = bounded(task).await.expect("task").expect("credentials");
        got.push(bearer(&credentials));
    }
    got
}

/// A replica whose wall clock is `secs` ahead of the others' (behind when negative).
#[derive(Debug)]
struct Skewed {
    inner: RedisTokens,
    secs: i64,
}

#[async_trait]
impl SharedTokens for Skewed {
    async fn get(&self, name: &str) -> Result<Option<SharedEntry>, ShareError> {
        self.inner.get(name).await
    }

    async fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), ShareError> {
        self.inner.put(name, value, ttl).await
    }

    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, ShareError> {
        self.inner.try_lock(name, owner, ttl).await
    }

    async fn unlock(&self, name: &str, owner: &str) -> Result<(), ShareError> {
        self.inner.unlock(name, owner).await
    }

    fn refresh_alone_on_error(&self) -> bool {
        self.inner.refresh_alone_on_error()
    }

    fn now(&self) -> SystemTime {
        let offset = Duration::from_secs(self.secs.unsigned_abs());
        if self.secs >= 0 {
            SystemTime::now() + offset
        } else {
            SystemTime::now() - offset
        }
    }
}
