//! `cargo xtask search-eval`: search quality and speed of the catalog.
//!
//! Runs a release build of `mcp-catalog`'s `search_eval` example, so latencies are those of
//! optimised code. The criterion benchmarks are `cargo xtask bench` (`bench.rs`).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::{cargo, run};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// `cargo xtask search-eval --dataset DIR [--json] [--subset all|even|odd]
/// [--embedder local[:PATH] | openai:URL#MODEL]`: ranks the whole catalog of `DIR/tools.jsonl`
/// for each query of `DIR/queries.jsonl` and prints hit@1/5/10, recall@1/5/10, MRR and p50/p99
/// query latency (`--json`: one JSON object with those keys). Without `--dataset`, uses
/// `datasets/bfcl` of the repository.
///
/// With `--embedder`, runs `mcp-embed-local`'s `hybrid_eval` example instead, which
/// prints the lexical and the hybrid figures side by side, with the query's embedding and
/// ranking timed apart. `local` alone is the all-MiniLM-L6-v2 folder that `cargo xtask peers`
/// (and so the test command) installs at `.peers/models/all-MiniLM-L6-v2`. Its own flags pass
/// through: `--fusion minmax|z<K>|rrf<K>`, `--weight W`, `--variants F:W,…` (hit@5 and MRR on
/// the even and the odd queries apart, to choose on one half and confirm on the other),
/// `--scale N` (latency at N tools), `--cache DIR` (vectors kept between runs), `--doc-text
/// VARIANT` (another embedded text per tool), `--strip-literals` (queries embedded without
/// their numbers and quoted strings), `--dump FILE` (vectors, expected tools and lexical
/// scores as JSON lines, to study misses offline).
pub(crate) fn search_eval(args: &[String]) -> Result<()> {
    let mut args = args.to_vec();
    if !args.iter().any(|a| a == "--dataset") {
        let default = root().join("datasets/bfcl");
        args.push("--dataset".into());
        args.push(default.to_string_lossy().into_owned());
    }
    let hybrid = args.iter().position(|a| a == "--embedder");
    if let Some(at) = hybrid
        && args.get(at + 1).is_some_and(|e| e == "local")
    {
        let model = crate::peers::models_dir(&root()).join("all-MiniLM-L6-v2");
        args[at + 1] = format!("local:{}", model.display());
    }
    let package: &[&str] = match hybrid {
        Some(_) => &["-p", "mcp-embed-local", "--example", "hybrid_eval"],
        None => &["-p", "mcp-catalog", "--example", "search_eval"],
    };
    run(cargo()
        .arg("run")
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .args(["--quiet", "--release"])
        .args(package)
        .arg("--")
        .args(&args))
}
