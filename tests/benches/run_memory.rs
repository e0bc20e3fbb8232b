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
//! Under glibc's malloc, after each round the allocator is asked to return its free pages
//! (`malloc_trim`) and `VmRSS` read a third time: what that gives back was retained by the
//! allocator, not held by the client. The baseline is read after a first run (and a trim).
//!
//! The host process owns the allocator, so the rounds run once per allocator, each time in a
//! process of its own ([`memory::allocators`]): under glibc's malloc (`system`, a host's
//! default; its `trimmed` figure is what a host gets that calls `malloc_trim` after closing
//! runs, the setup docs/benchmarks.md recommends) and under jemalloc with its background
//! thread (`jemalloc`, preloaded in front of glibc's malloc; it gives pages back by itself),
//! each also without its per-thread caches of freed blocks (`system_no_tcache`,
//! `jemalloc_no_tcache`): blocks those caches hold stay allocated to the allocator, and the
//! pages they sit on cannot be given back.
//!
//! `cargo bench -p integration-tests --bench run_memory` (figures printed, and written as JSON
//! to `$MCP_AGENT_BENCH_PAIRED` when set); under `cargo test --benches` it runs one small round.
//! jemalloc is measured when `MCP_AGENT_PEER_JEMALLOC` names its library (`eval "$(cargo xtask
//! peers --env)"` first; `cargo xtask bench` sets it).
//! `MCP_AGENT_MEMORY_RUNS=RUNSxROUNDS` for a heap profiler's smaller run,
//! `MCP_AGENT_MEMORY_SHARED=1` to make the server `shared = true` (the runs reuse one session),
//! `MCP_AGENT_MEMORY_PAUSE=SECONDS` to hold the runs open that long in each round (`vgdb
//! detailed_snapshot FILE` under `valgrind --tool=massif --vgdb=yes`).

use std::time::Duration;

use agent_core::{RunInput, Runner, ToolCall, ToolDispatcher};
use integration_tests::bench::{self, echo_args, runtime};
use integration_tests::harness::object;
use integration_tests::memory::{self, BenchAllocator, kib, rss, settle, trim};
use mcp_client::McpClient;
use mcp_config::{Config, HttpSpec, ServerSpec, TransportSpec};
use mcp_connector::Connectors;
use mcp_transport_http::{HttpConnector, HttpOptions};
use serde_json::{Value, json};

/// The allocator of this binary: the system's `malloc` (glibc's unless another was preloaded),
/// counting what it hands out and takes back.
#[global_allocator]
static ALLOCATOR: BenchAllocator = BenchAllocator::new();

/// The bytes handed out and not yet freed.
fn live() -> usize {
    ALLOCATOR.live()
}

/// The figures of one round, in bytes.
#[derive(Debug, Clone, Copy)]
struct Round {
    /// How long the live bytes took to stop falling after the last `close` returned.
    settled: Duration,
    rss_open: usize,
    live_open: usize,
    rss_closed: usize,
    live_closed: usize,
    /// Under glibc's malloc, `VmRSS` after it was asked to hand free pages back
    /// (`malloc_trim`), and how long that took (another malloc has no such call).
    trimmed: Option<(usize, Duration)>,
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
    memory::pause().await;
    futures::future::join_all(opened.iter().map(|r| r.close())).await;
    drop(opened);
    let settled = settle(Duration::from_millis(100), 2, Duration::from_secs(5), live).await;
    // An allocator may give pages back on a timer (jemalloc's decay).
    settle(Duration::from_secs(1), 5, Duration::from_secs(30), rss).await;
    let (rss_closed, live_closed) = (rss(), live());
    let trimmed = (memory::in_use() == "system").then(|| {
        let took = trim();
        (rss(), took)
    });
    Round {
        settled,
        rss_open,
        live_open,
        rss_closed,
        live_closed,
        trimmed,
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
    let (mut child, url) = memory::upstream();
    let rt = runtime();
    let figures = rt.block_on(async {
        let mut spec = ServerSpec::new(
            "kit",
            TransportSpec::StreamableHttp(HttpSpec::new(url.parse().expect("URL"))),
        );
        // `MCP_AGENT_MEMORY_SHARED=1`: every run reuses the client's one session of the server.
        spec.shared = std::env::var_os("MCP_AGENT_MEMORY_SHARED").is_some();
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
    let per_run = |b: usize, base: usize| kib(b.saturating_sub(base)) / runs as f64;
    println!(
        "baseline: RSS {:.0} KiB, live {:.0} KiB",
        kib(rss0),
        kib(live0)
    );
    let mut rows = Vec::new();
    for (i, r) in all.iter().enumerate() {
        let trimmed = match r.trimmed {
            Some((rss, took)) => format!(
                ", trimmed {:.0} KiB ({:+.1}%) in {:.1} ms",
                kib(rss),
                (rss as f64 / rss0 as f64 - 1.0) * 100.0,
                took.as_secs_f64() * 1e3
            ),
            None => String::new(),
        };
        println!(
            "round {}: {runs} runs open: RSS +{:.1} KiB/run, live +{:.1} KiB/run; closed (settled in {:.1} s): live {:.0} KiB, RSS {:.0} KiB ({:+.1}%){trimmed}",
            i + 1,
            per_run(r.rss_open, rss0),
            per_run(r.live_open, live0),
            r.settled.as_secs_f64(),
            kib(r.live_closed),
            kib(r.rss_closed),
            (r.rss_closed as f64 / rss0 as f64 - 1.0) * 100.0,
        );
        rows.push(json!({
            "rss_open_per_run_kib": per_run(r.rss_open, rss0),
            "live_open_per_run_kib": per_run(r.live_open, live0),
            "rss_closed_kib": kib(r.rss_closed),
            "live_closed_kib": kib(r.live_closed),
            "rss_trimmed_kib": r.trimmed.map(|(rss, _)| kib(rss)),
            "trim_ms": r.trimmed.map(|(_, took)| took.as_secs_f64() * 1e3),
        }));
    }
    json!({
        "runs": runs,
        "allocator": memory::in_use(),
        "baseline_rss_kib": kib(rss0),
        "baseline_live_kib": kib(live0),
        "rounds": rows,
    })
}

/// Set in the child that measures under one allocator: `full` or `small`.
const MEASURE: &str = "MCP_AGENT_MEMORY_MEASURE";

/// Measures under each of [`memory::allocators`] in a child process (this binary again),
/// printing what it prints.
fn measure_each(full: bool) -> Value {
    let mut out = serde_json::Map::new();
    for allocator in memory::allocators() {
        let name = allocator.name;
        println!("allocator: {name}");
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("this binary"));
        allocator.apply(&mut cmd);
        let output = cmd
            .env(MEASURE, if full { "full" } else { "small" })
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run the measurement");
        assert!(output.status.success(), "the {name} measurement failed");
        let text = String::from_utf8_lossy(&output.stdout);
        let mut figures = Value::Null;
        for line in text.lines() {
            match line.strip_prefix(FIGURES) {
                Some(json) => figures = serde_json::from_str(json).expect("the figures"),
                None => println!("  {line}"),
            }
        }
        assert!(
            !figures.is_null(),
            "the {name} measurement printed no figures"
        );
        assert_eq!(
            figures["allocator"], allocator.library,
            "the child meant to measure {name} ran on another allocator"
        );
        out.insert(name.to_owned(), figures);
    }
    json!({ "allocators": out })
}

/// Where a child's figures start on its stdout.
const FIGURES: &str = "figures: ";

fn main() {
    if std::env::var_os(memory::UPSTREAM).is_some() {
        return memory::serve_upstream();
    }
    if let Ok(size) = std::env::var(MEASURE) {
        let figures = measure(size == "full");
        println!("{FIGURES}{figures}");
        return;
    }
    bench::run_paired(measure_each);
}
