//! A third-party client on served tools: the official Python MCP SDK (`tests/peers/client.py`,
//! on the venv `cargo xtask peers` installs), over stdio (the demo binary) and streamable HTTP
//! (a server in this process, with a bearer token), negotiating revision 2025-11-25 (the
//! initialize handshake, a session) and 2026-07-28 (per-request metadata, stateless).
//!
//! Needs `MCP_AGENT_PEER_PYTHON`: fails without it under `CI=true` /
//! `MCP_AGENT_REQUIRE_PEERS=1`, skips with a note otherwise.

use std::process::Stdio;
use std::sync::Arc;

use mcp_serve::{BearerAuth, Exposure, HttpOptions, ToolListChanges, ToolServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{Tools, all_but_hidden, bounded, serve_http};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/client.py");

/// The venv's python, or `None` (with a note) when peers are not required.
fn python() -> Option<String> {
    let required = ["CI", "MCP_AGENT_REQUIRE_PEERS"].iter().any(|var| {
        std::env::var(var).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    });
    match std::env::var("MCP_AGENT_PEER_PYTHON") {
        Ok(path) if std::path::Path::new(&path).exists() => Some(path),
        _ => {
            assert!(
                !required,
                "MCP_AGENT_PEER_PYTHON is not set; run `cargo xtask peers` (the test command installs the peers)"
            );
            eprintln!("note: skipping: MCP_AGENT_PEER_PYTHON is not set");
            None
        }
    }
}

/// Runs the client with `args`, the calls on stdin; its report, or its stderr on failure.
async fn client(python: &str, args: &[&str], calls: &Value) -> Result<Value, String> {
    let mut child = tokio::process::Command::new(python)
        .arg(SCRIPT)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the Python client");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(calls.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = bounded("the Python client", child.wait_with_output())
        .await
        .unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    Ok(serde_json::from_str(last).unwrap_or_else(|e| panic!("not a report ({e}): {stdout}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio_both_revisions() {
    let Some(python) = python() else { return };
    let demo = env!("CARGO_BIN_EXE_mcp-serve-demo");
    let calls = json!({
        "add": {"a": 40, "b": 2},
        "echo": {"nested": {"list": [1, 2]}},
        "greet": {"name": "Py"},
        "fail": {"message": "as asked"},
        "secret": {},
    });
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let report = client(&python, &[mode, "stdio", demo, "stdio"], &calls)
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(report["protocol_version"], version, "{report}");
        assert_eq!(report["server"], "mcp-serve-demo");
        assert_eq!(report["tools"], json!(["echo", "add", "greet", "fail"]));
        let calls = &report["calls"];
        assert_eq!(
            calls["add"]["structured"],
            json!({"result": 42.0}),
            "{mode}"
        );
        assert_eq!(calls["add"]["text"], "42.0");
        assert_eq!(
            calls["echo"]["structured"],
            json!({"nested": {"list": [1, 2]}})
        );
        assert_eq!(calls["greet"]["text"], "Hello, Py!");
        assert_eq!(calls["fail"]["is_error"], true);
        assert_eq!(calls["fail"]["text"], "tool `fail` failed: as asked");
        assert_eq!(calls["secret"]["error"], "unknown tool `secret`");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http_both_revisions_with_a_bearer_token() {
    let Some(python) = python() else { return };
    let tools = Arc::new(Tools::default());
    let options = HttpOptions::default().with_auth(BearerAuth::new("py-token"));
    let server = serve_http(&tools, all_but_hidden(), options).await;
    let url = server.url().to_string();
    let calls = json!({
        "mapping": {"a": 1, "b": 2},
        "scalar": {"a": 1, "b": 2},
        "fail": {},
        "hidden": {},
    });
    for (mode, version) in [
        ("legacy", "2025-11-25"),
        ("auto", "2026-07-28"),
        ("2026-07-28", "2026-07-28"),
    ] {
        let before = tools.calls();
        let report = client(&python, &[mode, "http", &url, "py-token"], &calls)
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(report["protocol_version"], version, "{report}");
        let listed = report["tools"].as_array().unwrap();
        assert_eq!(listed.len(), 9, "{mode}");
        assert!(!listed.contains(&json!("hidden")));
        let calls = &report["calls"];
        assert_eq!(
            calls["mapping"]["structured"],
            json!({"sum": 3.0}),
            "{mode}"
        );
        assert_eq!(calls["mapping"]["text"], r#"{"sum":3.0}"#);
        assert_eq!(calls["scalar"]["structured"], json!({"result": 3.0}));
        assert_eq!(calls["fail"]["is_error"], true);
        assert_eq!(calls["hidden"]["error"], "unknown tool `hidden`");
        assert_eq!(tools.calls(), before + 3, "{mode}: hidden never ran");
    }

    // Without the token the client is refused, and nothing runs.
    let before = tools.calls();
    let refused = client(&python, &["legacy", "http", &url], &calls).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(tools.calls(), before);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_listens_for_tool_list_changes_until_shutdown() {
    let Some(python) = python() else { return };
    let tools = Arc::new(Tools::default());
    let changes = ToolListChanges::new();
    let server = ToolServer::new(tools, Exposure::read_only())
        .list_changes(changes.clone())
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .unwrap();
    let url = server.url().to_string();
    let mut child = tokio::process::Command::new(&python)
        .arg(SCRIPT)
        .args(["2026-07-28", "listen", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the Python client");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || {
        bounded("a line from the Python client", lines.next_line())
            .await
            .unwrap()
            .unwrap_or_default()
    };
    let subscribed = next().await;
    assert_eq!(subscribed, r#"subscribed {"toolsListChanged": true}"#);

    changes.notify();
    let event = next().await;
    assert!(event.starts_with("event "), "{event}");
    assert!(event.to_ascii_lowercase().contains("tool"), "{event}");

    // A shutdown ends the subscription gracefully instead of waiting for it.
    let report = bounded("the shutdown", server.shutdown()).await;
    assert_eq!(report.abandoned, 0);
    assert_eq!(next().await, "closed");
    let status = bounded("the client exits", child.wait()).await.unwrap();
    assert!(status.success());
}
