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

/// What a discovered or initialised session shows: `(name, protocol)` and a tool call's text.
async fn open_and_call(
    connectors: Connectors,
    mut spec: ServerSpec,
    tool: &str,
    arguments: serde_json::Value,
) -> (String, String, String) {
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
    // The call goes as a model's does: `server__tool` through the run's governed layer.
    let call = ToolCall::new(
        "c1",
        format!("{server}__{tool}"),
        arguments.as_object().cloned().unwrap_or_default(),
    );
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
    (
        identity.name.unwrap_or_default(),
        identity.protocol_version,
        text,
    )
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
    let (name, protocol, text) =
        open_and_call(stdio(), spec, "echo", json!({"message": "hé"})).await;
    assert_eq!(
        (name.as_str(), protocol.as_str()),
        ("py-peer", "2026-07-28")
    );
    assert_eq!(text, "Echo: hé");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_is_discovered_over_http() {
    let Some(server) = HttpPeer::python().await else {
        return;
    };
    let outcome = open_and_call(http(), server.spec(), "echo", json!({"message": "hé"})).await;
    server.stop().await;
    let (name, protocol, text) = outcome;
    assert_eq!(
        (name.as_str(), protocol.as_str()),
        ("py-peer", "2026-07-28")
    );
    assert_eq!(text, "Echo: hé");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_is_initialised_over_stdio() {
    let Some(spec) = peers::everything_stdio_spec() else {
        return;
    };
    let (name, protocol, text) =
        open_and_call(stdio(), spec, "echo", json!({"message": "hé"})).await;
    assert_eq!(
        (name.as_str(), protocol.as_str()),
        ("mcp-servers/everything", "2025-11-25")
    );
    assert_eq!(text, "Echo: hé");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_is_initialised_over_http() {
    let Some(server) = HttpPeer::everything().await else {
        return;
    };
    let outcome = open_and_call(http(), server.spec(), "echo", json!({"message": "hé"})).await;
    server.stop().await;
    let (name, protocol, text) = outcome;
    assert_eq!(
        (name.as_str(), protocol.as_str()),
        ("mcp-servers/everything", "2025-11-25")
    );
    assert_eq!(text, "Echo: hé");
}
