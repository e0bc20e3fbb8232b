//! Hostile connections: idle and slow-loris connections, a stalled body, a flood beyond the
//! connection cap, one address taking every slot, and the file-descriptor limit. Each is
//! bounded (closed, refused or backed off) and a well-behaved client is served afterwards.
//! The gateway's connections and CPU time are read from `/proc` of a child process run under
//! a lowered file-descriptor limit.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_serve::{HttpOptions, RateLimit};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::{
    LIMIT, POST_HEADERS, Tools, all_but_hidden, bounded, initialize_body, send, serve_http,
};

/// Short bounds, so a test waits for them and not for the defaults.
fn short(options: HttpOptions) -> HttpOptions {
    options
        .with_header_read_timeout(Duration::from_millis(500))
        .with_body_read_timeout(Duration::from_millis(500))
        .with_idle_timeout(Duration::from_millis(500))
}

/// Waits until the server closes `stream` (EOF or reset), reading and dropping what it sends;
/// returns what was sent.
async fn closed_by_server(stream: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return seen,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// Opens `n` connections to `addr`; a slow-loris one sends the start of a request head and
/// stalls.
async fn open_many(addr: std::net::SocketAddr, n: usize, loris: bool) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        let mut stream = bounded("connect", TcpStream::connect(addr))
            .await
            .expect("connect");
        if loris {
            let _ = stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .await;
        }
        streams.push(stream);
    }
    streams
}

/// A well-behaved client is served: `initialize` answered 200.
async fn served(url: &str) {
    let answer = send("POST", url, POST_HEADERS, initialize_body()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_loris_connections_are_closed_and_the_cap_holds() {
    let tools = Arc::new(Tools::default());
    let options = short(HttpOptions::default().with_max_connections(100));
    let server = serve_http(&tools, all_but_hidden(), options).await;
    let addr = server.local_addr();
    let mut streams = Vec::new();
    for batch in 0..20 {
        streams.extend(open_many(addr, 250, batch % 2 == 1).await);
        let held = server.connections();
        assert!(held <= 100, "{held} connections held");
    }
    let started = Instant::now();
    let mut refused = 0;
    for stream in &mut streams {
        let said = bounded("the server closes it", closed_by_server(stream)).await;
        refused += usize::from(said.starts_with(b"HTTP/1.1 503"));
    }
    eprintln!(
        "5000 idle/slow-loris connections, cap 100: {refused} refused with 503, all closed in {:?}",
        started.elapsed()
    );
    assert!(refused > 0, "none refused beyond the cap");
    drop(streams);
    served(server.url().as_str()).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_and_closed() {
    let tools = Arc::new(Tools::default());
    let server = serve_http(&tools, all_but_hidden(), short(HttpOptions::default())).await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\"",
        server.local_addr()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let said = bounded("the stalled body's answer", closed_by_server(&mut stream)).await;
    let said = String::from_utf8_lossy(&said);
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    assert_eq!(tools.calls(), 0);
    served(server.url().as_str()).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_gets_at_most_its_share_of_connections() {
    let tools = Arc::new(Tools::default());
    let options = HttpOptions::default().with_max_connections_per_address(2);
    let server = serve_http(&tools, all_but_hidden(), options).await;
    let addr = server.local_addr();
    let held = open_many(addr, 2, false).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    let said = bounded("the third is refused", closed_by_server(&mut third)).await;
    let said = String::from_utf8_lossy(&said);
    assert!(said.starts_with("HTTP/1.1 503"), "{said}");
    assert!(said.contains("per address"), "{said}");
    drop(held);
    // Once the two are gone their slots are free again.
    bounded("the slots free", async {
        while server.connections() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    served(server.url().as_str()).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_failing_auth_are_rate_limited_by_default() {
    let tools = Arc::new(Tools::default());
    let options = HttpOptions::default().with_auth(mcp_serve::BearerAuth::new("right-token"));
    assert_eq!(options.auth_failure_limit, Some(RateLimit::new(1.0, 10)));
    let server = serve_http(&tools, all_but_hidden(), options).await;
    let url = server.url().as_str();
    let wrong: Vec<_> = POST_HEADERS
        .iter()
        .copied()
        .chain([("authorization", "Bearer wrong")])
        .collect();
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(send("POST", url, &wrong, initialize_body()).await);
    }
    assert!(statuses[..10].iter().all(|a| a.status == 401));
    let limited = &statuses[11];
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.headers.contains_key("retry-after"));
    server.shutdown().await;
}

/// CPU time (user + system, all threads) of process `pid`, from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    let after = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // utime and stime are fields 14 and 15 (counting from 1), in USER_HZ (100) ticks.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The sockets process `pid` holds open.
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_descriptor_limit_accept_backs_off_and_clients_are_served_again() {
    const NOFILE: usize = 128;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {NOFILE} && exec \"$0\" http 127.0.0.1:0"
        ))
        .arg(env!("CARGO_BIN_EXE_mcp-serve-demo"))
        // Idle connections are closed after 5 s: the 2 s measured below are spent at the limit.
        .env("MCP_SERVE_DEMO_TIMEOUT_MS", "5000")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the demo server");
    let pid = child.id().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = bounded("the demo listens", async {
        loop {
            let line = lines.next_line().await.unwrap().expect("a line");
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_owned();
            }
        }
    })
    .await;
    let addr: std::net::SocketAddr = url::Url::parse(&url)
        .unwrap()
        .socket_addrs(|| None)
        .unwrap()[0];

    // More than the descriptors the server has: the rest wait in the listen backlog.
    let streams = open_many(addr, NOFILE + 64, false).await;
    bounded("the server reaches its descriptor limit", async {
        while sockets(pid) < NOFILE - 16 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let (cpu0, t0) = (cpu_time(pid), Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let share = (cpu_time(pid) - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let held = sockets(pid);
    eprintln!(
        "at the descriptor limit ({NOFILE}): {held} sockets held, {:.0}% of a core over 2 s",
        share * 100.0
    );
    assert!(
        held >= NOFILE - 16,
        "the limit was left too early: {held} held"
    );
    assert!(share < 0.2, "{:.0}% of a core at EMFILE", share * 100.0);

    // The idle ones are closed (and then those from the backlog), and a new client is served.
    let mut streams = streams;
    for stream in &mut streams {
        bounded("the server closes it", closed_by_server(stream)).await;
    }
    drop(streams);
    let started = Instant::now();
    served(&url).await;
    eprintln!(
        "then: {} sockets held, a new client served in {:?}",
        sockets(pid),
        started.elapsed()
    );
    assert!(started.elapsed() < LIMIT);
    let _ = child.start_kill();
}
