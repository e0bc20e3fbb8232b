//! `cargo xtask conformance [--scenario S]...`: the official MCP conformance suite's client
//! scenarios against `mcp-conformance-client`, compared with a committed baseline.
//!
//! For each client scenario the suite (`@modelcontextprotocol/conformance`, run on the Node 22
//! binary from `peers/npm`, first on `PATH`) starts a mock server and runs
//! `mcp-conformance-client <server URL>` with `MCP_CONFORMANCE_SCENARIO` set. A scenario passes
//! when the suite's own verdict (its exit status) is success: no failed check, no warning, the
//! client exited 0 in time.
//!
//! `peers/conformance-baseline.txt` lists the scenarios expected to fail, one per line with the
//! reason. The task fails on a regression (a scenario outside the baseline fails) and on an
//! unexpected pass (a baseline scenario passes: remove its line), and prints a summary. Each
//! scenario's output is kept under `target/conformance/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::peers::{self, Peers};

/// The client binary the suite runs.
const CLIENT_BIN: &str = "mcp-conformance-client";
/// The suite's timeout for one client run.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);
/// Our bound on one whole scenario (mock server start, client run, checks, shutdown).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);
/// Scenarios run at once (each is a node process plus a client process).
const PARALLEL: usize = 4;

/// `cargo xtask conformance [--scenario S]...`.
pub(crate) fn task(args: &[String]) -> Result<()> {
    let mut only = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--scenario" => only.push(it.next().context("--scenario needs a name")?.clone()),
            s if s.starts_with("--scenario=") => only.push(s["--scenario=".len()..].to_owned()),
            other => bail!(
                "unknown argument `{other}`; usage: cargo xtask conformance [--scenario S]..."
            ),
        }
    }
    let peers = peers::install()?;
    check(&peers, &only)
}

/// Runs the scenarios (all client scenarios when `only` is empty) and compares the outcomes
/// with the baseline.
pub(crate) fn check(peers: &Peers, only: &[String]) -> Result<()> {
    let root = peers::root();
    let client = build_client()?;
    let all = list_scenarios(peers)?;
    let baseline_path = root.join("peers/conformance-baseline.txt");
    let baseline = parse_baseline(
        &std::fs::read_to_string(&baseline_path)
            .with_context(|| format!("reading {}", baseline_path.display()))?,
    )?;
    for name in baseline.keys() {
        if !all.contains(name) {
            bail!("the baseline names `{name}`, which the suite does not have");
        }
    }
    for name in only {
        if !all.contains(name) {
            bail!(
                "unknown scenario `{name}`; the suite's client scenarios are: {}",
                all.join(", ")
            );
        }
    }
    let scenarios: Vec<String> = if only.is_empty() { all } else { only.to_vec() };

    let out_root = root.join("target/conformance");
    let started = Instant::now();
    eprintln!(
        "conformance: {} scenario(s), {PARALLEL} at a time, client {}",
        scenarios.len(),
        client.display()
    );
    let outcomes = run_all(peers, &client, &scenarios, &out_root);

    let mut regressions = Vec::new();
    let mut unexpected_passes = Vec::new();
    println!(
        "\nconformance results ({:.1} s):",
        started.elapsed().as_secs_f64()
    );
    for (scenario, outcome) in scenarios.iter().zip(&outcomes) {
        let expected = baseline.get(scenario);
        let verdict = match (outcome.passed, expected) {
            (true, None) => "pass",
            (false, Some(_)) => "expected failure",
            (false, None) => {
                regressions.push(scenario.clone());
                "FAIL (regression)"
            }
            (true, Some(_)) => {
                unexpected_passes.push(scenario.clone());
                "PASS (unexpected: remove it from the baseline)"
            }
        };
        println!("  {scenario:<44} {verdict:<18} {}", outcome.summary);
        if let (false, None) = (outcome.passed, expected) {
            for line in &outcome.failures {
                println!("      - {line}");
            }
            println!("      log: {}", outcome.log.display());
        }
        if let (false, Some(reason)) = (outcome.passed, expected) {
            println!("      baseline: {reason}");
        }
    }
    let passed = outcomes.iter().filter(|o| o.passed).count();
    println!(
        "\n{passed} passed, {} failed ({} expected), {} regression(s), {} unexpected pass(es)",
        outcomes.len() - passed,
        outcomes.len() - passed - regressions.len(),
        regressions.len(),
        unexpected_passes.len()
    );
    if !regressions.is_empty() || !unexpected_passes.is_empty() {
        bail!(
            "conformance differs from peers/conformance-baseline.txt: regressions {regressions:?}, unexpected passes {unexpected_passes:?}"
        );
    }
    Ok(())
}

/// Builds the client and returns its path, as cargo reports it.
fn build_client() -> Result<PathBuf> {
    let mut cmd = crate::cargo();
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "mcp-conformance",
        "--bin",
        CLIENT_BIN,
        "--message-format=json-render-diagnostics",
    ])
    .stderr(Stdio::inherit());
    eprintln!("$ {cmd:?}");
    let out = cmd.output().context("running cargo build")?;
    if !out.status.success() {
        bail!("building {CLIENT_BIN} failed ({})", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == CLIENT_BIN)
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo did not report the {CLIENT_BIN} executable"))
}

/// The suite's client scenarios, from `conformance list --client`.
fn list_scenarios(peers: &Peers) -> Result<Vec<String>> {
    let out = Command::new(&peers.node22)
        .arg(&peers.conformance)
        .args(["list", "--client"])
        .env("PATH", peers.path_with_node22())
        .output()
        .context("running the conformance suite's `list`")?;
    if !out.status.success() {
        bail!(
            "`conformance list --client` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let names = parse_list(&String::from_utf8_lossy(&out.stdout));
    if names.is_empty() {
        bail!("`conformance list --client` listed no scenarios");
    }
    Ok(names)
}

/// Scenario names from the `list` output: lines `  - name [versions]`.
fn parse_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The baseline: `scenario  reason…` per line; `#` starts a comment; blank lines are skipped.
/// Every entry needs a reason.
fn parse_baseline(text: &str) -> Result<BTreeMap<String, String>> {
    let mut entries = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split_once('#').map_or(line, |(l, _)| l).trim();
        if line.is_empty() {
            continue;
        }
        let (name, reason) = line
            .split_once(char::is_whitespace)
            .map(|(n, r)| (n, r.trim()))
            .unwrap_or((line, ""));
        if reason.is_empty() {
            bail!("baseline line {}: `{name}` has no reason", n + 1);
        }
        if entries.insert(name.to_owned(), reason.to_owned()).is_some() {
            bail!("baseline line {}: `{name}` is listed twice", n + 1);
        }
    }
    Ok(entries)
}

/// What one scenario run showed.
#[derive(Debug)]
struct Outcome {
    passed: bool,
    /// `N checks passed, M failed, K warnings` or why there are no checks.
    summary: String,
    /// Names and messages of the failed or warning checks.
    failures: Vec<String>,
    /// The suite's output for this scenario.
    log: PathBuf,
}

fn run_all(peers: &Peers, client: &Path, scenarios: &[String], out_root: &Path) -> Vec<Outcome> {
    let (tx, rx) = mpsc::channel();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..PARALLEL.min(scenarios.len()) {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(scenario) = scenarios.get(i) else {
                        break;
                    };
                    let outcome =
                        run_one(peers, client, scenario, out_root).unwrap_or_else(|e| Outcome {
                            passed: false,
                            summary: format!("not run: {e:#}"),
                            failures: Vec::new(),
                            log: out_root.to_path_buf(),
                        });
                    eprintln!(
                        "conformance: {scenario}: {}",
                        if outcome.passed { "pass" } else { "fail" }
                    );
                    let _ = tx.send((i, outcome));
                }
            });
        }
    });
    drop(tx);
    let mut outcomes: Vec<(usize, Outcome)> = rx.into_iter().collect();
    outcomes.sort_by_key(|(i, _)| *i);
    outcomes.into_iter().map(|(_, o)| o).collect()
}

fn run_one(peers: &Peers, client: &Path, scenario: &str, out_root: &Path) -> Result<Outcome> {
    use std::os::unix::process::CommandExt;

    let dir = out_root.join(scenario.replace('/', "__"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let log = dir.join("suite.log");
    let log_file = std::fs::File::create(&log)?;
    let mut child = Command::new(&peers.node22)
        .arg(&peers.conformance)
        .arg("client")
        .arg("--command")
        .arg(client)
        .args(["--scenario", scenario, "--timeout"])
        .arg(CLIENT_TIMEOUT.as_millis().to_string())
        .arg("-o")
        .arg(&dir)
        .env("PATH", peers.path_with_node22())
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        // Its own process group, so a run that overstays is killed with its client.
        .process_group(0)
        .spawn()
        .context("starting the conformance suite")?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(SCENARIO_TIMEOUT) {
        Ok(status) => Some(status?),
        Err(_) => {
            kill_group(pid);
            None
        }
    };
    let _ = waiter.join();
    let (summary, failures) = read_checks(&dir);
    Ok(match status {
        Some(status) => Outcome {
            passed: status.success(),
            summary,
            failures,
            log,
        },
        None => Outcome {
            passed: false,
            summary: format!("killed after {} s", SCENARIO_TIMEOUT.as_secs()),
            failures,
            log,
        },
    })
}

/// SIGKILL to the process group `pgid` (a suite run started with its own group). Never signals
/// group 0 or 1 (our own group, every process).
fn kill_group(pgid: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;

    match i32::try_from(pgid) {
        Ok(pgid) if pgid > 1 => {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        _ => {}
    }
}

/// Summarises the `checks.json` the suite wrote somewhere under `dir`.
fn read_checks(dir: &Path) -> (String, Vec<String>) {
    let Some(path) = find_file(dir, "checks.json") else {
        return ("no checks recorded".into(), Vec::new());
    };
    let Ok(checks) = std::fs::read_to_string(&path)
        .map_err(anyhow::Error::from)
        .and_then(|t| Ok(serde_json::from_str::<Vec<serde_json::Value>>(&t)?))
    else {
        return ("unreadable checks.json".into(), Vec::new());
    };
    let count = |s: &str| checks.iter().filter(|c| c["status"] == s).count();
    let failures = checks
        .iter()
        .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
        .map(|c| {
            format!(
                "{} {}: {}",
                c["status"].as_str().unwrap_or("?"),
                c["name"].as_str().unwrap_or("?"),
                c["errorMessage"]
                    .as_str()
                    .or(c["description"].as_str())
                    .unwrap_or("")
            )
        })
        .collect();
    (
        format!(
            "{} passed, {} failed, {} warnings",
            count("SUCCESS"),
            count("FAILURE"),
            count("WARNING")
        ),
        failures,
    )
}

fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_output_is_parsed() {
        let text = "Client scenarios (test against a client):\n  - initialize [2025-06-18,2025-11-25]\n  - auth/metadata-default [2025-11-25]\n";
        assert_eq!(parse_list(text), ["initialize", "auth/metadata-default"]);
    }

    #[test]
    fn baseline_needs_reasons_and_no_duplicates() {
        let ok = parse_baseline("# comment\n\nauth/x   not yet: OAuth  # trailing\n").unwrap();
        assert_eq!(ok["auth/x"], "not yet: OAuth");
        assert!(parse_baseline("auth/x\n").is_err());
        assert!(parse_baseline("a r\na r\n").is_err());
    }

    /// The committed baseline parses, so a malformed edit fails here rather than in CI's
    /// conformance step.
    #[test]
    fn committed_baseline_parses() {
        let text =
            std::fs::read_to_string(peers::root().join("peers/conformance-baseline.txt")).unwrap();
        let entries = parse_baseline(&text).unwrap();
        for required in ["initialize", "tools_call", "sse-retry"] {
            assert!(
                !entries.contains_key(required),
                "`{required}` must pass, not be baselined"
            );
        }
    }
}
