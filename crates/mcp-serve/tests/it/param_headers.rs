//! SEP-2243 over HTTP: a served tool declaring `x-mcp-header` has its `Mcp-Param-*` header
//! checked against the call's arguments before the call reaches the dispatcher — a match
//! (literal or `=?base64?...?=`) runs, a missing, malformed or differing header is `400` with
//! JSON-RPC error `-32020` naming the header and the tool; our own client's calls pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{Exposure, HttpOptions, HttpServer, ToolServer};
use serde_json::{Value, json};

use crate::support::{POST_HEADERS, call_through, mcp_client_http, object, send};

/// One tool, `route`, whose `region` is mirrored into `Mcp-Param-Region`.
#[derive(Default)]
struct Routed {
    calls: AtomicUsize,
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
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {
            "name": "route", "arguments": {"region": region},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    headers.extend([
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "route"),
    ]);
    headers.extend(extra);
    send("POST", url, &headers, body.to_string()).await
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
        let extra: Vec<(&str, &str)> = header
            .map(|h| ("Mcp-Param-Region", h))
            .into_iter()
            .collect();
        let answer = call(url, "Hello", &extra).await;
        assert_eq!(answer.status, 400, "{header:?}: {}", answer.body);
        let error = &answer.json()["error"];
        assert_eq!(error["code"], -32020, "{header:?}");
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
