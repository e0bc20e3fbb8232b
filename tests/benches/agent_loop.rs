//! The agent loop's own cost per step: what `AgentLoop` adds on top of the model's
//! and the tools' time, on a real runner over the test kit's server.
//!
//! ```text
//! cargo xtask bench --only agent_loop     # builds mcp-test-server in release first
//! cargo bench -p integration-tests --bench agent_loop   # needs target/release/mcp-test-server
//! ```
//!
//! The model is a `ScriptedModel::from_fn` that answers at once: a call of `kit__echo` through
//! `mcp_call_tool` at each of the first `STEPS − 1` steps, then a final answer. The tools are an
//! `McpRunner` on one `mcp-test-server` over stdio, the loop's events going to the runner's
//! bus, as in `mcp-agent run`.
//!
//! - `agent_loop/run_20_steps`: one iteration is a whole run of `STEPS` steps (a new model and
//!   loop each time); per element, the time of one step.
//! - `agent_loop/direct_dispatch`: one iteration is the run's `STEPS − 1` calls made with
//!   `runner.dispatch` directly, one after the other; per element, the time of one call through
//!   the governed layer.
//! - `paired` (not criterion): the two measured back to back in rounds (a few runs, then as
//!   many direct calls as those runs made, in alternating order), so that a load changing on a
//!   shared machine weighs on both alike. Per round, the loop's own cost per step is the
//!   round's run time minus its direct time, over the steps; the figures are medians over the
//!   rounds. Printed, and written as JSON to `$MCP_AGENT_BENCH_PAIRED` when set (`cargo xtask
//!   bench` reads it).
//!
//! The run's last step makes no call, so the loop's own cost per step is
//! `(run − (STEPS − 1) × call) / STEPS`, not `run / STEPS − call`. It includes the scripted
//! model's own work (building its answer, keeping the request), an upper bound on the loop's.
//!
//! Target: the loop's own cost ≤ 1 ms per step.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{
    AgentLoop, EventSink, Message, ModelResponse, Role, Runner, ScriptedModel, ToolCall,
    ToolDispatcher,
};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use integration_tests::bench::{self, echo_args, median, runtime};
use integration_tests::harness::{Harness, object, stdio_server};
use mcp_client::McpRunner;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// Steps of one run (the loop's default step limit): `STEPS − 1` tool calls, then the answer.
const STEPS: u32 = agent_core::DEFAULT_MAX_STEPS;
/// Runs per path in one round of the paired measurement.
const RUNS_PER_ROUND: usize = 5;
/// Rounds of the paired measurement.
const ROUNDS: usize = 60;

/// The call the model asks for, and the one dispatched directly.
fn call(id: String) -> ToolCall {
    let args = json!({"tool_name": "kit__echo", "arguments": echo_args()});
    ToolCall::new(id, mcp_catalog::CALL_TOOL, object(args))
}

/// A model answering at once: a tool call while fewer than `STEPS − 1` results came back,
/// then the answer.
fn model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|request| {
        let results = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count();
        let message = if results + 1 < STEPS as usize {
            Message::tool_calls(vec![call(format!("call_{results}"))])
        } else {
            Message::assistant("done")
        };
        Ok(ModelResponse::new(message))
    }))
}

/// One test-kit server over stdio, reached through a runner.
struct Fixture {
    harness: Harness,
    runner: McpRunner,
    events: Arc<dyn EventSink>,
}

impl Fixture {
    async fn open() -> Self {
        let harness = Harness::new();
        // No collecting sink: events go to the runner's bus only (nothing kept per call).
        let spec = stdio_server("kit", &StdioServerArgs::new(Mode::Test));
        let client = harness.client_without_events(vec![spec]);
        let runner = client
            .open_runner(&harness.input())
            .await
            .expect("open_runner");
        let events = runner.governed().events();
        let fixture = Self {
            harness,
            runner,
            events,
        };
        fixture.check().await;
        fixture
    }

    /// Checks that both paths do what is measured: the call echoes, the run answers after
    /// `STEPS` steps with every result an echo.
    async fn check(&self) {
        let out = self
            .runner
            .dispatch(call("c".into()))
            .await
            .expect("direct call");
        assert_eq!(out.structured, Some(echo_args()));
        let outcome = self.agent().run(&self.runner, "echo").await.expect("a run");
        assert_eq!(outcome.steps, STEPS);
        assert_eq!(outcome.answer, "done");
        let results: Vec<&Message> = outcome
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .collect();
        assert_eq!(results.len(), STEPS as usize - 1);
        for result in results {
            assert!(
                result.content.contains("hello, server"),
                "not an echo: {}",
                result.content
            );
        }
    }

    fn agent(&self) -> AgentLoop {
        AgentLoop::new(model())
            .max_steps(STEPS)
            .event_sink(Arc::clone(&self.events))
    }

    /// `runs` whole runs, timed.
    async fn runs(&self, runs: usize) -> Duration {
        let started = Instant::now();
        for _ in 0..runs {
            let outcome = self.agent().run(&self.runner, "echo").await.expect("a run");
            black_box(outcome);
        }
        started.elapsed()
    }

    /// The calls of `runs` runs, dispatched directly, timed.
    async fn direct(&self, runs: usize) -> Duration {
        let started = Instant::now();
        for _ in 0..runs {
            for i in 0..STEPS - 1 {
                let out = self.runner.dispatch(call(format!("call_{i}"))).await;
                black_box(out.expect("a call"));
            }
        }
        started.elapsed()
    }

    async fn close(self) {
        self.runner.close().await;
        self.harness.assert_no_process_left().await;
    }
}

/// Times `iters` iterations of `body` on `rt`.
fn timed<F: Future<Output = Duration>>(
    rt: &Runtime,
    iters: u64,
    mut body: impl FnMut() -> F,
) -> Duration {
    rt.block_on(async {
        let mut took = Duration::ZERO;
        for _ in 0..iters {
            took += body().await;
        }
        took
    })
}

fn agent_loop(c: &mut Criterion) {
    let rt = runtime();
    let fixture = rt.block_on(Fixture::open());
    let mut group = c.benchmark_group("agent_loop");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(u64::from(STEPS)));
    group.bench_function(format!("run_{STEPS}_steps"), |b| {
        b.iter_custom(|iters| timed(&rt, iters, || fixture.runs(1)))
    });
    group.throughput(Throughput::Elements(u64::from(STEPS - 1)));
    group.bench_function("direct_dispatch", |b| {
        b.iter_custom(|iters| timed(&rt, iters, || fixture.direct(1)))
    });
    group.finish();
    rt.block_on(fixture.close());
}

/// The paired measurement (see the crate docs): medians over `rounds` rounds of
/// `runs` runs and their calls made directly.
fn paired(rounds: usize, runs: usize) -> Value {
    let rt = runtime();
    let figures = rt.block_on(async {
        let fixture = Fixture::open().await;
        // Warm both paths up.
        fixture.runs(runs).await;
        fixture.direct(runs).await;
        let steps = (runs * STEPS as usize) as f64;
        let calls = (runs * (STEPS as usize - 1)) as f64;
        let (mut step_us, mut call_us, mut own_us, mut ratios) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            // Alternate which path goes first.
            let (looped, direct) = if r % 2 == 0 {
                let looped = fixture.runs(runs).await;
                (looped, fixture.direct(runs).await)
            } else {
                let direct = fixture.direct(runs).await;
                (fixture.runs(runs).await, direct)
            };
            let (looped, direct) = (looped.as_secs_f64() * 1e6, direct.as_secs_f64() * 1e6);
            step_us.push(looped / steps);
            call_us.push(direct / calls);
            own_us.push((looped - direct) / steps);
            ratios.push(looped / direct);
        }
        fixture.close().await;
        let round = |x: f64, digits: i32| {
            let scale = 10f64.powi(digits);
            (x * scale).round() / scale
        };
        json!({
            "rounds": rounds,
            "runs_per_round": runs,
            "steps_per_run": STEPS,
            "loop_us_per_step": round(median(step_us), 2),
            "direct_us_per_call": round(median(call_us), 2),
            "own_us_per_step": round(median(own_us), 2),
            "loop_vs_direct": round(median(ratios), 3),
        })
    });
    println!("paired/agent_loop: {figures}");
    figures
}

criterion_group! {
    name = benches;
    // Modest samples: a shared machine with 2 cores; the whole run stays within minutes.
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = agent_loop
}

fn main() {
    benches();
    bench::run_paired(|full| {
        if full {
            paired(ROUNDS, RUNS_PER_ROUND)
        } else {
            paired(1, 1)
        }
    });
    Criterion::default().configure_from_args().final_summary();
}
