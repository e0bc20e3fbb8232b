//! Search benchmarks (SPEC J2): query latency on 1k and 10k synthetic tools, index build time,
//! and the index's memory (an estimate, printed once per size).
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
use mcp_catalog::{Catalog, CatalogConfig, SearchRequest};

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

criterion_group!(benches, search, build, catalog);
criterion_main!(benches);
