//! The reference server `@modelcontextprotocol/server-everything`, over stdio and over
//! streamable HTTP, through the workspace's connectors and `mcp-client`'s runner and session layer: connect, list, call, structured content.
//!
//! Needs the peers of `cargo xtask peers` (see `integration_tests::peers`): fails without them
//! under `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`, skips with a note otherwise.

use integration_tests::peers::{self, HttpPeer, PeerSession, text_of};
use serde_json::json;

/// What every transport must show of server-everything.
async fn check(session: &PeerSession) {
    let identity = session.identity();
    assert_eq!(identity.name.as_deref(), Some("mcp-servers/everything"));

    // The peers negotiate down to the newest revision they know with a handshake.
    assert_eq!(identity.protocol_version, "2025-11-25");

    let tools = session.list_tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in ["echo", "get-sum", "get-structured-content"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let structured = tools
        .iter()
        .find(|t| t.name == "get-structured-content")
        .unwrap();
    assert!(
        structured.output_schema.is_some(),
        "get-structured-content has no outputSchema"
    );

    let echo = session
        .call("echo", json!({"message": "héllo peers"}))
        .await;
    assert_ne!(echo.is_error, Some(true));
    assert_eq!(text_of(&echo), "Echo: héllo peers");

    let sum = session.call("get-sum", json!({"a": 2, "b": 40})).await;
    assert_eq!(text_of(&sum), "The sum of 2 and 40 is 42.");

    let weather = session
        .call("get-structured-content", json!({"location": "Chicago"}))
        .await;
    assert_eq!(
        weather.structured_content,
        Some(json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}))
    );
    // The text block carries the same object, for clients without structured content.
    let text: serde_json::Value = serde_json::from_str(&text_of(&weather)).unwrap();
    assert_eq!(Some(text), weather.structured_content);

    // Bad arguments are the server's business: an error result or a JSON-RPC error, never a
    // hang. rmcp surfaces both; the session stays usable.
    let again = session.call("echo", json!({"message": "still here"})).await;
    assert_eq!(text_of(&again), "Echo: still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio() {
    if let Some(spec) = peers::everything_stdio_spec() {
        peers::check_over_stdio(spec, "server-everything", check).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    if let Some(server) = HttpPeer::everything().await {
        peers::check_over_http(server, "server-everything", check).await;
    }
}
