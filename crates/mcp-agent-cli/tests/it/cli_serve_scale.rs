//! `mcp-agent serve` at scale: 1,000 downstream sessions opened and dropped over streamable
//! HTTP, 16 at a time, each with its own upstream process. After them no upstream process is
//! left and the gateway's resident memory is back near what it was after a warm-up.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::children;
use crate::support::gateway::Gateway;

/// Every wait of this test is bounded by this.
const LIMIT: Duration = Duration::from_secs(120);
/// Sessions opened and dropped after the warm-up.
const SESSIONS: usize = 1_000;
/// Sessions of the warm-up, after which the baseline is read.
const WARM_UP: usize = 50;
/// Sessions open at once.
const CONCURRENCY: usize = 16;
/// How much the gateway's resident memory may grow over the 1,000 sessions.
const GROWTH_MAX_KIB: u64 = 20 * 1024;

/// The gateway's resident set size, in KiB, from `/proc`.
fn rss_kib(gateway: &Gateway) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", gateway.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

/// One HTTP/1.1 exchange on a fresh connection: status, head (lower-cased) and body.
fn request(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(body);
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    (status, text)
}

/// Opens one session (initialize, which opens its upstream; `tools/list`) and drops it
/// (`DELETE`, which closes its upstream).
fn session(addr: &str) {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "scale", "version": "1"},
        },
    });
    let (status, text) = request(addr, "POST", &[], &initialize.to_string());
    assert_eq!(status, 200, "{text}");
    // Header names are case-insensitive; the id itself is not.
    let id = text
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {text}"));
    let headers = [
        ("Mcp-Session-Id", id.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    request(addr, "POST", &headers, &initialized.to_string());
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, text) = request(addr, "POST", &headers, &list.to_string());
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("mcp_search_tools"), "{text}");
    let (status, text) = request(addr, "DELETE", &headers, "");
    assert!(status < 300, "DELETE answered {status}: {text}");
}

/// `count` sessions, `CONCURRENCY` at a time.
fn sessions(addr: &str, count: usize) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..CONCURRENCY {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < count {
                    session(addr);
                }
            });
        }
    });
}

/// Waits until the gateway has no child process (every upstream closed).
fn no_upstream_left(gateway: &Gateway) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = children(gateway.pid());
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "upstream processes left: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_thousand_sessions_opened_and_dropped_leave_no_upstream_and_memory_near_its_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.toml");
    let text = format!(
        "[[servers]]\nname = \"kit\"\ncommand = {:?}\n\n[serve]\nmax_sessions = {}\n",
        mcp_test_kit::stdio::binary().display().to_string(),
        CONCURRENCY * 4,
    );
    std::fs::write(&file, text).unwrap();
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();

    sessions(&addr, WARM_UP);
    no_upstream_left(&gateway);
    let baseline = rss_kib(&gateway);

    let started = Instant::now();
    sessions(&addr, SESSIONS);
    let took = started.elapsed();
    no_upstream_left(&gateway);
    let after = rss_kib(&gateway);

    let growth = after.saturating_sub(baseline);
    eprintln!(
        "{SESSIONS} sessions ({CONCURRENCY} at a time) in {:.1} s ({:.0}/s); gateway RSS \
         {baseline} KiB after {WARM_UP} warm-up sessions, {after} KiB after {SESSIONS} \
         (growth {growth} KiB, bound {GROWTH_MAX_KIB} KiB)",
        took.as_secs_f64(),
        SESSIONS as f64 / took.as_secs_f64(),
    );
    assert!(
        growth < GROWTH_MAX_KIB,
        "the gateway grew by {growth} KiB over {SESSIONS} sessions ({baseline} → {after} KiB)"
    );
}
