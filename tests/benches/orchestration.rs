//! Orchestration benchmarks: what the runner costs on top of a bare rmcp
//! client talking to the same test-kit server, and how `open_runner` scales with servers.
//!
//! ```text
//! cargo xtask bench              # builds mcp-test-server in release first; --json for figures
//! cargo bench -p integration-tests --bench orchestration   # needs target/release/mcp-test-server
//! ```
//!
//! - `calls_stdio` / `calls_http`: one iteration is 1,000 sequential `echo` calls, through the
//!   runner (`mcp_call_tool`, and the tool called first-class as `kit__echo`) and through a
//!   bare rmcp client (`rmcp::serve_client((), transport)` + `call_tool`). Over stdio the bare
//!   client spawns the same `mcp-test-server` on rmcp's own pipe transport, and a second bare
//!   client runs on the workspace's stdio transport (`StdioConnector`), which tells the
//!   transport's share from the orchestration's. Over HTTP both talk to one `serve_http`
//!   server, the bare client on the workspace's hyper client (the only streamable HTTP client
//!   here: rmcp's own needs reqwest).
//! - `in_flight_16_stdio` / `in_flight_16_http`: one iteration is 16 concurrent calls on one
//!   session.
//! - `open_runner`: the wall time of `open_runner` with 1, 8 and 32 stdio servers (closing is
//!   not timed); `open_runner_init_100ms`: the same with servers that answer `initialize`
//!   after 100 ms, like servers that wait on something; `open_bare_rmcp`: 1, 8 and 32 bare
//!   rmcp clients opened at once (spawn, initialize, list), the machine's floor.
//! - `paired` (not criterion): on a shared machine, benchmarks measured one after the other see
//!   different loads, which blurs a ratio of a few percent. So the overhead is also measured
//!   paired: rounds of 100 calls on each path, back to back in rotating order, and the median
//!   of the per-round ratios. Each round is preceded by a few untimed calls on its path, so no
//!   path is timed on the caches the path before it left (the runner's two paths share code:
//!   without them, the one that follows the other measured 3–4% faster over stdio). Over stdio
//!   the rounds also time a standalone session of the product (`Session::open_standalone`: no
//!   governed layer, no catalog), which tells the run's share from the session's
//!   (`session_vs_bare`, `runner_direct_vs_session`). Each path's context switches a call in
//!   this process (`context_switches_per_call`: voluntary, a thread that slept until woken;
//!   involuntary, one preempted) tell extra hand-offs between threads from extra work.
//! - `open` (beside `paired`): `open_runner` and bare rmcp's concurrent open of 1 and 8 stdio
//!   servers, paired the same way: one open of each per round, alternating which goes first.
//! - `in_process` (beside `paired`): the CPU per call of bare rmcp, a standalone session and
//!   the runner with the test-kit server on an in-memory pipe in the same thread
//!   ([`in_process`]), and `governed_alone`: the governed layers' CPU around a tool that
//!   answers at once. Thread CPU time, not wall time: figures the machine's load hardly moves.
//!
//! The paired and in-process figures are printed, and written as JSON to
//! `$MCP_AGENT_BENCH_PAIRED` when set (`cargo xtask bench` reads it).
//!
//! Targets: the runner's median per call ≤ 1.10× the bare client's; 8 servers open in ≤ 1.5×
//! the time of 1.

use std::hint::black_box;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{Runner, ToolCall, ToolDispatcher};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use integration_tests::bench::{self, echo_args, median, runtime, timed};
use integration_tests::harness::{self, Harness, object, stdio_server};
use mcp_client::{McpRunner, Session};
use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
use mcp_connector::{ConnectionHandle, Connector as _};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use mcp_test_kit::{HttpServer, TestServerOptions, serve_http};
use mcp_transport_http::{HttpConnector, HttpOptions};
use mcp_transport_stdio::StdioConnector;
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

#[path = "orchestration/in_process.rs"]
mod in_process;

/// Sequential calls per iteration of the `calls_*` benchmarks.
const CALLS: usize = 1_000;
/// Concurrent calls per iteration of the `in_flight_16_*` benchmarks.
const IN_FLIGHT: usize = 16;

/// One test-kit server reached through the runner and through bare rmcp clients.
struct Fixture {
    harness: Harness,
    runner: McpRunner,
    bare: RunningService<RoleClient, ()>,
    /// The bare client's server process (stdio).
    child: Option<tokio::process::Child>,
    /// Stdio: a bare rmcp client on the workspace's stdio transport (`StdioConnector`), which
    /// tells the transport's cost from the orchestration's.
    bare_product: Option<(RunningService<RoleClient, ()>, Box<dyn ConnectionHandle>)>,
    /// Stdio: a session of the product outside any run (`Session::open_standalone`: bounds
    /// and scrubbing, no governed layer, no catalog), which tells the session's cost from the
    /// run's.
    session: Option<Arc<Session>>,
    /// The shared HTTP server.
    http: Option<HttpServer>,
}

impl Fixture {
    async fn stdio() -> Self {
        let harness = Harness::new();
        let runner = open(&harness, vec![kit_stdio("kit")]).await;
        let mut child = tokio::process::Command::new(mcp_test_kit::stdio::binary())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn mcp-test-server");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let bare = rmcp::serve_client((), (stdout, stdin))
            .await
            .expect("bare rmcp handshake");
        let connection = StdioConnector::new()
            .connect(&kit_stdio("kit"))
            .await
            .expect("spawn through the stdio connector");
        let product = rmcp::serve_client((), connection.transport)
            .await
            .expect("bare rmcp handshake on the stdio transport");
        let (session, _) = Session::open_standalone(&harness.connectors(), kit_stdio("kit"))
            .await
            .expect("a standalone session");
        Self {
            harness,
            runner,
            bare,
            child: Some(child),
            bare_product: Some((product, connection.handle)),
            session: Some(session),
            http: None,
        }
    }

    async fn http() -> Self {
        let server = serve_http(TestServerOptions::default())
            .await
            .expect("the HTTP test server");
        let spec = ServerSpec::new(
            "kit",
            TransportSpec::StreamableHttp(HttpSpec::new(server.url().parse().expect("URL"))),
        );
        let harness = Harness::new();
        let runner = open(&harness, vec![spec.clone()]).await;
        let connector = HttpConnector::new(HttpOptions::default()).expect("HTTP connector");
        let transport = connector.connect(&spec).await.expect("HTTP transport");
        let bare = rmcp::serve_client((), transport.transport)
            .await
            .expect("bare rmcp handshake");
        Self {
            harness,
            runner,
            bare,
            child: None,
            bare_product: None,
            session: None,
            http: Some(server),
        }
    }

    /// Checks that every path echoes, so no benchmark measures errors.
    async fn check(&self) {
        let expected = Some(echo_args());
        let out = self
            .runner
            .dispatch(call_tool())
            .await
            .expect("runner call");
        assert_eq!(out.structured, expected);
        let out = self.runner.dispatch(direct()).await.expect("direct call");
        assert_eq!(out.structured, expected);
        let out = self.bare.call_tool(bare_params()).await.expect("bare call");
        assert_eq!(out.structured_content, expected);
        if let Some((product, _)) = &self.bare_product {
            let out = product.call_tool(bare_params()).await.expect("bare call");
            assert_eq!(out.structured_content, expected);
        }
    }

    async fn close(mut self) {
        self.runner.close().await;
        let _ = self.bare.cancel().await;
        if let Some(session) = self.session.take() {
            session.close(Duration::from_secs(2)).await;
        }
        if let Some((product, handle)) = self.bare_product.take() {
            let _ = product.cancel().await;
            handle.shutdown(Duration::from_secs(2)).await;
        }
        if let Some(mut child) = self.child.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            let _ = child.kill().await;
        }
        if let Some(http) = self.http.take() {
            http.shutdown().await;
        }
        self.harness.assert_no_process_left().await;
    }
}

fn kit_stdio(name: &str) -> ServerSpec {
    stdio_server(name, &StdioServerArgs::new(Mode::Test))
}

async fn open(harness: &Harness, specs: Vec<ServerSpec>) -> McpRunner {
    harness
        .client_without_events(specs)
        .open_runner(&harness.input())
        .await
        .expect("open_runner")
}

fn call_tool() -> ToolCall {
    let input = harness::call_tool_input("kit__echo", echo_args());
    ToolCall::new("c", mcp_catalog::CALL_TOOL, input)
}

fn direct() -> ToolCall {
    ToolCall::new("c", "kit__echo", object(echo_args()))
}

fn bare_params() -> CallToolRequestParams {
    CallToolRequestParams::new("echo").with_arguments(object(echo_args()))
}

fn sequential_calls(c: &mut Criterion, transport: &str) {
    let rt = runtime();
    let fixture = rt.block_on(async {
        let fixture = match transport {
            "stdio" => Fixture::stdio().await,
            _ => Fixture::http().await,
        };
        fixture.check().await;
        fixture
    });
    let mut group = c.benchmark_group(format!("calls_{transport}"));
    group.sampling_mode(SamplingMode::Flat);
    // Per-call figures are the iteration's time divided by this.
    group.throughput(Throughput::Elements(CALLS as u64));
    let (runner, bare) = (&fixture.runner, &fixture.bare);
    group.bench_function("bare_rmcp", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || async {
                for _ in 0..CALLS {
                    black_box(bare.call_tool(bare_params()).await.expect("call"));
                }
            })
        })
    });
    if let Some((product, _)) = &fixture.bare_product {
        group.bench_function("bare_rmcp_stdio_transport", |b| {
            b.iter_custom(|iters| {
                timed(&rt, iters, || async {
                    for _ in 0..CALLS {
                        black_box(product.call_tool(bare_params()).await.expect("call"));
                    }
                })
            })
        });
    }
    group.bench_function("runner_call_tool", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || async {
                for _ in 0..CALLS {
                    black_box(runner.dispatch(call_tool()).await.expect("call"));
                }
            })
        })
    });
    group.bench_function("runner_direct", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || async {
                for _ in 0..CALLS {
                    black_box(runner.dispatch(direct()).await.expect("call"));
                }
            })
        })
    });
    group.finish();
    rt.block_on(fixture.close());
}

fn concurrent_calls(c: &mut Criterion, transport: &str) {
    let rt = runtime();
    let fixture = rt.block_on(async {
        let fixture = match transport {
            "stdio" => Fixture::stdio().await,
            _ => Fixture::http().await,
        };
        fixture.check().await;
        fixture
    });
    let mut group = c.benchmark_group(format!("in_flight_16_{transport}"));
    group.throughput(Throughput::Elements(IN_FLIGHT as u64));
    let (runner, bare) = (&fixture.runner, &fixture.bare);
    group.bench_function("bare_rmcp", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || async {
                let calls = (0..IN_FLIGHT).map(|_| bare.call_tool(bare_params()));
                for out in futures::future::join_all(calls).await {
                    black_box(out.expect("call"));
                }
            })
        })
    });
    group.bench_function("runner_call_tool", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || async {
                let calls = (0..IN_FLIGHT).map(|_| runner.dispatch(call_tool()));
                for out in futures::future::join_all(calls).await {
                    black_box(out.expect("call"));
                }
            })
        })
    });
    group.finish();
    rt.block_on(fixture.close());
}

fn calls(c: &mut Criterion) {
    sequential_calls(c, "stdio");
    sequential_calls(c, "http");
    concurrent_calls(c, "stdio");
    concurrent_calls(c, "http");
}

/// Opens `servers` bare rmcp clients at once (spawn, initialize, list every tool), as a
/// floor for `open_runner`: what the machine needs to start that many servers.
async fn open_bare(servers: usize) -> Vec<(RunningService<RoleClient, ()>, tokio::process::Child)> {
    let opens = (0..servers).map(|_| async {
        let mut child = tokio::process::Command::new(mcp_test_kit::stdio::binary())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn mcp-test-server");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let client = rmcp::serve_client((), (stdout, stdin))
            .await
            .expect("bare rmcp handshake");
        black_box(client.list_all_tools().await.expect("tools/list"));
        (client, child)
    });
    futures::future::join_all(opens).await
}

/// Ends what [`open_bare`] opened (not timed).
async fn close_bare(clients: Vec<(RunningService<RoleClient, ()>, tokio::process::Child)>) {
    for (client, mut child) in clients {
        let _ = client.cancel().await;
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        let _ = child.kill().await;
    }
}

/// `open_runner` with 1, 8 and 32 stdio servers (`init_delay`: each answers `initialize` that
/// late, as servers that wait on something do), and the bare floor without delay.
fn opening(c: &mut Criterion) {
    let rt = runtime();
    let variants = [
        ("open_runner", None),
        ("open_runner_init_100ms", Some(Duration::from_millis(100))),
    ];
    for (name, init_delay) in variants {
        let mut group = c.benchmark_group(name);
        group.sampling_mode(SamplingMode::Flat);
        for servers in [1_usize, 8, 32] {
            let harness = Harness::new();
            let args = match init_delay {
                Some(delay) => StdioServerArgs::new(Mode::Test).with_init_delay(delay),
                None => StdioServerArgs::new(Mode::Test),
            };
            let specs = (0..servers)
                .map(|i| stdio_server(&format!("s{i}"), &args))
                .collect();
            let client = harness.client_without_events(specs);
            group.bench_function(format!("stdio_{servers}"), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut took = Duration::ZERO;
                        for _ in 0..iters {
                            let started = Instant::now();
                            let runner = client
                                .open_runner(&harness.input())
                                .await
                                .expect("open_runner");
                            took += started.elapsed();
                            assert_eq!(runner.sessions().len(), servers);
                            runner.close().await;
                        }
                        took
                    })
                })
            });
            rt.block_on(harness.assert_no_process_left());
        }
        group.finish();
    }

    let mut group = c.benchmark_group("open_bare_rmcp");
    group.sampling_mode(SamplingMode::Flat);
    for servers in [1_usize, 8, 32] {
        group.bench_function(format!("stdio_{servers}"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut took = Duration::ZERO;
                    for _ in 0..iters {
                        let started = Instant::now();
                        let clients = open_bare(servers).await;
                        took += started.elapsed();
                        close_bare(clients).await;
                    }
                    took
                })
            })
        });
    }
    group.finish();
}

/// The open measured paired: `open_runner` and bare rmcp's concurrent open of the same number
/// of stdio servers, one of each per round in alternating order; the medians and the median of
/// the per-round ratios. Criterion's `open_runner` and `open_bare_rmcp` groups run minutes
/// apart, and on a shared machine their ratio moves with the load between them.
fn paired_open(rounds: usize) -> Value {
    let rt = runtime();
    let mut out = serde_json::Map::new();
    for servers in [1_usize, 8] {
        let harness = Harness::new();
        let args = StdioServerArgs::new(Mode::Test);
        let specs = (0..servers)
            .map(|i| stdio_server(&format!("s{i}"), &args))
            .collect();
        let client = harness.client_without_events(specs);
        let (runner_ms, bare_ms) = rt.block_on(async {
            let open_runner = || async {
                let started = Instant::now();
                let runner = client
                    .open_runner(&harness.input())
                    .await
                    .expect("open_runner");
                let took = started.elapsed();
                assert_eq!(runner.sessions().len(), servers);
                runner.close().await;
                took.as_secs_f64() * 1e3
            };
            let open_bare_once = || async {
                let started = Instant::now();
                let clients = open_bare(servers).await;
                let took = started.elapsed();
                close_bare(clients).await;
                took.as_secs_f64() * 1e3
            };
            // Warm both up (page cache, the first re-exec of the supervisor).
            open_runner().await;
            open_bare_once().await;
            let (mut runner_ms, mut bare_ms) = (Vec::new(), Vec::new());
            for r in 0..rounds {
                if r % 2 == 0 {
                    runner_ms.push(open_runner().await);
                    bare_ms.push(open_bare_once().await);
                } else {
                    bare_ms.push(open_bare_once().await);
                    runner_ms.push(open_runner().await);
                }
            }
            (runner_ms, bare_ms)
        });
        rt.block_on(harness.assert_no_process_left());
        let ratios = runner_ms.iter().zip(&bare_ms).map(|(r, b)| r / b).collect();
        out.insert(
            format!("stdio_{servers}"),
            json!({
                "rounds": rounds,
                "open_runner_ms": median(runner_ms),
                "open_bare_rmcp_ms": median(bare_ms),
                "runner_vs_bare": median(ratios),
            }),
        );
    }
    Value::Object(out)
}

/// Calls per path in one round of the paired measurement.
const ROUND: usize = 100;
/// Untimed calls on a path right before each of its timed rounds.
const ROUND_WARM_UP: usize = 5;
/// Rounds of the paired measurement.
const ROUNDS: usize = 30;

/// The ways to call `echo` on one fixture.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    Bare,
    CallTool,
    Direct,
    /// Stdio only: bare rmcp on the workspace's stdio transport.
    BareProduct,
    /// Stdio only: a standalone session of the product.
    Session,
}

impl Path {
    /// The path's name in the figures.
    fn key(self) -> &'static str {
        match self {
            Path::Bare => "bare_rmcp",
            Path::CallTool => "runner_call_tool",
            Path::Direct => "runner_direct",
            Path::BareProduct => "bare_rmcp_stdio_transport",
            Path::Session => "session",
        }
    }
}

impl Fixture {
    /// `calls` sequential calls on `path`, timed.
    async fn time(&self, path: Path, calls: usize) -> Duration {
        let started = Instant::now();
        for _ in 0..calls {
            match path {
                Path::Bare => {
                    black_box(self.bare.call_tool(bare_params()).await.expect("call"));
                }
                Path::CallTool => {
                    black_box(self.runner.dispatch(call_tool()).await.expect("call"));
                }
                Path::Direct => {
                    black_box(self.runner.dispatch(direct()).await.expect("call"));
                }
                Path::BareProduct => {
                    let (product, _) = self.bare_product.as_ref().expect("a stdio fixture");
                    black_box(product.call_tool(bare_params()).await.expect("call"));
                }
                Path::Session => {
                    let session = self.session.as_ref().expect("a stdio fixture");
                    let arguments = object(echo_args());
                    black_box(session.call_tool("echo", arguments).await.expect("call"));
                }
            }
        }
        started.elapsed()
    }
}

/// The paired overhead measurement (see the crate docs), per transport: median per-call times
/// and the median of the per-round ratios.
fn paired(rounds: usize, round: usize, warm_up: usize) -> Value {
    let rt = runtime();
    let mut out = serde_json::Map::new();
    for transport in ["stdio", "http"] {
        let figures = rt.block_on(async {
            let fixture = match transport {
                "stdio" => Fixture::stdio().await,
                _ => Fixture::http().await,
            };
            fixture.check().await;
            let mut paths = vec![Path::Bare, Path::CallTool, Path::Direct];
            if fixture.bare_product.is_some() {
                paths.push(Path::BareProduct);
            }
            if fixture.session.is_some() {
                paths.push(Path::Session);
            }
            // Warm every path up.
            for &path in &paths {
                fixture.time(path, round).await;
            }
            let mut times: [Vec<f64>; 5] = Default::default();
            let mut switches = [(0u64, 0u64); 5];
            for r in 0..rounds {
                // Rotate the order so no path always runs first (or last) in a round.
                for i in 0..paths.len() {
                    let path = paths[(i + r) % paths.len()];
                    fixture.time(path, warm_up).await;
                    let before = bench::context_switches();
                    let took = fixture.time(path, round).await.as_secs_f64();
                    let after = bench::context_switches();
                    let total = &mut switches[path as usize];
                    total.0 += after.0 - before.0;
                    total.1 += after.1 - before.1;
                    times[path as usize].push(took * 1e6 / round as f64);
                }
            }
            fixture.close().await;
            let per_call = |p: Path| median(times[p as usize].clone());
            // This process's context switches a call, per path: over stdio the client's alone,
            // over HTTP the in-process server's too.
            let calls = (rounds * round) as f64;
            let switches_per_call: serde_json::Map<String, Value> = paths
                .iter()
                .map(|&p| {
                    let (voluntary, involuntary) = switches[p as usize];
                    let figures = json!({
                        "voluntary": voluntary as f64 / calls,
                        "involuntary": involuntary as f64 / calls,
                    });
                    (p.key().to_owned(), figures)
                })
                .collect();
            let ratio = |p: Path, base: Path| {
                median(
                    times[p as usize]
                        .iter()
                        .zip(&times[base as usize])
                        .map(|(x, b)| x / b)
                        .collect(),
                )
            };
            let mut figures = json!({
                "rounds": rounds,
                "calls_per_round": round,
                "bare_rmcp_us_per_call": per_call(Path::Bare),
                "runner_call_tool_us_per_call": per_call(Path::CallTool),
                "runner_direct_us_per_call": per_call(Path::Direct),
                "overhead_call_tool": ratio(Path::CallTool, Path::Bare),
                "overhead_direct": ratio(Path::Direct, Path::Bare),
                "context_switches_per_call": switches_per_call,
            });
            if paths.contains(&Path::BareProduct) {
                figures["bare_rmcp_stdio_transport_us_per_call"] =
                    json!(per_call(Path::BareProduct));
                figures["transport_vs_bare"] = json!(ratio(Path::BareProduct, Path::Bare));
                figures["orchestration_call_tool_vs_transport"] =
                    json!(ratio(Path::CallTool, Path::BareProduct));
                figures["orchestration_direct_vs_transport"] =
                    json!(ratio(Path::Direct, Path::BareProduct));
            }
            if paths.contains(&Path::Session) {
                figures["session_us_per_call"] = json!(per_call(Path::Session));
                figures["session_vs_bare"] = json!(ratio(Path::Session, Path::Bare));
                figures["runner_direct_vs_session"] = json!(ratio(Path::Direct, Path::Session));
            }
            figures
        });
        println!("paired/{transport}: {figures}");
        out.insert(transport.to_owned(), figures);
    }
    Value::Object(out)
}

criterion_group! {
    name = benches;
    // Modest samples: a shared machine with 2 cores; the whole run stays within minutes.
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = calls, opening
}

/// Rounds of the in-process CPU measurement, and calls per path in each.
const IN_PROCESS_ROUNDS: usize = 10;
const IN_PROCESS_CALLS: usize = 2_000;
/// Rounds of the paired open (each opens and closes both ways once).
const OPEN_ROUNDS: usize = 40;

fn main() {
    benches();
    bench::run_paired(|full| {
        let (mut figures, in_process, governed, open) = if full {
            (
                paired(ROUNDS, ROUND, ROUND_WARM_UP),
                in_process::measure(IN_PROCESS_ROUNDS, IN_PROCESS_CALLS),
                in_process::governed_alone(100_000),
                paired_open(OPEN_ROUNDS),
            )
        } else {
            (
                paired(1, 5, 1),
                in_process::measure(1, 5),
                in_process::governed_alone(10),
                paired_open(1),
            )
        };
        println!("paired/in_process: {in_process}");
        println!("paired/governed_alone: {governed}");
        println!("paired/open: {open}");
        figures["in_process"] = in_process;
        figures["governed_alone"] = governed;
        figures["open"] = open;
        figures
    });
    Criterion::default().configure_from_args().final_summary();
}
