//! `mcp-agent serve` with `[serve] park_idle_sessions_seconds`: a 2025-11-25 session idle that
//! long is parked (its upstream run closed, so the test kit's process exits) and its next
//! request restores it, opening the upstream again, in the same session.

use serde_json::{Value, json};

use crate::cli_serve_pool::{kit_servers, wait_until};
use crate::support::alive;
use crate::support::gateway::{Gateway, kit_config, open_session, request};

/// `mcp_call_tool` of `kit__echo` with `arguments` in `session`: the JSON-RPC message.
fn call_echo(addr: &str, session: &str, arguments: Value) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "mcp_call_tool",
                   "arguments": {"tool_name": "kit__echo", "arguments": arguments}},
    });
    let headers = [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (status, _, text) = request(addr, "POST", &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(&text);
    serde_json::from_str(data).unwrap_or_else(|e| panic!("no message ({e}): {text}"))
}

#[test]
fn an_idle_session_is_parked_and_its_next_request_restores_it() {
    let (_dir, file, record) = kit_config("park_idle_sessions_seconds = 0.3");
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    let session = open_session(&addr);
    let first = call_echo(&addr, &session, json!({"n": 1}));
    assert_eq!(first["result"]["structuredContent"]["n"], 1, "{first}");
    let upstream = kit_servers(gateway.pid());
    assert_eq!(upstream.len(), 1);

    // Parked: the session's run is closed, and with it the upstream process.
    wait_until("the parked session's upstream to exit", || {
        !alive(upstream[0])
    });
    // The same session goes on: restored, with the upstream opened again.
    let again = call_echo(&addr, &session, json!({"n": 2}));
    assert_eq!(again["result"]["structuredContent"]["n"], 2, "{again}");
    assert_eq!(record.snapshot().handshakes(), 2);
    let (status, _, _) = request(
        &addr,
        "DELETE",
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        b"",
    );
    assert!(status < 300, "{status}");
    let gone = request(
        &addr,
        "POST",
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        br#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#,
    );
    assert_eq!(gone.0, 404, "{}", gone.2);
}
