//! OAuth2 client credentials over real sockets: an authorization server and a protected MCP
//! server on 127.0.0.1 (hyper), the connector's default auth (its `AuthRegistry`).

use crate::common;
use crate::oauth_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{bounded, echo, text_of};
use http::Method;
use mcp_auth::AuthError;
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use oauth_support::{AuthServer, CLIENT_ID, Guard, SECRET, chain, oauth_spec, protected_server};
use rmcp::RoleClient;
use rmcp::service::RunningService;

fn connector() -> HttpConnector {
    HttpConnector::new(HttpOptions::default()).unwrap()
}

async fn open(
    connector: &HttpConnector,
    spec: &mcp_config::ServerSpec,
) -> Result<RunningService<RoleClient, ()>, String> {
    let connection = connector.connect(spec).await.map_err(|e| chain(&e))?;
    rmcp::serve_client((), connection.transport)
        .await
        .map_err(|e| chain(&e))
}

#[tokio::test]
async fn discovers_the_token_endpoint_then_lists_and_calls() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let client = open(&connector(), &oauth_spec(&mcp, None, SECRET, None))
            .await
            .unwrap();
        let tools = client.peer().list_all_tools().await.unwrap();
        assert_eq!(tools.len(), 2);
        let result = client.peer().call_tool(echo("hi")).await.unwrap();
        assert_eq!(text_of(&result), "hi");
        client.cancel().await.unwrap();

        assert_eq!(auth.state.token_requests(), 1);
        let calls = auth.state.calls.lock().unwrap().clone();
        assert_eq!(calls[0].method, "client_secret_basic");
        // RFC 8707: the resource named by the protected-resource metadata.
        let resource = calls[0]
            .form
            .iter()
            .find(|(k, _)| k == "resource")
            .map(|(_, v)| v.clone());
        assert_eq!(resource.as_deref(), Some(mcp.url.as_str()));

        let seen = mcp.seen();
        let paths: Vec<String> = seen
            .iter()
            .filter(|s| s.method == Method::GET && s.rpc.is_none())
            .map(|s| format!("{:?}", s.status))
            .collect();
        assert!(!paths.is_empty());
        // The first request went without a token and got the challenge; every MCP request
        // after it carried the token.
        assert_eq!(seen[0].status, http::StatusCode::UNAUTHORIZED);
        assert_eq!(seen[0].header("authorization"), None);
        let mcp_requests: Vec<_> = seen.iter().skip(1).filter(|s| s.rpc.is_some()).collect();
        assert!(mcp_requests.len() >= 3, "{seen:?}");
        for s in mcp_requests {
            assert_eq!(s.header("authorization"), Some("Bearer tok-1"), "{s:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn client_secret_post_when_the_metadata_offers_only_it() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_post"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let client = open(&connector(), &oauth_spec(&mcp, None, SECRET, None))
            .await
            .unwrap();
        client.cancel().await.unwrap();
        let calls = auth.state.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].method, "client_secret_post");
        assert!(
            calls[0]
                .form
                .contains(&("client_id".to_owned(), CLIENT_ID.to_owned()))
        );
    })
    .await;
}

#[tokio::test]
async fn a_configured_method_and_token_url_skip_discovery() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_basic", "client_secret_post"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let spec = oauth_spec(
            &mcp,
            Some(&auth.token_url()),
            SECRET,
            Some("client_secret_post"),
        );
        let client = open(&connector(), &spec).await.unwrap();
        client.cancel().await.unwrap();
        let calls = auth.state.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].method, "client_secret_post");
        // No 401 first: the token came before the first MCP request.
        assert!(
            mcp.seen()
                .iter()
                .all(|s| s.status != http::StatusCode::UNAUTHORIZED)
        );
        assert!(auth.server.seen().iter().all(|s| s.method == Method::POST));
    })
    .await;
}

#[tokio::test]
async fn a_wrong_secret_is_invalid_client_after_one_token_request() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        for token_url in [None, Some(auth.token_url())] {
            let before = auth.state.token_requests();
            let spec = oauth_spec(&mcp, token_url.as_deref(), "wrong-secret", None);
            let err = open(&connector(), &spec).await.unwrap_err();
            assert!(
                err.contains(
                    "server `guarded`: could not obtain credentials: the token endpoint refused the client credentials (HTTP 401): invalid_client: Invalid client credentials"
                ),
                "{err}"
            );
            assert!(!err.contains("wrong-secret"), "{err}");
            assert_eq!(auth.state.token_requests() - before, 1);
        }
    })
    .await;
}

#[tokio::test]
async fn a_token_endpoint_that_is_down_fails_the_connect_quickly() {
    bounded(async {
        // Refused: a port nothing listens on.
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let mut spec = oauth_spec(&mcp, Some(&format!("http://{closed}/token")), SECRET, None);
        spec.connect_timeout = Some(Duration::from_secs(2));
        let started = Instant::now();
        let err = open(&connector(), &spec).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{err}");
        assert!(
            err.contains(&format!(
                "token request to http://{closed}/token failed: the connection to {closed} was refused"
            )),
            "{err}"
        );

        // Silent: accepts connections, never answers. The connect timeout bounds the wait.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_addr = silent.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = silent.accept().await {
                held.push(stream);
            }
        });
        let mut spec = oauth_spec(
            &mcp,
            Some(&format!("http://{silent_addr}/token")),
            SECRET,
            None,
        );
        spec.connect_timeout = Some(Duration::from_millis(700));
        let started = Instant::now();
        let err = open(&connector(), &spec).await.unwrap_err();
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(700) && elapsed < Duration::from_secs(3),
            "{elapsed:?}: {err}"
        );
        assert!(err.contains("no answer within 0.7 s"), "{err}");
        hold.abort();
        assert_eq!(auth.state.token_requests(), 0);
    })
    .await;
}

#[tokio::test]
async fn a_server_answering_401_forever_costs_one_renewal_and_one_retry() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
        let mcp = protected_server(&auth, Guard::Always401).await;
        let spec = oauth_spec(&mcp, Some(&auth.token_url()), SECRET, None);
        let err = open(&connector(), &spec).await.unwrap_err();
        assert!(err.to_lowercase().contains("auth"), "{err}");
        // The first token, then exactly one renewal after the 401.
        assert_eq!(auth.state.token_requests(), 2);
        let seen = mcp.seen();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0].header("authorization"), Some("Bearer tok-1"));
        assert_eq!(seen[1].header("authorization"), Some("Bearer tok-2"));
    })
    .await;
}

#[tokio::test]
async fn fifty_concurrent_calls_on_an_expired_token_make_one_token_request() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let spec = oauth_spec(&mcp, Some(&auth.token_url()), SECRET, None);
        let connector = connector();
        // Tokens that expire as they are issued, while two sessions open.
        auth.state.expires_in.store(0, Ordering::SeqCst);
        let a = Arc::new(open(&connector, &spec).await.unwrap());
        let b = Arc::new(open(&connector, &spec).await.unwrap());
        auth.state.expires_in.store(3600, Ordering::SeqCst);

        let before = auth.state.token_requests();
        let calls = (0..50).map(|i| {
            let session = if i % 2 == 0 { a.clone() } else { b.clone() };
            async move {
                session
                    .peer()
                    .call_tool(echo(&format!("c{i}")))
                    .await
                    .map(|r| text_of(&r))
            }
        });
        let results = futures::future::join_all(calls).await;
        for (i, result) in results.into_iter().enumerate() {
            assert_eq!(result.unwrap(), format!("c{i}"));
        }
        assert_eq!(auth.state.token_requests() - before, 1);

        // The same for a token the server stops accepting: fifty 401s, one token request.
        auth.state.revoke_all();
        let before = auth.state.token_requests();
        let calls = (0..50).map(|i| {
            let session = if i % 2 == 0 { a.clone() } else { b.clone() };
            async move { session.peer().call_tool(echo("again")).await.map(|_| ()) }
        });
        for result in futures::future::join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(auth.state.token_requests() - before, 1);
    })
    .await;
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_refused() {
    bounded(async {
        let auth =
            AuthServer::start(vec!["client_secret_basic"], Some("http://evil.example".into()))
                .await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let err = open(&connector(), &oauth_spec(&mcp, None, SECRET, None))
            .await
            .unwrap_err();
        let expected = format!(
            "server `guarded`: could not obtain credentials: the authorization server metadata at {}/.well-known/oauth-authorization-server names issuer `http://evil.example`, not `{}`; refused (RFC 8414 §3.3)",
            auth.issuer(),
            auth.issuer()
        );
        assert!(err.contains(&expected), "{err}");
        assert_eq!(auth.state.token_requests(), 0);
    })
    .await;
}

#[tokio::test]
async fn the_registry_builds_typed_errors() {
    // A connector's registry is usable on its own: the provider of a spec, its errors typed.
    let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
    let mcp = protected_server(&auth, Guard::Tokens).await;
    let connector = connector();
    let spec = oauth_spec(&mcp, Some(&auth.token_url()), "wrong", None);
    let provider = connector.auth_registry().provider(&spec).unwrap();
    let err = provider.credentials().await.unwrap_err();
    assert!(matches!(err, AuthError::TokenRejected { status: 401, .. }));
    assert_eq!(err.oauth_error(), Some("invalid_client"));
    assert_eq!(err.server(), "guarded");
}
