//! `mcp-agent history show DIR [--json]`: a session's messages and events in order, a torn
//! last line noted (not a failure), a missing directory named.

use std::io::Write;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use mcp_agent::{
    CallOutcome, Event, EventKind, History, Redactor, ToolCall, agent::Message, events::EVENTS_FILE,
};
use serde_json::{Value, json};

use crate::support::mcp_agent;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A session as the governed layer writes one: a server connects, one call through
/// `mcp_call_tool` is cut to the output limit, a second one is denied.
fn write_session(dir: &Path) {
    let history = History::create(dir, Redactor::new().with_secrets(["tok-secret-42"])).unwrap();
    history
        .append_event(
            &Event::new(EventKind::ServerConnected)
                .with_server("kit")
                .with_server_identity(Some("mcp-test-kit")),
        )
        .unwrap();

    let mut asked = Message::new(mcp_agent::agent::Role::Assistant, "");
    asked.tool_calls.push(
        ToolCall::from_json(
            "cli-1",
            "mcp_call_tool",
            json!({"tool_name": "kit__huge", "arguments": {"bytes": 100000, "token": "tok-secret-42"}}),
        )
        .unwrap(),
    );
    history.append_message(&asked).unwrap();
    let started = Event::new(EventKind::ToolCallStarted)
        .with_tool(Some("kit"), "kit__huge")
        .with_server_identity(Some("mcp-test-kit"))
        .with_call_id("cli-1");
    history.append_event(&started).unwrap();
    let mut finished = Event::new(EventKind::ToolCallFinished)
        .with_tool(Some("kit"), "kit__huge")
        .with_server_identity(Some("mcp-test-kit"))
        .with_call_id("cli-1")
        .with_outcome(CallOutcome::Truncated)
        .with_duration(Duration::from_millis(12));
    finished.input_bytes = Some(52);
    finished.output_bytes = Some(65_536);
    finished.result_bytes = Some(100_000);
    finished.output_handle = Some("out_1".into());
    history.append_event(&finished).unwrap();
    history
        .append_message(&Message::tool_result(
            "cli-1",
            "xxxx\u{1b}]0;pwned\u{7}\nsecond line",
        ))
        .unwrap();

    let mut asked = Message::new(mcp_agent::agent::Role::Assistant, "");
    asked.tool_calls.push(
        ToolCall::from_json(
            "cli-2",
            "mcp_call_tool",
            json!({"tool_name": "kit__delete_all", "arguments": {}}),
        )
        .unwrap(),
    );
    history.append_message(&asked).unwrap();
    let denied = Event::new(EventKind::ToolCallDenied)
        .with_tool(Some("kit"), "kit__delete_all")
        .with_call_id("cli-2")
        .with_outcome(CallOutcome::Denied)
        .with_message("denied by { server = \"*\", tool = \"delete_*\" } in `[policy] deny`");
    history.append_event(&denied).unwrap();
    history
        .append_message(&Message::tool_result("cli-2", "call of tool denied"))
        .unwrap();
    history.close().unwrap();
}

#[test]
fn history_show_lists_messages_and_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path());
    let path = dir.path().to_str().unwrap();
    let output = mcp_agent(&["history", "show", path], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 8, "{out}");
    let order: Vec<&str> = lines
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "server_connected",
            "assistant",
            "tool_call_started",
            "tool_call_finished",
            "tool",
            "assistant",
            "tool_call_denied",
            "tool",
        ],
        "{out}"
    );
    // The real tool behind the generic caller, its outcome, duration and sizes.
    assert!(
        lines[1].contains("call cli-1: kit__huge {\"bytes\":100000,\"token\":\"[REDACTED]\"}"),
        "{out}"
    );
    assert!(
        lines[3].contains(
            "kit__huge on kit (mcp-test-kit): truncated in 12.0 ms, arguments 52 B, output 64.0 \
             KiB of 97.7 KiB, handle out_1"
        ),
        "{out}"
    );
    assert!(lines[6].contains("kit__delete_all on kit: denied"), "{out}");
    assert!(lines[6].contains("`[policy] deny`"), "{out}");
    // Nothing a tool wrote reaches the terminal raw, and no secret is shown.
    assert!(lines[4].contains("result of cli-1"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(!out.contains("tok-secret-42"), "{out}");
    let note = stderr(&output);
    assert!(note.contains("4 messages, 4 events, from "), "{note}");
}

#[test]
fn history_show_json_prints_every_line_as_a_json_line_in_order() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path());
    let path = dir.path().to_str().unwrap();
    let output = mcp_agent(&["history", "show", path, "--json"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let records: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 8);
    let files: Vec<&str> = records
        .iter()
        .map(|r| r["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files.iter().filter(|f| **f == "messages.jsonl").count(),
        4,
        "{files:?}"
    );
    assert_eq!(records[0]["kind"], "server_connected");
    assert_eq!(
        records[1]["tool_calls"][0]["arguments"]["tool_name"],
        "kit__huge"
    );
    assert_eq!(records[3]["outcome"], "truncated");
    assert_eq!(records[3]["result_bytes"], 100_000);
    assert_eq!(
        records[4]["content"],
        "xxxx\u{1b}]0;pwned\u{7}\nsecond line"
    );
    assert!(records.iter().all(|r| r["ts_ms"].is_u64()));
}

#[test]
fn a_secret_of_the_configuration_is_not_shown_even_if_a_history_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    // Written by a writer that did not know the secret.
    let history = History::create(dir.path(), Redactor::new()).unwrap();
    history
        .append_message(&Message::tool_result(
            "cli-1",
            "the key is tok-config-secret-9",
        ))
        .unwrap();
    history.close().unwrap();
    let servers = json!([{
        "name": "kit",
        "command": "/bin/true",
        "env": {"KIT_TOKEN": "tok-config-secret-9"},
    }])
    .to_string();
    let path = dir.path().to_str().unwrap();
    for args in [
        &["history", "show", path][..],
        &["history", "show", path, "--json"][..],
    ] {
        let output = mcp_agent(args, &[("MCP_AGENT__SERVERS", &servers)]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let out = stdout(&output);
        assert!(out.contains("the key is [REDACTED]"), "{out}");
        assert!(!out.contains("tok-config-secret-9"), "{out}");
    }
}

#[test]
fn a_torn_last_line_is_noted_and_every_whole_line_shown() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path());
    let mut events = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(EVENTS_FILE))
        .unwrap();
    events
        .write_all(b"{\"ts_ms\":1,\"kind\":\"tool_ca")
        .unwrap();
    drop(events);
    let path = dir.path().to_str().unwrap();
    for json in [false, true] {
        let args: &[&str] = if json {
            &["history", "show", path, "--json"]
        } else {
            &["history", "show", path]
        };
        let output = mcp_agent(args, &[]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let note = stderr(&output);
        assert!(
            note.contains("events.jsonl` line 5 is torn (26 bytes"),
            "{note}"
        );
        assert_eq!(stdout(&output).lines().count(), 8);
    }
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-session");
    let output = mcp_agent(&["history", "show", missing.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains(missing.to_str().unwrap()), "{said}");
    assert!(said.contains("does not exist"), "{said}");
    assert!(stdout(&output).is_empty());

    // A directory that is no session: the missing file is named.
    let output = mcp_agent(&["history", "show", dir.path().to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("messages.jsonl"),
        "{}",
        stderr(&output)
    );
}
