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
        let err = rmcp::serve_client((), connection.transport)
            .await
            .unwrap_err();
        assert_eq!(server.seen().len(), 1);
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
