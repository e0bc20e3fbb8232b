//! `cargo xtask conformance [--revision R]... [--scenario S]... [--client-only|--gateway-only]`:
//! the official MCP conformance suite's client scenarios against `mcp-conformance-client`, then
//! its server scenarios against the `mcp-agent serve` gateway ([`gateway`]), each compared with
//! a committed baseline.
//!
//! The suite (`@modelcontextprotocol/conformance`, run on the Node 22 binary from `peers/npm`,
//! first on `PATH`) freezes, per protocol revision, the client scenarios that revision requires
//! (`list --client --requirements R`). For each revision of [`REVISIONS`] the task runs those
//! scenarios, plus the extension scenarios the client implements ([`EXTENSIONS`]), each at that
//! revision's wire: for each scenario the suite starts a mock server and runs
//! `mcp-conformance-client <server URL>` with `MCP_CONFORMANCE_SCENARIO` set.
//!
//! Run whole (no `--scenario`), a revision's scenarios run as the suite scores them: its whole
//! requirement set at once in one suite process (`client --requirements R`, which also runs the
//! set's unscored scenarios), with the planned extensions the set lacks started alongside
//! (`client --scenario S --spec-version R --force`); the revisions one after the other. With
//! `--scenario`, the selected runs all start at once, each in its own suite process. A scenario
//! passes when it has no failed check and no warning and the client ended in time. Run alone,
//! the suite's exit status says so (the client exited 0, or with an error where the scenario
//! expects a refusal). In a requirement set the suite keeps no exit status per scenario: its
//! `checks.json` is read, and the client's last line (stderr) must show it ended by itself,
//! `scenario S: done` or `scenario S: error: …` — not missing (the suite stopped it) nor its own
//! timeout. A client error where none is expected is left to the checks there, as the suite's
//! own score does.
//!
//! `peers/conformance-baseline.txt` lists the scenarios expected to fail, one per line with the
//! reason, under a `[revision ...]` header naming the revisions the lines are about. The task
//! fails on a regression (a scenario outside the baseline fails) and on an unexpected pass (a
//! baseline scenario passes: remove its line), and prints a summary with the counts per
//! revision. Each scenario's output is kept under `target/conformance/<revision>/`.
//!
//! The gateway part has its own section in the same file, from its first `[gateway ...]`
//! header on: see [`gateway`].

mod gateway;

use std::collections::BTreeMap;
use std::ffi::OsStr;
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
/// Our bound on one revision's whole requirement set.
const SET_TIMEOUT: Duration = Duration::from_secs(240);
/// The protocol revisions checked, each with the client scenarios the suite requires of it.
pub(crate) const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];
/// Scenarios the suite runs but does not score, which the client implements: OAuth client
/// credentials (`client_secret_basic`, `private_key_jwt`), enterprise-managed authorization,
/// workload identity (JWT bearer grants), DPoP-bound tokens (with the nonce dance), the 2025-03-26 back-compat discovery (metadata at the
/// origin, default endpoints), JSON Schema 2020-12 kept as sent, and the skills extension's
/// client checks (no file read before use; size, digest and frontmatter verified on read).
const EXTENSIONS: [&str; 13] = [
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/enterprise-managed-authorization",
    "auth/wif-jwt-bearer",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/dpop",
    "auth/dpop-nonce",
    "json-schema-2020-12-preservation",
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
];

/// One scenario at one revision.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Run {
    revision: String,
    scenario: String,
    /// Required by the revision (counted in its score), not an extension.
    scored: bool,
    /// Run by the revision's requirement set (`client --requirements R`): required, or listed
    /// there as run but not scored.
    in_set: bool,
}

/// Which scenarios to run: every one when the lists are empty and no part is left out.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    revisions: Vec<String>,
    scenarios: Vec<String>,
    /// Only the client scenarios.
    client_only: bool,
    /// Only the gateway's server scenarios.
    gateway_only: bool,
}

/// `cargo xtask conformance [--revision R]... [--scenario S]...`.
pub(crate) fn task(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask conformance [--revision R]... [--scenario S]... [--client-only|--gateway-only]";
    let mut filter = Filter::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--client-only" => {
                filter.client_only = true;
                continue;
            }
            "--gateway-only" => {
                filter.gateway_only = true;
                continue;
            }
            _ => {}
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let list = match flag {
            "--scenario" => &mut filter.scenarios,
            "--revision" => &mut filter.revisions,
            other => bail!("unknown argument `{other}`; {USAGE}"),
        };
        let value = match inline {
            Some(value) => value,
            None => it
                .next()
                .with_context(|| format!("{flag} needs a value"))?
                .clone(),
        };
        list.push(value);
    }
    if filter.client_only && filter.gateway_only {
        bail!("--client-only and --gateway-only exclude each other; {USAGE}");
    }
    for revision in &filter.revisions {
        if !REVISIONS.contains(&revision.as_str()) {
            bail!(
                "unknown revision `{revision}`; checked are: {}",
                REVISIONS.join(", ")
            );
        }
    }
    let peers = peers::install()?;
    check(&peers, &filter)
}

/// Runs the scenarios `filter` selects (all of them when it is empty), the client's then the
/// gateway's, and compares the outcomes with the baseline.
pub(crate) fn check(peers: &Peers, filter: &Filter) -> Result<()> {
    let root = peers::root();
    let baseline_path = root.join("peers/conformance-baseline.txt");
    let baseline_text = std::fs::read_to_string(&baseline_path)
        .with_context(|| format!("reading {}", baseline_path.display()))?;
    let client_all = client_plan(peers, &baseline_text)?;
    let gateway_baseline = gateway::parse_baseline(&baseline_text)?;
    let gateway_all = gateway::plan(peers, &gateway_baseline)?;
    for name in &filter.scenarios {
        if let Some(reason) = gateway_baseline.not_applicable.get(name) {
            bail!("`{name}` is not run against the gateway: {reason}");
        }
        if !client_all.iter().any(|r| &r.scenario == name)
            && !gateway_all.iter().any(|r| &r.scenario == name)
        {
            let mut names: Vec<&str> = client_all
                .iter()
                .map(|r| r.scenario.as_str())
                .chain(gateway_all.iter().map(|r| r.scenario.as_str()))
                .collect();
            names.sort_unstable();
            names.dedup();
            bail!(
                "unknown scenario `{name}`; the scenarios run are: {}",
                names.join(", ")
            );
        }
    }
    let selected = |revision: &String, scenario: &String| {
        (filter.revisions.is_empty() || filter.revisions.contains(revision))
            && (filter.scenarios.is_empty() || filter.scenarios.contains(scenario))
    };
    let client_runs: Vec<Run> = client_all
        .into_iter()
        .filter(|r| !filter.gateway_only && selected(&r.revision, &r.scenario))
        .collect();
    let gateway_runs: Vec<gateway::GatewayRun> = gateway_all
        .into_iter()
        .filter(|r| !filter.client_only && selected(&r.revision, &r.scenario))
        .collect();
    let mut failed = Vec::new();
    let whole_sets = filter.scenarios.is_empty();
    if !client_runs.is_empty()
        && let Err(e) = check_client(peers, &client_runs, &baseline_text, whole_sets)
    {
        failed.push(format!("{e:#}"));
    }
    if !gateway_runs.is_empty()
        && let Err(e) = gateway::check(peers, &gateway_runs, &gateway_baseline)
    {
        failed.push(format!("{e:#}"));
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("\n"));
    }
    Ok(())
}

/// Every client run: the scenarios each revision requires plus the extensions; the baseline
/// may only name those.
fn client_plan(peers: &Peers, baseline_text: &str) -> Result<Vec<Run>> {
    let mut all = Vec::new();
    for revision in REVISIONS {
        let (required, unscored) = list_requirements(peers, revision)?;
        for scenario in &required {
            all.push(Run {
                revision: revision.to_owned(),
                scenario: scenario.clone(),
                scored: true,
                in_set: true,
            });
        }
        for extension in EXTENSIONS {
            if !required.iter().any(|s| s == extension) {
                all.push(Run {
                    revision: revision.to_owned(),
                    scenario: extension.to_owned(),
                    scored: false,
                    in_set: unscored.iter().any(|s| s == extension),
                });
            }
        }
    }
    let baseline = parse_baseline(baseline_text)?;
    for (revision, name) in baseline.keys() {
        if !all
            .iter()
            .any(|r| &r.revision == revision && &r.scenario == name)
        {
            bail!("the baseline names `{name}` at {revision}, which is not run at that revision");
        }
    }
    Ok(all)
}

/// Runs the client scenarios `runs` (each revision's as its whole requirement set when
/// `whole_sets`, see [`run_all`]) and compares them with the baseline's client section.
fn check_client(peers: &Peers, runs: &[Run], baseline_text: &str, whole_sets: bool) -> Result<()> {
    let root = peers::root();
    let baseline = parse_baseline(baseline_text)?;
    let [client] = crate::build_bins([CLIENT_BIN])?;
    let out_root = root.join("target/conformance");
    let started = Instant::now();
    eprintln!(
        "conformance: {} run(s), {}, client {}",
        runs.len(),
        if whole_sets {
            "each revision's whole requirement set at once"
        } else {
            "all at once"
        },
        client.display()
    );
    let outcomes = run_all(peers, &client, runs, &out_root, whole_sets);

    let mut regressions = Vec::new();
    let mut unexpected_passes = Vec::new();
    println!(
        "\nconformance results ({:.1} s):",
        started.elapsed().as_secs_f64()
    );
    for (run, outcome) in runs.iter().zip(&outcomes) {
        let key = (run.revision.clone(), run.scenario.clone());
        let label = format!("{} {}", run.revision, run.scenario);
        let expected = baseline.get(&key);
        let verdict = match (outcome.passed, expected) {
            (true, None) => "pass",
            (false, Some(_)) => "expected failure",
            (false, None) => {
                regressions.push(label.clone());
                "FAIL (regression)"
            }
            (true, Some(_)) => {
                unexpected_passes.push(label.clone());
                "PASS (unexpected: remove it from the baseline)"
            }
        };
        println!("  {label:<55} {verdict:<18} {}", outcome.summary);
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
    println!();
    for revision in REVISIONS {
        let of = |scored: bool| {
            let these: Vec<_> = runs
                .iter()
                .zip(&outcomes)
                .filter(|(r, _)| r.revision == revision && r.scored == scored)
                .collect();
            let passed = these.iter().filter(|(_, o)| o.passed).count();
            (passed, these.len())
        };
        let ((passed, required), (ext_passed, extensions)) = (of(true), of(false));
        if required + extensions > 0 {
            println!(
                "{revision}: {passed} of {required} required scenario(s) pass; extensions {ext_passed} of {extensions}"
            );
        }
    }
    let passed = outcomes.iter().filter(|o| o.passed).count();
    println!(
        "{passed} passed, {} failed ({} expected), {} regression(s), {} unexpected pass(es)",
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

/// The client scenarios the suite requires of `revision`, and those its requirement set runs
/// without scoring them, from `conformance list --client --requirements <revision>`.
fn list_requirements(peers: &Peers, revision: &str) -> Result<(Vec<String>, Vec<String>)> {
    let args = ["--client", "--requirements", revision];
    let text = list(peers, &args)?;
    let names = parse_required(&text);
    if names.is_empty() {
        bail!(
            "`conformance list {}` listed no client scenarios",
            args.join(" ")
        );
    }
    Ok((names, parse_unscored(&text)))
}

/// What the suite's `conformance list <args>` prints.
fn list(peers: &Peers, args: &[&str]) -> Result<String> {
    let out = Command::new(&peers.node22)
        .arg(&peers.conformance)
        .arg("list")
        .args(args)
        .env("PATH", peers.path_with_node22())
        .output()
        .context("running the conformance suite's `list`")?;
    if !out.status.success() {
        bail!(
            "`conformance list {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The client scenarios of a `list --requirements` output: the `  - name` lines under the
/// `Client scenarios` heading (server scenarios and those run but not scored are left out).
fn parse_required(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Client scenarios"))
        .skip(1)
        .map_while(|l| l.strip_prefix("  - "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The client scenarios of a `list --requirements` output that are run but not scored: the
/// `    - name [client]` lines under the `Run and reported, but never scored` heading.
fn parse_unscored(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Run and reported"))
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .filter_map(|l| l.strip_suffix(" [client]"))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The baseline: `[revision ...]` headers, each followed by `scenario  reason…` lines about
/// the revisions it names; `#` starts a comment; blank lines are skipped. Every entry needs a
/// reason and a header above it; a revision must be one of [`REVISIONS`].
fn parse_baseline(text: &str) -> Result<BTreeMap<(String, String), String>> {
    let mut entries = BTreeMap::new();
    let mut revisions: Vec<String> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let line = line.split_once('#').map_or(line, |(l, _)| l).trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with("[gateway") {
            // The gateway's section (`gateway::parse_baseline`) runs to the end.
            break;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header
                .strip_suffix(']')
                .with_context(|| format!("baseline line {n}: `[` without `]`"))?;
            revisions = header.split_whitespace().map(str::to_owned).collect();
            if revisions.is_empty() {
                bail!("baseline line {n}: a header names no revision");
            }
            if let Some(unknown) = revisions.iter().find(|r| !REVISIONS.contains(&r.as_str())) {
                bail!(
                    "baseline line {n}: `{unknown}` is not a checked revision ({})",
                    REVISIONS.join(", ")
                );
            }
            continue;
        }
        let (name, reason) = line
            .split_once(char::is_whitespace)
            .map(|(n, r)| (n, r.trim()))
            .unwrap_or((line, ""));
        if reason.is_empty() {
            bail!("baseline line {n}: `{name}` has no reason");
        }
        if revisions.is_empty() {
            bail!("baseline line {n}: `{name}` is not under a `[revision]` header");
        }
        for revision in &revisions {
            if entries
                .insert((revision.clone(), name.to_owned()), reason.to_owned())
                .is_some()
            {
                bail!("baseline line {n}: `{name}` is listed twice for {revision}");
            }
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

/// Runs `runs` and returns their outcomes in order. With `whole_sets`, each revision in turn
/// runs its requirement set in one suite process ([`run_set`]), every scenario of it at once
/// as the suite scores them, and its runs outside the set alongside; otherwise every run
/// starts at once, each in its own suite process.
fn run_all(
    peers: &Peers,
    client: &Path,
    runs: &[Run],
    out_root: &Path,
    whole_sets: bool,
) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = runs.iter().map(|_| None).collect();
    let not_run = |e: anyhow::Error| Outcome {
        passed: false,
        summary: format!("not run: {e:#}"),
        failures: Vec::new(),
        log: out_root.to_path_buf(),
    };
    let report = |run: &Run, outcome: &Outcome| {
        eprintln!(
            "conformance: {} {}: {}",
            run.revision,
            run.scenario,
            if outcome.passed { "pass" } else { "fail" }
        );
    };
    let batches: Vec<Option<&str>> = if whole_sets {
        REVISIONS.iter().map(|r| Some(*r)).collect()
    } else {
        vec![None]
    };
    for revision in batches {
        let of_batch = |r: &Run| revision.is_none_or(|rev| r.revision == rev);
        let set: Vec<usize> = (0..runs.len())
            .filter(|&i| whole_sets && of_batch(&runs[i]) && runs[i].in_set)
            .collect();
        let alone: Vec<usize> = (0..runs.len())
            .filter(|&i| of_batch(&runs[i]) && !set.contains(&i))
            .collect();
        std::thread::scope(|s| {
            let set_thread = match (revision, set.is_empty()) {
                (Some(revision), false) => {
                    let set_runs: Vec<&Run> = set.iter().map(|&i| &runs[i]).collect();
                    Some(s.spawn(move || run_set(peers, client, revision, &set_runs, out_root)))
                }
                _ => None,
            };
            let alone_threads: Vec<_> = alone
                .iter()
                .map(|&i| {
                    let run = &runs[i];
                    (i, s.spawn(move || run_one(peers, client, run, out_root)))
                })
                .collect();
            if let Some(thread) = set_thread {
                match thread
                    .join()
                    .expect("the requirement set's thread panicked")
                {
                    Ok(set_outcomes) => {
                        for (&i, outcome) in set.iter().zip(set_outcomes) {
                            report(&runs[i], &outcome);
                            outcomes[i] = Some(outcome);
                        }
                    }
                    Err(e) => {
                        let message = format!("{e:#}");
                        for &i in &set {
                            let outcome = not_run(anyhow::anyhow!("{message}"));
                            report(&runs[i], &outcome);
                            outcomes[i] = Some(outcome);
                        }
                    }
                }
            }
            for (i, thread) in alone_threads {
                let outcome = thread
                    .join()
                    .expect("a scenario's thread panicked")
                    .unwrap_or_else(not_run);
                report(&runs[i], &outcome);
                outcomes[i] = Some(outcome);
            }
        });
    }
    outcomes
        .into_iter()
        .map(|o| o.expect("every run has an outcome"))
        .collect()
}

/// Runs `revision`'s whole requirement set in one suite process (`client --requirements R`,
/// every scenario at once) and returns the outcomes of `runs` (all of the set's): each from
/// its result directory — its checks, and whether the client ended by itself in time
/// ([`client_ended`]).
fn run_set(
    peers: &Peers,
    client: &Path,
    revision: &str,
    runs: &[&Run],
    out_root: &Path,
) -> Result<Vec<Outcome>> {
    let dir = out_root.join(revision).join("requirements");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let args = [
        OsStr::new("client"),
        OsStr::new("--command"),
        client.as_os_str(),
        OsStr::new("--requirements"),
        OsStr::new(revision),
    ];
    let (status, log) = spawn_suite(peers, &args, CLIENT_TIMEOUT, SET_TIMEOUT, &dir)?;
    Ok(runs
        .iter()
        .map(|run| {
            let Some(scenario_dir) = result_dir(&dir, &run.scenario) else {
                return Outcome {
                    passed: false,
                    summary: match status {
                        None => format!("killed after {} s", SET_TIMEOUT.as_secs()),
                        Some(_) => "no result in the requirement set's output".into(),
                    },
                    failures: Vec::new(),
                    log: log.clone(),
                };
            };
            let checks = read_checks_json(&scenario_dir);
            let (summary, mut failures) = read_checks(&scenario_dir);
            if !client_ended(&scenario_dir, &run.scenario) {
                failures.push(format!(
                    "the client did not end by itself in time (its stderr.txt ends with neither `scenario {0}: done` nor `scenario {0}: error: …`, or with its own timeout)",
                    run.scenario
                ));
            }
            Outcome {
                passed: checks.is_some() && failures.is_empty(),
                summary,
                failures,
                log: scenario_dir,
            }
        })
        .collect())
}

/// The directory a requirement set's run wrote for `scenario` under `dir`:
/// `<scenario>-<timestamp>` (`auth/x` in `auth/`, as `auth/x-<timestamp>`).
fn result_dir(dir: &Path, scenario: &str) -> Option<PathBuf> {
    let path = dir.join(scenario);
    let (parent, name) = (path.parent()?, path.file_name()?.to_str()?);
    let prefix = format!("{name}-");
    std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix(&prefix))
                    // The timestamp, not a longer scenario name (`auth/x-y`, `x-2`).
                    .is_some_and(is_timestamp)
        })
}

/// Whether `text` is the suite's timestamp of a result directory: `YYYY-MM-DDThh-mm-ss-mmmZ`.
fn is_timestamp(text: &str) -> bool {
    let shape = b"dddd-dd-ddTdd-dd-dd-dddZ";
    text.len() == shape.len()
        && text.bytes().zip(shape).all(|(c, &s)| match s {
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        })
}

/// Whether the client of a run ended by itself in time: `mcp-conformance-client` prints, as
/// its last line (stderr), `scenario <name>: done` when it exits 0 and `scenario <name>:
/// error: <chain>` when it exits 1 — `… did not finish within …` when its own bound on the run
/// stopped it. A client the suite stopped prints neither.
fn client_ended(dir: &Path, scenario: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("stderr.txt")) else {
        return false;
    };
    let Some(last) = text.lines().last() else {
        return false;
    };
    let own_timeout = format!("scenario {scenario}: error: scenario {scenario} did not finish");
    last == format!("scenario {scenario}: done")
        || (last.starts_with(&format!("scenario {scenario}: error: "))
            && !last.starts_with(&own_timeout))
}

fn run_one(peers: &Peers, client: &Path, run: &Run, out_root: &Path) -> Result<Outcome> {
    let dir = out_root
        .join(&run.revision)
        .join(run.scenario.replace('/', "__"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let mode = [
        OsStr::new("client"),
        OsStr::new("--command"),
        client.as_os_str(),
    ];
    let (status, log) = run_suite(
        peers,
        &mode,
        &run.scenario,
        &run.revision,
        CLIENT_TIMEOUT,
        &dir,
    )?;
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

/// Runs the suite's `<mode> --scenario S --spec-version R` (at the revision's wire even where
/// the suite would skip the scenario, `--force`), its output in `dir` and its log in
/// `dir/suite.log`; killed with its process group after [`SCENARIO_TIMEOUT`] (then `None`).
fn run_suite(
    peers: &Peers,
    mode: &[&OsStr],
    scenario: &str,
    revision: &str,
    timeout: Duration,
    dir: &Path,
) -> Result<(Option<std::process::ExitStatus>, PathBuf)> {
    let args = [
        mode,
        &[
            OsStr::new("--scenario"),
            OsStr::new(scenario),
            OsStr::new("--spec-version"),
            OsStr::new(revision),
            OsStr::new("--force"),
        ],
    ]
    .concat();
    spawn_suite(peers, &args, timeout, SCENARIO_TIMEOUT, dir)
}

/// Runs the suite with `args`, its `--timeout` `timeout`, its output in `dir` and its log in
/// `dir/suite.log`; killed with its process group after `bound` (then `None`).
fn spawn_suite(
    peers: &Peers,
    args: &[&OsStr],
    timeout: Duration,
    bound: Duration,
    dir: &Path,
) -> Result<(Option<std::process::ExitStatus>, PathBuf)> {
    use std::os::unix::process::CommandExt;

    std::fs::create_dir_all(dir)?;
    let log = dir.join("suite.log");
    let log_file = std::fs::File::create(&log)?;
    let mut child = Command::new(&peers.node22)
        .arg(&peers.conformance)
        .args(args)
        .arg("--timeout")
        .arg(timeout.as_millis().to_string())
        .arg("-o")
        .arg(dir)
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
    let status = match rx.recv_timeout(bound) {
        Ok(status) => Some(status?),
        Err(_) => {
            kill_group(pid);
            None
        }
    };
    let _ = waiter.join();
    Ok((status, log))
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

/// The checks of the `checks.json` the suite wrote somewhere under `dir`, if it wrote a
/// readable one.
fn read_checks_json(dir: &Path) -> Option<Vec<serde_json::Value>> {
    let path = find_file(dir, "checks.json")?;
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Summarises the `checks.json` the suite wrote somewhere under `dir`.
fn read_checks(dir: &Path) -> (String, Vec<String>) {
    let Some(checks) = read_checks_json(dir) else {
        return ("no checks recorded".into(), Vec::new());
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
    fn result_directories_are_told_apart_by_their_timestamp() {
        assert!(is_timestamp("2026-12-05T21-27-44-980Z"));
        assert!(!is_timestamp("2-2026-12-05T21-27-44-980Z"));
        assert!(!is_timestamp("changed-2026-12-05T21-27-44-980Z"));
        assert!(!is_timestamp("2026-12-05"));
        let dir = std::env::temp_dir().join(format!("xtask-result-dir-{}", std::process::id()));
        for name in [
            "server-foo-2-2026-12-05T21-27-44-980Z",
            "server-foo-2026-12-05T21-27-45-001Z",
        ] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        let found =
            |scenario: &str| result_dir(&dir, scenario).map(|p| p.file_name().unwrap().to_owned());
        assert_eq!(
            found("server-foo").unwrap(),
            "server-foo-2026-12-05T21-27-45-001Z"
        );
        assert_eq!(
            found("server-foo-2").unwrap(),
            "server-foo-2-2026-12-05T21-27-44-980Z"
        );
        assert!(found("server-bar").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn required_client_scenarios_are_parsed() {
        let text = "Required for 2026-07-28 (3 scenarios, frozen):\n\nServer scenarios (test against a server):\n  - tools-list\n\nClient scenarios (test against a client):\n  - tools_call\n  - auth/metadata-default\n\nRun and reported, but never scored:\n  extension (1):\n    - auth/dpop [client]\n";
        assert_eq!(
            parse_required(text),
            ["tools_call", "auth/metadata-default"]
        );
    }

    #[test]
    fn unscored_client_scenarios_are_parsed() {
        let text = "Client scenarios (test against a client):\n  - tools_call\n\nRun and reported, but never scored:\n  extension (2):\n    - auth/dpop [client]\n    - tasks-lifecycle [server]\n  added-after-release (1):\n    - json-schema-2020-12-preservation [client]\n";
        assert_eq!(
            parse_unscored(text),
            ["auth/dpop", "json-schema-2020-12-preservation"]
        );
    }

    /// A requirement set's result directories are found by scenario (not a longer name with
    /// the same start), and a client ended by itself only when its last line says so.
    #[test]
    fn a_sets_results_are_found_per_scenario() {
        let dir = std::env::temp_dir().join(format!("xtask-set-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let longer = dir.join("auth/scope-step-up-extra-2026-01-01T00-00-00-000Z");
        let wanted = dir.join("auth/scope-step-up-2026-01-01T00-00-00-001Z");
        let plain = dir.join("initialize-2026-01-01T00-00-00-002Z");
        for d in [&longer, &wanted, &plain] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert_eq!(result_dir(&dir, "auth/scope-step-up"), Some(wanted.clone()));
        assert_eq!(result_dir(&dir, "initialize"), Some(plain.clone()));
        assert_eq!(result_dir(&dir, "tools_call"), None);

        let ended = |stderr: &str| {
            std::fs::write(wanted.join("stderr.txt"), stderr).unwrap();
            client_ended(&wanted, "auth/scope-step-up")
        };
        assert!(!client_ended(&wanted, "auth/scope-step-up"));
        assert!(ended(
            "scenario auth/scope-step-up: http://x\nscenario auth/scope-step-up: done\n"
        ));
        assert!(ended(
            "scenario auth/scope-step-up: http://x\nscenario auth/scope-step-up: error: refused\n"
        ));
        // Stopped by the suite mid-run, or by its own bound.
        assert!(!ended(
            "scenario auth/scope-step-up: http://x\n  tools/list: []\n"
        ));
        assert!(!ended(
            "scenario auth/scope-step-up: error: scenario auth/scope-step-up did not finish within 15.0 s\n"
        ));
        assert!(!ended("scenario auth/scope-step: done\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn baseline_needs_headers_reasons_and_no_duplicates() {
        let ok = parse_baseline(
            "# comment\n\n[2025-11-25 2026-07-28]\nauth/x   not yet: OAuth  # trailing\n[2026-07-28]\nnew  only here\n",
        )
        .unwrap();
        assert_eq!(
            ok[&("2025-11-25".into(), "auth/x".into())],
            "not yet: OAuth"
        );
        assert_eq!(
            ok[&("2026-07-28".into(), "auth/x".into())],
            "not yet: OAuth"
        );
        assert_eq!(ok[&("2026-07-28".into(), "new".into())], "only here");
        assert!(!ok.contains_key(&("2025-11-25".into(), "new".into())));
        assert!(parse_baseline("[2026-07-28]\nauth/x\n").is_err());
        assert!(parse_baseline("auth/x reason\n").is_err());
        assert!(parse_baseline("[2026-07-28]\na r\na r\n").is_err());
        assert!(parse_baseline("[1999-01-01]\na r\n").is_err());
        assert!(parse_baseline("[2026-07-28\na r\n").is_err());
    }

    /// The committed baseline parses, so a malformed edit fails here rather than in CI's
    /// conformance step.
    #[test]
    fn committed_baseline_parses() {
        let text =
            std::fs::read_to_string(peers::root().join("peers/conformance-baseline.txt")).unwrap();
        let entries = parse_baseline(&text).unwrap();
        let gateway = gateway::parse_baseline(&text).unwrap();
        assert!(
            !gateway.not_applicable.contains_key("tools-list")
                && !gateway
                    .not_applicable
                    .contains_key("dns-rebinding-protection"),
            "tools-list and dns-rebinding-protection always run against the gateway"
        );
        assert!(
            !gateway
                .expected
                .keys()
                .any(|(_, _, scenario, _)| scenario == "tools-list"
                    || scenario == "dns-rebinding-protection"),
            "tools-list and dns-rebinding-protection must pass against the gateway"
        );
        for (revision, required) in [
            ("2025-11-25", "initialize"),
            ("2025-11-25", "tools_call"),
            ("2025-11-25", "sse-retry"),
            ("2026-07-28", "tools_call"),
        ] {
            assert!(
                !entries.contains_key(&(revision.into(), required.into())),
                "`{required}` must pass at {revision}, not be baselined"
            );
        }
    }
}
