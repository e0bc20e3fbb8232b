//! Static headers and bearer tokens reach the server on every request; configuration
//! mistakes are connect errors naming the server; secrets never show.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve};
use http::Method;
use mcp_config::{Secret, SecretSource, TransportSpec};
use mcp_connector::{ConnectError, Connector};
use mcp_transport_http::{HttpConnector, HttpOptions};

const TOKEN: &str = "tok-very-secret-1";
const API_KEY: &str = "key-very-secret-2";
const STATIC: &str = "static-very-secret-3";

fn connector() -> HttpConnector {
    HttpConnector::new(HttpOptions::default()).unwrap()
}

#[tokio::test]
async fn static_headers_and_bearer_token_arrive_on_every_request() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let server = serve(rmcp.handler()).await;
        let mut spec = server.spec("secured");
        let TransportSpec::StreamableHttp(http) = &mut spec.transport else {
            unreachable!()
        };
        http.headers.insert("X-Static".into(), Secret::from(STATIC));
        spec.auth
            .headers
            .insert("X-Api-Key".into(), Secret::from(API_KEY));
        spec.auth.bearer = Some(SecretSource::Inline(Secret::from(TOKEN)));

        let connection = connector().connect(&spec).await.unwrap();
        let shown = format!("{connection:?}");
        for secret in [TOKEN, API_KEY, STATIC] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        client.peer().list_all_tools().await.unwrap();
        client.peer().call_tool(echo("x")).await.unwrap();
        client.cancel().await.unwrap();

        let seen = server.seen();
        assert!(seen.iter().any(|s| s.method == Method::DELETE));
        assert!(seen.iter().any(|s| s.method == Method::GET));
        for s in &seen {
            assert_eq!(
                s.header("authorization"),
                Some(format!("Bearer {TOKEN}").as_str()),
                "{s:?}"
            );
            assert_eq!(s.header("x-api-key"), Some(API_KEY), "{s:?}");
            assert_eq!(s.header("x-static"), Some(STATIC), "{s:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn bearer_token_env_is_read_when_the_session_opens() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::StatelessJson));
        let server = serve(rmcp.handler()).await;
        let mut spec = server.spec("from-env");
        // PATH is set wherever tests run; no test mutates the environment.
        spec.auth.bearer = Some(SecretSource::Env("PATH".into()));
        let connection = connector().connect(&spec).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        client.cancel().await.unwrap();
        let expected = format!("Bearer {}", std::env::var("PATH").unwrap());
        assert!(
            server
                .seen()
                .iter()
                .all(|s| s.header("authorization") == Some(expected.as_str()))
        );
    })
    .await;
}

/// Connecting `spec` fails before any request with a config error whose message contains
/// every one of `parts`.
async fn check_config_error(spec: &mcp_config::ServerSpec, parts: &[&str]) {
    let err = connector().connect(spec).await.unwrap_err();
    assert!(matches!(err, ConnectError::Config { .. }), "{err:?}");
    assert_eq!(err.server(), spec.name);
    let message = err.to_string();
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    for secret in [TOKEN, API_KEY, STATIC] {
        assert!(!format!("{message} {err:?}").contains(secret));
    }
}

#[tokio::test]
async fn configuration_mistakes_are_connect_errors() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::StatelessJson));
        let server = serve(rmcp.handler()).await;

        let mut spec = server.spec("no-env");
        spec.auth.bearer = Some(SecretSource::Env("MCP_HTTP_TEST_SURELY_UNSET_TOKEN".into()));
        check_config_error(&spec, &["`no-env`", "MCP_HTTP_TEST_SURELY_UNSET_TOKEN"]).await;

        let mut spec = server.spec("reserved");
        spec.auth
            .headers
            .insert("Mcp-Session-Id".into(), Secret::from(API_KEY));
        check_config_error(&spec, &["`reserved`", "mcp-session-id"]).await;

        let mut spec = server.spec("twice");
        spec.auth
            .headers
            .insert("Authorization".into(), Secret::from(API_KEY));
        spec.auth.bearer = Some(SecretSource::Inline(Secret::from(TOKEN)));
        check_config_error(&spec, &["`twice`", "authorization"]).await;

        let mut spec = server.spec("bad-value");
        let TransportSpec::StreamableHttp(http) = &mut spec.transport else {
            unreachable!()
        };
        http.headers
            .insert("X-Static".into(), Secret::from(format!("{STATIC}\n")));
        check_config_error(&spec, &["`bad-value`", "X-Static"]).await;

        let mut spec = server.spec("ftp");
        let TransportSpec::StreamableHttp(http) = &mut spec.transport else {
            unreachable!()
        };
        http.url = "ftp://127.0.0.1/mcp".parse().unwrap();
        check_config_error(&spec, &["`ftp`", "ftp"]).await;

        assert!(server.seen().is_empty(), "no request for a refused spec");
    })
    .await;
}

/// A session of revision 2026-07-28 (`server/discover`, per-request metadata): every POST
/// carries `MCP-Protocol-Version` and `Mcp-Method` (and a `tools/call` its tool as `Mcp-Name`)
/// beside the spec's headers and credentials, which the protocol headers never replace.
#[tokio::test]
async fn a_discovered_session_sends_the_2026_07_28_headers_with_the_credentials() {
    use rmcp::ClientLifecycleMode;
    use rmcp::model::ProtocolVersion;

    bounded(async {
        for mode in [Mode::StatelessJson, Mode::SessionSse] {
            let rmcp = Arc::new(RmcpServer::new(mode));
            let server = serve(rmcp.handler()).await;
            let mut spec = server.spec("modern");
            spec.auth.bearer = Some(SecretSource::Inline(Secret::from(TOKEN)));
            let connection = connector().connect(&spec).await.unwrap();
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            let client = rmcp::serve_client_with_lifecycle((), connection.transport, lifecycle)
                .await
                .unwrap();
            let protocol = client.peer().peer_info().unwrap().protocol_version.clone();
            assert_eq!(protocol, ProtocolVersion::V_2026_07_28);
            client.peer().list_all_tools().await.unwrap();
            client.peer().call_tool(echo("x")).await.unwrap();
            client.cancel().await.unwrap();

            let seen = server.seen();
            let posts: Vec<_> = seen
                .iter()
                .filter(|s| s.method == Method::POST && s.rpc.is_some())
                .collect();
            let methods: Vec<&str> = posts.iter().filter_map(|s| s.rpc.as_deref()).collect();
            assert!(
                methods.contains(&"server/discover"),
                "{mode:?}: {methods:?}"
            );
            assert!(!methods.contains(&"initialize"), "{mode:?}: {methods:?}");
            for s in &posts {
                assert_eq!(
                    s.header("mcp-protocol-version"),
                    Some("2026-07-28"),
                    "{s:?}"
                );
                assert_eq!(s.header("mcp-method"), s.rpc.as_deref(), "{s:?}");
                assert_eq!(
                    s.header("authorization"),
                    Some(format!("Bearer {TOKEN}").as_str()),
                    "{s:?}"
                );
            }
            let call = posts
                .iter()
                .find(|s| s.rpc.as_deref() == Some("tools/call"))
                .expect("the call was posted");
            assert_eq!(call.header("mcp-name"), Some("echo"), "{call:?}");
        }
    })
    .await;
}
