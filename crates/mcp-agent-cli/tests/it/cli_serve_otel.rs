//! `mcp-agent serve` with traces (feature `otel`): the real gateway exporting to a test OTLP
//! receiver (`mcp_test_kit::otlp`, decoding OTLP's protobuf), in front of the test-kit server
//! recording the `_meta` of each call. A downstream `traceparent` — HTTP header or `_meta`
//! (SEP-414) — parents the gateway's spans, and the upstream call carries the same trace id
//! with the gateway's own span id; a malformed one starts a new trace and the call succeeds;
//! without an endpoint nothing is exported, no exporter thread runs, and the caller's context
//! passes through to the upstream unchanged.

use mcp_test_kit::otlp::{OtlpReceiver, ReceivedSpan};
use mcp_test_kit::{Event, RecordFile};
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, LIMIT, kit_config, request};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PARENT_ID}-01")
}

/// A stateless `tools/call` of the kit's `echo` through `mcp_call_tool`, with `headers` and
/// `meta` merged into its `_meta`: the JSON-RPC result.
fn call(addr: &str, headers: &[(&str, &str)], meta: Value) -> Value {
    let mut full_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    full_meta
        .as_object_mut()
        .unwrap()
        .extend(meta.as_object().cloned().unwrap_or_default());
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": "kit__echo", "arguments": {"said": "hi"}},
            "_meta": full_meta,
        },
    });
    let mut all = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "mcp_call_tool"),
    ];
    all.extend_from_slice(headers);
    let (status, _, text) = request(addr, "POST", &all, body.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    let answer: Value = text
        .lines()
        .filter_map(|line| serde_json::from_str(line.trim_start_matches("data:").trim()).ok())
        .find(|m: &Value| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {text}"));
    assert!(answer.get("error").is_none(), "{answer}");
    assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    answer["result"].clone()
}

/// The `traceparent` of the upstream's one recorded `echo` call (`_meta`), split into trace
/// id and span id.
fn upstream_traceparent(record: &RecordFile) -> Option<(String, String)> {
    let calls: Vec<Option<String>> = record
        .snapshot()
        .events
        .into_iter()
        .filter_map(|e| match e {
            Event::Call {
                tool, traceparent, ..
            } if tool == "echo" => Some(traceparent),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let traceparent = calls.into_iter().next().unwrap()?;
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00", "{traceparent}");
    Some((parts[1].to_owned(), parts[2].to_owned()))
}

/// A gateway exporting to `receiver` every 50 ms.
fn traced_gateway(receiver: &OtlpReceiver) -> (tempfile::TempDir, Gateway, RecordFile) {
    let (dir, path, record) = kit_config("");
    let gateway = Gateway::start(
        &path,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_SERVICE_NAME", "gateway-under-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    (dir, gateway, record)
}

/// Waits for the gateway's call span and the client span of its upstream call in `trace`.
async fn spans_of(receiver: &OtlpReceiver, trace: &str) -> (ReceivedSpan, ReceivedSpan) {
    let named = |spans: &[ReceivedSpan], name: &str| {
        spans
            .iter()
            .find(|s| s.trace_id == trace && s.name == name)
            .cloned()
    };
    let spans = receiver
        .wait_for(LIMIT, |spans| {
            named(spans, "mcp_serve_call").is_some() && named(spans, "mcp_call").is_some()
        })
        .await
        .unwrap_or_else(|| panic!("no spans of trace {trace}: {:?}", receiver.spans()));
    let served = named(&spans, "mcp_serve_call").unwrap();
    let upstream = named(&spans, "mcp_call").unwrap();
    assert_eq!(served.service_name.as_deref(), Some("gateway-under-test"));
    (served, upstream)
}

/// The span chain: the upstream call's span descends from the gateway's call span, and the
/// upstream received the span id of the upstream call's span.
fn assert_chain(
    served: &ReceivedSpan,
    upstream: &ReceivedSpan,
    sent_span_id: &str,
    all: &[ReceivedSpan],
) {
    assert_eq!(upstream.span_id, sent_span_id, "{all:?}");
    assert_eq!(upstream.attribute("tool"), Some("echo"), "{upstream:?}");
    // mcp_call's ancestors lead to mcp_serve_call.
    let mut at = upstream.clone();
    for _ in 0..16 {
        if at.span_id == served.span_id {
            return;
        }
        at = all
            .iter()
            .find(|s| s.span_id == at.parent_span_id)
            .cloned()
            .unwrap_or_else(|| panic!("{at:?}'s parent was not received: {all:?}"));
    }
    panic!("mcp_call does not descend from mcp_serve_call: {all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_header_parents_the_gateways_spans_and_reaches_the_upstream() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let (_dir, gateway, record) = traced_gateway(&receiver);
    let addr = gateway.addr();
    let tp = traceparent();
    let result = tokio::task::spawn_blocking(move || {
        call(
            &addr,
            &[("traceparent", &tp), ("tracestate", "vendor=x")],
            json!({}),
        )
    })
    .await
    .unwrap();
    assert_eq!(result["structuredContent"]["said"], "hi", "{result}");
    let (trace, span) = upstream_traceparent(&record).expect("a traceparent upstream");
    assert_eq!(trace, TRACE_ID);
    assert_ne!(span, PARENT_ID);
    let (served, upstream) = spans_of(&receiver, TRACE_ID).await;
    assert_eq!(served.parent_span_id, PARENT_ID);
    assert_chain(&served, &upstream, &span, &receiver.spans());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_in_meta_parents_the_gateways_spans_and_reaches_the_upstream() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let (_dir, gateway, record) = traced_gateway(&receiver);
    let addr = gateway.addr();
    let result = tokio::task::spawn_blocking(move || {
        call(&addr, &[], json!({"traceparent": traceparent()}))
    })
    .await
    .unwrap();
    assert_eq!(result["structuredContent"]["said"], "hi", "{result}");
    let (trace, span) = upstream_traceparent(&record).expect("a traceparent upstream");
    assert_eq!(trace, TRACE_ID);
    assert_ne!(span, PARENT_ID);
    let (served, upstream) = spans_of(&receiver, TRACE_ID).await;
    assert_eq!(served.parent_span_id, PARENT_ID);
    assert_chain(&served, &upstream, &span, &receiver.spans());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_traceparent_starts_a_new_trace_and_the_call_succeeds() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let (_dir, gateway, record) = traced_gateway(&receiver);
    let addr = gateway.addr();
    let oversized_state = format!("k={}", "v".repeat(10_000));
    let result = tokio::task::spawn_blocking(move || {
        call(
            &addr,
            &[("tracestate", &oversized_state)],
            json!({"traceparent": format!("00-{TRACE_ID}-zz{}-01", &PARENT_ID[2..])}),
        )
    })
    .await
    .unwrap();
    assert_eq!(result["structuredContent"]["said"], "hi", "{result}");
    let (trace, span) = upstream_traceparent(&record).expect("a traceparent upstream");
    assert_ne!(trace, TRACE_ID);
    let (served, upstream) = spans_of(&receiver, &trace).await;
    assert_eq!(served.parent_span_id, "", "a new trace: {served:?}");
    assert_chain(&served, &upstream, &span, &receiver.spans());
}

/// The names of the gateway's threads.
fn threads(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_exported_and_the_context_passes_through() {
    let receiver = OtlpReceiver::start().await.unwrap();
    // The positive control: with an endpoint, the exporter's threads run.
    let (_dir, traced, _record) = traced_gateway(&receiver);
    let names = threads(traced.pid());
    assert!(names.iter().any(|n| n == "otlp-export"), "{names:?}");
    drop(traced);

    let (_dir, path, record) = kit_config("");
    let gateway = Gateway::start(
        &path,
        &[
            ("OTEL_SERVICE_NAME", "gateway-under-test"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
        ],
    );
    let addr = gateway.addr();
    let result = tokio::task::spawn_blocking(move || {
        call(&addr, &[("traceparent", &traceparent())], json!({}))
    })
    .await
    .unwrap();
    assert_eq!(result["structuredContent"]["said"], "hi", "{result}");
    // No tracer here: the caller's context reaches the upstream unchanged (its own span id,
    // no gateway span between them).
    assert_eq!(
        upstream_traceparent(&record),
        Some((TRACE_ID.to_owned(), PARENT_ID.to_owned()))
    );
    let names = threads(gateway.pid());
    assert!(
        !names
            .iter()
            .any(|n| n == "otlp-export" || n.starts_with("OpenTelemetry")),
        "{names:?}"
    );
    assert!(
        !gateway.head.iter().any(|l| l.contains("trace")),
        "{:?}",
        gateway.head
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spans_still_queued_are_flushed_when_the_gateway_stops() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let receiver = OtlpReceiver::start().await.unwrap();
    let (_dir, path, _record) = kit_config("");
    // An hour between scheduled exports: only the flush at shutdown sends the call's spans.
    let mut gateway = Gateway::start(
        &path,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "3600000"),
        ],
    );
    let addr = gateway.addr();
    tokio::task::spawn_blocking(move || call(&addr, &[("traceparent", &traceparent())], json!({})))
        .await
        .unwrap();
    assert!(receiver.spans().is_empty(), "{:?}", receiver.spans());
    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    let code = tokio::task::spawn_blocking(move || gateway.exit_code())
        .await
        .unwrap();
    assert_eq!(code, Some(0));
    // Sent before the process exited.
    let spans = receiver.spans();
    let served = spans
        .iter()
        .find(|s| s.trace_id == TRACE_ID && s.name == "mcp_serve_call")
        .unwrap_or_else(|| panic!("{spans:?}"));
    assert_eq!(served.service_name.as_deref(), Some("mcp-agent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_call_exports_its_span_and_passes_its_context_upstream() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let (_dir, path, record) = kit_config("");
    let endpoint = receiver.endpoint().to_owned();
    // The default schedule (5 s): what arrives was flushed when the command ended.
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
            .args([
                "tools",
                "call",
                "kit__echo",
                r#"{"said": "hi"}"#,
                "--yes",
                "--file",
            ])
            .arg(&path)
            .env_clear()
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env("OTEL_SERVICE_NAME", "one-shot")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (trace, span) = upstream_traceparent(&record).expect("a traceparent upstream");
    let spans = receiver.spans();
    let call = spans
        .iter()
        .find(|s| s.name == "mcp_call" && s.span_id == span)
        .unwrap_or_else(|| panic!("{spans:?}"));
    assert_eq!(call.trace_id, trace);
    assert_eq!(call.service_name.as_deref(), Some("one-shot"));
}
