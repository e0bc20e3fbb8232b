//! Project automation, run as `cargo xtask <task>`.
//!
//! | task | what it does |
//! |---|---|
//! | `test` | installs the test peers, builds every binary and test once, runs the whole test suite (the README's test command) |
//! | `lint` | `cargo fmt --check`, clippy with `-D warnings` on all targets and features, rustdoc with broken links denied, the README's example and the facade with each transport feature alone |
//! | `tidy` | the repository's conventions (dependency rules, lints, code map), as tests |
//! | `ci` | `lint`, then `test` |
//! | `peers` | installs the pinned third-party test peers (`peers/`); `--env` prints their `MCP_AGENT_PEER_*` variables |
//! | `search-eval` | search quality and latency of the catalog on a dataset (`--dataset DIR [--json]`, default `datasets/bfcl`) |
//! | `bench` | criterion benchmarks in release mode: catalog search, the runner vs bare rmcp per call and `open_runner`, the agent loop's own cost per step, the gateway vs calling upstream directly, a fleet of replicas on Redis behind nginx, the memory of library runs and gateway sessions, the model adapter's parse cost per chunk (docs/benchmarks.md); `--json` for the key figures, ratios and targets, `--only search\|orchestration\|agent_loop\|gateway\|fleet\|run_memory\|gateway_memory\|model_stream` |
//! | `conformance` | the official MCP conformance suite's client scenarios of each checked revision, then its server scenarios against the `mcp-agent serve` gateway, vs `peers/conformance-baseline.txt` (`--revision R`, `--scenario S`, `--client-only`, `--gateway-only` to narrow) |

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

mod bench;
mod conformance;
mod leaks;
mod peers;
mod search_eval;
mod tidy;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    match task {
        "test" => test(rest),
        "lint" => lint(),
        "tidy" => run(cargo().args(["test", "--quiet", "-p", "xtask", "--", "tidy"])),
        "ci" => {
            lint()?;
            test(rest)
        }
        "peers" => peers::task(rest),
        "conformance" => conformance::task(rest),
        "search-eval" => search_eval::search_eval(rest),
        "bench" => bench::task(rest),
        "help" | "--help" | "-h" => {
            println!(
                "usage: cargo xtask <test|lint|tidy|ci|peers|conformance|search-eval|bench> [args]"
            );
            Ok(())
        }
        other => bail!("unknown task `{other}`; try `cargo xtask help`"),
    }
}

/// A `cargo` command, using the same cargo that runs the xtask.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The build every test step shares: each workspace binary and test, resolved with the
/// dev-dependencies' features as `cargo test --workspace` resolves them, so the test run
/// (`--tests`: the same targets) starts with nothing left to compile. Examples are not built:
/// the lint's clippy checks them.
///
/// A build of the binaries alone (or of one package's, `-p`) resolves the features of shared
/// dependencies differently (tokio's `test-util`, the crates' `testing` features), and cargo
/// then compiles most of the workspace a second time for the tests. With this one, the test
/// run and the conformance check's binaries find everything built.
pub(crate) const WORKSPACE_BUILD: [&str; 4] = ["build", "--workspace", "--bins", "--tests"];

/// Builds the workspace's binaries `bins` and returns their paths in the same order, as cargo
/// reports them, from one build.
///
/// The build is the workspace's ([`WORKSPACE_BUILD`]), not the packages' alone: within
/// `cargo xtask test` everything is built already, where `-p` would resolve the dependencies'
/// features anew and compile them again.
pub(crate) fn build_bins<const N: usize>(bins: [&str; N]) -> Result<[PathBuf; N]> {
    let mut cmd = cargo();
    cmd.args(WORKSPACE_BUILD)
        .args(["--quiet", "--message-format=json-render-diagnostics"])
        .stderr(Stdio::inherit());
    eprintln!("$ {cmd:?}");
    let out = cmd.output().context("running cargo build")?;
    if !out.status.success() {
        bail!("building {} failed ({})", bins.join(", "), out.status);
    }
    let messages: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let executable = |bin: &str| {
        messages
            .iter()
            .filter(|msg| {
                msg["reason"] == "compiler-artifact"
                    && msg["target"]["name"] == bin
                    && msg["target"]["kind"]
                        .as_array()
                        .is_some_and(|kinds| kinds.iter().any(|k| k == "bin"))
                    // Not the binary's own unit tests, which cargo reports under the same name.
                    && msg["profile"]["test"] == false
            })
            .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
            .with_context(|| format!("cargo did not report the {bin} executable"))
    };
    let mut paths = Vec::with_capacity(N);
    for bin in bins {
        paths.push(executable(bin)?);
    }
    Ok(paths.try_into().expect("one path per binary"))
}

/// Runs a command to completion, failing with its command line when it fails; says how long
/// it took, so a slow step shows in a CI log.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {cmd:?}");
    let started = std::time::Instant::now();
    let status = cmd.status().with_context(|| format!("spawning {cmd:?}"))?;
    eprintln!("  ({})", minutes(started));
    if !status.success() {
        bail!("command failed ({status}): {cmd:?}");
    }
    Ok(())
}

/// The time since `started`, as `4m 07s`.
fn minutes(started: std::time::Instant) -> String {
    let took = started.elapsed().as_secs();
    format!("{}m {:02}s", took / 60, took % 60)
}

fn has_nextest() -> bool {
    cargo()
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The README's test command: install what the tests need, then run every test, then the
/// conformance check. Tests find the peers through the `MCP_AGENT_PEER_*` variables.
///
/// The peers install while the workspace builds: most of their time is downloads and
/// unpacking, which the build's compilers overlap.
fn test(extra: &[String]) -> Result<()> {
    let started = std::time::Instant::now();
    let (peers, build) = std::thread::scope(|s| {
        let peers = s.spawn(peers::install);
        let build = run(cargo().args(WORKSPACE_BUILD));
        (peers.join().expect("the peer install thread"), build)
    });
    build?;
    let peers = peers?;
    let before = leaks::snapshot();
    if has_nextest() {
        let mut nextest = cargo();
        nextest.args(["nextest", "run", "--workspace", "--tests", "--no-fail-fast"]);
        // A variable, not a flag: one the caller passes (`-j`, `--test-threads`, `--jobs`) or
        // sets (`NEXTEST_TEST_THREADS`) wins.
        if std::env::var_os("NEXTEST_TEST_THREADS").is_none() {
            nextest.env("NEXTEST_TEST_THREADS", test_threads().to_string());
        }
        run(with_peers(&mut nextest, &peers).args(extra))?;
        run(with_peers(
            cargo().args(["test", "--workspace", "--doc"]),
            &peers,
        ))?;
    } else {
        run(with_peers(
            cargo().args(["test", "--workspace", "--no-fail-fast"]),
            &peers,
        )
        .args(extra))?;
    }
    local_model_tests(&peers)?;
    embed_example()?;
    let conformance = std::time::Instant::now();
    conformance::check(&peers, &conformance::Filter::default())?;
    eprintln!("conformance check: {}", minutes(conformance));
    // No server process the suite started may outlive it (tests check their own servers by
    // pid and process group; this is the net under them).
    leaks::check(&peers::root(), &before)?;
    eprintln!("leak check: no process started by the test suite is alive");
    eprintln!("cargo xtask test: {}", minutes(started));
    if started.elapsed() > TEST_BUDGET {
        // Said, not failed: a loaded machine stretches every test alike (compare the steps'
        // times above with an earlier run's before looking for a slow test).
        eprintln!(
            "cargo xtask test: over its budget of {} minutes",
            TEST_BUDGET.as_secs() / 60
        );
    }
    Ok(())
}

/// How long `cargo xtask test` on a bare clone should take at most, peers and build included.
const TEST_BUDGET: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// How many tests run at once: twice the cores, at most 16. About a third of a test's time is
/// spent waiting on its peers' processes, sockets and timers (on 2 cores the suite kept them
/// 137% busy at one test per core, 174% at two, and took 164 s instead of 209 s). The bound:
/// each test may start peer processes and take ports of its own.
fn test_threads() -> usize {
    (2 * std::thread::available_parallelism().map_or(1, |n| n.get())).min(16)
}

/// `tools search` with `[search] embedder = { local = … }` through the command line built with
/// its `embed-local` feature (`cli_search`). The model's own tests (`mcp-embed-local`) run
/// with the rest of the workspace.
///
/// The whole workspace is selected, with the feature of the command line alone, so that every
/// crate resolves its features as in the workspace build: only the command line recompiles,
/// not the workspace a second time (`-p` would resolve the dev-dependencies' features anew).
/// `MCP_AGENT_SKIP_LOCAL_MODEL=1` leaves it out (say, for a quick run while working on
/// something else).
fn local_model_tests(peers: &peers::Peers) -> Result<()> {
    if std::env::var_os("MCP_AGENT_SKIP_LOCAL_MODEL").is_some_and(|v| v == "1") {
        eprintln!("local embedding model tests skipped (MCP_AGENT_SKIP_LOCAL_MODEL=1)");
        return Ok(());
    }
    let selection = ["--workspace", "--features", "mcp-agent-cli/embed-local"];
    if has_nextest() {
        run(with_peers(
            cargo()
                .args(["nextest", "run", "--no-fail-fast"])
                .args(selection)
                // The integration tests alone: the command line's own unit tests do not
                // depend on the feature, and building them again would cost a binary.
                .args(["--test", "it"])
                .args(["-E", "package(mcp-agent-cli) and test(/cli_search::/)"]),
            peers,
        ))
    } else {
        run(with_peers(
            cargo()
                .args(["test", "--no-fail-fast"])
                .args(selection)
                .args(["--test", "it", "cli_search::"]),
            peers,
        ))
    }
}

/// Runs `examples/embed` (the README's library example, a package of its own that depends on
/// `mcp-agent` alone) against the demo server, configured as `github`. The test build linked
/// it; `cargo xtask lint` checks that it builds with the facade's default features alone.
fn embed_example() -> Result<()> {
    let [cli, embed] = build_bins(["mcp-agent", "embed"])?;
    let servers = format!(
        r#"[{{"name":"github","command":{},"args":["demo-server"]}}]"#,
        serde_json::Value::String(cli.to_string_lossy().into_owned())
    );
    let out = std::process::Command::new(embed)
        .env("MCP_AGENT__SERVERS", servers)
        .output()
        .context("running examples/embed")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains("the model sees 3 tools") {
        bail!(
            "examples/embed failed ({}):\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!("examples/embed: ran the README's library example");
    Ok(())
}

fn with_peers<'a>(cmd: &'a mut Command, peers: &peers::Peers) -> &'a mut Command {
    peers.apply(cmd);
    cmd
}

fn lint() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo()
        .args(["doc", "--workspace", "--no-deps", "--all-features"])
        .env(
            "RUSTDOCFLAGS",
            "-D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links",
        ))?;
    // The README's example as a user builds it: the facade's default features, none of the
    // workspace's (the test build links and runs it with everyone's).
    run(cargo().args(["clippy", "--quiet", "-p", "embed", "--", "-D", "warnings"]))?;
    // Each transport feature of the facade on its own, and none: a deployment picks them;
    // `http` without `oauth` is static headers and bearer tokens only.
    for features in [
        &["--no-default-features"][..],
        &["--no-default-features", "--features", "stdio"],
        &["--no-default-features", "--features", "http"],
        &["--no-default-features", "--features", "oauth"],
    ] {
        run(cargo()
            .args(["check", "--quiet", "-p", "mcp-agent", "--lib"])
            .args(features))?;
    }
    Ok(())
}
