//! SEP-2243 over HTTP: a served tool declaring `x-mcp-header` has its `Mcp-Param-*` header
//! checked against the call's arguments before the call reaches the dispatcher — a match
//! (literal or `=?base64?...?=`) runs, a missing, malformed or differing header is `400` with
//! JSON-RPC error `-32020` naming the header and the tool; our own client's calls pass.
//! Per-session tools (a gateway's) are checked the same way once the request has opened
//! them, and a 2025-11-25 session is not held to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{
    Exposure, HttpOptions, HttpServer, OpenError, OpenTools, SessionTools, ToolServer,
};
use serde_json::{Value, json};

use crate::support::{
    POST_HEADERS, call_through, initialize_body, mcp_client_http, object, send, stateless_call,
};

/// One tool, `route`, whose `region` is mirrored into `Mcp-Param-Region`.
#[derive(Default)]
struct Routed {
    calls: Arc<AtomicUsize>,
}

impl ToolCatalog for Routed {
    fn tools(&self) -> Vec<ToolDescriptor> {
        vec![ToolDescriptor::new(
            "route",
            object(json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "note": {"type": "string"}
                },
                "required": ["region"]
            })),
        )]
    }
}

#[async_trait]
impl ToolDispatcher for Routed {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let region = call.arguments.get("region").cloned().unwrap_or(Value::Null);
        Ok(ToolOutput::structured(json!({ "region": region })))
    }
}

async fn serve(tools: &Arc<Routed>) -> HttpServer {
    ToolServer::new(tools.clone(), Exposure::only(["route"]))
        .name("routed", "1.0.0")
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP")
}

/// A sessionless 2026-07-28 `tools/call` of `route` with `region`, plus `extra` headers.
async fn call(url: &str, region: &str, extra: &[(&str, &str)]) -> crate::support::Answer {
    let arguments = json!({"region": region});
    stateless_call(url, "route", arguments, json!({}), extra).await
}

/// A call of `route` with region `Hello` and `header` as its `Mcp-Param-Region` (none when
/// `None`) is refused with `400` and `-32020`, naming header and tool and saying `says`,
/// without echoing the header's value.
async fn assert_refused(url: &str, header: Option<&str>, says: &str) {
    let extra: Vec<(&str, &str)> = header
        .map(|h| ("Mcp-Param-Region", h))
        .into_iter()
        .collect();
    let answer = call(url, "Hello", &extra).await;
    assert_eq!(answer.status, 400, "{header:?}: {}", answer.body);
    let error = &answer.json()["error"];
    assert_eq!(error["code"], -32020, "{header:?}: {}", answer.body);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(says), "{message}");
    assert!(
        message.contains("`Mcp-Param-Region`") && message.contains("`route`"),
        "{message}"
    );
    assert!(
        !message.contains("Goodbye"),
        "values are not echoed: {message}"
    );
    assert_eq!(
        error["data"],
        json!({"header": "Mcp-Param-Region", "tool": "route"})
    );
    assert_eq!(answer.json()["id"], 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_headers_reach_the_tool() {
    let tools = Arc::new(Routed::default());
    let server = serve(&tools).await;
    let url = server.url().as_str();
    for (region, header) in [
        ("Hello", "=?base64?SGVsbG8=?="),
        ("SGVsbG8=", "SGVsbG8="),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
    ] {
        let answer = call(url, region, &[("mcp-param-region", header)]).await;
        assert!(
            answer.status < 400 && !answer.body.contains("\"error\""),
            "{header}: {} {}",
            answer.status,
            answer.body
        );
    }
    assert_eq!(tools.calls.load(Ordering::SeqCst), 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disagreeing_headers_are_refused_before_the_tool() {
    let tools = Arc::new(Routed::default());
    let server = serve(&tools).await;
    let url = server.url().as_str();
    for (header, says) in [
        (Some("=?base64?SGVsbG8?="), "malformed"),
        (Some("=?base64?SGVs!!!bG8=?="), "malformed"),
        (Some("Goodbye"), "does not match"),
        (None, "is missing"),
    ] {
        assert_refused(url, header, says).await;
    }
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_mirrors_the_argument() {
    let tools = Arc::new(Routed::default());
    let server = serve(&tools).await;
    let runner = mcp_client_http(server.url(), None).await;
    for region in ["eu-west", " spaced ", "héllo"] {
        let output = call_through(&runner, "route", json!({"region": region}))
            .await
            .unwrap_or_else(|e| panic!("{region:?}: {e}"));
        assert_eq!(output.structured, Some(json!({"region": region})));
    }
    assert_eq!(tools.calls.load(Ordering::SeqCst), 3);
    let _ = runner.shutdown().await;
    server.shutdown().await;
}

impl SessionTools for Routed {}

/// Opens a `Routed` for each session (as a gateway opens an upstream run), all counting
/// their calls in one place.
#[derive(Default)]
struct RoutedPerSession {
    opened: AtomicUsize,
    calls: Arc<AtomicUsize>,
}

#[async_trait]
impl OpenTools for RoutedPerSession {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.opened.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(Routed {
            calls: self.calls.clone(),
        }))
    }
}

async fn serve_per_session(opener: &Arc<RoutedPerSession>) -> HttpServer {
    ToolServer::per_session(opener.clone())
        .name("gateway", "1.0.0")
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_tools_are_checked_once_the_request_opened_them() {
    let opener = Arc::new(RoutedPerSession::default());
    let server = serve_per_session(&opener).await;
    let url = server.url().as_str();
    for (header, says) in [
        (Some("Goodbye"), "does not match"),
        (Some("=?base64?SGVsbG8?="), "malformed"),
        (None, "is missing"),
    ] {
        assert_refused(url, header, says).await;
    }
    // Each stateless request opened its own tools, and none of the calls reached them.
    assert_eq!(opener.opened.load(Ordering::SeqCst), 3);
    assert_eq!(opener.calls.load(Ordering::SeqCst), 0);

    let answer = call(url, "Hello", &[("Mcp-Param-Region", "=?base64?SGVsbG8=?=")]).await;
    assert!(
        answer.status < 400 && answer.body.contains(r#"\"region\":\"Hello\""#),
        "{} {}",
        answer.status,
        answer.body
    );
    assert_eq!(opener.calls.load(Ordering::SeqCst), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_mirrors_the_argument_of_a_per_session_tool() {
    let opener = Arc::new(RoutedPerSession::default());
    let server = serve_per_session(&opener).await;
    let runner = mcp_client_http(server.url(), None).await;
    for region in ["eu-west", "héllo"] {
        let output = call_through(&runner, "route", json!({"region": region}))
            .await
            .unwrap_or_else(|e| panic!("{region:?}: {e}"));
        assert_eq!(output.structured, Some(json!({"region": region})));
    }
    assert_eq!(opener.calls.load(Ordering::SeqCst), 2);
    let _ = runner.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_is_not_held_to_param_headers() {
    let opener = Arc::new(RoutedPerSession::default());
    let server = serve_per_session(&opener).await;
    let url = server.url().as_str();
    let init = send("POST", url, POST_HEADERS, initialize_body()).await;
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    headers.extend([
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = send("POST", url, &headers, initialized.to_string()).await;
    assert!(answer.status < 300, "{}: {}", answer.status, answer.body);
    // A revision without `Mcp-Param-*` headers: none expected, and a stray one is not read.
    for (id, extra) in [(2, None), (3, Some("Goodbye"))] {
        let mut headers = headers.clone();
        headers.extend(extra.map(|value| ("Mcp-Param-Region", value)));
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "route", "arguments": {"region": "Hello"}}
        });
        let answer = send("POST", url, &headers, body.to_string()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(
            answer.body.contains(r#"\"region\":\"Hello\""#) && !answer.body.contains("-32020"),
            "{}",
            answer.body
        );
    }
    assert_eq!(opener.opened.load(Ordering::SeqCst), 1);
    assert_eq!(opener.calls.load(Ordering::SeqCst), 2);
    server.shutdown().await;
}
