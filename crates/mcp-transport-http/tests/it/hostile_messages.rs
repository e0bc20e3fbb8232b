//! Messages a server makes too large or too deeply nested fail the pending request at once,
//! with an error naming the server, the size or depth and the limit — never a silent drop
//! that leaves the caller waiting for its timeout.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Script, echo, json_answer, scripted, serve, sse_answer, stalling};
use http::request::Parts;
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use serde_json::{Value, json};

const LIMIT: usize = 64 * 1024;

/// The bound on one failing request: far below any caller's timeout, far above the time a
/// prompt failure takes. Only a safety net: a silent drop would wait here.
const PROMPT: Duration = Duration::from_secs(5);

/// The error and its causes, joined.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(" <- ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn options() -> HttpOptions {
    HttpOptions::default()
        .with_max_response_bytes(LIMIT)
        .with_max_sse_event_bytes(LIMIT)
}

/// A JSON-RPC result for request `id` whose `structuredContent` nests `depth` arrays.
fn deep_result(id: &Value, depth: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"x":{}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// A JSON-RPC result for request `id` with a text of `bytes` bytes.
fn big_result(id: &Value, bytes: usize) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": { "content": [{ "type": "text", "text": "x".repeat(bytes) }] }
    })
}

/// A server answering `rpc` with `answer(id)`, everything else as `scripted` does.
fn answering(
    rpc: &'static str,
    answer: impl Fn(&Value) -> http::Response<common::Body> + Send + Sync + 'static,
) -> Script {
    Arc::new(move |_: &Parts, message: &Value| {
        (message["method"] == rpc).then(|| answer(&message["id"]))
    })
}

/// Connects to a server running `script`, calls `echo` and returns the error's chain and
/// how long the call took to fail.
async fn failing_call(script: Script) -> (String, Duration) {
    let server = serve(scripted(script)).await;
    let connector = HttpConnector::new(options()).unwrap();
    let connection = connector.connect(&server.spec("hostile")).await.unwrap();
    let client = rmcp::serve_client((), connection.transport).await.unwrap();
    let started = Instant::now();
    let err = tokio::time::timeout(PROMPT, client.peer().call_tool(echo("x")))
        .await
        .expect("the call fails at once")
        .unwrap_err();
    let took = started.elapsed();
    drop(client);
    (chain(&err), took)
}

/// Connects to a server running `script` and returns the handshake's error chain.
async fn failing_handshake(script: Script) -> String {
    let server = serve(scripted(script)).await;
    let connector = HttpConnector::new(options()).unwrap();
    let connection = connector.connect(&server.spec("hostile")).await.unwrap();
    let err = tokio::time::timeout(PROMPT, rmcp::serve_client((), connection.transport))
        .await
        .expect("the handshake fails at once")
        .unwrap_err();
    chain(&err)
}

fn assert_names(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
}

#[tokio::test]
async fn oversized_json_answer_fails_the_call_naming_its_size_and_the_limit() {
    let sent = Arc::new(AtomicUsize::new(0));
    let size = sent.clone();
    let (text, _) = failing_call(answering("tools/call", move |id| {
        let body = big_result(id, 4 * LIMIT).to_string();
        size.store(body.len(), Ordering::SeqCst);
        common::respond(http::StatusCode::OK, "application/json", body)
    }))
    .await;
    let sent = sent.load(Ordering::SeqCst);
    assert_names(
        &text,
        &[&format!(
            "server `hostile`: the HTTP response body of {sent} bytes exceeds the limit of {LIMIT} bytes"
        )],
    );
}

#[tokio::test]
async fn oversized_json_answer_without_length_fails_once_the_limit_is_passed() {
    // The body never ends: only the limit can end the wait.
    let (text, took) = failing_call(answering("tools/call", |_| {
        stalling("application/json", vec![b' '; LIMIT + 1])
    }))
    .await;
    assert_names(
        &text,
        &["server `hostile`", &format!("the limit of {LIMIT} bytes")],
    );
    assert!(took < PROMPT, "{took:?}");
}

#[tokio::test]
async fn oversized_sse_event_fails_once_the_limit_is_passed() {
    // An event larger than the limit that never ends: before, it was held back until its
    // end, so the call waited for its timeout.
    let (text, took) = failing_call(answering("tools/call", |_| {
        stalling(
            "text/event-stream",
            format!("data: {}", "x".repeat(LIMIT + 1)),
        )
    }))
    .await;
    assert_names(
        &text,
        &[
            "server `hostile`",
            &format!("exceeds the limit of {LIMIT} bytes"),
        ],
    );
    assert!(took < PROMPT, "{took:?}");
}

#[tokio::test]
async fn oversized_initialize_answer_fails_the_handshake() {
    for sse in [false, true] {
        let text = failing_handshake(answering("initialize", move |id| {
            let message = big_result(id, 2 * LIMIT);
            if sse {
                sse_answer(&message)
            } else {
                json_answer(&message)
            }
        }))
        .await;
        assert_names(&text, &["server `hostile`", &format!("{LIMIT} bytes")]);
    }
}

#[tokio::test]
async fn deeply_nested_json_answer_fails_the_call_naming_depth_and_limit() {
    let (text, _) = failing_call(answering("tools/call", |id| {
        common::respond(
            http::StatusCode::OK,
            "application/json",
            deep_result(id, 10_000),
        )
    }))
    .await;
    assert_names(&text, &["server `hostile`", "10003 levels", "127"]);
}

#[tokio::test]
async fn deeply_nested_sse_event_fails_the_call_naming_depth_and_limit() {
    // The stream stays open after the event: only the event itself can end the wait.
    let (text, took) = failing_call(answering("tools/call", |id| {
        stalling(
            "text/event-stream",
            format!("data: {}\n\n", deep_result(id, 10_000)),
        )
    }))
    .await;
    assert_names(&text, &["server `hostile`", "10003 levels", "127"]);
    assert!(took < PROMPT, "{took:?}");
}

#[tokio::test]
async fn deeply_nested_initialize_answer_fails_the_handshake() {
    for sse in [false, true] {
        let text = failing_handshake(answering("initialize", move |id| {
            let body = deep_result(id, 10_000);
            if sse {
                common::respond(
                    http::StatusCode::OK,
                    "text/event-stream",
                    format!("data: {body}\n\n"),
                )
            } else {
                common::respond(http::StatusCode::OK, "application/json", body)
            }
        }))
        .await;
        assert_names(&text, &["server `hostile`", "10003 levels", "127"]);
    }
}

#[tokio::test]
async fn nesting_up_to_the_limit_is_accepted() {
    // 127 levels from the top of the message: the most serde_json parses.
    let server = serve(scripted(answering("tools/call", |id| {
        common::respond(
            http::StatusCode::OK,
            "application/json",
            deep_result(id, 124),
        )
    })))
    .await;
    let connector = HttpConnector::new(options()).unwrap();
    let connection = connector.connect(&server.spec("deep")).await.unwrap();
    let client = rmcp::serve_client((), connection.transport).await.unwrap();
    let result = tokio::time::timeout(PROMPT, client.peer().call_tool(echo("x")))
        .await
        .unwrap()
        .unwrap();
    assert!(result.structured_content.is_some());
}
