//! Whether a fleet honours its rate limit as one: requests sent through the load balancer
//! faster than the limit, each answer's status counted, against what the limit lets through
//! in the time they were sent.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one request may take.
const REQUEST_BOUND: Duration = Duration::from_secs(20);

/// What a burst of requests met.
#[derive(Debug, Clone)]
pub struct RateCheck {
    /// Requests sent.
    pub sent: usize,
    /// Answered `200`.
    pub allowed: usize,
    /// Answered `429`.
    pub refused: usize,
    /// Any other answer (status, or `0` for none), with how often.
    pub other: Vec<(u16, usize)>,
    /// From the first request sent to the last.
    pub window: Duration,
    /// What the limit lets through in `window`: the burst, then `per_second` a second.
    pub expected: f64,
}

impl RateCheck {
    /// `allowed` over `expected`: 1.0 is exact.
    pub fn accuracy(&self) -> f64 {
        self.allowed as f64 / self.expected
    }
}

/// Sends `count` requests to `addr` (a 2026-07-28 `tools/list` on `/mcp`, each on a fresh
/// connection, one every `1 / send_per_second` seconds without waiting for answers) and
/// counts the answers, for a limit of `per_second` in bursts of `burst`.
pub async fn check_rate_limit(
    addr: SocketAddr,
    per_second: f64,
    burst: u32,
    send_per_second: f64,
    count: usize,
) -> RateCheck {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / send_per_second));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = tokio::task::JoinSet::new();
    let mut first = None;
    let mut last = Instant::now();
    for _ in 0..count {
        ticks.tick().await;
        last = Instant::now();
        first.get_or_insert(last);
        tasks.spawn(async move { tools_list_status(addr).await });
    }
    let window = last - first.unwrap_or(last);
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    while let Some(status) = tasks.join_next().await {
        *statuses.entry(status.expect("a request task")).or_default() += 1;
    }
    let allowed = statuses.remove(&200).unwrap_or(0);
    let refused = statuses.remove(&429).unwrap_or(0);
    RateCheck {
        sent: count,
        allowed,
        refused,
        other: statuses.into_iter().collect(),
        window,
        expected: f64::from(burst) + per_second * window.as_secs_f64(),
    }
}

/// The status of one stateless `tools/list` to `addr` (`0` when no answer came).
pub async fn tools_list_status(addr: SocketAddr) -> u16 {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "rate", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }},
    })
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/list\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = Vec::new();
        let mut buf = [0u8; 512];
        while !head.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let line = String::from_utf8_lossy(&head).into_owned();
        line.split(' ').nth(1)?.parse().ok()
    };
    tokio::time::timeout(REQUEST_BOUND, exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}
