//! Sessions started with `server/discover` (`McpClientBuilder::discover`) against the real
//! peers, over stdio and streamable HTTP: the Python SDK server speaks revision 2026-07-28 and
//! is discovered; server-everything (2025-11-25) answers the probe as an older server and is
//! initialised. Either way the identity is kept and tools list and call.
//!
//! Needs the peers of `cargo xtask peers` (see `integration_tests::peers`).

use std::time::Duration;

use agent_core::{ContentPart, RunInput, Runner, ToolCall, ToolDispatcher};
use integration_tests::peers::{self, HttpPeer};
use mcp_client::{Connectors, McpClient};
use mcp_config::{Config, ServerSpec};
use mcp_transport_http::{HttpConnector, HttpOptions};
use mcp_transport_stdio::StdioConnector;
use serde_json::json;

/// Opens a run on `spec` (discovery on), calls the peer's `echo` as a model would —
/// `server__echo` through the run's governed layer — closes the run, and returns the peer's
/// `(name, protocol)` and the call's text.
async fn echo(connectors: Connectors, mut spec: ServerSpec) -> ((String, String), String) {
    spec.connect_timeout = Some(Duration::from_secs(30));
    let server = spec.name.clone();
    let runner = McpClient::builder(Config::new(vec![spec]).expect("a valid spec"))
        .connectors(connectors)
        .discover(true)
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .unwrap_or_else(|e| panic!("the run opens: {}", agent_core::error_chain(&e)));
    let identity = runner.sessions()[0].identity().clone();
    let arguments = json!({"message": "hé"}).as_object().cloned().unwrap();
    let call = ToolCall::new("c1", format!("{server}__echo"), arguments);
    let output = runner.dispatch(call).await.expect("the call succeeds");
    runner.close().await;
    let text = output
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let name = identity.name.unwrap_or_default();
    ((name, identity.protocol_version), text)
}

/// The Python SDK server's name and revision: discovered.
const PYTHON: (&str, &str) = ("py-peer", "2026-07-28");
/// server-everything's name and revision: initialised after the probe.
const EVERYTHING: (&str, &str) = ("mcp-servers/everything", "2025-11-25");

#[track_caller]
fn assert_echoed(((name, protocol), text): ((String, String), String), peer: (&str, &str)) {
    assert_eq!((name.as_str(), protocol.as_str()), peer);
    assert_eq!(text, "Echo: hé");
}

fn stdio() -> Connectors {
    Connectors::new().with(StdioConnector::new())
}

fn http() -> Connectors {
    Connectors::new().with(HttpConnector::new(HttpOptions::default()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_is_discovered_over_stdio() {
    let Some(spec) = peers::python_stdio_spec() else {
        return;
    };
    assert_echoed(echo(stdio(), spec).await, PYTHON);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_is_discovered_over_http() {
    let Some(server) = HttpPeer::python().await else {
        return;
    };
    let outcome = echo(http(), server.spec()).await;
    server.stop().await;
    assert_echoed(outcome, PYTHON);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_is_initialised_over_stdio() {
    let Some(spec) = peers::everything_stdio_spec() else {
        return;
    };
    assert_echoed(echo(stdio(), spec).await, EVERYTHING);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_is_initialised_over_http() {
    let Some(server) = HttpPeer::everything().await else {
        return;
    };
    let outcome = echo(http(), server.spec()).await;
    server.stop().await;
    assert_echoed(outcome, EVERYTHING);
}
