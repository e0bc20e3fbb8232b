//! Measures the ranking of `mcp_search_tools` on a tool-search dataset.
//!
//! ```text
//! cargo run --release -p mcp-catalog --example search_eval -- --dataset datasets/bfcl [--json] [--subset all|even|odd]
//! ```
//!
//! The dataset folder holds `tools.jsonl` and `queries.jsonl` (format in
//! `datasets/README.md`). Every query ranks the **whole** catalog (no cap); the output
//! is hit@1/5/10, recall@1/5/10, MRR and the p50/p99 latency of one query. `--subset even|odd`
//! scores only the queries on even or odd lines, to compare a tuning half with a held-out half.
//! `cargo xtask search-eval` runs this example.

use std::path::PathBuf;
use std::process::ExitCode;

use mcp_catalog::search::{RankingConfig, SearchIndex};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("search_eval: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut dataset: Option<PathBuf> = None;
    let mut json = false;
    let mut subset = String::from("all");
    let mut dump: Option<PathBuf> = None;
    let mut config = RankingConfig::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dataset" => dataset = args.next().map(PathBuf::from),
            "--json" => json = true,
            "--dump" => dump = args.next().map(PathBuf::from),
            "--subset" => subset = args.next().ok_or("--subset needs a value")?,
            "--set" => {
                let kv = args.next().ok_or("--set needs KEY=VALUE")?;
                set(&mut config, &kv)?;
            }
            "-h" | "--help" => {
                println!(
                    "usage: search_eval --dataset DIR [--json] [--subset all|even|odd] [--set KEY=VALUE] [--dump FILE]"
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let dataset = dataset.ok_or("--dataset DIR is required")?;
    let keep: fn(usize) -> bool = match subset.as_str() {
        "all" => |_| true,
        "even" => |i| i % 2 == 0,
        "odd" => |i| i % 2 == 1,
        other => return Err(format!("unknown subset `{other}`")),
    };
    let tools = mcp_catalog::eval::load_tools(&dataset.join("tools.jsonl"))?;
    let queries = mcp_catalog::eval::load_queries(&dataset.join("queries.jsonl"))?;
    let queries: Vec<_> = queries
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, q)| q)
        .collect();
    let mut index = SearchIndex::new(config);
    mcp_catalog::eval::index_tools(&mut index, &tools);
    let report = mcp_catalog::eval::evaluate(&index, &queries);
    if let Some(path) = dump {
        // One line per query: its id, the rank of its first expected tool and the top five.
        let mut out = String::new();
        for q in &queries {
            let found = index.search(&q.query, None, usize::MAX);
            let rank = found
                .hits
                .iter()
                .position(|h| q.expected.iter().any(|e| **e == *h.id))
                .map_or(0, |r| r + 1);
            let top: Vec<&str> = found.hits.iter().take(5).map(|h| &*h.id).collect();
            let line = serde_json::json!({"id": q.id, "query": q.query, "expected": q.expected, "rank": rank, "top": top});
            out.push_str(&line.to_string());
            out.push('\n');
        }
        std::fs::write(&path, out).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if json {
        println!("{}", report.to_json());
    } else {
        println!(
            "dataset {} ({} tools, {} queries, subset {subset})",
            dataset.display(),
            index.len(),
            queries.len()
        );
        println!("{report}");
    }
    Ok(())
}

fn set(config: &mut RankingConfig, kv: &str) -> Result<(), String> {
    let (key, value) = kv.split_once('=').ok_or("--set needs KEY=VALUE")?;
    let v: f32 = value.parse().map_err(|_| format!("bad number `{value}`"))?;
    match key {
        "k1" => config.k1 = v,
        "coverage_weight" => config.coverage_weight = v,
        "coverage_power" => config.coverage_power = v,
        "phrase_weight" => config.phrase_weight = v,
        "exact_name_boost" => config.exact_name_boost = v,
        "prefix_weight" => config.prefix_weight = v,
        "prefix_min_len" => config.prefix_min_len = v as usize,
        _ => {
            let (field, i) = key.split_at(key.len() - 1);
            let i: usize = i.parse().map_err(|_| format!("unknown key `{key}`"))?;
            match field {
                "w" if i < 5 => config.field_weights[i] = v,
                "b" if i < 5 => config.field_b[i] = v,
                _ => return Err(format!("unknown key `{key}`")),
            }
        }
    }
    Ok(())
}
