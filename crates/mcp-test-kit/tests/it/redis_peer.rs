//! The Redis test peer: started ready, password enforced, gone on drop; with TLS, TLS only,
//! trusted through its test CA alone. Skips (or fails under `CI=true` /
//! `MCP_AGENT_REQUIRE_PEERS=1`) without `MCP_AGENT_PEER_REDIS` (`MCP_AGENT_PEER_REDIS_TLS`).

use mcp_test_kit::bounded;
use mcp_test_kit::procs::running;
use mcp_test_kit::redis::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `request` (inline commands) and reads until the reply holds `until`.
async fn exchange(server: &RedisServer, request: &str, until: &str) -> String {
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains(until) {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "connection closed; got {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    seen
}

#[tokio::test]
async fn answers_at_once_and_is_gone_on_drop() {
    let Some(server) = bounded(RedisServer::start()).await else {
        return;
    };
    let pid = server.pid();
    let reply = bounded(exchange(&server, "PING\r\n", "\r\n")).await;
    assert_eq!(reply, "+PONG\r\n");
    // No persistence: no save points, no append-only file.
    let request = "CONFIG GET save\r\nCONFIG GET appendonly\r\nPING\r\n";
    let reply = bounded(exchange(&server, request, "+PONG\r\n")).await;
    assert_eq!(
        reply,
        "*2\r\n$4\r\nsave\r\n$0\r\n\r\n*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n+PONG\r\n"
    );
    drop(server);
    assert!(
        !running(pid),
        "redis-server (pid {pid}) outlived its handle"
    );
}

#[tokio::test]
async fn a_password_is_required_when_set() {
    let Some(server) = bounded(RedisServer::start_with_password("pw-123")).await else {
        return;
    };
    assert!(server.url().starts_with("redis://:pw-123@127.0.0.1:"));
    let reply = bounded(exchange(&server, "PING\r\n", "\r\n")).await;
    assert!(reply.starts_with("-NOAUTH"), "{reply:?}");
    let reply = bounded(exchange(&server, "AUTH pw-123\r\nPING\r\n", "+PONG\r\n")).await;
    assert_eq!(reply, "+OK\r\n+PONG\r\n");
}

/// Sends `request` over TLS trusting `ca` and reads until the reply holds `until`.
async fn exchange_tls(
    server: &RedisServer,
    ca: &mcp_test_kit::tls::TestCa,
    request: &str,
    until: &str,
) -> String {
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(ca.client_config()));
    let tcp = TcpStream::connect(server.addr()).await.expect("connect");
    let name = rustls::pki_types::ServerName::IpAddress(server.addr().ip().into());
    let mut stream = connector.connect(name, tcp).await.expect("TLS handshake");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains(until) {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "connection closed; got {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    seen
}

#[tokio::test]
async fn a_tls_server_speaks_tls_only_and_keeps_it_across_a_restart() {
    let Some(mut server) = bounded(RedisServer::start_tls(Some("pw-tls"))).await else {
        return;
    };
    assert!(server.url().starts_with("rediss://:pw-tls@127.0.0.1:"));
    // Plain text on its port gets no answer: the connection is closed.
    let mut plain = TcpStream::connect(server.addr()).await.expect("connect");
    plain.write_all(b"PING\r\n").await.expect("write");
    let mut buf = [0u8; 64];
    let n = bounded(plain.read(&mut buf)).await.unwrap_or(0);
    assert!(!String::from_utf8_lossy(&buf[..n]).contains("PONG"));

    // A client trusting the server's CA talks to it, with the password.
    let ca = server.test_ca().unwrap();
    let reply = bounded(exchange_tls(&server, ca, "PING\r\n", "\r\n")).await;
    assert!(reply.starts_with("-NOAUTH"), "{reply:?}");
    let request = "AUTH pw-tls\r\nPING\r\n";
    let reply = bounded(exchange_tls(&server, ca, request, "+PONG\r\n")).await;
    assert_eq!(reply, "+OK\r\n+PONG\r\n");

    let (port, ca_file, pid) = (server.port(), server.ca_file(), server.pid());
    server.restart().await;
    assert_ne!(server.pid(), pid);
    assert_eq!((server.port(), server.ca_file()), (port, ca_file));
    let ca = server.test_ca().unwrap();
    let reply = bounded(exchange_tls(&server, ca, request, "+PONG\r\n")).await;
    assert_eq!(
        reply, "+OK\r\n+PONG\r\n",
        "TLS and the password after a restart"
    );
}

#[tokio::test]
async fn a_test_ca_is_trusted_by_its_own_clients_only() {
    let Some(server) = bounded(RedisServer::start_tls(None)).await else {
        return;
    };
    let stranger = mcp_test_kit::tls::TestCa::new();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(stranger.client_config()));
    let tcp = TcpStream::connect(server.addr()).await.expect("connect");
    let name = rustls::pki_types::ServerName::IpAddress(server.addr().ip().into());
    let refused = bounded(connector.connect(name, tcp)).await;
    let e = refused.expect_err("a CA that did not issue the certificate");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
}
