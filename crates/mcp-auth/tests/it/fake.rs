//! A scripted authorization server: answers by `METHOD url` (query left out), records every
//! request, and can hold token requests back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use mcp_auth::{
    FetchError, HttpFetch, Login, MemoryTokenStore, OAuthOptions, StoredLogin, TokenStore,
    loopback_redirect_uri,
};
use mcp_config::{HttpSpec, OAuthLogin, ServerSpec, TransportSpec};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

pub(crate) const MCP_URL: &str = "https://mcp.example/mcp";
pub(crate) const ISSUER: &str = "https://auth.example";
pub(crate) const PRM_URL: &str = "https://mcp.example/.well-known/oauth-protected-resource/mcp";
pub(crate) const AS_METADATA_URL: &str =
    "https://auth.example/.well-known/oauth-authorization-server";
pub(crate) const TOKEN_URL: &str = "https://auth.example/token";
pub(crate) const REGISTER_URL: &str = "https://auth.example/register";
pub(crate) const REDIRECT_PORT: u16 = 8765;

/// One request as sent.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub(crate) key: String,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Sent {
    /// The form body's value of `name`.
    pub(crate) fn form(&self, name: &str) -> Option<String> {
        form_urlencoded::parse(self.body.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

#[derive(Debug, Default)]
pub(crate) struct Fake {
    routes: Mutex<HashMap<String, Vec<(u16, Value)>>>,
    log: Mutex<Vec<Sent>>,
    posts: AtomicUsize,
    /// When set, token requests wait for a permit.
    pub(crate) gate: Option<Semaphore>,
    /// When set, every answer carries `DPoP-Nonce: <prefix>-<n>`, `n` counting answers (a
    /// new nonce each time).
    pub(crate) dpop_nonce: Mutex<Option<(String, usize)>>,
}

impl Fake {
    /// Token requests wait for a permit of `gate`.
    pub(crate) fn gated(gate: Semaphore) -> Self {
        Self {
            gate: Some(gate),
            ..Self::default()
        }
    }

    /// Answers `key` with `body` from now on.
    pub(crate) fn route(&self, key: &str, status: u16, body: Value) {
        self.routes
            .lock()
            .unwrap()
            .insert(key.to_owned(), vec![(status, body)]);
    }

    /// Answers `key` with each of `answers` in turn, the last one from then on.
    pub(crate) fn sequence(&self, key: &str, answers: Vec<(u16, Value)>) {
        self.routes.lock().unwrap().insert(key.to_owned(), answers);
    }

    pub(crate) fn sent(&self) -> Vec<Sent> {
        self.log.lock().unwrap().clone()
    }

    /// The requests to `key`.
    pub(crate) fn sent_to(&self, key: &str) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.key == key).collect()
    }

    pub(crate) fn posts(&self) -> usize {
        self.posts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl HttpFetch for Fake {
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
        _max: usize,
    ) -> Result<http::Response<Bytes>, FetchError> {
        let uri = request.uri().to_string();
        let url = uri.split('?').next().unwrap_or_default();
        let key = format!("{} {url}", request.method());
        self.log.lock().unwrap().push(Sent {
            key: key.clone(),
            headers: request.headers().clone(),
            body: String::from_utf8_lossy(request.body()).into_owned(),
        });
        if request.method() == http::Method::POST {
            self.posts.fetch_add(1, Ordering::SeqCst);
            if let Some(gate) = &self.gate {
                gate.acquire().await.expect("gate").forget();
            }
        }
        let (status, body) = {
            let mut routes = self.routes.lock().unwrap();
            match routes.get_mut(&key) {
                Some(answers) if answers.len() > 1 => answers.remove(0),
                Some(answers) => answers[0].clone(),
                None => (404, json!({"error": "not_found"})),
            }
        };
        let mut response = http::Response::builder().status(status);
        if let Some((prefix, n)) = self.dpop_nonce.lock().unwrap().as_mut() {
            *n += 1;
            response = response.header("dpop-nonce", format!("{prefix}-{n}"));
        }
        Ok(response
            .body(Bytes::from(body.to_string()))
            .expect("response"))
    }
}

/// The authorization server's metadata, with `changes` merged in (`null` removes a field).
pub(crate) fn as_metadata(changes: Value) -> Value {
    let mut doc = json!({
        "issuer": ISSUER,
        "authorization_endpoint": "https://auth.example/authorize?tenant=t1",
        "token_endpoint": TOKEN_URL,
        "registration_endpoint": REGISTER_URL,
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "scopes_supported": ["files:read", "files:write", "offline_access"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
    });
    for (key, value) in changes.as_object().cloned().unwrap_or_default() {
        if value.is_null() {
            doc.as_object_mut().unwrap().remove(&key);
        } else {
            doc[key] = value;
        }
    }
    doc
}

/// A fake with protected-resource metadata, authorization-server metadata (with `changes`),
/// dynamic registration and a token endpoint.
pub(crate) fn server(changes: Value) -> Arc<Fake> {
    let fake = Arc::new(Fake::default());
    fake.route(
        &format!("GET {PRM_URL}"),
        200,
        json!({
            "resource": MCP_URL,
            "authorization_servers": [ISSUER],
            "scopes_supported": ["files:read", "files:write"],
        }),
    );
    fake.route(&format!("GET {AS_METADATA_URL}"), 200, as_metadata(changes));
    fake.route(
        &format!("POST {REGISTER_URL}"),
        201,
        json!({"client_id": "dyn-client", "token_endpoint_auth_method": "none"}),
    );
    fake.route(
        &format!("POST {TOKEN_URL}"),
        200,
        token_answer("access-one-123456", Some("refresh-one-123456"), 3600),
    );
    fake
}

pub(crate) fn token_answer(access: &str, refresh: Option<&str>, expires_in: u64) -> Value {
    let mut answer =
        json!({"access_token": access, "token_type": "Bearer", "expires_in": expires_in});
    if let Some(refresh) = refresh {
        answer["refresh_token"] = Value::from(refresh);
    }
    answer
}

/// Server `srv` at [`MCP_URL`] with the `oauth` table `login`.
pub(crate) fn spec(login: OAuthLogin) -> ServerSpec {
    let mut spec = ServerSpec::new(
        "srv",
        TransportSpec::StreamableHttp(HttpSpec::new(MCP_URL.parse().unwrap())),
    );
    spec.auth.oauth = Some(login);
    spec
}

/// A login of [`spec`] with `login` through `fake` into `store`.
pub(crate) fn login_with(fake: &Arc<Fake>, login: OAuthLogin, store: Arc<dyn TokenStore>) -> Login {
    Login::new(&spec(login), fake.clone(), store)
        .unwrap()
        .with_redirect_uri(loopback_redirect_uri(REDIRECT_PORT))
        .with_options(OAuthOptions::default())
}

pub(crate) fn memory() -> Arc<dyn TokenStore> {
    Arc::new(MemoryTokenStore::new())
}

/// The query value `name` of `url`.
pub(crate) fn param(url: &url::Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// The redirect the authorization server would send for `url`: its `state`, the given code
/// and `iss`.
pub(crate) fn redirect(url: &url::Url, code: &str, iss: Option<&str>) -> String {
    let mut back = url::Url::parse("http://127.0.0.1:8765/callback").unwrap();
    {
        let mut q = back.query_pairs_mut();
        q.append_pair("code", code);
        q.append_pair("state", &param(url, "state").unwrap());
        if let Some(iss) = iss {
            q.append_pair("iss", iss);
        }
    }
    back.to_string()
}

/// A stored login of `srv` for tests of the hook.
pub(crate) fn stored(access: &str, refresh: Option<&str>, expires_in: Option<i64>) -> StoredLogin {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut login = mcp_auth::StoredLogin::new(
        "srv",
        MCP_URL,
        ISSUER,
        "dyn-client",
        TOKEN_URL,
        MCP_URL,
        access.into(),
    );
    login.refresh_token = refresh.map(Into::into);
    // A token of one hour's lifetime with `expires_in` seconds left.
    if let Some(left) = expires_in {
        login.obtained_at = (now as i64 + left - 3600).max(0) as u64;
        login.expires_at = Some((now as i64 + left).max(0) as u64);
    } else {
        login.obtained_at = now;
    }
    login
}

/// A directory removed when dropped.
pub(crate) struct TempDir(std::path::PathBuf);

impl TempDir {
    pub(crate) fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "mcp-auth-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
