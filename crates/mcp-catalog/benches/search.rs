//! Search benchmarks: query latency on 1k and 10k synthetic tools, index build time,
//! the index's memory (an estimate, printed once per size), the whole catalog's memory for
//! 100k tools (resident memory grown, measured once and printed) and the time of one 108 KB
//! query over 20k tools (printed once).
//!
//! ```text
//! cargo bench -p mcp-catalog --bench search      # or: cargo xtask bench
//! ```
//!
//! Targets: a query on 10k tools in ≤ 1 ms (p50), a 10k-tool index built in ≤ 100 ms.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use mcp_catalog::eval::{index_tools, synthetic_queries, synthetic_tools};
use mcp_catalog::search::SearchIndex;
use mcp_catalog::testing::{Behavior, FakeServer, tool};
use mcp_catalog::{Catalog, CatalogConfig, SearchRequest, ServerTools, SessionError, ToolSession};
use rmcp::model::{CallToolResult, Tool};

const SIZES: [usize; 2] = [1_000, 10_000];

fn search(c: &mut Criterion) {
    let mut group = c.benchmark_group("search");
    for n in SIZES {
        let tools = synthetic_tools(n, 42);
        let queries = synthetic_queries(&tools, 256, 7);
        let mut index = SearchIndex::default();
        index_tools(&mut index, &tools);
        println!(
            "index memory, {n} tools: {:.1} MiB (estimate)",
            index.memory_bytes() as f64 / (1024.0 * 1024.0)
        );
        let mut i = 0;
        group.bench_function(format!("query_top10_{n}_tools"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(index.search(black_box(&queries[i]), None, 10))
            })
        });
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("build");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    for n in SIZES {
        let tools = synthetic_tools(n, 42);
        group.bench_function(format!("index_{n}_tools"), |b| {
            b.iter_batched(
                SearchIndex::default,
                |mut index| {
                    index_tools(&mut index, &tools);
                    index
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// The whole `mcp_search_tools` path on 10k tools in 200 servers: ranking plus the response
/// JSON the model reads.
fn catalog(c: &mut Criterion) {
    let tools = synthetic_tools(10_000, 42);
    let queries = synthetic_queries(&tools, 256, 7);
    let catalog = Catalog::new(CatalogConfig::default());
    for chunk in tools.chunks(50) {
        let mut fake = FakeServer::new();
        for t in chunk {
            let schema = serde_json::Value::Object(t.input_schema.clone().unwrap_or_default());
            fake = fake.with_tool(
                tool(&t.name, t.description.as_deref().unwrap_or(""), schema),
                Behavior::Echo,
            );
        }
        catalog
            .add_server(Arc::new(fake).into_server(&chunk[0].server))
            .expect("synthetic names do not collide");
    }
    let mut i = 0;
    c.bench_function("catalog/search_json_10000_tools", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            let found = catalog
                .search(&SearchRequest::new(queries[i].clone()))
                .expect("search");
            black_box(found.to_json())
        })
    });
}

/// A session that is never called: the memory figure counts the catalog only.
struct Idle;

#[async_trait::async_trait]
impl ToolSession for Idle {
    async fn call_tool(
        &self,
        _: &str,
        _: agent_core::JsonObject,
    ) -> Result<CallToolResult, SessionError> {
        Err(SessionError::Closed)
    }
}

/// This process's resident memory, in bytes (Linux; 0 elsewhere).
fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Resident memory of a catalog of 100k tools in 1,000 servers, the tools parsed from JSON text
/// as a `tools/list` answer arrives, and dropped once the catalog holds them. Measured first,
/// before any other benchmark has touched the heap, and printed once.
///
/// Each server's answer is made inside the loop: what one iteration frees, the next reuses, so
/// the growth is the catalog's (memory freed early would otherwise be reused by the catalog and
/// hide part of it).
fn catalog_memory(_: &mut Criterion) {
    const TOOLS: usize = 100_000;
    const PER_SERVER: usize = 100;
    let answer = |seed: u64| {
        let tools: Vec<serde_json::Value> = synthetic_tools(PER_SERVER, seed)
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "description": t.description,
                    "inputSchema": t.input_schema,
                })
            })
            .collect();
        serde_json::Value::Array(tools).to_string()
    };
    let before = resident_bytes();
    let catalog = Catalog::new(CatalogConfig::default());
    for s in 0..TOOLS / PER_SERVER {
        let listed: Vec<Tool> = serde_json::from_str(&answer(s as u64)).expect("tools");
        catalog
            .add_server(ServerTools::new(
                format!("server{s}"),
                Arc::new(Idle),
                listed,
            ))
            .expect("synthetic names do not collide");
    }
    let grown = resident_bytes().saturating_sub(before);
    println!(
        "catalog memory, {TOOLS} tools: {:.1} MiB resident ({} bytes per tool)",
        grown as f64 / (1024.0 * 1024.0),
        grown / TOOLS
    );
    black_box(&catalog);
}

/// One search with a 108 KB query over 20k tools, timed once and printed: the index reads only
/// the query's first `MAX_QUERY_CHARS` characters and `MAX_QUERY_TERMS` distinct words.
fn long_query(_: &mut Criterion) {
    let tools = synthetic_tools(20_000, 42);
    let mut index = SearchIndex::default();
    index_tools(&mut index, &tools);
    let mut query = String::new();
    for q in synthetic_queries(&tools, 20_000, 7) {
        if query.len() >= 108 * 1024 {
            break;
        }
        query.push_str(&q);
        query.push(' ');
    }
    let started = std::time::Instant::now();
    black_box(index.search(&query, None, 10));
    println!(
        "a {} KB query over 20000 tools: {:.1} ms",
        query.len() / 1024,
        started.elapsed().as_secs_f64() * 1e3
    );
}

criterion_group!(benches, catalog_memory, long_query, search, build, catalog);
criterion_main!(benches);
