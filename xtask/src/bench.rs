//! `cargo xtask bench [--json] [--only search|orchestration] [criterion args]`: the criterion
//! benchmarks in release mode, then their key figures and ratios.
//!
//! - `search` (`mcp-catalog`, bench `search`): query latency on 1k/10k tools, index build time
//!   and memory.
//! - `orchestration` (`integration-tests`, bench `orchestration`): per-call cost of the runner
//!   vs a bare rmcp client on the same test-kit server over stdio and HTTP, 16 calls in flight
//!   on one session, and `open_runner` with 1/8/32 stdio servers. Needs `mcp-test-server`,
//!   built here in release first.
//!
//! The figures are read from criterion's `target/criterion/**/new/{benchmark,estimates}.json`
//! of this run (files older than the run are ignored), as medians. A group with a throughput
//! of N elements (1,000 sequential calls, 16 calls in flight) is also reported per element.
//! The orchestration bench also measures the runner's overhead paired (rounds of calls on each
//! path back to back, robust to a machine whose load changes between benchmarks) and writes it
//! to `target/criterion/orchestration-paired.json`, reported as `orchestration.paired`.
//! `--json` prints one JSON object on stdout (criterion's own output goes to stderr).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::{cargo, run};

/// The per-call overhead the runner may add over a bare rmcp client (issue 3).
const CALL_OVERHEAD_MAX: f64 = 1.10;
/// How much longer 8 servers may take to open than 1 (issue 3).
const OPEN_8_VS_1_MAX: f64 = 1.5;

const SUITES: [&str; 2] = ["search", "orchestration"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Runs the task.
pub(crate) fn task(args: &[String]) -> Result<()> {
    let mut json_out = false;
    let mut only = Vec::new();
    let mut criterion_args = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--json" => json_out = true,
            "--only" => {
                let suite = iter
                    .next()
                    .context("`--only` needs search or orchestration")?;
                if !SUITES.contains(&suite.as_str()) {
                    bail!(
                        "unknown suite `{suite}`; the suites are: {}",
                        SUITES.join(", ")
                    );
                }
                only.push(suite.clone());
            }
            _ => criterion_args.push(arg.clone()),
        }
    }
    let suites: Vec<&str> = SUITES
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s))
        .collect();

    let paired_file = target_dir()
        .join("criterion")
        .join("orchestration-paired.json");
    let _ = std::fs::remove_file(&paired_file);
    let started = SystemTime::now();
    for suite in &suites {
        let mut cmd = cargo();
        cmd.arg("bench")
            .arg("--manifest-path")
            .arg(root().join("Cargo.toml"));
        match *suite {
            "search" => {
                cmd.args(["-p", "mcp-catalog", "--bench", "search"]);
            }
            _ => {
                // The benchmark spawns the test server; build it with the same optimisations.
                quiet(
                    cargo()
                        .arg("build")
                        .arg("--manifest-path")
                        .arg(root().join("Cargo.toml"))
                        .args([
                            "--release",
                            "-p",
                            "mcp-test-kit",
                            "--bin",
                            "mcp-test-server",
                        ]),
                    json_out,
                )?;
                let server = target_dir().join("release").join("mcp-test-server");
                std::fs::create_dir_all(paired_file.parent().expect("a parent"))?;
                cmd.args(["-p", "integration-tests", "--bench", "orchestration"])
                    .env("MCP_TEST_SERVER_BIN", server)
                    .env("MCP_AGENT_BENCH_PAIRED", &paired_file);
            }
        }
        cmd.arg("--").args(&criterion_args);
        quiet(&mut cmd, json_out)?;
    }

    let results = collect(&target_dir().join("criterion"), started)?;
    let paired = std::fs::read_to_string(&paired_file)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let report = report(&results, paired);
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    Ok(())
}

/// Runs `cmd`; with `to_stderr`, its stdout goes to stderr so ours carries only the JSON.
fn quiet(cmd: &mut Command, to_stderr: bool) -> Result<()> {
    if to_stderr {
        cmd.stdout(std::io::stderr());
    }
    run(cmd)
}

/// One benchmark's result.
#[derive(Debug, Clone)]
struct Measured {
    /// Median time of one iteration, in nanoseconds.
    median_ns: f64,
    /// Elements per iteration (criterion's throughput), if declared.
    elements: Option<f64>,
}

impl Measured {
    fn per_element_ns(&self) -> f64 {
        self.median_ns / self.elements.unwrap_or(1.0)
    }
}

/// The results criterion wrote since `since`, by full id (`group/function`).
fn collect(dir: &Path, since: SystemTime) -> Result<BTreeMap<String, Measured>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let estimates = path.join("estimates.json");
            if path.file_name().is_some_and(|n| n == "new") && estimates.is_file() {
                let fresh = std::fs::metadata(&estimates)
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m >= since);
                if fresh {
                    let (id, measured) = read_result(&path)?;
                    found.insert(id, measured);
                }
            } else {
                stack.push(path);
            }
        }
    }
    Ok(found)
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn read_result(dir: &Path) -> Result<(String, Measured)> {
    let benchmark = read_json(&dir.join("benchmark.json"))?;
    let estimates = read_json(&dir.join("estimates.json"))?;
    let id = benchmark["full_id"]
        .as_str()
        .context("benchmark.json without full_id")?
        .to_owned();
    let median_ns = estimates["median"]["point_estimate"]
        .as_f64()
        .context("estimates.json without a median")?;
    let elements = benchmark["throughput"]["Elements"].as_f64();
    Ok((
        id,
        Measured {
            median_ns,
            elements,
        },
    ))
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Value {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => json!(round(a / b, 3)),
        _ => Value::Null,
    }
}

/// The key figures and ratios: per-call medians (µs), overheads, open times (ms), search
/// latencies (µs), and every median found (ns).
fn report(results: &BTreeMap<String, Measured>, paired: Option<Value>) -> Value {
    let per_us = |id: &str| results.get(id).map(|m| m.per_element_ns() / 1_000.0);
    let mut out = Map::new();

    let mut orchestration = Map::new();
    for transport in ["stdio", "http"] {
        let group = format!("calls_{transport}");
        let bare = per_us(&format!("{group}/bare_rmcp"));
        let call_tool = per_us(&format!("{group}/runner_call_tool"));
        let direct = per_us(&format!("{group}/runner_direct"));
        let product = per_us(&format!("{group}/bare_rmcp_stdio_transport"));
        if bare.is_none() && call_tool.is_none() {
            continue;
        }
        let mut figures = json!({
            "bare_rmcp_us_per_call": bare.map(|x| round(x, 2)),
            "runner_call_tool_us_per_call": call_tool.map(|x| round(x, 2)),
            "runner_direct_us_per_call": direct.map(|x| round(x, 2)),
            "overhead_call_tool": ratio(call_tool, bare),
            "overhead_direct": ratio(direct, bare),
        });
        if product.is_some() {
            figures["bare_rmcp_stdio_transport_us_per_call"] = json!(product.map(|x| round(x, 2)));
            figures["transport_vs_bare"] = ratio(product, bare);
            figures["orchestration_call_tool_vs_transport"] = ratio(call_tool, product);
        }
        orchestration.insert(format!("sequential_{transport}"), figures);
    }
    for transport in ["stdio", "http"] {
        let group = format!("in_flight_16_{transport}");
        let batch_us = |f: &str| {
            results
                .get(&format!("{group}/{f}"))
                .map(|m| m.median_ns / 1_000.0)
        };
        let (bare, runner) = (batch_us("bare_rmcp"), batch_us("runner_call_tool"));
        if bare.is_none() && runner.is_none() {
            continue;
        }
        orchestration.insert(
            format!("in_flight_16_{transport}"),
            json!({
                "bare_rmcp_us_per_16": bare.map(|x| round(x, 1)),
                "runner_us_per_16": runner.map(|x| round(x, 1)),
                "overhead": ratio(runner, bare),
            }),
        );
    }
    for group in ["open_runner", "open_runner_init_100ms", "open_bare_rmcp"] {
        let open_ms = |n: u32| {
            results
                .get(&format!("{group}/stdio_{n}"))
                .map(|m| m.median_ns / 1e6)
        };
        let (one, eight, many) = (open_ms(1), open_ms(8), open_ms(32));
        if one.is_some() {
            orchestration.insert(
                format!("{group}_ms"),
                json!({
                    "stdio_1": one.map(|x| round(x, 2)),
                    "stdio_8": eight.map(|x| round(x, 2)),
                    "stdio_32": many.map(|x| round(x, 2)),
                    "ratio_8_vs_1": ratio(eight, one),
                    "ratio_32_vs_1": ratio(many, one),
                }),
            );
        }
    }
    if !orchestration.is_empty() {
        let mut met = Map::new();
        for transport in ["stdio", "http"] {
            let figures = &orchestration.get(&format!("sequential_{transport}"));
            for path in ["call_tool", "direct"] {
                if let Some(r) = figures.and_then(|f| f[format!("overhead_{path}")].as_f64()) {
                    met.insert(
                        format!("overhead_{path}_{transport}"),
                        json!(r <= CALL_OVERHEAD_MAX),
                    );
                }
            }
        }
        for group in ["open_runner", "open_runner_init_100ms"] {
            if let Some(r) = orchestration
                .get(&format!("{group}_ms"))
                .and_then(|o| o["ratio_8_vs_1"].as_f64())
            {
                met.insert(format!("{group}_8_vs_1"), json!(r <= OPEN_8_VS_1_MAX));
            }
        }
        let mut met_paired = Map::new();
        for transport in ["stdio", "http"] {
            for path in ["call_tool", "direct"] {
                let overhead = paired
                    .as_ref()
                    .and_then(|p| p[transport][format!("overhead_{path}")].as_f64());
                if let Some(r) = overhead {
                    met_paired.insert(
                        format!("overhead_{path}_{transport}"),
                        json!(r <= CALL_OVERHEAD_MAX),
                    );
                }
            }
        }
        orchestration.insert(
            "targets".into(),
            json!({
                "call_overhead_max": CALL_OVERHEAD_MAX,
                "open_8_vs_1_max": OPEN_8_VS_1_MAX,
                "met": met,
                "met_paired": met_paired,
            }),
        );
        if let Some(paired) = paired {
            orchestration.insert("paired".into(), paired);
        }
        out.insert("orchestration".into(), Value::Object(orchestration));
    }

    let search: Map<String, Value> = results
        .iter()
        .filter(|(id, _)| {
            ["search/", "build/", "catalog/"]
                .iter()
                .any(|p| id.starts_with(p))
        })
        .map(|(id, m)| (id.clone(), json!(round(m.median_ns / 1_000.0, 2))))
        .collect();
    if !search.is_empty() {
        out.insert("search_median_us".into(), Value::Object(search));
    }
    out.insert(
        "medians_ns".into(),
        results
            .iter()
            .map(|(id, m)| (id.clone(), json!(round(m.median_ns, 0))))
            .collect::<Map<String, Value>>()
            .into(),
    );
    Value::Object(out)
}

fn print_summary(report: &Value) {
    println!("\nkey figures (medians) and ratios:");
    let Some(object) = report.as_object() else {
        return;
    };
    for (section, value) in object {
        if section == "medians_ns" {
            continue;
        }
        println!("{section}:");
        print_tree(value, 1);
    }
}

fn print_tree(value: &Value, depth: usize) {
    let indent = "  ".repeat(depth);
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                if value.is_object() {
                    println!("{indent}{key}:");
                    print_tree(value, depth + 1);
                } else {
                    println!("{indent}{key}: {value}");
                }
            }
        }
        other => println!("{indent}{other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(median_ns: f64, elements: Option<f64>) -> Measured {
        Measured {
            median_ns,
            elements,
        }
    }

    #[test]
    fn ratios_are_per_call_and_targets_are_checked() {
        let results = BTreeMap::from([
            (
                "calls_stdio/bare_rmcp".to_owned(),
                measured(50_000_000.0, Some(1_000.0)),
            ),
            (
                "calls_stdio/runner_call_tool".to_owned(),
                measured(54_000_000.0, Some(1_000.0)),
            ),
            (
                "calls_stdio/runner_direct".to_owned(),
                measured(60_000_000.0, Some(1_000.0)),
            ),
            ("open_runner/stdio_1".to_owned(), measured(10e6, None)),
            ("open_runner/stdio_8".to_owned(), measured(14e6, None)),
            (
                "search/query_top10_1000_tools".to_owned(),
                measured(2_500.0, None),
            ),
        ]);
        let paired = json!({"stdio": {"overhead_call_tool": 1.04, "overhead_direct": 1.12}});
        let report = report(&results, Some(paired));
        let o = &report["orchestration"];
        assert_eq!(o["sequential_stdio"]["bare_rmcp_us_per_call"], json!(50.0));
        assert_eq!(o["sequential_stdio"]["overhead_call_tool"], json!(1.08));
        assert_eq!(o["sequential_stdio"]["overhead_direct"], json!(1.2));
        assert_eq!(o["open_runner_ms"]["ratio_8_vs_1"], json!(1.4));
        assert_eq!(o["open_runner_ms"]["stdio_32"], Value::Null);
        assert_eq!(o["targets"]["met"]["overhead_call_tool_stdio"], json!(true));
        assert_eq!(o["targets"]["met"]["overhead_direct_stdio"], json!(false));
        assert_eq!(o["targets"]["met"]["open_runner_8_vs_1"], json!(true));
        assert_eq!(
            o["targets"]["met_paired"]["overhead_call_tool_stdio"],
            json!(true)
        );
        assert_eq!(
            o["targets"]["met_paired"]["overhead_direct_stdio"],
            json!(false)
        );
        assert_eq!(o["paired"]["stdio"]["overhead_call_tool"], json!(1.04));
        assert!(o.get("sequential_http").is_none());
        assert_eq!(
            report["search_median_us"]["search/query_top10_1000_tools"],
            json!(2.5)
        );
    }
}
