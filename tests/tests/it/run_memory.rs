//! The memory of a run with 100,000 tools: 20 in-memory servers of 5,003 tools
//! each, listed in pages of 1,000 as they are asked for, through the whole client (listing,
//! catalog, index). A measurement, run by hand:
//! `cargo nextest run -p integration-tests --test it --run-ignored only --no-capture run_memory::`
//! (use `--release` for the time it takes).

use crate::in_memory;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{RunInput, Runner};
use in_memory::{InMemory, builder, spec};
use integration_tests::harness::Events;
use mcp_test_kit::hostile::{HostileOptions, HostileServer, Pages};

/// Resident and peak memory of this process, in KiB (`VmRSS`, `VmHWM`).
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_a_run_of_100k_tools() {
    let server = HostileServer::new(HostileOptions::new(Pages::Many {
        pages: 5,
        tools_per_page: 1_000,
    }));
    let specs = (0..20)
        .map(|i| spec(&format!("s{i:02}"), &[], Duration::from_secs(600)))
        .collect();
    let client = builder(specs, InMemory::new(server), Arc::new(Events::default())).build();
    let (before, _) = memory_kib();
    let started = Instant::now();
    let runner = client
        .open_runner(&RunInput::new("s", "q"))
        .await
        .expect("the run opens");
    let took = started.elapsed();
    let (after, peak) = memory_kib();
    let tools = runner.catalog().len();
    println!(
        "{tools} tools opened in {:.1} s: resident {} -> {} MiB ({} bytes per tool), peak {} MiB",
        took.as_secs_f64(),
        before / 1024,
        after / 1024,
        (after - before) * 1024 / tools as u64,
        peak / 1024
    );
    runner.close().await;
}
