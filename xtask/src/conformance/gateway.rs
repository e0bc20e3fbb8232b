//! The gateway part of `cargo xtask conformance`: the suite's SERVER scenarios against
//! `mcp-agent serve --http`, in front of the test kit's `mcp-test-server` (with
//! `--header-params`: its `route` tool declares `x-mcp-header`; and `--skills`: a skill
//! directory, [`write_skills`], whose skills the gateway serves), once per exposure
//! (`eager`: every upstream tool as `kit__tool`; `lazy`: `mcp_search_tools`, `mcp_call_tool`,
//! `mcp_read_output`), and in a third, `upstream`: eager with `tool_names = "upstream"`, in
//! front of a kit that also lists the tools the suite calls by name (`--suite-tools`:
//! `test_simple_text`, …), which the gateway then lists under those names, and offers the
//! resources and prompts the suite reads by name (`--suite-resources`), which a gateway over
//! one upstream serves under their own names.
//!
//! For each checked revision the suite lists the server scenarios it requires, plus those it
//! runs without scoring (`list --requirements R`), and the extension scenarios the gateway
//! implements run too ([`EXTENSIONS`]: the skills extension's). Each one runs against the gateway in the
//! `eager` and `lazy` exposures, or only in `upstream` when named under
//! `[gateway upstream-only]` in `peers/conformance-baseline.txt` (scenarios that call a tool
//! by its exact name or resource URI), or is named under `[gateway not-applicable]` with the
//! reason (it forwards no logging or sampling). A scenario the suite adds later runs until the baseline says otherwise, so it is
//! never silently skipped.
//!
//! A run is judged check by check (the suite's `checks.json`): every `FAILURE` or `WARNING`
//! check must be listed in the baseline as `scenario:check-id  reason` under a
//! `[gateway R... [eager|lazy|upstream]]` header (about `eager` and `lazy` unless one is
//! named), and every listed check must still fail (else: remove its line). A run that leaves no checks (the suite crashed or overstayed) is a regression.
//! Each exposure at each revision has a gateway of its own, the gateways run in parallel, and
//! each runs the revision's requirement set in one suite process (every scenario of the set,
//! those not planned for the exposure too, whose results are not read), then the rest one by
//! one ([`run_all`]). Output is kept under `target/conformance/gateway/<exposure>/<revision>/`:
//! the requirement set's in `requirements/`, each scenario run alone (an extension, a group's
//! only scenario, one the set did not reach) in `<scenario>/`, the gateway's log in `gateway/`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{REVISIONS, SCENARIO_TIMEOUT, read_checks_json};
use crate::peers::Peers;

/// Extension server scenarios the gateway implements, run at every checked revision though
/// the suite's requirement sets do not list them: the skills extension's (`skills/list` and
/// `skills/get`, the `SKILL.md` resource, `resources/directory/read` of a skill's folder).
const EXTENSIONS: [&str; 3] = [
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
];

/// The exposures the gateway is checked in.
pub(super) const EXPOSURES: [&str; 3] = ["eager", "lazy", "upstream"];
/// The exposures every scenario runs in, unless the baseline names it upstream-only: the
/// `upstream` exposure runs only those.
const GENERAL_EXPOSURES: [&str; 2] = ["eager", "lazy"];
/// The exposure whose gateway lists upstream tools under their own names.
const UPSTREAM_NAMES: &str = "upstream";
/// The suite's timeout for one server scenario.
const SUITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Our bound on the gateway starting or stopping.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(30);

/// One server scenario at one revision against the gateway in one exposure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct GatewayRun {
    pub(super) exposure: String,
    pub(super) revision: String,
    pub(super) scenario: String,
}

/// The gateway section of the baseline.
#[derive(Debug, Default)]
pub(super) struct GatewayBaseline {
    /// Scenarios not run, with why.
    pub(super) not_applicable: BTreeMap<String, String>,
    /// Scenarios run only in the `upstream` exposure, with why.
    pub(super) upstream_only: BTreeMap<String, String>,
    /// `(exposure, revision, scenario, check id)` expected to fail or warn, with why.
    pub(super) expected: BTreeMap<(String, String, String, String), String>,
}

/// Parses the baseline's gateway section: from the first `[gateway ...]` header on. Headers are
/// `[gateway not-applicable]` or `[gateway upstream-only]` (then `scenario  reason` lines) or
/// `[gateway R... [eager|lazy|upstream]]` (then `scenario:check-id  reason` lines, about
/// `eager` and `lazy` unless exposures are named).
pub(super) fn parse_baseline(text: &str) -> Result<GatewayBaseline> {
    enum Section {
        None,
        NotApplicable,
        UpstreamOnly,
        Expected {
            revisions: Vec<String>,
            exposures: Vec<String>,
        },
    }
    let mut out = GatewayBaseline::default();
    let mut section = Section::None;
    let mut started = false;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let line = line.split_once('#').map_or(line, |(l, _)| l).trim();
        if !started {
            started = line.starts_with("[gateway");
            if !started {
                continue;
            }
        }
        if line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header
                .strip_suffix(']')
                .with_context(|| format!("baseline line {n}: `[` without `]`"))?;
            let mut words = header.split_whitespace();
            if words.next() != Some("gateway") {
                bail!(
                    "baseline line {n}: after the first `[gateway ...]` header, every header is a gateway one"
                );
            }
            let words: Vec<&str> = words.collect();
            if words == ["not-applicable"] {
                section = Section::NotApplicable;
                continue;
            }
            if words == ["upstream-only"] {
                section = Section::UpstreamOnly;
                continue;
            }
            let mut revisions = Vec::new();
            let mut exposures = Vec::new();
            for word in words {
                if REVISIONS.contains(&word) {
                    revisions.push(word.to_owned());
                } else if EXPOSURES.contains(&word) {
                    exposures.push(word.to_owned());
                } else {
                    bail!(
                        "baseline line {n}: `{word}` is neither a checked revision ({}) nor an exposure ({})",
                        REVISIONS.join(", "),
                        EXPOSURES.join(", ")
                    );
                }
            }
            if revisions.is_empty() {
                bail!("baseline line {n}: a gateway header names no revision");
            }
            if exposures.is_empty() {
                exposures = GENERAL_EXPOSURES.iter().map(|e| (*e).to_owned()).collect();
            }
            section = Section::Expected {
                revisions,
                exposures,
            };
            continue;
        }
        let (name, reason) = line
            .split_once(char::is_whitespace)
            .map(|(n, r)| (n, r.trim()))
            .unwrap_or((line, ""));
        if reason.is_empty() {
            bail!("baseline line {n}: `{name}` has no reason");
        }
        match &section {
            Section::None => unreachable!("the gateway section starts with a header"),
            Section::NotApplicable | Section::UpstreamOnly => {
                if name.contains(':') {
                    bail!(
                        "baseline line {n}: a not-applicable or upstream-only entry names a scenario, not a check"
                    );
                }
                if out.not_applicable.contains_key(name) || out.upstream_only.contains_key(name) {
                    bail!("baseline line {n}: `{name}` is listed twice");
                }
                let into = match section {
                    Section::NotApplicable => &mut out.not_applicable,
                    _ => &mut out.upstream_only,
                };
                into.insert(name.to_owned(), reason.to_owned());
            }
            Section::Expected {
                revisions,
                exposures,
            } => {
                let Some((scenario, check)) = name.split_once(':') else {
                    bail!("baseline line {n}: `{name}` is not `scenario:check-id`");
                };
                if scenario.is_empty() || check.is_empty() {
                    bail!("baseline line {n}: `{name}` is not `scenario:check-id`");
                }
                for exposure in exposures {
                    for revision in revisions {
                        let key = (
                            exposure.clone(),
                            revision.clone(),
                            scenario.to_owned(),
                            check.to_owned(),
                        );
                        if out.expected.insert(key, reason.to_owned()).is_some() {
                            bail!(
                                "baseline line {n}: `{name}` is listed twice for {revision} ({exposure})"
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The server scenarios of a `list --requirements` output: the `  - name` lines under the
/// `Server scenarios` heading, and the `    - name [server]` lines of those run but not
/// scored.
pub(super) fn parse_server_scenarios(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Server scenarios"))
        .skip(1)
        .map_while(|l| l.strip_prefix("  - "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    names.extend(
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("- "))
            .filter_map(|l| l.strip_suffix(" [server]"))
            .map(|l| l.trim().to_owned()),
    );
    names
}

/// The server scenarios the suite lists for `revision`.
fn list_server(peers: &Peers, revision: &str) -> Result<Vec<String>> {
    let args = ["--requirements", revision];
    let names = parse_server_scenarios(&super::list(peers, &args)?);
    if names.is_empty() {
        bail!(
            "`conformance list {}` listed no server scenarios",
            args.join(" ")
        );
    }
    Ok(names)
}

/// Every gateway run the suite and the baseline call for, checked against each other: a
/// scenario is run or not applicable, never both or neither; every baseline entry is about a
/// scenario the suite still lists.
pub(super) fn plan(peers: &Peers, baseline: &GatewayBaseline) -> Result<Vec<GatewayRun>> {
    let mut runs = Vec::new();
    let mut listed = BTreeSet::new();
    for revision in REVISIONS {
        let mut scenarios = list_server(peers, revision)?;
        for extension in EXTENSIONS {
            if !scenarios.iter().any(|s| s == extension) {
                scenarios.push(extension.to_owned());
            }
        }
        for scenario in scenarios {
            listed.insert(scenario.clone());
            if baseline.not_applicable.contains_key(&scenario) {
                continue;
            }
            let exposures: &[&str] = if baseline.upstream_only.contains_key(&scenario) {
                &[UPSTREAM_NAMES]
            } else {
                &GENERAL_EXPOSURES
            };
            for &exposure in exposures {
                runs.push(GatewayRun {
                    exposure: exposure.to_owned(),
                    revision: revision.to_owned(),
                    scenario: scenario.clone(),
                });
            }
        }
    }
    for name in baseline.not_applicable.keys() {
        if !listed.contains(name) {
            bail!(
                "the baseline says `{name}` does not apply to the gateway, but the suite lists no such server scenario"
            );
        }
    }
    for name in baseline.upstream_only.keys() {
        if !listed.contains(name) {
            bail!(
                "the baseline says `{name}` runs with upstream tool names, but the suite lists no such server scenario"
            );
        }
    }
    for (exposure, revision, scenario, check) in baseline.expected.keys() {
        let run = GatewayRun {
            exposure: exposure.clone(),
            revision: revision.clone(),
            scenario: scenario.clone(),
        };
        if !runs.contains(&run) {
            bail!(
                "the baseline expects `{scenario}:{check}` to fail at {revision} ({exposure}), but `{scenario}` is not run there"
            );
        }
    }
    Ok(runs)
}

/// Builds the gateway and the upstream, runs `runs` and compares each run's failed and warning
/// checks with the baseline's gateway section; prints the results and the counts.
pub(super) fn check(peers: &Peers, runs: &[GatewayRun], baseline: &GatewayBaseline) -> Result<()> {
    let [gateway_bin, upstream_bin] = crate::build_bins(["mcp-agent", "mcp-test-server"])?;
    let out_root = crate::peers::root().join("target/conformance/gateway");
    let started = Instant::now();
    eprintln!(
        "conformance: {} gateway run(s), gateway {}",
        runs.len(),
        gateway_bin.display()
    );
    let outcomes = run_all(peers, &gateway_bin, &upstream_bin, runs, &out_root)?;
    println!(
        "\ngateway conformance results ({:.1} s; server scenarios against `mcp-agent serve --http`):",
        started.elapsed().as_secs_f64()
    );
    let mut regressions = Vec::new();
    let mut unexpected_passes = Vec::new();
    let mut clean = 0;
    let mut with_expected = 0;
    for (run, outcome) in runs.iter().zip(&outcomes) {
        let label = format!("{} {} {}", run.exposure, run.revision, run.scenario);
        let expected: BTreeMap<&str, &str> = baseline
            .expected
            .iter()
            .filter(|((e, r, s, _), _)| {
                e == &run.exposure && r == &run.revision && s == &run.scenario
            })
            .map(|((_, _, _, check), reason)| (check.as_str(), reason.as_str()))
            .collect();
        let new: Vec<&(String, String)> = outcome
            .problems
            .iter()
            .filter(|(id, _)| !expected.contains_key(id.as_str()))
            .collect();
        let gone: Vec<&str> = expected
            .keys()
            .filter(|check| !outcome.problems.iter().any(|(id, _)| id == *check))
            .copied()
            .collect();
        let verdict = if !outcome.completed {
            regressions.push(label.clone());
            "FAIL (did not complete)"
        } else if !new.is_empty() {
            regressions.push(label.clone());
            "FAIL (regression)"
        } else if !gone.is_empty() {
            unexpected_passes.push(format!("{label}: {}", gone.join(", ")));
            "PASS (unexpected: remove it from the baseline)"
        } else if expected.is_empty() {
            clean += 1;
            "pass"
        } else {
            with_expected += 1;
            "expected failure"
        };
        println!("  {label:<55} {verdict:<18} {}", outcome.summary);
        for (id, message) in &new {
            println!("      - {id} {message}");
        }
        if !new.is_empty() || !outcome.completed {
            println!("      log: {}", outcome.log.display());
        }
        for check in &gone {
            println!("      passes now: {check}");
        }
        for (check, reason) in &expected {
            if !gone.contains(check) {
                println!("      baseline {check}: {reason}");
            }
        }
    }
    println!();
    for exposure in EXPOSURES {
        for revision in REVISIONS {
            let these: Vec<_> = runs
                .iter()
                .zip(&outcomes)
                .filter(|(r, _)| r.exposure == exposure && r.revision == revision)
                .collect();
            if these.is_empty() {
                continue;
            }
            let passed = these
                .iter()
                .filter(|(_, o)| o.completed && o.problems.is_empty())
                .count();
            println!(
                "gateway ({exposure}) {revision}: {passed} of {} server scenario(s) pass every check",
                these.len()
            );
        }
    }
    println!(
        "gateway: {clean} passed, {with_expected} with expected failures only, {} regression(s), {} unexpected pass(es); not applicable: {}",
        regressions.len(),
        unexpected_passes.len(),
        baseline.not_applicable.len()
    );
    if !regressions.is_empty() || !unexpected_passes.is_empty() {
        bail!(
            "gateway conformance differs from peers/conformance-baseline.txt: regressions {regressions:?}, unexpected passes {unexpected_passes:?}"
        );
    }
    Ok(())
}

/// What one gateway run showed.
#[derive(Debug)]
pub(super) struct GatewayOutcome {
    /// `N checks passed, M failed, K warnings`, or why there are none.
    pub(super) summary: String,
    /// The suite recorded checks and finished in time.
    pub(super) completed: bool,
    /// `(check id, "STATUS: message")` of every failed or warning check.
    pub(super) problems: Vec<(String, String)>,
    pub(super) log: PathBuf,
}

/// Runs `runs` by group, each group (one exposure at one revision) against a gateway of its
/// own, the groups on as many workers as the machine has cores (at most 4); the outcomes are in
/// the order of `runs`. In the `upstream` exposure the gateway's kit speaks the revision under
/// test (`--discover` at 2026-07-28, where its tools ask for input with input-required results
/// the gateway relays).
///
/// A group's scenarios of the revision's requirement set run in one suite process, which runs
/// them one after the other ([`run_set`]; starting the suite costs more than most scenarios),
/// then the extensions and any scenario the set did not reach, each alone ([`run_one`]). A
/// scenario that overstays the suite's timeout is recorded as failed and the set goes on, while
/// that scenario's requests may still be in flight: a hang can disturb the next scenario, and
/// both are then regressions to look at.
pub(super) fn run_all(
    peers: &Peers,
    gateway_bin: &Path,
    upstream_bin: &Path,
    runs: &[GatewayRun],
    out_root: &Path,
) -> Result<Vec<GatewayOutcome>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for exposure in EXPOSURES {
        let dir = out_root.join(exposure);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        for revision in REVISIONS {
            let these: Vec<(usize, &GatewayRun)> = runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.exposure == exposure && r.revision == revision)
                .collect();
            if !these.is_empty() {
                groups.push(Group {
                    exposure,
                    revision,
                    runs: these,
                    dir: dir.join(revision),
                });
            }
        }
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes = std::sync::Mutex::new(runs.iter().map(|_| None).collect::<Vec<_>>());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(group) = groups.get(i) else {
                            return Ok(());
                        };
                        for (i, outcome) in group.run(peers, gateway_bin, upstream_bin)? {
                            outcomes.lock().expect("the outcomes")[i] = Some(outcome);
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a gateway conformance worker"))
    })?;
    Ok(outcomes
        .into_inner()
        .expect("the outcomes")
        .into_iter()
        .map(|o| o.expect("every run has an outcome"))
        .collect())
}

/// The runs of one exposure at one revision, against one gateway.
struct Group<'a> {
    exposure: &'static str,
    revision: &'static str,
    /// Each run with its index in all the runs.
    runs: Vec<(usize, &'a GatewayRun)>,
    /// `<exposure>/<revision>`: the gateway's files in `gateway/`, the requirement set's
    /// output in `requirements/`, each scenario run alone in `<scenario>/`.
    dir: PathBuf,
}

impl Group<'_> {
    /// Starts the group's gateway, runs its scenarios and stops it.
    fn run(
        &self,
        peers: &Peers,
        gateway_bin: &Path,
        upstream_bin: &Path,
    ) -> Result<Vec<(usize, GatewayOutcome)>> {
        let (exposure, revision) = (self.exposure, self.revision);
        let gateway_dir = self.dir.join("gateway");
        std::fs::create_dir_all(&gateway_dir)?;
        let discover = exposure == UPSTREAM_NAMES && revision == "2026-07-28";
        let mut gateway =
            match Gateway::start(gateway_bin, upstream_bin, exposure, discover, &gateway_dir) {
                Ok(gateway) => gateway,
                Err(e) => {
                    let e = e.context(format!("the gateway ({exposure}) {revision}"));
                    return Ok(self
                        .runs
                        .iter()
                        .map(|&(i, _)| (i, not_run(&e, &gateway_dir)))
                        .collect());
                }
            };
        eprintln!(
            "conformance: gateway ({exposure}) {revision} at {}, {} run(s)",
            gateway.url,
            self.runs.len()
        );
        // The extensions are not in the requirement set; one scenario alone needs no set.
        let (mut set, mut alone): (Vec<_>, Vec<_>) = self
            .runs
            .iter()
            .partition(|(_, r)| !EXTENSIONS.contains(&r.scenario.as_str()));
        if set.len() < 2 {
            alone.append(&mut set);
        }
        let mut outcomes = Vec::with_capacity(self.runs.len());
        let report = |run: &GatewayRun, outcome: &GatewayOutcome| {
            eprintln!(
                "conformance: gateway ({exposure}) {revision} {}: {}",
                run.scenario, outcome.summary
            );
        };
        if !set.is_empty() {
            let names: Vec<&str> = set.iter().map(|(_, r)| r.scenario.as_str()).collect();
            let set_outcomes = run_set(peers, &gateway.url, revision, &names, &self.dir)
                .unwrap_or_else(|e| names.iter().map(|_| Some(not_run(&e, &self.dir))).collect());
            for (&(i, run), outcome) in set.iter().zip(set_outcomes) {
                match outcome {
                    Some(outcome) => {
                        report(run, &outcome);
                        outcomes.push((i, outcome));
                    }
                    // Not reached before the set ended (or was killed): on its own, so that
                    // what became of it is its own result.
                    None => alone.push((i, run)),
                }
            }
        }
        for (i, run) in alone {
            let outcome = run_one(peers, &gateway.url, run, &self.dir)
                .unwrap_or_else(|e| not_run(&e, &self.dir));
            report(run, &outcome);
            outcomes.push((i, outcome));
        }
        gateway.stop()?;
        Ok(outcomes)
    }
}

/// The outcome of a run the suite could not be started for.
fn not_run(error: &anyhow::Error, dir: &Path) -> GatewayOutcome {
    GatewayOutcome {
        summary: format!("not run: {error:#}"),
        completed: false,
        problems: Vec::new(),
        log: dir.to_path_buf(),
    }
}

/// Runs `revision`'s requirement set against the gateway at `url` in one suite process
/// (`server --requirements R`: the scenarios one after the other, each within
/// [`SUITE_TIMEOUT`], all within [`SET_TIMEOUT`](super::SET_TIMEOUT)) and returns the outcome
/// of each of `scenarios` from its result directory (`server-<scenario>-<timestamp>` in
/// `dir/requirements`), `None` for one with no result there (the set was killed before it
/// ended). Scenarios of the set not asked for (upstream-only or not applicable here) run too;
/// their results are not read.
fn run_set(
    peers: &Peers,
    url: &str,
    revision: &str,
    scenarios: &[&str],
    dir: &Path,
) -> Result<Vec<Option<GatewayOutcome>>> {
    let dir = dir.join("requirements");
    let args = [
        OsStr::new("server"),
        OsStr::new("--url"),
        OsStr::new(url),
        OsStr::new("--requirements"),
        OsStr::new(revision),
    ];
    let (_, log) = super::spawn_suite(peers, &args, SUITE_TIMEOUT, super::SET_TIMEOUT, &dir)?;
    Ok(scenarios
        .iter()
        .map(|scenario| {
            let result = super::result_dir(&dir, &format!("server-{scenario}"))?;
            // A result directory holds `checks.json` once its scenario ended.
            let checks = read_checks_json(&result)?;
            Some(outcome(Some(checks), None, log.clone()))
        })
        .collect())
}

fn run_one(peers: &Peers, url: &str, run: &GatewayRun, dir: &Path) -> Result<GatewayOutcome> {
    let dir = dir.join(run.scenario.replace('/', "__"));
    let mode = [OsStr::new("server"), OsStr::new("--url"), OsStr::new(url)];
    let (status, log) = super::run_suite(
        peers,
        &mode,
        &run.scenario,
        &run.revision,
        SUITE_TIMEOUT,
        &dir,
    )?;
    let killed_after = status.is_none().then_some(SCENARIO_TIMEOUT);
    Ok(outcome(read_checks_json(&dir), killed_after, log))
}

/// A run's outcome from the checks the suite wrote (`None`: it wrote none); `killed_after`
/// our bound when the suite did not end within it.
fn outcome(
    checks: Option<Vec<serde_json::Value>>,
    killed_after: Option<Duration>,
    log: PathBuf,
) -> GatewayOutcome {
    let Some(checks) = checks else {
        return GatewayOutcome {
            summary: "no checks recorded".into(),
            completed: false,
            problems: Vec::new(),
            log,
        };
    };
    let count = |s: &str| checks.iter().filter(|c| c["status"] == s).count();
    let problems = checks
        .iter()
        .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
        .map(|c| {
            (
                c["id"].as_str().unwrap_or("?").to_owned(),
                format!(
                    "{}: {}",
                    c["status"].as_str().unwrap_or("?"),
                    c["errorMessage"]
                        .as_str()
                        .or(c["description"].as_str())
                        .unwrap_or("")
                ),
            )
        })
        .collect();
    let summary = match killed_after {
        None => format!(
            "{} passed, {} failed, {} warnings",
            count("SUCCESS"),
            count("FAILURE"),
            count("WARNING")
        ),
        Some(bound) => format!("killed after {} s", bound.as_secs()),
    };
    GatewayOutcome {
        summary,
        completed: killed_after.is_none(),
        problems,
        log,
    }
}

/// The skill directory the upstream serves (`--skills`): one skill, `pdf-processing`, its
/// `SKILL.md` (frontmatter `name`, `description`, `license`) and a file in a subdirectory (the
/// child `inode/directory` a directory read of the skill lists).
fn write_skills(dir: &Path) -> Result<()> {
    let skill = dir.join("pdf-processing");
    std::fs::create_dir_all(skill.join("references"))?;
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n\
         license: MIT\n---\n\n# PDF processing\n\nRead references/FORMS.md before filling a form.\n",
    )?;
    std::fs::write(
        skill.join("references/FORMS.md"),
        "# Forms\n\nFill every field; sign last.\n",
    )?;
    Ok(())
}

/// `mcp-agent serve --http 127.0.0.1:0` on a config with the test kit's server `kit`; stopped
/// with SIGTERM (it drains and closes its upstreams), killed if it overstays or on drop.
struct Gateway {
    child: Child,
    url: String,
    stopped: bool,
}

impl Gateway {
    fn start(
        bin: &Path,
        upstream: &Path,
        exposure: &str,
        discover: bool,
        dir: &Path,
    ) -> Result<Self> {
        let config = dir.join("mcp.toml");
        let skills = dir.join("skills");
        write_skills(&skills)?;
        let skills = skills.display().to_string();
        let (expose, names, mut kit_args) = if exposure == UPSTREAM_NAMES {
            (
                "eager",
                "upstream",
                vec!["--header-params", "--suite-tools", "--suite-resources"],
            )
        } else {
            (exposure, "prefixed", vec!["--header-params"])
        };
        kit_args.extend(["--skills", skills.as_str()]);
        if discover {
            kit_args.push("--discover");
        }
        std::fs::write(
            &config,
            format!(
                "[[servers]]\nname = \"kit\"\ncommand = {:?}\nargs = {kit_args:?}\n\n[serve]\nexpose = {expose:?}\ntool_names = {names:?}\n",
                upstream.display().to_string()
            ),
        )?;
        let mut child = Command::new(bin)
            .args(["serve", "--http", "127.0.0.1:0", "--file"])
            .arg(&config)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stderr = child.stderr.take().context("the gateway's stderr")?;
        let mut log = std::fs::File::create(dir.join("gateway.log"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let mut gateway = Self {
            child,
            url: String::new(),
            stopped: false,
        };
        match rx.recv_timeout(GATEWAY_TIMEOUT) {
            Ok(url) => gateway.url = url,
            Err(_) => bail!(
                "the gateway ({exposure}) did not say where it listens within {} s; see {}",
                GATEWAY_TIMEOUT.as_secs(),
                dir.join("gateway.log").display()
            ),
        }
        Ok(gateway)
    }

    /// SIGTERM, then a bounded wait for a clean exit.
    fn stop(&mut self) -> Result<()> {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;

        self.stopped = true;
        let pid = i32::try_from(self.child.id()).context("the gateway's pid")?;
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        let deadline = Instant::now() + GATEWAY_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("the gateway exited with {status} after SIGTERM");
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        bail!(
            "the gateway did not exit within {} s of SIGTERM",
            GATEWAY_TIMEOUT.as_secs()
        )
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_scenarios_are_parsed() {
        let text = "Required for 2026-07-28 (3 scenarios, frozen):\n\nServer scenarios (test against a server):\n  - server-stateless\n  - tools-list\n\nClient scenarios (test against a client):\n  - tools_call\n\nRun and reported, but never scored:\n  extension (2):\n    - auth/dpop [client]\n    - tasks-lifecycle [server]\n";
        assert_eq!(
            parse_server_scenarios(text),
            ["server-stateless", "tools-list", "tasks-lifecycle"]
        );
    }

    #[test]
    fn gateway_baseline_sections() {
        let text = "[2026-07-28]\nclient-thing  ignored here\n[gateway not-applicable]\nprompts-list  no prompts\n[gateway upstream-only]\ntools-call-image  by name\n[gateway 2026-07-28]\ncaching:sep-2549-x  no resources\n[gateway 2025-11-25 lazy]\nping:ping  why\n[gateway 2026-07-28 upstream]\ntools-call-image:x  why\n";
        let b = parse_baseline(text).unwrap();
        assert_eq!(b.not_applicable["prompts-list"], "no prompts");
        assert_eq!(b.upstream_only["tools-call-image"], "by name");
        assert!(b.expected.contains_key(&(
            "upstream".into(),
            "2026-07-28".into(),
            "tools-call-image".into(),
            "x".into()
        )));
        // Unnamed, an expectation is about the two general exposures only.
        assert!(!b.expected.contains_key(&(
            "upstream".into(),
            "2026-07-28".into(),
            "caching".into(),
            "sep-2549-x".into()
        )));
        for exposure in GENERAL_EXPOSURES {
            assert!(b.expected.contains_key(&(
                exposure.into(),
                "2026-07-28".into(),
                "caching".into(),
                "sep-2549-x".into()
            )));
        }
        assert!(b.expected.contains_key(&(
            "lazy".into(),
            "2025-11-25".into(),
            "ping".into(),
            "ping".into()
        )));
        assert!(!b.expected.contains_key(&(
            "eager".into(),
            "2025-11-25".into(),
            "ping".into(),
            "ping".into()
        )));
        assert!(parse_baseline("[gateway 2026-07-28]\ncaching  no check id\n").is_err());
        assert!(parse_baseline("[gateway 2026-07-28]\ncaching:x\n").is_err());
        assert!(parse_baseline("[gateway not-applicable]\na:b reason\n").is_err());
        assert!(parse_baseline("[gateway 1999-01-01]\na:b r\n").is_err());
        assert!(parse_baseline("[gateway]\na:b r\n").is_err());
        assert!(parse_baseline("[gateway not-applicable]\na r\n[2026-07-28]\nb r\n").is_err());
        assert!(parse_baseline("[gateway not-applicable]\na r\na r\n").is_err());
        assert!(
            parse_baseline("[gateway not-applicable]\na r\n[gateway upstream-only]\na r\n")
                .is_err()
        );
        assert!(parse_baseline("[gateway upstream-only]\na:b r\n").is_err());
    }
}
