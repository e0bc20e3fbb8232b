//! `mcp-agent serve --expose eager` in front of a test-kit upstream whose `route` tool
//! declares `x-mcp-header` (SEP-2243): the gateway lists the declarations as the upstream
//! wrote them, refuses a 2026-07-28 `tools/call` of `kit__route` whose `Mcp-Param-*` header
//! disagrees with its arguments (`400`, JSON-RPC error `-32020` naming the header and the
//! tool) without the call reaching the upstream, lets a matching one through, and does not
//! hold a 2025-11-25 session (which sends no such headers) to it.

use serde_json::{Value, json};

use crate::support::gateway::{Gateway, kit_config_with, open_session, request};

/// A 2026-07-28 request of `method` with `params` (the per-request `_meta` added), and
/// `extra` headers: status and body.
fn stateless(addr: &str, method: &str, mut params: Value, extra: &[(&str, &str)]) -> (u16, String) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if !name.is_empty() {
        headers.push(("Mcp-Name", &name));
    }
    headers.extend(extra);
    let (status, _, body) = request(addr, "POST", &headers, body.to_string().as_bytes());
    (status, body)
}

fn route(region: &str) -> Value {
    json!({"name": "kit__route", "arguments": {"region": region, "note": "n"}})
}

#[test]
fn the_eager_gateway_checks_param_headers_of_upstream_tools() {
    let (_dir, file, record) = kit_config_with("expose = \"eager\"", &["--header-params"]);
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();

    // The upstream's declarations reach the downstream client, which mirrors by them.
    let (status, body) = stateless(&addr, "tools/list", json!({}), &[]);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""region":{"type":"string","x-mcp-header":"Region"}"#),
        "{body}"
    );

    for (header, says) in [
        (Some("us-east"), "does not match"),
        (Some("=?base64?ZXU?="), "malformed"),
        (None, "is missing"),
    ] {
        let extra: Vec<(&str, &str)> = header
            .map(|h| ("Mcp-Param-Region", h))
            .into_iter()
            .collect();
        let (status, body) = stateless(&addr, "tools/call", route("eu-west"), &extra);
        assert_eq!(status, 400, "{header:?}: {body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        let error = &answer["error"];
        assert_eq!(error["code"], -32020, "{body}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(says)
                && message.contains("`Mcp-Param-Region`")
                && message.contains("`kit__route`"),
            "{message}"
        );
        assert!(
            !message.contains("us-east"),
            "values are not echoed: {message}"
        );
        assert_eq!(
            error["data"],
            json!({"header": "Mcp-Param-Region", "tool": "kit__route"})
        );
    }
    assert_eq!(
        record.snapshot().calls_of("route"),
        0,
        "nothing reached the upstream"
    );

    let (status, body) = stateless(
        &addr,
        "tools/call",
        route("eu-west"),
        &[("Mcp-Param-Region", "eu-west")],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"\"region\":\"eu-west\""#), "{body}");
    assert!(!body.contains("\"isError\":true"), "{body}");
    assert_eq!(record.snapshot().calls_of("route"), 1);

    // A 2025-11-25 session sends no `Mcp-Param-*` headers and is not held to them.
    let session = open_session(&addr);
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": route("eu-west")});
    let (status, _, body) = request(&addr, "POST", &headers, call.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"\"region\":\"eu-west\""#), "{body}");
    assert_eq!(record.snapshot().calls_of("route"), 2);
}
