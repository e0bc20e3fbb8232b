//! A server on the official Python MCP SDK (`peers/python/server.py`), over stdio and
//! over streamable HTTP, through the workspace's connectors and `mcp-client`'s runner and session layer: connect, list, call, structured
//! content, tool errors.
//!
//! Needs the peers of `cargo xtask peers` (see `integration_tests::peers`): fails without them
//! under `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`, skips with a note otherwise.

use integration_tests::peers::{self, HttpPeer, PeerSession, text_of};
use serde_json::json;

/// What every transport must show of the Python SDK server.
async fn check(session: &PeerSession) {
    let identity = session.identity();
    assert_eq!(identity.name.as_deref(), Some("py-peer"));
    assert_eq!(
        identity.instructions.as_deref(),
        Some("A test peer on the official Python MCP SDK.")
    );

    // The peers negotiate down to the newest revision they know with a handshake.
    assert_eq!(identity.protocol_version, "2025-11-25");

    let tools = session.list_tools().await;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add", "echo", "fail", "weather"]);
    let weather_tool = tools.iter().find(|t| t.name == "weather").unwrap();
    let schema = weather_tool.output_schema.as_ref().expect("outputSchema");
    assert_eq!(
        schema.get("required"),
        Some(&json!(["city", "temperature", "conditions"]))
    );

    let echo = session.call("echo", json!({"message": "héllo"})).await;
    assert_eq!(text_of(&echo), "Echo: héllo");

    let add = session.call("add", json!({"a": 40, "b": 2})).await;
    assert_eq!(add.structured_content, Some(json!({"result": 42})));
    assert_eq!(text_of(&add), "42");

    let weather = session.call("weather", json!({"city": "Oslo"})).await;
    assert_ne!(weather.is_error, Some(true));
    assert_eq!(
        weather.structured_content,
        Some(json!({"city": "Oslo", "temperature": 7.0, "conditions": "Light rain"}))
    );

    let failed = session.call("fail", json!({"message": "boom"})).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(
        text_of(&failed).contains("boom"),
        "tool error text: {}",
        text_of(&failed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio() {
    if let Some(spec) = peers::python_stdio_spec() {
        peers::check_over_stdio(spec, "the Python server", check).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_streamable_http() {
    if let Some(server) = HttpPeer::python().await {
        peers::check_over_http(server, "the Python server", check).await;
    }
}
