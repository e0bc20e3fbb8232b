//! The memory of library runs: rounds of many concurrent runs (`open_runner` →
//! `mcp_call_tool` → `close`) against one HTTP upstream in another process, so that only the
//! client's memory is counted.
//!
//! Each round opens `RUNS` runners at once, makes one `mcp_call_tool` call on each, reads the
//! process's resident memory (`VmRSS`) and the bytes the allocator has handed out and not
//! taken back (`live`, counted by this binary's global allocator), closes every runner and
//! reads both again. `live` tells a leak (it grows round after round) from retention (`live`
//! back at its baseline while `VmRSS` is not: freed memory the allocator keeps).
//!
//! After each round glibc's allocator is asked to return its free pages (`malloc_trim`) and
//! `VmRSS` read a third time: what that gives back was retained by the allocator, not held by
//! the client. The baseline is read after a first run and a trim.
//!
//! `cargo bench -p integration-tests --bench run_memory` (figures printed, and written as JSON
//! to `$MCP_AGENT_BENCH_PAIRED` when set); under `cargo test --benches` it runs one small round.

use std::alloc::System;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use agent_core::{RunInput, Runner, ToolCall, ToolDispatcher};
use integration_tests::bench::{self, echo_args, runtime};
use integration_tests::harness::object;
use mcp_client::McpClient;
use mcp_config::{Config, HttpSpec, ServerSpec, TransportSpec};
use mcp_connector::Connectors;
use mcp_test_kit::{TestServerOptions, serve_http};
use mcp_transport_http::{HttpConnector, HttpOptions};
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

/// The allocator of this binary: the system's, counting what it hands out and takes back.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The bytes handed out and not yet freed.
fn live() -> usize {
    let s = ALLOCATOR.stats();
    // A `realloc` is already counted in both (its growth or its shrinking).
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

/// The environment variable that makes this binary the upstream server.
const UPSTREAM: &str = "MCP_AGENT_MEMORY_UPSTREAM";

/// Resident memory of this process, in bytes (`VmRSS`).
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .expect("VmRSS in /proc/self/status")
        * 1024
}

/// The upstream: the test kit's HTTP server in a child process (this binary again), whose
/// URL it prints on its first line.
fn upstream() -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .env(UPSTREAM, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the upstream");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the upstream's URL");
    (child, line.trim().to_owned())
}

/// Serves until stdin closes (the parent ended).
fn serve_upstream() {
    runtime().block_on(async {
        let server = serve_http(TestServerOptions::default())
            .await
            .expect("the HTTP test server");
        let mut out = std::io::stdout();
        writeln!(out, "{}", server.url()).expect("print the URL");
        out.flush().expect("flush");
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            let _ = std::io::stdin().read_line(&mut sink);
        })
        .await;
        server.shutdown().await;
    });
}

/// The figures of one round, in bytes.
#[derive(Debug, Clone, Copy)]
struct Round {
    /// How long the live bytes took to stop falling after the last `close` returned.
    settled: std::time::Duration,
    rss_open: usize,
    live_open: usize,
    rss_closed: usize,
    live_closed: usize,
    /// `VmRSS` after the allocator was asked to hand free pages back (`malloc_trim`).
    rss_trimmed: usize,
}

/// Asks glibc's allocator to give the operating system back the free pages it keeps.
fn trim() {
    // SAFETY: `malloc_trim` only releases free memory of the allocator's own arenas; it takes
    // no pointer and is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Waits until the live bytes stop falling (tasks of closed sessions may still be ending when
/// `close` returns), at most 5 s; returns how long that took.
async fn settle() -> std::time::Duration {
    let started = std::time::Instant::now();
    let mut last = live();
    while started.elapsed() < std::time::Duration::from_secs(5) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = live();
        if now >= last {
            break;
        }
        last = now;
    }
    started.elapsed()
}

async fn round(client: &McpClient, runs: usize) -> Round {
    let args = json!({"tool_name": "kit__echo", "arguments": echo_args()});
    let call = ToolCall::new("call-1", mcp_catalog::CALL_TOOL, object(args));
    let opened = futures::future::join_all((0..runs).map(|i| {
        let call = call.clone();
        async move {
            let runner = client
                .open_runner(&RunInput::new(format!("run-{i}"), "echo"))
                .await
                .expect("the run opens");
            let out = runner.dispatch(call).await.expect("the call");
            assert_eq!(out.structured, Some(echo_args()));
            runner
        }
    }))
    .await;
    let (rss_open, live_open) = (rss(), live());
    futures::future::join_all(opened.iter().map(|r| r.close())).await;
    drop(opened);
    let settled = settle().await;
    let (rss_closed, live_closed) = (rss(), live());
    trim();
    let rss_trimmed = rss();
    Round {
        settled,
        rss_open,
        live_open,
        rss_closed,
        live_closed,
        rss_trimmed,
    }
}

fn measure(full: bool) -> Value {
    let (mut runs, mut rounds) = if full { (1_000, 4) } else { (20, 1) };
    // `MCP_AGENT_MEMORY_RUNS=RUNSxROUNDS` for a heap profiler's smaller run.
    if let Some((r, n)) = std::env::var("MCP_AGENT_MEMORY_RUNS").ok().and_then(|v| {
        let (r, n) = v.split_once('x')?;
        Some((r.parse().ok()?, n.parse().ok()?))
    }) {
        (runs, rounds) = (r, n);
    }
    let (mut child, url) = upstream();
    let rt = runtime();
    let figures = rt.block_on(async {
        let spec = ServerSpec::new(
            "kit",
            TransportSpec::StreamableHttp(HttpSpec::new(url.parse().expect("URL"))),
        );
        let http = HttpConnector::new(HttpOptions::default()).expect("HTTP connector");
        let client = McpClient::builder(Config::new(vec![spec]).expect("valid spec"))
            .connectors(Connectors::new().with(http))
            .build();
        // One run first, so that what every later run shares (the connector's pools, the
        // runtime's threads) is in the baseline.
        round(&client, 1).await;
        trim();
        let (rss0, live0) = (rss(), live());
        let mut all = Vec::new();
        for _ in 0..rounds {
            all.push(round(&client, runs).await);
        }
        client.shutdown().await;
        (rss0, live0, all)
    });
    drop(child.stdin.take());
    let _ = child.wait();
    let (rss0, live0, all) = figures;
    let kib = |b: usize| b as f64 / 1024.0;
    let per_run = |b: usize, base: usize| kib(b.saturating_sub(base)) / runs as f64;
    println!(
        "baseline: RSS {:.0} KiB, live {:.0} KiB",
        kib(rss0),
        kib(live0)
    );
    let mut rows = Vec::new();
    for (i, r) in all.iter().enumerate() {
        println!(
            "round {}: {runs} runs open: RSS +{:.1} KiB/run, live +{:.1} KiB/run; closed (settled in {:.1} s): live {:.0} KiB, RSS {:.0} KiB ({:+.1}%), trimmed {:.0} KiB ({:+.1}%)",
            i + 1,
            per_run(r.rss_open, rss0),
            per_run(r.live_open, live0),
            r.settled.as_secs_f64(),
            kib(r.live_closed),
            kib(r.rss_closed),
            (r.rss_closed as f64 / rss0 as f64 - 1.0) * 100.0,
            kib(r.rss_trimmed),
            (r.rss_trimmed as f64 / rss0 as f64 - 1.0) * 100.0,
        );
        rows.push(json!({
            "rss_open_per_run_kib": per_run(r.rss_open, rss0),
            "live_open_per_run_kib": per_run(r.live_open, live0),
            "rss_closed_kib": kib(r.rss_closed),
            "live_closed_kib": kib(r.live_closed),
            "rss_trimmed_kib": kib(r.rss_trimmed),
        }));
    }
    json!({
        "runs": runs,
        "baseline_rss_kib": kib(rss0),
        "baseline_live_kib": kib(live0),
        "rounds": rows,
    })
}

fn main() {
    if std::env::var_os(UPSTREAM).is_some() {
        return serve_upstream();
    }
    bench::run_paired(measure);
}
