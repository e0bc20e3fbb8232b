//! Prints index build time and query latency on a synthetic catalog.
//!
//! ```text
//! cargo run --release -p mcp-catalog --example synthetic_latency -- [TOOLS]
//! ```

use std::time::Instant;

use mcp_catalog::eval::{index_tools, synthetic_queries, synthetic_tools};
use mcp_catalog::search::SearchIndex;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let start = Instant::now();
    let tools = synthetic_tools(n, 42);
    let generation = start.elapsed().as_secs_f64() * 1000.0;
    if std::env::args().nth(2).as_deref() == Some("--build-only") {
        let mut build = 0.0;
        let mut fastest = f64::MAX;
        let mut drop = 0.0;
        for _ in 0..10 {
            let start = Instant::now();
            let mut index = SearchIndex::default();
            index_tools(&mut index, &tools);
            std::hint::black_box(&index);
            let took = start.elapsed().as_secs_f64() * 1000.0;
            fastest = fastest.min(took);
            build += took / 10.0;
            let start = Instant::now();
            std::mem::drop(index);
            drop += start.elapsed().as_secs_f64() * 100.0;
        }
        println!(
            "build {build:.1} ms mean, {fastest:.1} ms fastest of 10; drop {drop:.1} ms; \
             generating the tools took {generation:.1} ms"
        );
        return;
    }
    let queries = synthetic_queries(&tools, 2000, 7);
    let mut builds = Vec::new();
    let mut index = SearchIndex::default();
    for _ in 0..5 {
        let start = Instant::now();
        index = SearchIndex::default();
        index_tools(&mut index, &tools);
        builds.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    builds.sort_by(f64::total_cmp);
    let mut lat: Vec<f64> = queries
        .iter()
        .map(|q| {
            let start = Instant::now();
            let r = index.search(q, None, 10);
            std::hint::black_box(r);
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    println!(
        "{n} tools: build median {:.1} ms; query p50 {:.3} ms, p99 {:.3} ms; index ~{:.1} MiB",
        builds[2],
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
        index.memory_bytes() as f64 / (1024.0 * 1024.0)
    );
}
