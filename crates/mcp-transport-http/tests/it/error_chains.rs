//! Every `HttpError` reads once: no level of its `source()` chain repeats another, none holds
//! a Rust type path, and the server is named once. Each error is provoked through the
//! transport where a local peer can cause it; the few that need a peer failing mid-stream or
//! a connect that hangs (covered by `causes.rs` and `limits.rs`) are built directly.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{Handler, bounded, respond, serve};
use http::StatusCode;
use mcp_config::{HttpSpec, ServerSpec, SpecOrigin, TransportSpec};
use mcp_transport_http::{HttpConnector, HttpError, HttpOptions, Resolve};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpError};
use serde_json::json;
use tokio::io::AsyncWriteExt;

/// Every host name fails to resolve.
#[derive(Debug)]
struct NoDns;

#[async_trait]
impl Resolve for NoDns {
    async fn resolve(&self, _host: &str) -> io::Result<Vec<IpAddr>> {
        Err(io::Error::new(io::ErrorKind::NotFound, "no such host"))
    }
}

fn spec(url: &str) -> ServerSpec {
    ServerSpec::new(
        "srv",
        TransportSpec::StreamableHttp(HttpSpec::new(url.parse().unwrap())),
    )
}

/// The error of one `ping` POST of `spec` to `uri`, as the transport's own type.
async fn post_error(connector: &HttpConnector, spec: &ServerSpec, uri: &str) -> HttpError {
    let client = connector.client(spec).unwrap();
    let ping: ClientJsonRpcMessage =
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap();
    match client
        .post_message(Arc::from(uri), ping, None, None, HashMap::new())
        .await
    {
        Err(StreamableHttpError::Client(error)) => error,
        other => panic!("expected a client error, got {other:?}"),
    }
}

async fn post(connector: &HttpConnector, spec: &ServerSpec) -> HttpError {
    let TransportSpec::StreamableHttp(http) = &spec.transport else {
        unreachable!()
    };
    post_error(connector, spec, http.url.as_str()).await
}

/// A server answering every request with `status`, `content_type` and `body`.
fn answering(content_type: &'static str, body: String) -> Handler {
    Arc::new(move |_, _| {
        Box::pin(std::future::ready(respond(
            StatusCode::OK,
            content_type,
            body.clone(),
        )))
    })
}

/// A TCP server on 127.0.0.1 that writes `bytes` to each connection and closes it.
async fn raw(bytes: &'static [u8]) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(bytes).await;
            let _ = stream.shutdown().await;
        }
    });
    addr
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
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

#[tokio::test]
async fn no_level_of_an_error_chain_repeats_another() {
    bounded(async {
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let mut errors = Vec::new();

        // Refused, a name that does not resolve, a peer that is not TLS, one that closes.
        errors.push(
            post(
                &connector,
                &spec(&format!("http://127.0.0.1:{}/mcp", closed_port())),
            )
            .await,
        );
        let no_dns =
            HttpConnector::new(HttpOptions::default().with_resolver(Arc::new(NoDns))).unwrap();
        errors.push(post(&no_dns, &spec("http://nowhere.test/mcp")).await);
        let plain = raw(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
        errors.push(
            post(
                &connector,
                &spec(&format!("https://localhost:{}/mcp", plain.port())),
            )
            .await,
        );
        let closing = raw(b"").await;
        errors.push(post(&connector, &spec(&format!("http://{closing}/mcp"))).await);

        // Answers too large, too deep, not JSON-RPC.
        let small = HttpConnector::new(HttpOptions::default().with_max_response_bytes(64)).unwrap();
        let big = serve(answering("application/json", "x".repeat(1_000))).await;
        errors.push(post(&small, &big.spec("srv")).await);
        let deep = serve(answering(
            "application/json",
            format!("{}{}", "[".repeat(200), "]".repeat(200)),
        ))
        .await;
        errors.push(post(&connector, &deep.spec("srv")).await);
        let odd = serve(answering(
            "application/json",
            r#"{"hello": "world"}"#.to_owned(),
        ))
        .await;
        errors.push(post(&connector, &odd.spec("srv")).await);

        // The SSRF guard.
        let mut inline = spec("http://127.0.0.1:9/mcp");
        inline.origin = SpecOrigin::Inline;
        errors.push(post(&connector, &inline).await);

        // Credentials: a token endpoint nothing listens on.
        let oauth = ServerSpec::from_json(
            &json!({
                "name": "srv",
                "url": "http://127.0.0.1:9/mcp",
                "auth": {"oauth_client_credentials": {
                    "client_id": "cid",
                    "client_secret": "chain-secret",
                    "token_url": format!("http://127.0.0.1:{}/token", closed_port()),
                }}
            }),
            SpecOrigin::Operator,
        )
        .unwrap();
        errors.push(post(&connector, &oauth).await);

        // A request that cannot be built.
        errors.push(post_error(&connector, &spec("http://127.0.0.1:9/mcp"), "not a uri\n").await);

        // A root certificate that is not one.
        let bad_root = HttpOptions::default()
            .with_root_certificate(rustls::pki_types::CertificateDer::from(vec![1, 2, 3]));
        errors.push(HttpConnector::new(bad_root).unwrap_err());

        // Built directly: a connect that hangs, fails otherwise, a body cut mid-stream, an
        // oversized event, a message that cannot be encoded.
        let server = || "srv".to_owned();
        errors.push(HttpError::ConnectTimeout {
            server: server(),
            host: "mcp.example".into(),
            port: 443,
            after: Duration::from_secs(10),
        });
        errors.push(HttpError::Connect {
            server: server(),
            host: "mcp.example".into(),
            port: 443,
            reason: "network is unreachable".into(),
        });
        errors.push(HttpError::Body {
            server: server(),
            reason: "connection reset by peer".into(),
        });
        errors.push(HttpError::SseEventTooLarge {
            server: server(),
            limit: 1024,
        });
        errors.push(HttpError::Encode {
            server: server(),
            source: serde_json::from_str::<serde_json::Value>("{").unwrap_err(),
        });

        let mut variants = BTreeSet::new();
        for error in &errors {
            // A request's error comes back recorded (shared with the connection handle); the
            // variant is the one inside.
            let name = format!("{:?}", error.unwrapped());
            variants.insert(name.split([' ', '{', '(']).next().unwrap().to_owned());
            let levels = levels(error);
            for (i, level) in levels.iter().enumerate() {
                assert!(!level.contains("::"), "a type path in {levels:?}");
                assert!(!level.contains("Box<"), "a type in {levels:?}");
                for (j, other) in levels.iter().enumerate() {
                    assert!(
                        i == j || !level.contains(other.as_str()),
                        "level {i} repeats level {j}: {levels:?}"
                    );
                }
            }
            let named = levels.join("\n").matches("`srv`").count();
            let expected = usize::from(error.server().is_some());
            assert_eq!(named, expected, "the server is named once: {levels:?}");
        }
        let all: BTreeSet<String> = [
            "Auth",
            "BlockedAddress",
            "Body",
            "BodyTooLarge",
            "BuildRequest",
            "Connect",
            "ConnectTimeout",
            "ConnectionRefused",
            "Dns",
            "Encode",
            "InvalidMessage",
            "Request",
            "SseEventTooLarge",
            "Tls",
            "TlsHandshake",
            "TooDeep",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(variants, all, "every variant is checked");
        let recorded = HttpError::Recorded(std::sync::Arc::new(HttpError::Encode {
            server: server(),
            source: serde_json::from_str::<serde_json::Value>("{").unwrap_err(),
        }));
        assert_eq!(
            levels(&recorded),
            levels(recorded.unwrapped()),
            "transparent"
        );

        // The auth error's own message names the server; the transport's names it once.
        let auth = errors
            .iter()
            .find_map(HttpError::auth_error)
            .expect("an auth error");
        assert_eq!(auth.to_string(), format!("server `srv`: {}", auth.reason()));
    })
    .await;
}
