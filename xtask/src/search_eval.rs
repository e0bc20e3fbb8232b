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

/// `cargo xtask search-eval --dataset DIR [--json] [--subset all|even|odd]`: ranks the whole
/// catalog of `DIR/tools.jsonl` for each query of `DIR/queries.jsonl` and prints hit@1/5/10,
/// recall@1/5/10, MRR and p50/p99 query latency (`--json`: one JSON object with those keys).
/// Without `--dataset`, uses `datasets/bfcl` of the repository.
pub(crate) fn search_eval(args: &[String]) -> Result<()> {
    let mut args = args.to_vec();
    if !args.iter().any(|a| a == "--dataset") {
        let default = root().join("datasets/bfcl");
        args.push("--dataset".into());
        args.push(default.to_string_lossy().into_owned());
    }
    run(cargo()
        .arg("run")
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .args([
            "--quiet",
            "--release",
            "-p",
            "mcp-catalog",
            "--example",
            "search_eval",
            "--",
        ])
        .args(&args))
}
