//! The provider against a scripted in-memory HTTP client (no network): caching, expiry with
//! tokio's paused clock, single-flight, discovery and its refusals. The same behaviour over
//! real sockets is tested in `mcp-transport-http/tests/oauth_*.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_lite::join_all;
use http::header::AUTHORIZATION;
use mcp_config::{
    HttpSpec, OAuthClientCredentials, SecretSource, ServerSpec, SpecOrigin,
    TokenEndpointAuthMethod, TransportSpec,
};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::discovery::{authorization_server_urls, protected_resource_urls};
use super::*;
use crate::{AuthError, AuthProvider, Credentials, FetchError, HttpFetch, OnUnauthorized};

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

const MCP_URL: &str = "https://mcp.example/api/mcp";

/// A spec for [`MCP_URL`] whose operator trusts the authorization server `https://as.example`
/// (and its tenant `/tenant1`) for discovery.
fn spec(token_url: Option<&str>, secret: &str) -> ServerSpec {
    spec_at(
        MCP_URL,
        token_url,
        secret,
        json!({"allowed_issuers": ["https://as.example", "https://as.example/tenant1"]}),
    )
}

/// A spec for `url`; `extra` is merged into its `oauth_client_credentials`.
fn spec_at(url: &str, token_url: Option<&str>, secret: &str, extra: Value) -> ServerSpec {
    let mut spec = ServerSpec::new(
        "srv",
        TransportSpec::StreamableHttp(HttpSpec::new(url.parse().unwrap())),
    );
    spec.auth.oauth_client_credentials = Some(oauth_at(url, token_url, secret, extra));
    spec
}

fn oauth_at(
    url: &str,
    token_url: Option<&str>,
    secret: &str,
    extra: Value,
) -> OAuthClientCredentials {
    let mut json = json!({
        "name": "srv",
        "url": url,
        "auth": {"oauth_client_credentials": {"client_id": "cid", "client_secret": secret}}
    });
    if let Some(url) = token_url {
        json["auth"]["oauth_client_credentials"]["token_url"] = json!(url);
    }
    for (key, value) in extra.as_object().into_iter().flatten() {
        json["auth"]["oauth_client_credentials"][key] = value.clone();
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

#[tokio::test]
async fn a_servers_token_is_never_shared_with_another_server_on_the_same_endpoint() {
    let fake = Arc::new(Fake::default());
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t1", 3600));
    let registry = registry(&fake);
    let extra = || json!({"allowed_issuers": ["https://as.example"]});
    let a = provider(
        &registry,
        &spec_at("https://a.example/mcp#x", Some(TOKEN_URL), SECRET, extra()),
    );
    assert_eq!(bearer(&a.credentials().await.unwrap()), "Bearer t1");
    let body: HashMap<String, String> = form_urlencoded::parse(fake.last_token_body().as_bytes())
        .into_owned()
        .collect();
    // A configured token endpoint with no resource configured: none sent (some authorization
    // servers refuse the parameter).
    assert!(!body.contains_key("resource"), "{body:?}");

    // Another server on the same token endpoint with the same client: a token of its own,
    // asked for its own URL, not the first server's.
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t2", 3600));
    let b = provider(
        &registry,
        &spec_at("https://b.example/mcp", Some(TOKEN_URL), SECRET, extra()),
    );
    assert_eq!(bearer(&b.credentials().await.unwrap()), "Bearer t2");
    assert_eq!(fake.token_requests(), 2);
    // Nor does the second server's challenge change the first one's token.
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t3", 3600));
    let t2 = b.credentials().await.unwrap();
    b.on_unauthorized(&t2, Some(r#"Bearer scope="billing:admin""#))
        .await
        .unwrap();
    assert_eq!(bearer(&a.credentials().await.unwrap()), "Bearer t1");
}

/// `credentials()` of every one of `callers` at once, the token endpoint held (the fake's gate)
/// until all of them are waiting.
async fn all_waiting<'a>(
    fake: &Fake,
    callers: impl Iterator<Item = &'a ClientCredentials>,
) -> Vec<Result<Credentials, AuthError>> {
    let calls: Vec<_> = callers.map(|auth| auth.credentials()).collect();
    let gate = async {
        tokio::task::yield_now().await;
        fake.gate.as_ref().unwrap().add_permits(1);
    };
    let (results, ()) = tokio::join!(join_all(calls), gate);
    results
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
    let callers = (0..50).map(|i| if i % 2 == 0 { &first } else { &second });
    let results = all_waiting(&fake, callers).await;
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
    let results = all_waiting(&fake, std::iter::repeat_n(&auth, 10)).await;
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

#[tokio::test]
async fn without_resource_metadata_a_discovered_endpoint_is_asked_for_the_servers_url() {
    let fake = Arc::new(Fake::default());
    // No protected resource metadata: the authorization server's, at the server's origin.
    fake.route(
        "GET https://mcp.example/.well-known/oauth-authorization-server",
        200,
        json!({
            "issuer": "https://mcp.example",
            "token_endpoint": "https://mcp.example/oauth/token",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        }),
    );
    fake.route(
        "POST https://mcp.example/oauth/token",
        200,
        token_answer("t-origin", 3600),
    );
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    auth.on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
        .unwrap_or_else(|e| panic!("{e}: {:?}", fake.requests()));
    let body: HashMap<String, String> = form_urlencoded::parse(fake.last_token_body().as_bytes())
        .into_owned()
        .collect();
    assert_eq!(body["resource"], MCP_URL);
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
    // The cause is in the message once, not again as its source.
    assert!(std::error::Error::source(&err).is_none());
    let AuthError::OAuthRequest { cause, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(cause.to_string(), "no answer within 3.0 s");
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

#[tokio::test(start_paused = true)]
async fn every_run_using_a_shared_credential_learns_its_tokens_and_an_ended_run_is_dropped() {
    let fake = Arc::new(Fake::default());
    fake.route(
        &format!("POST {TOKEN_URL}"),
        200,
        token_answer("shared-token-1", 100),
    );
    let registry = registry(&fake);
    let (first_run, second_run) = (mcp_config::Redactor::new(), mcp_config::Redactor::new());
    let a = registry.provider(&spec(Some(TOKEN_URL), SECRET)).unwrap();
    a.report_secrets_to(&first_run.sink());
    a.credentials().await.unwrap();
    assert_eq!(first_run.scrub("echo shared-token-1"), "echo [REDACTED]");
    // A run that joins later learns the token issued before it came.
    let b = registry.provider(&spec(Some(TOKEN_URL), SECRET)).unwrap();
    b.report_secrets_to(&second_run.sink());
    assert_eq!(second_run.scrub("shared-token-1"), "[REDACTED]");
    // A renewal reaches both; once a run ended, its sink is let go.
    let ended = Arc::downgrade(&first_run.sink());
    drop(first_run);
    assert!(ended.upgrade().is_none(), "the provider holds no run alive");
    fake.route(
        &format!("POST {TOKEN_URL}"),
        200,
        token_answer("shared-token-2", 100),
    );
    tokio::time::advance(Duration::from_secs(90)).await;
    b.credentials().await.unwrap();
    assert_eq!(second_run.scrub("shared-token-2"), "[REDACTED]");
    // A run that never used the credential knows nothing of it.
    assert_eq!(
        mcp_config::Redactor::new().scrub("shared-token-2"),
        "shared-token-2"
    );
}

#[tokio::test]
async fn tokens_and_secrets_echoed_by_the_token_endpoint_never_show() {
    const ACCESS: &str = "access-token-echo-1";
    const REFRESH: &str = "refresh-token-echo-1";
    const KEY: &str = "api-key-echo-value";
    let fake = Arc::new(Fake::default());
    fake.route(
        &format!("POST {TOKEN_URL}"),
        200,
        json!({"access_token": ACCESS, "refresh_token": REFRESH, "token_type": "Bearer", "expires_in": 3600}),
    );
    let registry = registry(&fake);
    let mut spec = spec(Some(TOKEN_URL), SECRET);
    spec.auth
        .headers
        .insert("X-Api-Key".into(), mcp_config::Secret::from(KEY));
    let auth = provider(&registry, &spec);
    let t1 = auth.credentials().await.unwrap();
    assert_eq!(bearer(&t1), format!("Bearer {ACCESS}"));

    // The renewal after a 401 is refused, and the endpoint echoes everything it knows.
    fake.route(
        &format!("POST {TOKEN_URL}"),
        400,
        json!({"error": ACCESS, "error_description": format!("{ACCESS} and {REFRESH} revoked; key {KEY}; secret {SECRET}")}),
    );
    let err = auth.on_unauthorized(&t1, Some("Bearer")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: the token endpoint refused the client credentials (HTTP 400): [REDACTED]: \
         [REDACTED] and [REDACTED] revoked; key [REDACTED]; secret [REDACTED]"
    );
    let shown = format!("{err:?}");
    for secret in [ACCESS, REFRESH, KEY, SECRET] {
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[test]
fn an_empty_client_secret_is_refused() {
    let fake = Arc::new(Fake::default());
    let registry = registry(&fake);
    let mut spec = spec(Some(TOKEN_URL), SECRET);
    spec.auth
        .oauth_client_credentials
        .as_mut()
        .unwrap()
        .client_secret = SecretSource::Inline(" ".into());
    let err = registry.provider(&spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: `client_secret` is empty or only whitespace; an empty credential is never sent"
    );
    assert_eq!(fake.token_requests(), 0);
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

/// A fresh EC P-256 private key, PKCS#8 PEM.
fn ec_pem() -> String {
    use base64::Engine as _;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

    let pkcs8 = EcdsaKeyPair::generate_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
    )
}

#[tokio::test]
async fn private_key_jwt_signs_an_assertion_for_the_issuer() {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    let pem = ec_pem();
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

/// A protected resource at `mcp_url` whose metadata names `issuer`, whose metadata (issuer
/// consistent) names `token_endpoint`, which issues tokens.
fn routes_for(fake: &Fake, mcp_url: &str, issuer: &str, token_endpoint: &str) {
    let mcp: Url = mcp_url.parse().unwrap();
    let prm = protected_resource_urls(&mcp).remove(0);
    fake.route(
        &format!("GET {prm}"),
        200,
        json!({"resource": mcp_url, "authorization_servers": [issuer]}),
    );
    let metadata = authorization_server_urls(&issuer.parse().unwrap()).remove(0);
    fake.route(
        &format!("GET {metadata}"),
        200,
        json!({
            "issuer": issuer,
            "token_endpoint": token_endpoint,
            "grant_types_supported": ["client_credentials"],
        }),
    );
    fake.route(
        &format!("POST {token_endpoint}"),
        200,
        token_answer("t-discovered", 3600),
    );
}

async fn discover(fake: &Arc<Fake>, spec: &ServerSpec) -> Result<OnUnauthorized, AuthError> {
    let registry = registry(fake);
    provider(&registry, spec)
        .on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
}

/// Discovery from [`MCP_URL`] whose metadata names `issuer` with `token_endpoint`, refused:
/// the error's text (after checking that no token was asked for) and the fake.
async fn refused_discovery(issuer: &str, token_endpoint: &str) -> (String, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    routes_for(&fake, MCP_URL, issuer, token_endpoint);
    let err = discover(&fake, &spec_at(MCP_URL, None, SECRET, json!({})))
        .await
        .unwrap_err();
    assert_eq!(fake.token_requests(), 0);
    (err.to_string(), fake)
}

#[tokio::test]
async fn discovery_sends_the_secret_only_to_the_servers_host_or_an_allowed_issuer() {
    // Another host, not listed: refused before anything is asked of it.
    let (err, fake) = refused_discovery("https://evil.example", "https://evil.example/token").await;
    assert_eq!(
        err,
        "server `srv`: OAuth discovery failed: the server names the authorization server `https://evil.example/`, \
         which is neither on its own host `mcp.example` nor in `allowed_issuers`; refused (list it in `allowed_issuers`, or set `token_url`)"
    );
    assert!(
        fake.requests().iter().all(|r| !r.contains("evil")),
        "{:?}",
        fake.requests()
    );

    // The server's own host (another port): accepted.
    let fake = Arc::new(Fake::default());
    let own = "https://mcp.example:8443";
    routes_for(&fake, MCP_URL, own, &format!("{own}/token"));
    let outcome = discover(&fake, &spec_at(MCP_URL, None, SECRET, json!({}))).await;
    assert_eq!(outcome.unwrap(), OnUnauthorized::Retry);
    assert_eq!(fake.token_requests(), 1);

    // Listed by the operator: accepted.
    let fake = Arc::new(Fake::default());
    let login = "https://login.example/t1";
    routes_for(&fake, MCP_URL, login, "https://login.example/t1/token");
    let listed = json!({"allowed_issuers": [login]});
    let outcome = discover(&fake, &spec_at(MCP_URL, None, SECRET, listed)).await;
    assert_eq!(outcome.unwrap(), OnUnauthorized::Retry);
    assert_eq!(fake.token_requests(), 1);
}

#[tokio::test]
async fn a_token_endpoint_off_the_issuers_host_is_refused() {
    let (err, _) = refused_discovery("https://mcp.example", "https://evil.example/token").await;
    assert_eq!(
        err,
        "server `srv`: OAuth discovery failed: the token endpoint https://evil.example/token is not on the host \
         of the authorization server `https://mcp.example`; refused (set `token_url` to use it)"
    );
}

#[tokio::test]
async fn discovery_over_plain_http_sends_no_secret_unless_the_server_is_loopback() {
    let fake = Arc::new(Fake::default());
    let url = "http://mcp.example/api/mcp";
    routes_for(&fake, url, "http://mcp.example", "http://mcp.example/token");
    for method in [
        None,
        Some("client_secret_basic"),
        Some("client_secret_post"),
    ] {
        let extra = method.map_or(json!({}), |m| json!({"token_endpoint_auth_method": m}));
        let err = discover(&fake, &spec_at(url, None, SECRET, extra))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "server `srv`: OAuth discovery failed: the server URL http://mcp.example/api/mcp is plain http, \
             so anyone on the network could choose where the client secret goes; refused (use https, set `token_url`, or use private_key_jwt)",
            "{method:?}"
        );
    }
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());

    // A signed assertion may go: it is short-lived and bound to the issuer.
    let jwt = json!({"token_endpoint_auth_method": "private_key_jwt"});
    let outcome = discover(&fake, &spec_at(url, None, &ec_pem(), jwt)).await;
    assert_eq!(outcome.unwrap(), OnUnauthorized::Retry);
    assert_eq!(fake.token_requests(), 1);

    // On this machine, plain http is fine.
    for origin in ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9"] {
        let fake = Arc::new(Fake::default());
        let url = format!("{origin}/api/mcp");
        routes_for(&fake, &url, origin, &format!("{origin}/token"));
        let outcome = discover(&fake, &spec_at(&url, None, SECRET, json!({}))).await;
        assert_eq!(outcome.unwrap(), OnUnauthorized::Retry, "{origin}");
        assert_eq!(fake.token_requests(), 1, "{origin}");
    }
}

#[tokio::test]
async fn a_server_taking_neither_basic_nor_post_gets_no_secret() {
    let fake = Arc::new(Fake::default());
    discovery_routes(
        &fake,
        "",
        "https://as.example",
        json!(["private_key_jwt", "tls_client_auth\u{1b}[2J"]),
    );
    let err = discover(&fake, &spec(None, SECRET)).await.unwrap_err();
    assert_eq!(fake.token_requests(), 0);
    assert_eq!(
        err.to_string(),
        "server `srv`: OAuth discovery failed: the token endpoint supports neither client_secret_basic nor client_secret_post \
         (token_endpoint_auth_methods_supported: `private_key_jwt`, `tls_client_auth [2J`); set `token_endpoint_auth_method` \
         to one it supports (private_key_jwt takes the PEM private key where the secret goes)"
    );
}

#[tokio::test]
async fn a_mismatched_issuer_is_shown_shortened() {
    let found = format!("https://evil.example/{}\n\u{1b}[31m", "a".repeat(10_000));
    let err = discovery_error(&found, MCP_URL).await;
    let AuthError::IssuerMismatch { found: shown, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(shown.chars().count(), 257, "{shown}");
    assert!(shown.starts_with("https://evil.example/aaa") && shown.ends_with('…'));
    let text = err.to_string();
    assert!(text.len() < 1_024, "{} bytes", text.len());
    assert!(!text.contains(['\n', '\u{1b}']), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_token_without_expires_in_is_renewed_after_the_default_lifetime() {
    let fake = Arc::new(Fake::default());
    let answer = |token: &str| json!({"access_token": token, "token_type": "Bearer"});
    fake.route(&format!("POST {TOKEN_URL}"), 200, answer("t1"));
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(Some(TOKEN_URL), SECRET));
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t1");

    // Default lifetime 5 min, renewed the default skew (30 s) before it ends.
    tokio::time::advance(Duration::from_secs(269)).await;
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t1");
    fake.route(&format!("POST {TOKEN_URL}"), 200, answer("t2"));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(bearer(&auth.credentials().await.unwrap()), "Bearer t2");
    assert_eq!(fake.token_requests(), 2);

    // Its expiry is real: a token refused at renewal time is not used past it.
    fake.route(
        &format!("POST {TOKEN_URL}"),
        503,
        json!({"error": "temporarily_unavailable"}),
    );
    tokio::time::advance(Duration::from_secs(301)).await;
    let err = auth.credentials().await.unwrap_err();
    assert_eq!(err.oauth_error(), Some("temporarily_unavailable"));
}

#[tokio::test(start_paused = true)]
async fn unused_credentials_are_dropped_once_expired_while_others_are_used() {
    let fake = Arc::new(Fake::default());
    fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t", 60));
    let registry = registry(&fake);
    let used = provider(&registry, &spec(Some(TOKEN_URL), SECRET));
    used.credentials().await.unwrap();
    for i in 0..3 {
        let once = provider(&registry, &spec(Some(TOKEN_URL), &format!("other-{i}")));
        once.credentials().await.unwrap();
    }
    assert_eq!(registry.cache.len(), 4);

    // Their tokens expire; nobody builds a provider, the used one just goes on.
    tokio::time::advance(Duration::from_secs(61)).await;
    used.credentials().await.unwrap();
    assert_eq!(registry.cache.len(), 1);
}

#[tokio::test]
async fn caller_supplied_specs_use_the_guarded_client() {
    let open = Arc::new(Fake::default());
    let guarded = Arc::new(Fake::default());
    for fake in [&open, &guarded] {
        fake.route(&format!("POST {TOKEN_URL}"), 200, token_answer("t", 3600));
    }
    let registry = AuthRegistry::new(open.clone()).with_guarded_fetch(guarded.clone());
    let operator = spec(Some(TOKEN_URL), SECRET);
    let mut inline = operator.clone();
    inline.origin = SpecOrigin::Inline;
    provider(&registry, &inline).credentials().await.unwrap();
    assert_eq!((open.token_requests(), guarded.token_requests()), (0, 1));
    provider(&registry, &operator).credentials().await.unwrap();
    assert_eq!((open.token_requests(), guarded.token_requests()), (1, 1));
    // An inline spec the operator lets reach internal addresses is not guarded.
    let mut trusted = inline.clone();
    trusted.allow_internal_addresses = true;
    let trusted = provider(&registry, &trusted);
    trusted.credentials().await.unwrap();
    assert_eq!((open.token_requests(), guarded.token_requests()), (1, 1));
    assert!(format!("{registry:?}").contains("guarded_fetch: true"));
}

#[tokio::test]
async fn a_metadata_field_of_the_wrong_type_names_server_document_and_field() {
    let fake = Arc::new(Fake::default());
    fake.route(
        "GET https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
        200,
        json!({"resource": MCP_URL, "authorization_servers": "https://as.example"}),
    );
    let registry = registry(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    let err = auth
        .on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::InvalidResponse { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "server `srv`: protected resource metadata request to \
         https://mcp.example/.well-known/oauth-protected-resource/api/mcp: field \
         `authorization_servers` has the wrong type (invalid type: string \"https://as.example\", expected a sequence)"
    );
    assert_eq!(fake.token_requests(), 0);

    // The same for the authorization server's document.
    let fake = Arc::new(Fake::default());
    discovery_routes(
        &fake,
        "",
        "https://as.example",
        json!("client_secret_basic"),
    );
    let registry = registry_of(&fake);
    let auth = provider(&registry, &spec(None, SECRET));
    let err = auth
        .on_unauthorized(&Credentials::none(), Some("Bearer"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: authorization server metadata request to \
         https://as.example/.well-known/oauth-authorization-server: field \
         `token_endpoint_auth_methods_supported` has the wrong type (invalid type: string \"client_secret_basic\", expected a sequence)"
    );
    assert_eq!(fake.token_requests(), 0);
}

/// An [`HttpFetch`] whose every exchange fails with `error()`.
#[derive(Debug)]
struct Failing(fn() -> FetchError);

#[async_trait]
impl HttpFetch for Failing {
    async fn fetch(
        &self,
        _: http::Request<Bytes>,
        _: usize,
    ) -> Result<http::Response<Bytes>, FetchError> {
        Err((self.0)())
    }
}

/// The text of `error` and of each of its sources, outermost first.
fn levels(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut levels = vec![error.to_string()];
    let mut source = error.source();
    while let Some(inner) = source {
        levels.push(inner.to_string());
        source = inner.source();
    }
    levels
}

#[tokio::test(start_paused = true)]
async fn no_level_of_an_error_chain_repeats_another() {
    let mut errors: Vec<AuthError> = Vec::new();
    let static_spec = |f: &dyn Fn(&mut mcp_config::AuthSpec)| {
        let mut auth = mcp_config::AuthSpec::default();
        f(&mut auth);
        crate::from_spec("srv", &auth).unwrap_err()
    };
    let header = |name: &str, value: &str| {
        [(name.to_owned(), Secret::from(value))]
            .into_iter()
            .collect()
    };
    // The static forms: MissingEnv, EmptySecret, InvalidHeaderName, InvalidHeaderValue,
    // DuplicateHeader, Unsupported.
    errors.push(static_spec(&|a| {
        a.bearer = Some(SecretSource::Env("MCP_AUTH_CHAIN_SURELY_UNSET".into()));
    }));
    errors.push(static_spec(&|a| {
        a.bearer = Some(SecretSource::Inline(Secret::from(" ")));
    }));
    errors.push(static_spec(&|a| a.headers = header("bad name", "v")));
    errors.push(static_spec(&|a| a.headers = header("X-Key", "a\nb")));
    errors.push(static_spec(&|a| {
        a.headers = header("Authorization", "Basic x");
        a.bearer = Some(SecretSource::Inline(Secret::from("t")));
    }));
    errors.push(
        crate::from_spec("srv", &spec(Some(TOKEN_URL), SECRET).auth)
            .map(|_| ())
            .unwrap_err(),
    );

    // TokenRejected, InvalidResponse (token answer), OAuthRequest (timeout).
    let fake = Arc::new(Fake::default());
    fake.route(
        &format!("POST {TOKEN_URL}"),
        401,
        json!({"error": "invalid_client", "error_description": "unknown client"}),
    );
    let registry = registry(&fake);
    errors.push(
        provider(&registry, &spec(Some(TOKEN_URL), SECRET))
            .credentials()
            .await
            .unwrap_err(),
    );
    let fake = Arc::new(Fake::default());
    fake.route(
        &format!("POST {TOKEN_URL}"),
        200,
        json!({"token_type": "Bearer"}),
    );
    errors.push(
        provider(&registry_of(&fake), &spec(Some(TOKEN_URL), SECRET))
            .credentials()
            .await
            .unwrap_err(),
    );
    let hanging = Arc::new(Fake {
        hang: true,
        ..Fake::default()
    });
    errors.push(
        provider(&registry_of(&hanging), &spec(Some(TOKEN_URL), SECRET))
            .credentials()
            .await
            .unwrap_err(),
    );
    // OAuthRequest: the exchange failed, or its answer was too large.
    for failing in [
        Failing(|| {
            FetchError::Request(Box::new(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "the connection to as.example:443 was refused",
            )))
        }),
        Failing(|| FetchError::BodyTooLarge { limit: 65_536 }),
    ] {
        let registry = AuthRegistry::new(Arc::new(failing));
        errors.push(
            provider(&registry, &spec(Some(TOKEN_URL), SECRET))
                .credentials()
                .await
                .unwrap_err(),
        );
    }

    // Discovery, IssuerMismatch, InvalidResponse (metadata).
    let empty = Arc::new(Fake::default());
    errors.push(
        provider(&registry_of(&empty), &spec(None, SECRET))
            .on_unauthorized(&Credentials::none(), None)
            .await
            .unwrap_err(),
    );
    errors.push(discovery_error("https://evil.example", MCP_URL).await);
    let wrong_type = Arc::new(Fake::default());
    wrong_type.route(
        "GET https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
        200,
        json!({"resource": 5}),
    );
    errors.push(
        provider(&registry_of(&wrong_type), &spec(None, SECRET))
            .on_unauthorized(&Credentials::none(), None)
            .await
            .unwrap_err(),
    );

    // Provider: an unusable private_key_jwt key.
    let mut jwt = spec(Some(TOKEN_URL), "not a PEM key");
    jwt.auth
        .oauth_client_credentials
        .as_mut()
        .unwrap()
        .token_endpoint_auth_method = Some(TokenEndpointAuthMethod::PrivateKeyJwt);
    errors.push(registry_of(&empty).provider(&jwt).map(|_| ()).unwrap_err());

    // TokenFile, TokenExchange: a workload token file that is not there; an identity
    // provider refusing the exchange.
    let federated = Arc::new(Fake::default());
    federated.route(
        "GET https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
        200,
        json!({"resource": MCP_URL, "authorization_servers": ["https://mcp.example"]}),
    );
    federated.route(
        "GET https://mcp.example/.well-known/oauth-authorization-server",
        200,
        json!({"issuer": "https://mcp.example", "token_endpoint": "https://mcp.example/token"}),
    );
    federated.route(
        "POST https://idp.example/token",
        400,
        json!({"error": "invalid_grant"}),
    );
    let subject = std::env::temp_dir().join(format!("mcp-auth-subject-{}", std::process::id()));
    std::fs::write(&subject, "id-token-value-0042").unwrap();
    for auth in [
        json!({"workload_identity": {"token_file": "/nonexistent/mcp-auth-token"}}),
        json!({"enterprise": {"idp_token_url": "https://idp.example/token",
            "subject_token_file": subject, "client_id": "c"}}),
    ] {
        let spec = ServerSpec::from_json(
            &json!({"name": "srv", "url": MCP_URL, "auth": auth}),
            SpecOrigin::Operator,
        )
        .unwrap();
        errors.push(
            registry_of(&federated)
                .federated(&spec)
                .unwrap()
                .on_unauthorized(&Credentials::none(), None)
                .await
                .unwrap_err(),
        );
    }
    std::fs::remove_file(&subject).unwrap();

    let mut variants = std::collections::BTreeSet::new();
    for error in &errors {
        variants.insert(
            format!("{error:?}")
                .split([' ', '{', '('])
                .next()
                .unwrap()
                .to_owned(),
        );
        let levels = levels(error);
        for (i, level) in levels.iter().enumerate() {
            assert!(!level.contains("::"), "a type path in {levels:?}");
            for (j, other) in levels.iter().enumerate() {
                assert!(
                    i == j || !level.contains(other.as_str()),
                    "level {i} repeats level {j}: {levels:?}"
                );
            }
        }
        assert_eq!(
            levels.join("\n").matches("`srv`").count(),
            1,
            "the server is named once: {levels:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("server `srv`: {}", error.reason())
        );
    }
    assert_eq!(
        variants.into_iter().collect::<Vec<_>>(),
        [
            "DuplicateHeader",
            "EmptySecret",
            "InvalidHeaderName",
            "InvalidHeaderValue",
            "InvalidResponse",
            "IssuerMismatch",
            "MissingEnv",
            "OAuthRequest",
            "Provider",
            "TokenRejected",
            "Unsupported",
            "Discovery",
            "TokenExchange",
            "TokenFile",
        ]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>(),
        "every variant is provoked"
    );
}

fn registry_of(fake: &Arc<Fake>) -> AuthRegistry {
    AuthRegistry::new(fake.clone())
}
