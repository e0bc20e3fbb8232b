//! The Redis test peer: started ready, password enforced, gone on drop. Skips (or fails under
//! `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`) without `MCP_AGENT_PEER_REDIS`.

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
