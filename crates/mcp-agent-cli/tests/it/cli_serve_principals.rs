//! Per-principal `[policy]` behind `[serve] auth.jwt`: rules that name a subject, scopes or
//! claims apply to the sessions of matching tokens only. Each principal's `tools/list` shows
//! just what it may call, a call outside it is refused (the tool does not exist for that
//! session), and a session without a subject never matches a rule that names one.

use serde_json::{Value, json};

use crate::cli_serve_jwt::{AUDIENCE, ISSUER, jwk, key, serve_jwks, token_with};
use crate::support::gateway::{Gateway, kit_config, request};

/// An eager gateway over the test kit: everyone may call `add`; members of `admins`
/// anything; `huge` is denied to `alice` herself, and `echo` to whoever lacks `kit:echo`.
const SERVE: &str = r#"expose = "eager"
auth = { jwt = { issuer = "ISSUER", audience = "AUDIENCE", jwks_url = "JWKS", algorithms = ["ES256"], claims = ["groups"] } }

[policy]
allow = [
  { server = "*", tool = "*", claims = { groups = "admin?" } },
  { server = "*", tool = "add" },
  { server = "*", tool = "echo", scopes = ["kit:echo"] },
]
deny = [{ server = "*", tool = "huge", subject = "alice" }]
"#;

/// A session of the gateway for `token`: its `Mcp-Session-Id`.
fn session(gateway: &Gateway, token: &str) -> String {
    let bearer = format!("Bearer {token}");
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    });
    let headers = [("Authorization", bearer.as_str())];
    let (status, head, body) = request(
        &gateway.addr(),
        "POST",
        &headers,
        init.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let id = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(|v| v.trim().to_owned())
        .expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send(gateway, token, &id, &note);
    id
}

/// Posts `message` in session `id` with `token`: the JSON-RPC answer (from JSON or the event
/// stream's last `data`), `Null` for none.
fn send(gateway: &Gateway, token: &str, id: &str, message: &Value) -> Value {
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", id),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (_, _, body) = request(
        &gateway.addr(),
        "POST",
        &headers,
        message.to_string().as_bytes(),
    );
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(body.as_str()))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or(Value::Null)
}

/// The names of the upstream tools `token`'s session lists (not the gateway's own
/// `mcp_*` ones), sorted.
fn listed(gateway: &Gateway, token: &str) -> (String, Vec<String>) {
    let id = session(gateway, token);
    let list = send(
        gateway,
        token,
        &id,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let mut names: Vec<String> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .filter(|name| !name.starts_with("mcp_"))
        .collect();
    names.sort();
    (id, names)
}

/// Calls `tool` in session `id`: the result's text and whether it is an error.
fn call(gateway: &Gateway, token: &str, id: &str, tool: &str, args: Value) -> (String, bool) {
    let message = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": tool, "arguments": args}});
    let answer = send(gateway, token, id, &message);
    let result = &answer["result"];
    match result["content"][0]["text"].as_str() {
        Some(text) => (text.to_owned(), result["isError"] == true),
        // A JSON-RPC error (a tool this session does not have): refused too.
        None => (answer.to_string(), answer.get("error").is_some()),
    }
}

#[test]
fn each_principal_lists_and_calls_only_what_its_rules_allow() {
    let signing = key();
    let jwks = serve_jwks(json!([jwk(&signing, "k1")]));
    let serve = SERVE
        .replace("ISSUER", ISSUER)
        .replace("AUDIENCE", AUDIENCE)
        .replace("JWKS", &jwks);
    let (_dir, file, _record) = kit_config(&serve);
    let gateway = Gateway::start(&file, &[]);
    let token = |claims: Value| token_with(&signing, "k1", AUDIENCE, claims);
    let admin = token(json!({"sub": "alice", "groups": ["staff", "admins"]}));
    let echoer = token(json!({"sub": "bob", "scope": "kit:echo kit:other"}));
    let plain = token(json!({"sub": "carol", "groups": "staff"}));
    let nobody = token(json!({"groups": ["admins"], "scope": "kit:echo"}));

    let (alice, tools) = listed(&gateway, &admin);
    assert!(tools.iter().any(|t| t.ends_with("echo")), "{tools:?}");
    assert!(tools.iter().any(|t| t.ends_with("add")), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.ends_with("huge")),
        "denied to alice: {tools:?}"
    );
    let (bob, tools) = listed(&gateway, &echoer);
    assert!(
        tools
            .iter()
            .all(|t| t.ends_with("echo") || t.ends_with("add")),
        "{tools:?}"
    );
    assert_eq!(tools.len(), 2, "{tools:?}");
    let (carol, tools) = listed(&gateway, &plain);
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert!(tools[0].ends_with("add"), "{tools:?}");
    // Without a subject, no rule naming a principal matches: `add` alone.
    let (_, tools) = listed(&gateway, &nobody);
    assert_eq!(tools.len(), 1, "{tools:?}");

    let echo =
        |token: &str, id: &str| call(&gateway, token, id, "kit__echo", json!({"text": "hi"}));
    assert!(!echo(&admin, &alice).1, "alice may echo");
    assert!(!echo(&echoer, &bob).1, "bob has the scope");
    let (why, refused) = echo(&plain, &carol);
    // Not listed to carol, the tool does not exist for her session.
    assert!(refused, "{why:?}");
    assert!(why.contains("unknown tool"), "{why}");
    // Denied to alice by name: not hers either.
    let (why, refused) = call(&gateway, &admin, &alice, "kit__huge", json!({"bytes": 10}));
    assert!(refused && why.contains("unknown tool"), "{why}");
    let (text, refused) = call(&gateway, &plain, &carol, "kit__huge", json!({"bytes": 10}));
    assert!(refused, "{text}");
    let (sum, refused) = call(
        &gateway,
        &plain,
        &carol,
        "kit__add",
        json!({"a": 2, "b": 3}),
    );
    assert!(!refused && sum.contains('5'), "{sum}");
}

#[test]
fn a_principal_cannot_read_another_s_cut_output() {
    let signing = key();
    let jwks = serve_jwks(json!([jwk(&signing, "k1")]));
    let serve = format!(
        "expose = \"eager\"\nauth = {{ jwt = {{ issuer = \"{ISSUER}\", audience = \"{AUDIENCE}\", \
         jwks_url = \"{jwks}\", algorithms = [\"ES256\"] }} }}\n\n[policy]\nmax_output_bytes = 1024\n"
    );
    let (_dir, file, _record) = kit_config(&serve);
    let gateway = Gateway::start(&file, &[]);
    let alice = token_with(&signing, "k1", AUDIENCE, json!({"sub": "alice"}));
    let bob = token_with(&signing, "k1", AUDIENCE, json!({"sub": "bob"}));
    let (alice_session, _) = listed(&gateway, &alice);
    let (bob_session, _) = listed(&gateway, &bob);

    let huge = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "kit__huge", "arguments": {"bytes": 5000}}});
    let answer = send(&gateway, &alice, &alice_session, &huge);
    let texts: String = answer["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect();
    let handle = texts
        .split("\"handle\": \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no handle in {texts}"))
        .to_owned();
    let read = |token: &str, session: &str| {
        let message = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                             "params": {"name": "mcp_read_output", "arguments": {"handle": handle}}});
        send(&gateway, token, session, &message)
    };
    let own = read(&alice, &alice_session);
    assert_eq!(own["result"]["isError"], false, "{own}");
    let probed = read(&bob, &bob_session);
    assert_eq!(probed["result"]["isError"], true, "{probed}");
    let said = probed.to_string();
    assert!(
        !said.contains("0123456789abcdef"),
        "bob read alice's output: {said}"
    );
}
