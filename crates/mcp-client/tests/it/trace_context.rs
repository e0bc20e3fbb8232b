//! W3C trace context on calls (feature `otel`): a caller's span, in a subscriber with
//! tracing-opentelemetry's layer, continues into the MCP server — the test-kit server records
//! the `_meta` `traceparent` and `tracestate` each `tools/call` carried.

use agent_core::{RunInput, Runner, ToolCall, ToolDispatcher};
use mcp_client::McpClient;
use mcp_config::Config;
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{Event, Observations, TestServer, TestServerOptions, serve_in_memory};
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::json;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

fn client(observations: &Observations) -> McpClient {
    let observations = observations.clone();
    let memory = InMemoryConnector::new().server("a", move || {
        serve_in_memory(TestServer::new(
            TestServerOptions::default().with_observations(observations.clone()),
        ))
    });
    let config = Config::new(vec![spec("a")]).expect("valid specs");
    McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
}

/// The `_meta` trace fields of each recorded call.
fn recorded(observations: &Observations) -> Vec<(Option<String>, Option<String>)> {
    observations
        .snapshot()
        .events
        .into_iter()
        .filter_map(|e| match e {
            Event::Call {
                traceparent,
                tracestate,
                ..
            } => Some((traceparent, tracestate)),
            _ => None,
        })
        .collect()
}

async fn echo(runner: &impl ToolDispatcher) {
    let call = ToolCall::from_json(
        "1",
        "mcp_call_tool",
        json!({"tool_name": "a__echo", "arguments": {"x": 1}}),
    )
    .unwrap();
    runner.dispatch(call).await.expect("the call succeeds");
}

#[tokio::test]
async fn a_callers_trace_continues_into_the_server() {
    let provider = SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    // This test's thread only (a current-thread runtime: the server's tasks run here too).
    let _default = tracing::subscriber::set_default(subscriber);

    let observations = Observations::new();
    let runner = client(&observations)
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");

    // A service's span that continues a remote trace, with vendor state.
    let trace_id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let remote = SpanContext::new(
        trace_id,
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        TraceFlags::SAMPLED,
        true,
        "vendor=abc".parse::<TraceState>().unwrap(),
    );
    let step = tracing::info_span!("agent_step");
    step.set_parent(opentelemetry::Context::new().with_remote_span_context(remote))
        .unwrap();
    let step_id = step.context().span().span_context().span_id();
    echo(&runner).instrument(step).await;

    // A span of the caller's own trace, no remote parent.
    let own = tracing::info_span!("agent_run");
    let own_trace = own.context().span().span_context().trace_id();
    echo(&runner).instrument(own).await;

    // Outside any span: nothing to continue.
    echo(&runner).await;
    runner.close().await;

    let calls = recorded(&observations);
    assert_eq!(calls.len(), 3, "{calls:?}");
    let (traceparent, tracestate) = &calls[0];
    let traceparent = traceparent.as_deref().expect("a traceparent");
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts[0], "00");
    assert_eq!(parts[1], trace_id.to_string());
    // The call's own span (`mcp_call`, a child of the caller's), not the caller's.
    assert_ne!(parts[2], step_id.to_string());
    assert_ne!(parts[2], "00f067aa0ba902b7");
    assert_eq!(parts[3], "01");
    assert_eq!(tracestate.as_deref(), Some("vendor=abc"));

    let (traceparent, tracestate) = &calls[1];
    let traceparent = traceparent.as_deref().expect("a traceparent");
    assert_eq!(
        traceparent.split('-').nth(1),
        Some(own_trace.to_string().as_str())
    );
    assert_eq!(tracestate, &None);

    // `mcp_call` is a span of its own: outside the caller's, it starts a trace.
    let (traceparent, _) = &calls[2];
    let third = traceparent.as_deref().expect("mcp_call's own trace");
    assert_ne!(third.split('-').nth(1), Some(trace_id.to_string().as_str()));
    assert_ne!(
        third.split('-').nth(1),
        Some(own_trace.to_string().as_str())
    );
}

#[tokio::test]
async fn without_a_tracer_nothing_is_added() {
    let observations = Observations::new();
    let runner = client(&observations)
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    echo(&runner)
        .instrument(tracing::info_span!("agent_step"))
        .await;
    runner.close().await;
    assert_eq!(recorded(&observations), [(None, None)]);
}

#[tokio::test]
async fn without_a_tracer_a_passed_context_reaches_the_server_unchanged() {
    const PASSED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let observations = Observations::new();
    let runner = client(&observations)
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    let context = agent_core::trace::W3cContext::parse(PASSED, Some("vendor=abc")).unwrap();
    agent_core::trace::with_context(context, echo(&runner)).await;
    echo(&runner).await;
    runner.close().await;
    assert_eq!(
        recorded(&observations),
        [
            (Some(PASSED.to_owned()), Some("vendor=abc".to_owned())),
            (None, None)
        ]
    );
}
