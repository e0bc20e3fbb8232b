//! `[serve] state` wired into the gateway: one connection to the fleet's Redis ([`FleetState`]),
//! and what is shared through it — mcp-state's Redis rate limiter as mcp-serve's
//! [`RateLimitStore`], so that `[serve] rate_limit` is counted fleet-wide (mcp-serve knows no
//! Redis, mcp-state no gateway; this adapter is where they meet), and the upstream OAuth
//! tokens shared by the replicas (the facade's `RedisTokens`) when a seal key is configured.
//! Sessions are shared in `shared_sessions`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_agent::auth::SharedTokens;
use mcp_agent::state::{RedisTokens, SealKey};
use mcp_serve::{
    OnStoreError, ProofReplay, RateLimit, RateLimitStore, SharedRateLimit, StoreError, Taken,
};
use mcp_state::{Locks, OnError, RateLimiter, RedisState, StateConfig, StateError};

use super::term::say;

/// The fleet's shared state: Redis, connected and checked at start, and the seal key when
/// `seal_key_env` names one.
pub(crate) struct FleetState {
    redis: RedisState,
    config: StateConfig,
    sealed: bool,
}

impl FleetState {
    /// Checks the seal key of `config` when it names one (unset or malformed is an error
    /// naming the variable, before any connection), then connects (checked: reachable,
    /// credentials accepted). Without `seal_key_env`, a note says what is not shared: tokens
    /// and sessions are never stored unsealed.
    pub(crate) async fn connect(config: &StateConfig) -> Result<Self, StateError> {
        let sealed = match config.seal_key_env {
            Some(_) => SealKey::from_config(config).map(|_| true)?,
            None => {
                say(
                    "note: [serve] state has no seal_key_env: sessions and upstream OAuth \
                     tokens are not shared (they are never stored unsealed); a client stays on \
                     the replica that opened its session, and each replica obtains its own \
                     tokens",
                );
                false
            }
        };
        Ok(Self {
            redis: RedisState::connect(config).await?,
            config: config.clone(),
            sealed,
        })
    }

    /// The connection.
    pub(crate) fn redis(&self) -> &RedisState {
        &self.redis
    }

    /// The seal key, when one is configured (checked by [`connect`](Self::connect)).
    pub(crate) fn seal_key(&self) -> Option<SealKey> {
        self.sealed
            .then(|| SealKey::from_config(&self.config).ok())
            .flatten()
    }

    /// A failure of Redis as mcp-serve's stores report it, naming the server.
    pub(crate) fn store_error(&self, e: &StateError) -> StoreError {
        redis_failed(&self.redis, e)
    }

    /// What the gateway does while Redis fails (`on_error`).
    pub(crate) fn on_store_error(&self) -> OnStoreError {
        match self.redis.on_error() {
            OnError::Open => OnStoreError::Open,
            OnError::Closed => OnStoreError::Closed,
        }
    }

    /// The rate limit counted in Redis.
    pub(crate) fn rate_limit(&self) -> SharedRateLimit {
        let limits = RedisLimits {
            limiter: self.redis.rate_limiter(),
            redis: self.redis.clone(),
        };
        SharedRateLimit::new(Arc::new(limits), self.on_store_error())
    }

    /// The DPoP proofs used anywhere in the fleet (`[serve] auth.jwt.dpop`): a proof replayed
    /// at another replica is refused too.
    pub(crate) fn proof_replay(&self) -> Arc<dyn ProofReplay> {
        Arc::new(RedisReplay {
            locks: self.redis.locks(),
            redis: self.redis.clone(),
        })
    }

    /// The store the upstream OAuth tokens are shared in, sealed with the seal key; `None`
    /// without one (each replica obtains its own).
    pub(crate) fn tokens(&self) -> Option<Arc<dyn SharedTokens>> {
        let key = self.seal_key()?;
        Some(Arc::new(RedisTokens::new(&self.redis, key)))
    }
}

/// Buckets counted in the fleet's Redis.
struct RedisLimits {
    limiter: RateLimiter,
    redis: RedisState,
}

/// A failure of `redis` as mcp-serve's stores report it, naming the server.
fn redis_failed(redis: &RedisState, e: &StateError) -> StoreError {
    StoreError::new(format!("Redis at {}", redis.addr()), e.to_string())
}

/// DPoP proofs used, as Redis keys taken with `SET NX PX` (a lease nobody releases: it
/// expires with the proof's window).
struct RedisReplay {
    locks: Locks,
    redis: RedisState,
}

#[async_trait]
impl ProofReplay for RedisReplay {
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.locks
            .try_acquire(key, "used", ttl)
            .await
            .map_err(|e| redis_failed(&self.redis, &e))
    }
}

#[async_trait]
impl RateLimitStore for RedisLimits {
    async fn take(&self, key: &str, limit: RateLimit) -> Result<Result<(), Duration>, StoreError> {
        Ok(self.take_counted(key, limit, 1).await?.map(|_| ()))
    }

    async fn take_counted(
        &self,
        key: &str,
        limit: RateLimit,
        count: u32,
    ) -> Result<Result<Taken, Duration>, StoreError> {
        let count = count.max(1);
        Ok(self
            .limiter
            .take_counted(key, count, limit.per_second, limit.burst)
            .await
            .map_err(|e| redis_failed(&self.redis, &e))?
            .map(|room| Taken {
                tokens: count,
                room: Some(room),
            }))
    }

    async fn take_sparing(
        &self,
        key: &str,
        limit: RateLimit,
        count: u32,
        keep: u32,
    ) -> Result<Option<Taken>, StoreError> {
        Ok(self
            .limiter
            .take_sparing(key, count, keep, limit.per_second, limit.burst)
            .await
            .map_err(|e| redis_failed(&self.redis, &e))?
            .map(|(tokens, room)| Taken {
                tokens,
                room: Some(room),
            }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use mcp_agent::prelude::{ToolCatalog, ToolDispatcher};
    use mcp_agent::{ToolCall, ToolDescriptor, ToolError, ToolOutput};
    use mcp_serve::{Exposure, HttpOptions, HttpServer, RateLimit, ToolServer};
    use mcp_state::{OnError, StateConfig};
    use mcp_test_kit::bounded;
    use mcp_test_kit::redis::RedisServer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// No tools: the requests under test end at the front.
    struct NoTools;

    impl ToolCatalog for NoTools {
        fn tools(&self) -> Vec<ToolDescriptor> {
            Vec::new()
        }
    }

    #[async_trait]
    impl ToolDispatcher for NoTools {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Err(ToolError::unknown_tool(call.name, Vec::new()))
        }
    }

    /// A gateway replica counting 5 requests per ~1000 s in the Redis at `url`.
    async fn replica(url: &str, on_error: OnError) -> HttpServer {
        let config = StateConfig {
            on_error,
            ..StateConfig::new(url)
        };
        let shared = bounded(super::FleetState::connect(&config))
            .await
            .expect("the state")
            .rate_limit();
        let options = HttpOptions::default()
            .with_rate_limit(RateLimit::new(0.001, 5))
            .with_shared_rate_limit(shared)
            .with_sse_keep_alive(None);
        ToolServer::new(Arc::new(NoTools), Exposure::read_only())
            .serve_http(options)
            .await
            .expect("serve over HTTP")
    }

    /// POSTs `initialize` to `server` over a fresh connection: the status and `Retry-After`.
    async fn initialize(server: &HttpServer) -> (u16, Option<u64>) {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            server.url().path(),
            server.local_addr(),
            body.len()
        );
        bounded(async {
            let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap() == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let status = head[9..12].parse().unwrap();
            let retry = head
                .lines()
                .find_map(|l| l.strip_prefix("retry-after: "))
                .map(|v| v.trim().parse().unwrap());
            (status, retry)
        })
        .await
    }

    #[tokio::test]
    async fn a_seal_key_variable_that_is_unset_is_refused_before_any_connection() {
        let config = StateConfig {
            seal_key_env: Some("MCP_AGENT_TEST_UNSET_SEAL_KEY".into()),
            ..StateConfig::new("redis://127.0.0.1:1")
        };
        let e = bounded(super::FleetState::connect(&config))
            .await
            .err()
            .unwrap();
        assert!(matches!(e, mcp_state::StateError::SealKey { .. }), "{e:?}");
        assert!(
            e.to_string().contains("MCP_AGENT_TEST_UNSET_SEAL_KEY"),
            "{e}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn used_dpop_proofs_are_one_set_for_every_connection_under_the_prefix() {
        let Some(redis) = bounded(RedisServer::start()).await else {
            return;
        };
        let config = StateConfig::new(redis.url());
        let mut replays = Vec::new();
        for _ in 0..2 {
            let fleet = bounded(super::FleetState::connect(&config))
                .await
                .expect("the state");
            replays.push(fleet.proof_replay());
        }
        let ttl = mcp_serve::PROOF_WINDOW * 2;
        assert!(
            bounded(replays[0].first_use("dpop-jti:a", ttl))
                .await
                .unwrap()
        );
        assert!(
            !bounded(replays[1].first_use("dpop-jti:a", ttl))
                .await
                .unwrap(),
            "the other replica has seen it"
        );
        assert!(
            !bounded(replays[0].first_use("dpop-jti:a", ttl))
                .await
                .unwrap()
        );
        assert!(
            bounded(replays[1].first_use("dpop-jti:b", ttl))
                .await
                .unwrap()
        );
        // Its key is under the state's prefix and expires with the proof's window.
        let mut admin = redis::Client::open(redis.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let pttl: i64 = redis::cmd("PTTL")
            .arg("mcp-agent:lock:dpop-jti:a")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(pttl > 0 && pttl <= 120_000, "{pttl}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_replicas_share_one_budget_and_its_store_failing_is_closed_or_open() {
        let Some(redis) = bounded(RedisServer::start()).await else {
            return;
        };
        let replicas = [
            replica(&redis.url(), OnError::Closed).await,
            replica(&redis.url(), OnError::Open).await,
        ];
        for i in 0..5 {
            let (status, _) = initialize(&replicas[i % 2]).await;
            assert_eq!(status, 200, "request {i} of the fleet's 5");
        }
        for replica in &replicas {
            let (status, retry) = initialize(replica).await;
            assert_eq!(
                status, 429,
                "the 6th, on either replica: the budget is the fleet's"
            );
            assert!(retry.is_some_and(|s| s > 900), "about 1000 s: {retry:?}");
        }
        drop(redis);
        assert_eq!(initialize(&replicas[0]).await.0, 503, "closed");
        assert_eq!(initialize(&replicas[1]).await.0, 200, "open");
    }
}
