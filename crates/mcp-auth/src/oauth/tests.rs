//! The provider against a scripted in-memory HTTP client (no network): caching, expiry with
//! tokio's paused clock, single-flight, discovery and its refusals. The same behaviour over
//! real sockets is tested in `mcp-transport-http/tests/oauth_*.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures_lite::join_all;
use mcp_config::HttpSpec;
use serde_json::json;
use tokio::sync::Semaphore;

use super::*;
use crate::FetchError;

const SECRET: &str = "cc-secret-value-42";

/// A scripted HTTP client: `routes` maps `METHOD url` to a JSON answer; token answers count.
#[derive(Debug, Default)]
struct Fake {
    routes: Mutex<HashMap<String, (u16, Value)>>,
    log: Mutex<Vec<(String, http::HeaderMap, String)>>,
    token_requests: AtomicUsize,
    /// When set, token requests wait for a permit (to pile callers up behind one attempt).
    gate: Option<Semaphore>,
    /// Token answers never come.
    hang: bool,
}

impl Fake {
    fn route(&self, key: &str, status: u16, body: Value) {
        lock(&self.routes).insert(key.to_owned(), (status, body));
    }

    fn requests(&self) -> Vec<String> {
        lock(&self.log).iter().map(|(k, _, _)| k.clone()).collect()
    }

    fn token_requests(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }

    fn last_token_body(&self) -> String {
        lock(&self.log)
            .iter()
            .rev()
            .find(|(k, _, _)| k.starts_with("POST"))
            .map(|(_, _, body)| body.clone())
            .unwrap_or_default()
    }
}

#[async_trait]
impl HttpFetch for Fake {
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
        _max: usize,
    ) -> Result<http::Response<Bytes>, FetchError> {
        let key = format!("{} {}", request.method(), request.uri());
        lock(&self.log).push((
            key.clone(),
            request.headers().clone(),
            String::from_utf8_lossy(request.body()).into_owned(),
        ));
        if request.method() == http::Method::POST {
            self.token_requests.fetch_add(1, Ordering::SeqCst);
            if self.hang {
                std::future::pending::<()>().await;
            }
            if let Some(gate) = &self.gate {
                gate.acquire().await.expect("gate").forget();
            }
        }
        let (status, body) = lock(&self.routes)
            .get(&key)
            .cloned()
            .unwrap_or((404, json!({"error": "not_found"})));
        Ok(http::Response::builder()
            .status(status)
            .body(Bytes::from(body.to_string()))
            .expect("response"))
    }
}

/// Joins futures on the current task (every one is polled before any completes).
mod futures_lite {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
        let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
        let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            let mut pending = false;
            for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
                if output.is_none() {
                    match future.as_mut().poll(cx) {
                        Poll::Ready(value) => *output = Some(value),
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(
                    outputs
                        .iter_mut()
                        .map(|o| o.take().expect("done"))
                        .collect(),
                )
            }
        })
        .await
    }
}

fn spec(token_url: Option<&str>, secret: &str) -> ServerSpec {
    let mut spec = ServerSpec::new(
        "srv",
        TransportSpec::StreamableHttp(HttpSpec::new(
            "https://mcp.example/api/mcp".parse().unwrap(),
        )),
    );
    spec.auth.oauth_client_credentials = Some(oauth(token_url, secret));
    spec
}

fn oauth(token_url: Option<&str>, secret: &str) -> OAuthClientCredentials {
    let mut json = json!({
        "name": "srv",
        "url": "https://mcp.example/api/mcp",
        "auth": {"oauth_client_credentials": {"client_id": "cid", "client_secret": secret}}
    });
    if let Some(url) = token_url {
        json["auth"]["oauth_client_credentials"]["token_url"] = json!(url);
    }
    ServerSpec::from_json(&json, SpecOrigin::Operator)
        .expect("valid spec")
        .auth
        .oauth_client_credentials
        .expect("oauth")
}

fn registry(fake: &Arc<Fake>) -> AuthRegistry {
    AuthRegistry::new(fake.clone())
}

fn provider(registry: &AuthRegistry, spec: &ServerSpec) -> ClientCredentials {
    let oauth = spec.auth.oauth_client_credentials.clone().unwrap();
    registry.client_credentials(spec, &oauth).unwrap()
}

fn token_answer(token: &str, expires_in: u64) -> Value {
    json!({"access_token": token, "token_type": "Bearer", "expires_in": expires_in})
}

fn bearer(credentials: &Credentials) -> String {
    credentials
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

const TOKEN_URL: &str = "https://as.example/token";

#[tokio::test(start_paused = true)]
async fn tokens_are_cached_until_expiry_minus_skew() {
    let fake = Arc::new(Fake::default());
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t1", 100));
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(Some(TOKEN_URL), SECRET));

    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t1");
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t1");
    assert_eq!(fake.token_requests(), 1);

    // Default skew 30 s: fresh until 70 s after the request.
    tokio::time::advance(Duration::from_secs(69)).await;
    auth.credentials().await.unwrap();
    assert_eq!(fake.token_requests(), 1);
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t2", 100));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t2");
    assert_eq!(fake.token_requests(), 2);
    assert_eq!(auth.token_requests(), 2);

    // A short lifetime keeps at most half of it as skew.
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t3", 10));
    tokio::time::advance(Duration::from_secs(100)).await;
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t3");
    tokio::time::advance(Duration::from_secs(4)).await;
    auth.credentials().await.unwrap();
    assert_eq!(fake.token_requests(), 3);
    tokio::time::advance(Duration::from_secs(2)).await;
    auth.credentials().await.unwrap();
    assert_eq!(fake.token_requests(), 4);
}

#[tokio::test(start_paused = true)]
async fn fifty_concurrent_callers_on_an_expired_token_cause_one_request() {
    let fake = Arc::new(Fake {
        gate: Some(Semaphore::new(0)),
        ..Fake::default()
    });
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t1", 0));
    let registry = registry(&fake);
    let spec = spec(Some(TOKEN_URL), SECRET);
    let first = provider(&registry, &spec);
    fake.gate.as_ref().unwrap().add_permits(1);
    assert_eq!(bearer(&first.credentials().await.unwrap()), "Bearer t1");
    assert_eq!(fake.token_requests(), 1);

    // t1 expired at once. Fifty callers over two sessions of the same credential.
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t2", 3600));
    let second = provider(&registry, &spec);
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let auth = if i % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            async move { auth.credentials().await }
        })
        .collect();
    let gate = async {
        tokio::task::yield_now().await;
        fake.gate.as_ref().unwrap().add_permits(1);
    };
    let (results, ()) = tokio::join!(join_all(calls), gate);
    assert_eq!(fake.token_requests(), 2);
    for result in results {
        assert_eq!(bearer(&result.unwrap()), "Bearer t2");
    }
}

#[tokio::test]
async fn a_refused_secret_is_one_request_for_every_waiting_caller() {
    let fake = Arc::new(Fake {
        gate: Some(Semaphore::new(0)),
        ..Fake::default()
    });
    fake.route(
        &format!("POST {TOKEN_URL}"),
        401,
        json!({"error": "invalid_client", "error_description": "Invalid client credentials"}),
    );
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(Some(TOKEN_URL), "wrong-secret"));
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let auth = auth.clone();
            async move { auth.credentials().await }
        })
        .collect();
    let gate = async {
        tokio::task::yield_now().await;
        fake.gate.as_ref().unwrap().add_permits(1);
    };
    let (results, ()) = tokio::join!(join_all(calls), gate);
    assert_eq!(fake.token_requests(), 1);
    for result in results {
        let err = result.unwrap_err();
        assert_eq!(err.oauth_error(), Some("invalid_client"));
        assert_eq!(
            err.to_string(),
            "server `srv`: the token endpoint refused the client credentials (HTTP 401): invalid_client: Invalid client credentials"
        );
    }
}

#[tokio::test]
async fn on_unauthorized_renews_once_per_rejected_token() {
    let fake = Arc::new(Fake::default());
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t1", 3600));
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(Some(TOKEN_URL), SECRET));
    let t1 = auth.credentials().await.unwrap();
    assert_eq!(fake.token_requests(), 1);

    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t2", 3600));
    // Two requests rejected with t1: the first renews, the second finds t2 and just retries.
    assert_eq!(
        auth.on_unauthorized(&t1, Some("Bearer")).await.unwrap(),
        OnUnauthorized::Retry
    );
    assert_eq!(
        auth.on_unauthorized(&t1, Some("Bearer")).await.unwrap(),
        OnUnauthorized::Retry
    );
    assert_eq!(fake.token_requests(), 2);
    let t2 = auth.credentials().await.unwrap();
    assert_eq!(bearer(&t2), "Bearer t2");

    // t2 refused too, and the endpoint now refuses: an error, not a retry.
    fake.route(
        &format!("POST {TOKEN_URL}"),
        400,
        json!({"error": "invalid_scope"}),
    );
    let err = auth.on_unauthorized(&t2, None).await.unwrap_err();
    assert_eq!(err.oauth_error(), Some("invalid_scope"));
    assert_eq!(fake.token_requests(), 3);
}

/// The protected resource and its authorization server at `as_path` (`""` or `/tenant1`).
fn discovery_routes(fake: &Fake, as_path: &str, issuer: &str, methods: Value) {
    fake.route(
        "GET https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
        200,
        json!({
            "resource": "https://mcp.example/api/mcp",
            "authorization_servers": [format!("https://as.example{as_path}")]
        }),
    );
    fake.route(
        &format!("GET https://as.example/.well-known/oauth-authorization-server{as_path}"),
        200,
        json!({
            "issuer": issuer,
            "token_endpoint": "https://as.example/oauth/token",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": methods,
        }),
    );
    fake.route(
        "POST https://as.example/oauth/token",
        200,
        token_answer("t-discovered", 3600),
    );
}

#[tokio::test]
async fn discovery_starts_at_the_first_401() {
    let fake = Arc::new(Fake::default());
    discovery_routes(
        &fake,
        "/tenant1",
        "https://as.example/tenant1",
        json!(["client_secret_post"]),
    );
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));

    let first = auth.credentials().await.unwrap();
    assert!(first.is_empty(), "no token before the server asks");
    assert!(fake.requests().is_empty());
    let challenge = r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/api/mcp", scope="tools""#;
    assert_eq!(
        auth.on_unauthorized(&first, Some(challenge)).await.unwrap(),
        OnUnauthorized::Retry
    );
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer t-discovered"
    );
    assert_eq!(
        fake.requests(),
        [
            "GET https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
            "GET https://as.example/.well-known/oauth-authorization-server/tenant1",
            "POST https://as.example/oauth/token",
        ]
    );
    assert_eq!(
        auth.token_url().unwrap().as_str(),
        "https://as.example/oauth/token"
    );
    // client_secret_post, the resource from the metadata, the scope from the challenge.
    let body: HashMap<String, String> = form_urlencoded::parse(fake.last_token_body().as_bytes())
        .into_owned()
        .collect();
    assert_eq!(body["client_secret"], SECRET);
    assert_eq!(body["client_id"], "cid");
    assert_eq!(body["resource"], "https://mcp.example/api/mcp");
    assert_eq!(body["scope"], "tools");
    assert_eq!(body["grant_type"], "client_credentials");
}

#[tokio::test]
async fn discovery_without_a_hint_uses_well_known_urls_and_basic_auth() {
    let fake = Arc::new(Fake::default());
    discovery_routes(
        &fake,
        "",
        "https://as.example",
        json!(["client_secret_basic"]),
    );
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    auth.on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
        .unwrap();
    assert_eq!(fake.token_requests(), 1);
    let log = lock(&fake.log);
    let (_, headers, body) = log.last().unwrap();
    assert!(
        headers[AUTHORIZATION]
            .to_str()
            .unwrap()
            .starts_with("Basic ")
    );
    assert!(!body.contains(SECRET));
}

async fn discovery_error(as_issuer: &str, resource: &str) -> AuthError {
    let fake = Arc::new(Fake::default());
    discovery_routes(&fake, "", as_issuer, json!(["client_secret_basic"]));
    fake.route(
        "GET https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
        200,
        json!({"resource": resource, "authorization_servers": ["https://as.example"]}),
    );
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    let err = auth
        .on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
        .unwrap_err();
    assert_eq!(fake.token_requests(), 0, "no secret sent: {err}");
    err
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_refused() {
    let err = discovery_error("https://evil.example", "https://mcp.example/api/mcp").await;
    assert!(matches!(err, AuthError::IssuerMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "server `srv`: the authorization server metadata at https://as.example/.well-known/oauth-authorization-server names issuer `https://evil.example`, not `https://as.example`; refused (RFC 8414 §3.3)"
    );
}

#[tokio::test]
async fn metadata_for_another_resource_is_refused() {
    let err = discovery_error("https://as.example", "https://evil.example/mcp").await;
    assert_eq!(
        err.to_string(),
        "server `srv`: OAuth discovery failed: the protected resource metadata at https://mcp.example/.well-known/oauth-protected-resource/api/mcp is for resource `https://evil.example/mcp`, not for https://mcp.example/api/mcp; refused (RFC 9728 §3.3)"
    );
}

#[tokio::test]
async fn downgrades_and_internal_addresses_are_refused() {
    let fake = Arc::new(Fake::default());
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    let err = auth
        .on_unauthorized(
            &Credentials::none(),
            Some(r#"Bearer resource_metadata="http://mcp.example/prm""#),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("is not https while the server is"),
        "{err}"
    );

    let mut inline = spec(None, SECRET);
    inline.origin = SpecOrigin::Inline;
    let auth = provider(&registry, &inline);
    let err = auth
        .on_unauthorized(
            &Credentials::none(),
            Some(r#"Bearer resource_metadata="https://169.254.169.254/latest""#),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("SSRF guard"), "{err}");
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());
}

#[tokio::test]
async fn nothing_found_names_every_url_tried() {
    let fake = Arc::new(Fake::default());
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    let err = auth
        .on_unauthorized(&Credentials::none(), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: OAuth discovery failed: no authorization server metadata found for `https://mcp.example` (tried \
         https://mcp.example/.well-known/oauth-protected-resource/api/mcp (HTTP 404), \
         https://mcp.example/.well-known/oauth-protected-resource (HTTP 404), \
         https://mcp.example/.well-known/oauth-authorization-server (HTTP 404), \
         https://mcp.example/.well-known/openid-configuration (HTTP 404))"
    );
}

#[tokio::test(start_paused = true)]
async fn a_token_endpoint_that_never_answers_fails_within_the_deadline() {
    let fake = Arc::new(Fake {
        hang: true,
        ..Fake::default()
    });
    let registry = AuthRegistry::new(fake.clone())
        .with_options(OAuthOptions::default().with_request_timeout(Duration::from_secs(60)));
    let mut spec = spec(Some(TOKEN_URL), SECRET);
    spec.connect_timeout = Some(Duration::from_secs(3));
    let auth = provider(&registry, &spec);
    let started = Instant::now();
    let err = auth.credentials().await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!(
        err.to_string(),
        format!("server `srv`: token request to {TOKEN_URL} failed: no answer within 3.0 s")
    );
    let cause = std::error::Error::source(&err).unwrap().to_string();
    assert_eq!(cause, "no answer within 3.0 s");
}

#[tokio::test(start_paused = true)]
async fn a_failed_renewal_keeps_the_valid_token() {
    let fake = Arc::new(Fake::default());
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t1", 100));
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(Some(TOKEN_URL), SECRET));
    auth.credentials().await.unwrap();
    fake.route(
        &format!("POST {TOKEN_URL}"),
        503,
        json!({"error": "temporarily_unavailable"}),
    );
    tokio::time::advance(Duration::from_secs(80)).await;
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t1");
    // Within the retry delay no new attempt is made.
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t1");
    assert_eq!(fake.token_requests(), 2);
    tokio::time::advance(Duration::from_secs(25)).await;
    let err = auth.credentials().await.unwrap_err();
    assert_eq!(err.oauth_error(), Some("temporarily_unavailable"));
    assert_eq!(fake.token_requests(), 3);
}

#[tokio::test]
async fn the_registry_shares_a_cache_per_credential() {
    let fake = Arc::new(Fake::default());
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t1", 3600));
    let registry = registry(&fake);
    let a = registry.provider(&spec(Some(TOKEN_URL), SECRET)).unwrap();
    let b = registry.provider(&spec(Some(TOKEN_URL), SECRET)).unwrap();
    a.credentials().await.unwrap();
    b.credentials().await.unwrap();
    assert_eq!(fake.token_requests(), 1);
    // Another secret is another credential.
    let c = registry.provider(&spec(Some(TOKEN_URL), "other")).unwrap();
    c.credentials().await.unwrap();
    assert_eq!(fake.token_requests(), 2);
}

#[test]
fn secrets_never_show() {
    let fake = Arc::new(Fake::default());
    let registry = registry(&fake);
    let spec = spec(Some(TOKEN_URL), SECRET);
    let auth = registry.provider(&spec).unwrap();
    let shown = format!("{auth:?} {registry:?} {spec:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.contains("cid"), "{shown}");

    let mut env_spec = spec.clone();
    env_spec
        .auth
        .oauth_client_credentials
        .as_mut()
        .unwrap()
        .client_secret = SecretSource::Env("MCP_AUTH_TEST_SURELY_UNSET_SECRET".into());
    let err = registry.provider(&env_spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: environment variable `MCP_AUTH_TEST_SURELY_UNSET_SECRET` (client_secret_env) is not set or not valid UTF-8"
    );
}

#[tokio::test]
async fn private_key_jwt_signs_an_assertion_for_the_issuer() {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

    let pkcs8 = EcdsaKeyPair::generate_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        STANDARD.encode(pkcs8.as_ref())
    );
    let fake = Arc::new(Fake::default());
    discovery_routes(
        &fake,
        "/tenant1",
        "https://as.example/tenant1",
        json!(["private_key_jwt"]),
    );
    let registry = registry(&fake);
    let mut spec = spec(None, &pem);
    spec.auth
        .oauth_client_credentials
        .as_mut()
        .unwrap()
        .token_endpoint_auth_method = Some(TokenEndpointAuthMethod::PrivateKeyJwt);
    let auth = provider(&registry, &spec);
    assert!(!format!("{auth:?}").contains("PRIVATE KEY"));
    auth.on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
        .unwrap();
    let body: HashMap<String, String> = form_urlencoded::parse(fake.last_token_body().as_bytes())
        .into_owned()
        .collect();
    assert!(!body.contains_key("client_secret"));
    assert_eq!(
        body["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    let claims = body["client_assertion"].split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
    assert_eq!(claims["aud"], "https://as.example/tenant1");
    assert_eq!(claims["iss"], "cid");

    // A key that is not one is refused when the provider is built, without showing it.
    let mut bad = spec.clone();
    bad.auth
        .oauth_client_credentials
        .as_mut()
        .unwrap()
        .client_secret = SecretSource::Inline(Secret::from("not-a-key-7731"));
    let err = registry.provider(&bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: private_key_jwt: the private key is not PEM (`-----BEGIN … KEY-----`) (the client secret setting holds the PEM private key)"
    );
}
