//! `[serve] trusted_proxies` behind real nginx: a replica counts each client's failed
//! authentications (and its rate) by the address nginx appends to `X-Forwarded-For`, so one
//! client spending its budget does not refuse another; without it, every client behind the
//! balancer is the balancer's address and shares one budget. A client that reaches the replica
//! directly, or through the balancer with a header of its own, is counted by its own address
//! whatever `X-Forwarded-For` it forges.
//!
//! The clients are told apart by their source address on the loopback network (127.0.0.2,
//! 127.0.0.3, …: Linux routes all of 127/8 to the loopback interface).

use std::net::SocketAddr;

use integration_tests::fleet::{Fleet, FleetOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const TOKEN: &str = "fleet-proxy-token-5c2e91";

/// Every failed authentication of an address counts; two, then `429` for the budget's
/// (practically) whole refill.
const FAILURES: &str = "auth_failure_rate_limit = { per_second = 0.001, burst = 2 }";

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"proxied","version":"1"}}}"#;

/// The status of an `initialize` POSTed to `to` from the source address `from`, with `token`
/// and the extra header lines `extra`.
async fn status_from(from: &str, to: SocketAddr, token: &str, extra: &str) -> u16 {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(to).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n\
         {extra}Content-Length: {}\r\nConnection: close\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let head = String::from_utf8_lossy(&answer);
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// One replica behind nginx with a bearer token, the failed-authentication budget above, and
/// `serve` besides.
async fn fleet(serve: &str) -> Option<Fleet> {
    Fleet::start(
        FleetOptions::default()
            .with_replicas(1)
            .with_env("GW_TOKEN", TOKEN)
            .with_serve("auth = { bearer_token_env = \"GW_TOKEN\" }")
            .with_serve(FAILURES)
            .with_serve(serve),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_balancer_each_client_spends_its_own_failure_budget() {
    let Some(trusting) = fleet("trusted_proxies = [\"127.0.0.1\"]").await else {
        return;
    };
    let balancer = trusting.lb.addr();
    let mut spent = Vec::new();
    for _ in 0..3 {
        spent.push(status_from("127.0.0.2", balancer, "wrong-token", "").await);
    }
    assert_eq!(spent, [401, 401, 429], "the failing client's own budget");
    assert_eq!(
        status_from("127.0.0.3", balancer, TOKEN, "").await,
        200,
        "another client behind the same balancer is not refused"
    );
    // Straight to the replica, from an address it does not trust: counted as itself, whatever
    // it claims to be.
    let replica = trusting.replicas[0].addr();
    let mut forged = Vec::new();
    for i in 0..3 {
        let claim = format!("X-Forwarded-For: 198.51.100.{i}\r\n");
        forged.push(status_from("127.0.0.4", replica, "wrong-token", &claim).await);
    }
    assert_eq!(forged, [401, 401, 429], "a forged header is not believed");
    // Through the balancer with a forged header: nginx appends the address it was reached
    // from, and that address, the last one outside the trusted networks, is the one counted.
    let mut through = Vec::new();
    for i in 0..3 {
        let claim = format!("X-Forwarded-For: 198.51.100.{i}\r\n");
        through.push(status_from("127.0.0.5", balancer, "wrong-token", &claim).await);
    }
    assert_eq!(
        through,
        [401, 401, 429],
        "a header forged before the balancer's does not give a fresh budget"
    );
    drop(trusting);

    // Without trusted proxies every client behind the balancer is the balancer.
    let Some(blind) = fleet("").await else {
        return;
    };
    let balancer = blind.lb.addr();
    for _ in 0..2 {
        assert_eq!(
            status_from("127.0.0.2", balancer, "wrong-token", "").await,
            401
        );
    }
    assert_eq!(
        status_from("127.0.0.3", balancer, TOKEN, "").await,
        429,
        "the balancer's one budget is spent"
    );
}
