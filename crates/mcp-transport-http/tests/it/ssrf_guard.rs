//! The SSRF guard on resolved addresses: a caller-supplied (inline) spec may not
//! reach an internal address through a host name — not for MCP requests, not for its OAuth
//! requests — while the operator's own specs may. Names are resolved by an injected resolver
//! (`*.internal.test` → 127.0.0.1, where the test servers listen), and `localhost` by the
//! system resolver.

use crate::common;
use crate::oauth_support;

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use common::{Mode, RmcpServer, bounded, serve};
use mcp_config::{ServerSpec, SpecOrigin};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions, Resolve};
use oauth_support::{AuthServer, SECRET, chain};

/// `*.internal.test` is 127.0.0.1; every other name is unknown.
#[derive(Debug)]
struct TestDns;

#[async_trait]
impl Resolve for TestDns {
    async fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        if host.ends_with(".internal.test") {
            Ok(vec![IpAddr::from([127, 0, 0, 1])])
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("unknown host {host}"),
            ))
        }
    }
}

fn connector() -> HttpConnector {
    HttpConnector::new(HttpOptions::default().with_resolver(Arc::new(TestDns))).unwrap()
}

/// `url` with its host replaced by `host`.
fn renamed(url: &url::Url, host: &str) -> url::Url {
    let mut url = url.clone();
    url.set_host(Some(host)).unwrap();
    url
}

fn spec(name: &str, url: &url::Url, origin: SpecOrigin) -> ServerSpec {
    let mut spec = ServerSpec::from_json(
        &serde_json::json!({"name": name, "url": url.as_str(), "connect_timeout_seconds": 10}),
        SpecOrigin::Operator,
    )
    .unwrap();
    // Set after validation, which would refuse `localhost` and literal internal addresses
    // in an inline spec: the transport must hold on its own.
    spec.origin = origin;
    spec
}

/// Opens a session (handshake and tool listing): the tool count, or the error chain.
async fn open(connector: &HttpConnector, spec: &ServerSpec) -> Result<usize, String> {
    let connection = connector.connect(spec).await.map_err(|e| chain(&e))?;
    let client = rmcp::serve_client((), connection.transport)
        .await
        .map_err(|e| chain(&e))?;
    let tools = client
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| chain(&e))?;
    client.cancel().await.map_err(|e| chain(&e))?;
    Ok(tools.len())
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_for_inline_specs_only() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        // rmcp refuses Host headers other than localhost's (DNS rebinding protection).
        let inner = rmcp.handler();
        let server = serve(Arc::new(move |mut parts: http::request::Parts, body| {
            parts
                .headers
                .insert(http::header::HOST, "127.0.0.1".parse().unwrap());
            inner(parts, body)
        }))
        .await;
        let url = renamed(&server.url, "mcp.internal.test");
        let connector = connector();

        let err = open(&connector, &spec("tenant", &url, SpecOrigin::Inline))
            .await
            .unwrap_err();
        assert!(
            err.contains(
                "server `tenant`: the connection to `mcp.internal.test` was refused by the SSRF guard"
            ),
            "{err}"
        );
        assert!(!err.contains("127.0.0.1"), "no address is named: {err}");
        assert!(server.seen().is_empty(), "{:?}", server.seen());
        assert_eq!(server.connections(), 0);

        // The operator's spec to the same name works, and so does an inline one the operator
        // let through (`ssrf_guard = false`).
        assert_eq!(
            open(&connector, &spec("ops", &url, SpecOrigin::Operator)).await,
            Ok(2)
        );
        let mut trusted = spec("trusted", &url, SpecOrigin::Inline);
        trusted.allow_internal_addresses = true;
        assert_eq!(open(&connector, &trusted).await, Ok(2));
    })
    .await;
}

#[tokio::test]
async fn literals_and_localhost_are_refused_for_inline_specs() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::StatelessJson));
        let server = serve(rmcp.handler()).await;
        // The system resolver, no injection.
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        for (host, shown) in [("127.0.0.1", "127.0.0.1"), ("localhost", "localhost")] {
            let url = renamed(&server.url, host);
            let err = open(&connector, &spec("tenant", &url, SpecOrigin::Inline))
                .await
                .unwrap_err();
            assert!(
                err.contains(&format!(
                    "the connection to `{shown}` was refused by the SSRF guard"
                )),
                "{err}"
            );
        }
        assert_eq!(server.connections(), 0);
        let url = renamed(&server.url, "localhost");
        assert_eq!(
            open(&connector, &spec("ops", &url, SpecOrigin::Operator)).await,
            Ok(2)
        );
    })
    .await;
}

#[tokio::test]
async fn oauth_requests_of_inline_specs_are_guarded_too() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_post"], None).await;
        let token_url = renamed(&auth.token_url().parse().unwrap(), "as.internal.test");
        let oauth_spec = |origin: SpecOrigin| {
            let mut spec = ServerSpec::from_json(
                &serde_json::json!({
                    "name": "tenant",
                    // Never reached: the token is needed before the first MCP request.
                    "url": "https://mcp.example.com/mcp",
                    "connect_timeout_seconds": 10,
                    "auth": {"oauth_client_credentials": {
                        "token_url": token_url.as_str(),
                        "client_id": oauth_support::CLIENT_ID,
                        "client_secret": SECRET,
                        "token_endpoint_auth_method": "client_secret_post",
                    }}
                }),
                SpecOrigin::Operator,
            )
            .unwrap();
            spec.origin = origin;
            spec
        };
        let connector = connector();

        let err = open(&connector, &oauth_spec(SpecOrigin::Inline))
            .await
            .unwrap_err();
        assert!(
            err.contains(&format!("token request to {token_url} failed: "))
                && err.contains("`as.internal.test` resolves only to internal addresses"),
            "{err}"
        );
        assert!(err.contains("SSRF guard"), "{err}");
        assert_eq!(auth.state.token_requests(), 0);
        assert_eq!(auth.server.connections(), 0);
        assert!(!err.contains(SECRET));

        // The operator's spec gets its token (and then fails on the unreachable MCP URL).
        let err = open(&connector, &oauth_spec(SpecOrigin::Operator))
            .await
            .unwrap_err();
        assert_eq!(auth.state.token_requests(), 1, "{err}");
    })
    .await;
}
