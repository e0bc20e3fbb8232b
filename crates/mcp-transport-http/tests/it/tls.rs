//! `https` with rustls: a server whose certificate the connector trusts is reached (over
//! HTTP/2 when both sides offer it); one it does not trust is refused.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve_tls, text_of};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A self-signed certificate for 127.0.0.1 and a TLS acceptor serving it.
fn tls() -> (CertificateDer<'static>, tokio_rustls::TlsAcceptor) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (cert, tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[tokio::test]
async fn https_with_a_trusted_certificate_works_over_http2() {
    bounded(async {
        let (cert, acceptor) = tls();
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let server = serve_tls(rmcp.handler(), acceptor).await;
        assert_eq!(server.url.scheme(), "https");
        let connector =
            HttpConnector::new(HttpOptions::default().with_root_certificate(cert)).unwrap();
        let connection = connector.connect(&server.spec("tls")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let result = client.peer().call_tool(echo("secure")).await.unwrap();
        assert_eq!(text_of(&result), "secure");
        client.cancel().await.unwrap();
        let seen = server.seen();
        assert!(
            seen.iter().all(|s| s.version == http::Version::HTTP_2),
            "{seen:?}"
        );
        // One TLS connection carries every request, the long-lived GET stream included.
        assert_eq!(server.connections(), 1);
    })
    .await;
}

#[tokio::test]
async fn https_with_an_unknown_certificate_is_refused() {
    bounded(async {
        let (_, acceptor) = tls();
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let server = serve_tls(rmcp.handler(), acceptor).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let connection = connector.connect(&server.spec("tls")).await.unwrap();
        rmcp::serve_client((), connection.transport)
            .await
            .unwrap_err();
        assert!(server.seen().is_empty());
    })
    .await;
}
