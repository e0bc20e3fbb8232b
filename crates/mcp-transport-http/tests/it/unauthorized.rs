//! A 401 asks the auth hook once; the request is resent at most once.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use common::{Mode, RmcpServer, bounded, echo, respond, serve, text_of};
use http::{Method, StatusCode};
use mcp_auth::{AuthError, AuthProvider, Credentials, OnUnauthorized};
use mcp_config::{Secret, SecretSource};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};

/// Hands out `Bearer tok-N`, N counting the 401s it was told about; always asks to retry.
#[derive(Debug, Default)]
struct Rotating {
    unauthorized: AtomicUsize,
}

#[async_trait]
impl AuthProvider for Rotating {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        let n = self.unauthorized.load(Ordering::SeqCst);
        Credentials::bearer("rotating", &Secret::new(format!("tok-{n}")))
    }

    async fn on_unauthorized(
        &self,
        rejected: &Credentials,
        www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        let n = self.unauthorized.fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            rejected.get("authorization").unwrap(),
            format!("Bearer tok-{n}").as_str()
        );
        assert_eq!(www_authenticate, Some(r#"Bearer realm="test""#));
        Ok(OnUnauthorized::Retry)
    }
}

fn unauthorized() -> common::Handler {
    Arc::new(|_, _| {
        Box::pin(async {
            let mut response = respond(StatusCode::UNAUTHORIZED, "text/plain", "no");
            response.headers_mut().insert(
                "www-authenticate",
                r#"Bearer realm="test""#.parse().unwrap(),
            );
            response
        })
    })
}

#[tokio::test]
async fn unauthorized_forever_retries_exactly_once_then_fails() {
    bounded(async {
        let server = serve(unauthorized()).await;
        let provider = Arc::new(Rotating::default());
        let hook = provider.clone();
        let connector = HttpConnector::new(HttpOptions::default())
            .unwrap()
            .with_auth_factory(move |_| Ok(hook.clone() as Arc<dyn AuthProvider>));
        let connection = connector.connect(&server.spec("locked")).await.unwrap();
        let err = rmcp::serve_client((), connection.transport)
            .await
            .unwrap_err();

        assert_eq!(provider.unauthorized.load(Ordering::SeqCst), 1);
        let seen = server.seen();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0].header("authorization"), Some("Bearer tok-0"));
        assert_eq!(seen[1].header("authorization"), Some("Bearer tok-1"));
        assert!(seen.iter().all(|s| s.rpc.as_deref() == Some("initialize")));
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("tok-"), "{shown}");
    })
    .await;
}

#[tokio::test]
async fn static_credentials_are_not_resent() {
    bounded(async {
        let server = serve(unauthorized()).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let mut spec = server.spec("locked");
        spec.auth.bearer = Some(SecretSource::Inline(Secret::from("tok-static-secret")));
        let connection = connector.connect(&spec).await.unwrap();
        assert_eq!(connection.handle.failures(), 0);
        let err = rmcp::serve_client((), connection.transport)
            .await
            .unwrap_err();
        assert_eq!(server.seen().len(), 1);
        assert_eq!(connection.handle.failures(), 1, "the refused request is counted");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("tok-static-secret"), "{shown}");
        // The handle keeps the status and the challenge, for the message a person reads.
        let failure = connection.handle.failure().expect("the 401 is recorded");
        assert_eq!(
            failure.to_string(),
            r#"server `locked`: the request was refused with HTTP 401 Unauthorized (WWW-Authenticate: Bearer realm="test")"#
        );
    })
    .await;
}

#[tokio::test]
async fn fresh_credentials_after_a_401_are_used_from_then_on() {
    bounded(async {
        // The server accepts only `tok-1`: the first request (tok-0) gets a 401.
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let inner = rmcp.handler();
        let deny = unauthorized();
        let server = serve(Arc::new(move |parts: http::request::Parts, body| {
            if parts
                .headers
                .get("authorization")
                .is_some_and(|v| v == "Bearer tok-1")
            {
                inner(parts, body)
            } else {
                deny(parts, body)
            }
        }))
        .await;
        let provider = Arc::new(Rotating::default());
        let hook = provider.clone();
        let connector = HttpConnector::new(HttpOptions::default())
            .unwrap()
            .with_auth_factory(move |_| Ok(hook.clone() as Arc<dyn AuthProvider>));
        let connection = connector.connect(&server.spec("rotating")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let result = client.peer().call_tool(echo("in")).await.unwrap();
        assert_eq!(text_of(&result), "in");
        client.cancel().await.unwrap();

        assert_eq!(provider.unauthorized.load(Ordering::SeqCst), 1);
        let statuses: Vec<_> = server.seen().iter().map(|s| s.status).collect();
        assert_eq!(
            statuses
                .iter()
                .filter(|s| **s == StatusCode::UNAUTHORIZED)
                .count(),
            1,
            "{statuses:?}"
        );
        assert_eq!(server.count_method(&Method::DELETE), 1);
    })
    .await;
}

/// A DPoP-like hook: `Authorization: DPoP tok` and a `dpop` header naming the nonce it
/// learned last (`proof-<nonce>`); it counts what it was asked.
#[derive(Debug, Default)]
struct Nonced {
    nonce: std::sync::Mutex<Option<String>>,
    asked: std::sync::Mutex<Vec<(String, String)>>,
    unauthorized: AtomicUsize,
}

#[async_trait]
impl AuthProvider for Nonced {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        unreachable!("the transport asks with the method and URL")
    }

    async fn credentials_for(&self, method: &Method, url: &str) -> Result<Credentials, AuthError> {
        self.asked
            .lock()
            .unwrap()
            .push((method.to_string(), url.to_owned()));
        let nonce = self.nonce.lock().unwrap().clone().unwrap_or_default();
        Ok(Credentials::none()
            .with_header(http::header::AUTHORIZATION, "DPoP tok".parse().unwrap())
            .with_header(
                http::HeaderName::from_static("dpop"),
                format!("proof-{nonce}").parse().unwrap(),
            ))
    }

    fn observe_response(&self, _url: &str, headers: &http::HeaderMap) -> bool {
        let Some(nonce) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let mut current = self.nonce.lock().unwrap();
        let new = current.as_deref() != Some(nonce);
        *current = Some(nonce.to_owned());
        new
    }

    async fn on_unauthorized(
        &self,
        _rejected: &Credentials,
        _www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        self.unauthorized.fetch_add(1, Ordering::SeqCst);
        Ok(OnUnauthorized::Retry)
    }
}

/// A 401 `use_dpop_nonce` naming `nonce`.
fn use_nonce(nonce: &str) -> http::Response<common::Body> {
    let mut response = respond(StatusCode::UNAUTHORIZED, "text/plain", "nonce");
    let headers = response.headers_mut();
    headers.insert(
        "www-authenticate",
        r#"DPoP error="use_dpop_nonce""#.parse().unwrap(),
    );
    headers.insert("dpop-nonce", nonce.parse().unwrap());
    response
}

#[tokio::test]
async fn a_resource_servers_dpop_nonce_is_learned_and_the_request_resent_with_it() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let inner = rmcp.handler();
        let server = serve(Arc::new(move |parts: http::request::Parts, body| {
            if parts.headers.get("dpop").is_some_and(|v| v == "proof-n-1") {
                inner(parts, body)
            } else {
                Box::pin(async { use_nonce("n-1") })
            }
        }))
        .await;
        let provider = Arc::new(Nonced::default());
        let hook = provider.clone();
        let connector = HttpConnector::new(HttpOptions::default())
            .unwrap()
            .with_auth_factory(move |_| Ok(hook.clone() as Arc<dyn AuthProvider>));
        let spec = server.spec("nonced");
        let connection = connector.connect(&spec).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let result = client.peer().call_tool(echo("in")).await.unwrap();
        assert_eq!(text_of(&result), "in");
        client.cancel().await.unwrap();

        assert_eq!(provider.unauthorized.load(Ordering::SeqCst), 0);
        let statuses: Vec<_> = server.seen().iter().map(|s| s.status).collect();
        assert_eq!(statuses[..2], [401, 200], "{statuses:?}");
        assert!(statuses[2..].iter().all(|s| *s != 401), "{statuses:?}");
        let asked = provider.asked.lock().unwrap().clone();
        let url = match &spec.transport {
            mcp_config::TransportSpec::StreamableHttp(http) => http.url.to_string(),
            _ => unreachable!(),
        };
        assert_eq!(asked[0], ("POST".to_owned(), url));
    })
    .await;
}

#[tokio::test]
async fn a_resource_server_asking_for_a_new_nonce_every_time_is_an_error_naming_it() {
    bounded(async {
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        let server = serve(Arc::new(move |_, _| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { use_nonce(&format!("n-{n}")) })
        }))
        .await;
        let provider = Arc::new(Nonced::default());
        let hook = provider.clone();
        let connector = HttpConnector::new(HttpOptions::default())
            .unwrap()
            .with_auth_factory(move |_| Ok(hook.clone() as Arc<dyn AuthProvider>));
        let connection = connector.connect(&server.spec("looping")).await.unwrap();
        rmcp::serve_client((), connection.transport)
            .await
            .unwrap_err();
        assert_eq!(server.seen().len(), 2, "one resend with the nonce, no more");
        assert_eq!(provider.unauthorized.load(Ordering::SeqCst), 0);
        let failure = connection
            .handle
            .failure()
            .expect("the failure is recorded");
        let text = failure.to_string();
        assert!(text.contains("server `looping`"), "{text}");
        assert!(
            text.contains("DPoP") && text.contains("use_dpop_nonce"),
            "{text}"
        );
    })
    .await;
}
