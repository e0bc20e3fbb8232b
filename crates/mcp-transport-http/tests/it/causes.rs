//! Why a connection failed reads as what happened, naming the server and the host once:
//! refused, a host name that does not resolve, an untrusted or wrong TLS certificate, a server
//! that does not speak TLS, a TCP connect that times out — each its own typed error, not
//! "HTTP request failed" wrapped in the HTTP library's type names.

use crate::common;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{Mode, RmcpServer, bounded, serve, serve_tls};
use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpError, HttpOptions, Resolve};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpError};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Resolves `known.test` to 127.0.0.1, `empty.test` to nothing, and fails for anything else.
#[derive(Debug)]
struct TestResolver;

#[async_trait]
impl Resolve for TestResolver {
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        match host {
            "known.test" => Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]),
            "empty.test" => Ok(Vec::new()),
            _ => Err(io::Error::new(io::ErrorKind::NotFound, "no such host")),
        }
    }
}

fn spec(name: &str, url: &str) -> ServerSpec {
    ServerSpec::new(
        name,
        TransportSpec::StreamableHttp(HttpSpec::new(url.parse().unwrap())),
    )
}

/// The error of one POST of `spec` through `connector`, as the transport's own type.
async fn post_error(connector: &HttpConnector, spec: &ServerSpec) -> HttpError {
    let client = connector.client(spec).unwrap();
    let TransportSpec::StreamableHttp(http) = &spec.transport else {
        unreachable!()
    };
    let ping: ClientJsonRpcMessage =
        serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .unwrap();
    let outcome = client
        .post_message(
            Arc::from(http.url.as_str()),
            ping,
            None,
            None,
            HashMap::new(),
        )
        .await;
    match outcome {
        Err(StreamableHttpError::Client(error)) => error,
        other => panic!("expected a client error, got {other:?}"),
    }
}

/// `error`'s message is `expected`; the same text reaches the caller of a whole handshake.
async fn check(connector: &HttpConnector, spec: &ServerSpec, expected: &str) -> HttpError {
    let error = post_error(connector, spec).await;
    assert_eq!(error.to_string(), expected);
    assert_eq!(error.server(), Some(spec.name.as_str()));
    // No cause is hidden behind it, so nothing is shown twice.
    assert!(std::error::Error::source(&error).is_none());
    let connection = connector.connect(spec).await.unwrap();
    let handshake = rmcp::serve_client((), connection.transport)
        .await
        .unwrap_err()
        .to_string();
    assert!(handshake.contains(expected), "{handshake}");
    for noise in ["client error (", "tcp connect error", "os error"] {
        assert!(!handshake.contains(noise), "{handshake}");
    }
    error
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_refused_connection_names_host_and_port() {
    bounded(async {
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let port = closed_port();
        let spec = spec("down", &format!("http://127.0.0.1:{port}/mcp"));
        let error = check(
            &connector,
            &spec,
            &format!(
                "server `down`: the connection to 127.0.0.1:{port} was refused (is the server running?)"
            ),
        )
        .await;
        assert!(matches!(error.unwrapped(), HttpError::ConnectionRefused { .. }));
    })
    .await;
}

#[tokio::test]
async fn an_unresolvable_host_is_named_with_the_resolvers_answer() {
    bounded(async {
        let options = HttpOptions::default().with_resolver(Arc::new(TestResolver));
        let connector = HttpConnector::new(options).unwrap();
        let error = check(
            &connector,
            &spec("nowhere", "http://nowhere.test:8080/mcp"),
            "server `nowhere`: the host name `nowhere.test` could not be resolved: no such host",
        )
        .await;
        assert!(matches!(error.unwrapped(), HttpError::Dns { .. }));
        check(
            &connector,
            &spec("empty", "http://empty.test/mcp"),
            "server `empty`: the host name `empty.test` could not be resolved: no address found",
        )
        .await;
    })
    .await;
}

/// A TLS acceptor with a self-signed certificate for `names`, and the certificate.
fn tls(names: &[&str]) -> (CertificateDer<'static>, tokio_rustls::TlsAcceptor) {
    let names = names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    let certified = rcgen::generate_simple_self_signed(names).unwrap();
    let cert = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    (cert, tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[tokio::test]
async fn tls_failures_say_why() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::StatelessJson));

        // Self-signed, not trusted.
        let (_, acceptor) = tls(&["127.0.0.1"]);
        let server = serve_tls(rmcp.handler(), acceptor).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let error = check(
            &connector,
            &server.spec("untrusted"),
            "server `untrusted`: the TLS handshake with `127.0.0.1` failed: the server's certificate \
             is not trusted (issued by an unknown authority; add its CA to the trusted root certificates)",
        )
        .await;
        assert!(matches!(error.unwrapped(), HttpError::TlsHandshake { .. }));

        // Trusted, but for another name.
        let (cert, acceptor) = tls(&["localhost"]);
        let server = serve_tls(rmcp.handler(), acceptor).await;
        let connector =
            HttpConnector::new(HttpOptions::default().with_root_certificate(cert)).unwrap();
        check(
            &connector,
            &server.spec("wrong-name"),
            "server `wrong-name`: the TLS handshake with `127.0.0.1` failed: the server's \
             certificate is not valid for this host name",
        )
        .await;

        // Plain HTTP on an https URL.
        let server = serve(rmcp.handler()).await;
        let mut url = server.url.clone();
        url.set_scheme("https").unwrap();
        check(
            &connector,
            &spec("plain", url.as_str()),
            "server `plain`: the TLS handshake with `127.0.0.1` failed: the server did not answer \
             with TLS (a plain-HTTP server on an https URL?)",
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_tcp_connect_timeout_names_the_step_and_the_time() {
    bounded(async {
        // A listener whose accept queue is full: further connection attempts get no answer.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::new();
        loop {
            let attempt = tokio::time::timeout(
                Duration::from_millis(200),
                tokio::net::TcpStream::connect(addr),
            )
            .await;
            match attempt {
                Ok(Ok(stream)) => held.push(stream),
                Ok(Err(e)) => panic!("connect: {e}"),
                // The queue is full: attempts now hang.
                Err(_) => break,
            }
            assert!(held.len() < 64, "the accept queue never filled");
        }
        let options = HttpOptions::default().with_tcp_connect_timeout(Duration::from_millis(300));
        let connector = HttpConnector::new(options).unwrap();
        let error = check(
            &connector,
            &spec("stalled", &format!("http://{addr}/mcp")),
            &format!(
                "server `stalled`: the TCP connection to {addr} was not established within 0.3 s"
            ),
        )
        .await;
        assert!(matches!(
            error.unwrapped(),
            HttpError::ConnectTimeout { .. }
        ));
        drop(listener);
    })
    .await;
}
