//! `--log-format json`: every line on stderr is one JSON object (`timestamp`, `level`,
//! `target`, `fields`) — the command's own messages at the level their words name, and each
//! tool call's events (target `mcp_agent::event`, the kind as the message) — while stdout
//! keeps the command's output. The text format stays the default and shows no events.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::mcp_agent;

/// `mcp-agent ARGS` with the test kit's stdio server as `kit` and `policy`.
fn kit_with(args: &[&str], policy: &Value) -> Output {
    let servers = json!([{ "name": "kit", "command": mcp_test_kit::stdio::binary() }]).to_string();
    let policy = policy.to_string();
    mcp_agent(
        args,
        &[
            ("MCP_AGENT__SERVERS", &servers),
            ("MCP_AGENT__POLICY", &policy),
        ],
    )
}

/// Every stderr line, parsed; panics on a line that is not a JSON log object.
fn lines(output: &Output) -> Vec<Value> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{stderr}"));
            for key in ["timestamp", "level", "target", "fields"] {
                assert!(value.get(key).is_some(), "no {key}: {line}");
            }
            value
        })
        .collect()
}

/// The events among `lines`, by kind.
fn events<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["target"] == "mcp_agent::event" && l["fields"]["message"] == kind)
        .collect()
}

#[test]
fn a_call_s_events_and_the_command_s_messages_are_json_lines() {
    let policy = json!({});
    let output = kit_with(
        &[
            "--log-format",
            "json",
            "tools",
            "call",
            "kit__add",
            r#"{"a": 2, "b": 3}"#,
        ],
        &policy,
    );
    let lines = lines(&output);
    assert_eq!(output.status.code(), Some(0), "{lines:#?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains('5'));

    let connected = events(&lines, "server_connected");
    assert_eq!(connected.len(), 1, "{lines:#?}");
    assert_eq!(connected[0]["fields"]["server"], "kit");
    let started = events(&lines, "tool_call_started");
    let finished = events(&lines, "tool_call_finished");
    assert_eq!((started.len(), finished.len()), (1, 1), "{lines:#?}");
    let fields = &finished[0]["fields"];
    assert_eq!(fields["server"], "kit", "{fields}");
    assert_eq!(fields["outcome"], "ok", "{fields}");
    assert!(fields["tool"].as_str().unwrap().contains("add"), "{fields}");
    assert!(fields["duration_ms"].is_u64(), "{fields}");
    assert_eq!(finished[0]["level"], "INFO");
}

#[test]
fn a_denied_call_is_an_event_and_its_error_a_json_error_line() {
    let policy = json!({"deny": [{"server": "mcp-test-kit", "tool": "ec*"}]});
    let output = kit_with(
        &[
            "--log-format",
            "json",
            "tools",
            "call",
            "kit__echo",
            r#"{"a": 1}"#,
        ],
        &policy,
    );
    let lines = lines(&output);
    assert_eq!(output.status.code(), Some(1), "{lines:#?}");
    let denied = events(&lines, "tool_call_denied");
    assert_eq!(denied.len(), 1, "{lines:#?}");
    assert!(
        denied[0]["fields"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("deny")),
        "{lines:#?}"
    );
    assert!(events(&lines, "tool_call_started").is_empty());
    let errors: Vec<_> = lines
        .iter()
        .filter(|l| l["level"] == "ERROR" && l["target"] == "mcp_agent")
        .collect();
    assert_eq!(errors.len(), 1, "{lines:#?}");
    let said = errors[0]["fields"]["message"].as_str().unwrap();
    assert!(said.contains("kit__echo"), "{said}");
    assert!(!said.starts_with("error: "), "the level says it: {said}");
}

#[test]
fn text_stays_the_default_and_shows_no_events() {
    let output = kit_with(
        &["tools", "call", "kit__add", r#"{"a": 2, "b": 3}"#],
        &json!({}),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("tool_call_finished"), "{stderr}");
    assert!(stderr.lines().all(|l| !l.starts_with('{')), "{stderr}");
}
