//! The CPU each path spends per call, with the server in the same thread: a test-kit server on
//! an in-memory pipe and every client on one current-thread runtime, timed by the thread's
//! CPU clock (`CLOCK_THREAD_CPUTIME_ID`). Nothing waits on another thread or process, so the
//! figures are the work itself (the client's and the server's, the same server on every path),
//! which other load on the machine does not blur the way it blurs wall time.

use std::hint::black_box;
use std::time::Duration;

use agent_core::{Runner, ToolCall, ToolDispatcher};
use integration_tests::bench::{echo_args, median};
use integration_tests::harness::{Harness, object};
use mcp_client::{McpClient, Session};
use mcp_config::Config;
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use nix::time::{ClockId, clock_gettime};
use serde_json::{Value, json};

use super::{bare_params, call_tool, direct};

/// The paths measured, in the order of the figures.
const PATHS: [&str; 4] = ["bare_rmcp", "session", "runner_direct", "runner_call_tool"];

/// This thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`: nanoseconds, not the scheduler
/// ticks `getrusage` counts in).
fn thread_cpu() -> Duration {
    let now = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("the thread's CPU clock");
    Duration::from(now)
}

/// Rounds of `calls` calls on each path, in rotating order: the median CPU µs per call of each
/// path and the median of its per-round ratios to bare rmcp.
pub(super) fn measure(rounds: usize, calls: usize) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    rt.block_on(async {
        let serve = || serve_in_memory(TestServer::new(TestServerOptions::default()));
        let connectors = Connectors::new().with(InMemoryConnector::new().server("kit", serve));
        let config = Config::new(vec![spec("kit")]).expect("a valid spec");
        let runner = McpClient::builder(config)
            .connectors(connectors.clone())
            .build()
            .open_runner(&Harness::new().input())
            .await
            .expect("open_runner in memory");
        let (session, _) = Session::open_standalone(&connectors, spec("kit"))
            .await
            .expect("a standalone session in memory");
        let bare = rmcp::serve_client((), serve())
            .await
            .expect("bare rmcp handshake in memory");
        let time = async |path: usize| {
            let started = thread_cpu();
            for _ in 0..calls {
                match path {
                    0 => drop(black_box(
                        bare.call_tool(bare_params()).await.expect("call"),
                    )),
                    1 => drop(black_box(
                        session
                            .call_tool("echo", object(echo_args()))
                            .await
                            .expect("call"),
                    )),
                    2 => drop(black_box(runner.dispatch(direct()).await.expect("call"))),
                    _ => drop(black_box(runner.dispatch(call_tool()).await.expect("call"))),
                }
            }
            (thread_cpu() - started).as_secs_f64() * 1e6 / calls as f64
        };
        for path in 0..PATHS.len() {
            time(path).await;
        }
        let mut times: [Vec<f64>; 4] = Default::default();
        for round in 0..rounds {
            for i in 0..PATHS.len() {
                let path = (i + round) % PATHS.len();
                times[path].push(time(path).await);
            }
        }
        runner.close().await;
        session.close(Duration::from_secs(2)).await;
        let _ = bare.cancel().await;
        let mut figures = json!({"rounds": rounds, "calls_per_round": calls});
        for (path, name) in PATHS.iter().enumerate() {
            figures[format!("{name}_cpu_us_per_call")] = json!(median(times[path].clone()));
            if path > 0 {
                let ratios = times[path].iter().zip(&times[0]).map(|(x, b)| x / b);
                figures[format!("{name}_vs_bare")] = json!(median(ratios.collect()));
            }
        }
        let ratios = times[2].iter().zip(&times[1]).map(|(x, s)| x / s);
        figures["runner_direct_vs_session"] = json!(median(ratios.collect()));
        figures
    })
}

/// The governed layers alone: their CPU per call around a tool that answers at once, against
/// the tool called directly (same runtime, same thread).
pub(super) fn governed_alone(calls: usize) -> Value {
    use agent_core::{AsNative, GovernedLayer, ToolError, ToolOutput};
    use async_trait::async_trait;

    struct Echo;
    #[async_trait]
    impl ToolDispatcher for Echo {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::structured(call.arguments.into()))
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let governed = GovernedLayer::new().layer(AsNative::new(Echo));
    let call = || ToolCall::new("c", "echo", object(echo_args()));
    rt.block_on(async {
        let mut direct_us = Vec::new();
        let mut governed_us = Vec::new();
        for _ in 0..5 {
            let started = thread_cpu();
            for _ in 0..calls {
                drop(black_box(Echo.dispatch(call()).await));
            }
            direct_us.push((thread_cpu() - started).as_secs_f64() * 1e6 / calls as f64);
            let started = thread_cpu();
            for _ in 0..calls {
                drop(black_box(governed.dispatch(call()).await));
            }
            governed_us.push((thread_cpu() - started).as_secs_f64() * 1e6 / calls as f64);
        }
        let (direct_us, governed_us) = (median(direct_us), median(governed_us));
        json!({
            "calls": calls,
            "tool_cpu_us_per_call": direct_us,
            "governed_cpu_us_per_call": governed_us,
            "layers_cpu_us_per_call": governed_us - direct_us,
        })
    })
}
