//! `mcp-agent run` end to end: the CLI, the demo server it spawns, and a model endpoint played
//! by a third-party OpenAI-compatible mock server (`support::endpoint`) whose scripts ask for
//! tool calls and check — by matching what the CLI sent — that the model was shown their
//! results.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::endpoint::Endpoint;
use crate::support::mcp_agent;

/// The API key every run has; it must never be printed.
pub(crate) const KEY: &str = "sk-test-4f9a2c7e1b8d6053";

/// `MCP_AGENT__SERVERS` naming the demo server of this binary as `demo`.
pub(crate) fn demo_servers() -> String {
    json!([{
        "name": "demo",
        "transport": "stdio",
        "command": env!("CARGO_BIN_EXE_mcp-agent"),
        "args": ["demo-server"],
    }])
    .to_string()
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn all(output: &Output) -> String {
    format!("{}{}", stdout(output), stderr(output))
}

/// Neither the key nor a raw control character in anything the CLI printed.
#[track_caller]
pub(crate) fn assert_clean(output: &Output) {
    let all = all(output);
    assert!(!all.contains(KEY), "the key was printed: {all}");
    assert!(
        !all.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{all:?}"
    );
}

/// `mcp-agent run --model test-model --base-url URL … INSTRUCTION` (`--model` from `args` when
/// given there) with the demo server, the key in `OPENAI_API_KEY`, and `env`.
pub(crate) fn run(endpoint: &Endpoint, args: &[&str], env: &[(&str, &str)]) -> Output {
    let servers = demo_servers();
    let mut all_args = vec!["run", "--base-url", &endpoint.base_url];
    if !args.contains(&"--model") {
        all_args.extend(["--model", "test-model"]);
    }
    all_args.extend_from_slice(args);
    let mut all_env = vec![
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("OPENAI_API_KEY", KEY),
    ];
    all_env.extend_from_slice(env);
    mcp_agent(&all_args, &all_env)
}

/// A tool call of the demo's adder, then (once the model was shown `{"sum":5…}`) an answer
/// streamed in small pieces.
const ADD_THEN_ANSWER: &str = r#"
fixtures:
  - scenario: { name: run, required_state: "", set_state: called }
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: demo__add, arguments: { a: 2, b: 3 } }
  - scenario: { name: run, required_state: called, set_state: done }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, '\"sum\":5')]"
    streaming: { chunk_size: 3 }
    response:
      content: "The sum of 2 and 3 is 5."
"#;

#[test]
fn the_endpoint_asks_for_a_tool_call_sees_its_result_and_the_answer_is_streamed_to_stdout() {
    let Some(endpoint) = Endpoint::start(ADD_THEN_ANSWER) else {
        return;
    };
    let history = tempfile::tempdir().unwrap();
    let dir = history.path().join("session");
    let output = run(
        &endpoint,
        &["--history", dir.to_str().unwrap(), "What is 2 + 3?"],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "The sum of 2 and 3 is 5.\n");
    let said = stderr(&output);
    let lines: Vec<&str> = said.lines().collect();
    let call = lines
        .iter()
        .position(|l| *l == r#"→ demo__add {"a":2,"b":3}"#)
        .unwrap_or_else(|| panic!("{said}"));
    assert!(lines[call + 1].starts_with("← ok "), "{said}");
    assert!(lines[call + 1].ends_with(" B"), "{said}");
    assert!(said.contains("done in 2 steps"), "{said}");
    assert_clean(&output);

    // The history holds the instruction, the call, its result and the answer.
    let messages = std::fs::read_to_string(dir.join("messages.jsonl")).unwrap();
    for expected in [
        "What is 2 + 3?",
        "demo__add",
        "\\\"sum\\\":5",
        "The sum of 2 and 3 is 5.",
    ] {
        assert!(messages.contains(expected), "{expected} not in {messages}");
    }
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    for kind in ["tool_call_finished", "model_responded", "run_finished"] {
        assert!(events.contains(kind), "{kind} not in {events}");
    }
}

#[test]
fn json_prints_the_run_s_events_and_then_the_answer_as_json_lines() {
    let Some(endpoint) = Endpoint::start(ADD_THEN_ANSWER) else {
        return;
    };
    let output = run(&endpoint, &["--json", "What is 2 + 3?"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let lines: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "model_responded",
            "tool_call_started",
            "tool_call_finished",
            "model_responded",
            "run_finished",
            "answer"
        ]
    );
    let started = &lines[kinds
        .iter()
        .position(|k| *k == "tool_call_started")
        .unwrap()];
    assert_eq!(started["tool"], "demo__add");
    assert_eq!(started["server"], "demo");
    let finished = &lines[kinds
        .iter()
        .position(|k| *k == "tool_call_finished")
        .unwrap()];
    assert_eq!(finished["outcome"], "ok");
    assert_eq!(lines[0]["tool_call_count"], 1);
    let answer = lines.last().unwrap();
    assert_eq!(answer["kind"], "answer");
    assert_eq!(answer["answer"], "The sum of 2 and 3 is 5.");
    assert_eq!(answer["step"], 2);
    assert_eq!(lines[4]["step"], 2);
    assert_clean(&output);
}

/// Three bad calls in three answers — a tool that does not exist, arguments its schema
/// refuses, a tool the policy denies — each answer asked for only once the model was shown the
/// error of the one before; then an answer.
const THREE_BAD_CALLS: &str = r#"
fixtures:
  - scenario: { name: run, required_state: "", set_state: unknown }
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: demo__subtract, arguments: { a: 2, b: 3 } }
  - scenario: { name: run, required_state: unknown, set_state: invalid }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, 'unknown tool')]"
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: demo__add, arguments: { a: "two", b: 3 } }
  - scenario: { name: run, required_state: invalid, set_state: denied }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, 'invalid arguments')]"
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: demo__echo, arguments: { text: "hi" } }
  - scenario: { name: run, required_state: denied, set_state: done }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, 'denied')]"
    response:
      content: "None of my three calls worked."
"#;

#[test]
fn an_unknown_tool_arguments_the_schema_refuses_and_a_denied_tool_are_errors_the_model_sees() {
    let Some(endpoint) = Endpoint::start(THREE_BAD_CALLS) else {
        return;
    };
    let policy = r#"{"deny": [{"server": "mcp-demo", "tool": "echo"}]}"#;
    let output = run(
        &endpoint,
        &["Do three things."],
        &[("MCP_AGENT__POLICY", policy)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "None of my three calls worked.\n");
    let said = stderr(&output);
    for expected in [
        "→ demo__subtract {\"a\":2,\"b\":3}",
        "← unknown tool ",
        "→ demo__add {\"a\":\"two\",\"b\":3}",
        "← invalid arguments ",
        "→ demo__echo {\"text\":\"hi\"}",
        "← denied ",
        "done in 4 steps",
    ] {
        assert!(said.contains(expected), "`{expected}` not in:\n{said}");
    }
    // The unknown tool's error suggests the real one.
    assert!(said.contains("demo__add"), "{said}");
    assert_clean(&output);
}

#[test]
fn a_model_that_calls_tools_forever_stops_at_max_steps_with_a_clear_error() {
    let forever = r#"
fixtures:
  - response:
      tool_calls:
        - name: mcp_search_tools
          arguments: { query: "anything at all" }
"#;
    let Some(endpoint) = Endpoint::start(forever) else {
        return;
    };
    let output = run(&endpoint, &["--max-steps", "3", "Never stop."], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    let said = stderr(&output);
    assert_eq!(said.matches("→ mcp_search_tools ").count(), 3, "{said}");
    assert!(said.contains("no final answer within 3 steps"), "{said}");
    assert!(said.contains("--max-steps"), "{said}");
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert_clean(&output);
}

/// A model that echoes the key in its arguments and its streamed text (split across pieces),
/// with terminal escapes around it.
const LEAKY: &str = r#"
fixtures:
  - scenario: { name: run, required_state: "", set_state: called }
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments:
            tool_name: demo__echo
            arguments: { text: "sk-test-4f9a2c7e1b8d6053", token: "tok-other-9c1e" }
  - scenario: { name: run, required_state: called, set_state: done }
    streaming: { chunk_size: 5 }
    response:
      content: "Your key is sk-test-4f9a2c7e1b8d6053 \e[2J\e]0;title\a and that is all."
"#;

#[test]
fn neither_the_key_nor_a_control_character_reaches_the_terminal_from_the_model() {
    let Some(endpoint) = Endpoint::start(LEAKY) else {
        return;
    };
    let history = tempfile::tempdir().unwrap();
    let dir = history.path().join("session");
    let dir_arg = dir.display().to_string();
    let output = run(&endpoint, &["--history", &dir_arg, "Leak it."], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    // Nor the session's files: the key the model echoed is redacted there too.
    for file in ["messages.jsonl", "events.jsonl"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(!text.contains(KEY), "{file} holds the key: {text}");
    }
    let messages = std::fs::read_to_string(dir.join("messages.jsonl")).unwrap();
    assert!(messages.contains("[REDACTED]"), "{messages}");
    assert_eq!(
        stdout(&output),
        "Your key is [REDACTED] \\u{1b}[2J\\u{1b}]0;title\\u{7} and that is all.\n"
    );
    let said = stderr(&output);
    assert!(
        said.contains(r#"→ demo__echo {"text":"[REDACTED]","token":"[REDACTED]"}"#),
        "{said}"
    );
    assert_clean(&output);
}

/// A call of the test kit's `test_tool_with_progress`, then (once the model was shown its
/// result) an answer.
const PROGRESS_THEN_ANSWER: &str = r#"
fixtures:
  - scenario: { name: run, required_state: "", set_state: called }
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: kit__test_tool_with_progress, arguments: {} }
  - scenario: { name: run, required_state: called, set_state: done }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, 'Progress tool completed')]"
    response:
      content: "It completed."
"#;

#[test]
fn a_call_s_progress_is_printed_between_its_lines() {
    let Some(endpoint) = Endpoint::start(PROGRESS_THEN_ANSWER) else {
        return;
    };
    let servers = crate::support::kit_with_suite_tools();
    let output = run(
        &endpoint,
        &["Run the progress tool."],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "It completed.\n");
    let said = stderr(&output);
    let lines: Vec<&str> = said.lines().collect();
    let call = lines
        .iter()
        .position(|l| *l == "→ kit__test_tool_with_progress {}")
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(
        lines[call + 1..call + 4],
        [
            "  progress: 0/100",
            "  progress: 50/100",
            "  progress: 100/100"
        ],
        "{said}"
    );
    assert!(lines[call + 4].starts_with("← ok "), "{said}");
    assert_clean(&output);
}

/// The model, shown the kit's instructions in its system prompt, reads a resource of the kit
/// with `mcp_read`, then answers once it was shown the resource.
const READ_THEN_ANSWER: &str = r#"
fixtures:
  - scenario: { name: run, required_state: "", set_state: read }
    match:
      body_jsonpath: "$.messages[?@.role == 'system' && search(@.content, 'MCP server `kit`')]"
    response:
      tool_calls:
        - name: mcp_read
          arguments: { server: kit, uri: "test://text/hello" }
  - scenario: { name: run, required_state: read, set_state: done }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, 'text/plain')]"
    response:
      content: "The resource says hello."
"#;

#[test]
fn the_model_sees_the_servers_instructions_and_reads_a_resource_with_mcp_read() {
    let Some(endpoint) = Endpoint::start(READ_THEN_ANSWER) else {
        return;
    };
    let servers = json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": ["--features"],
    }])
    .to_string();
    let args = [
        "run",
        "--base-url",
        &endpoint.base_url,
        "--model",
        "test-model",
        "What does the kit's hello resource say?",
    ];
    let output = mcp_agent(
        &args,
        &[("MCP_AGENT__SERVERS", &servers), ("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "The resource says hello.\n");
    let said = stderr(&output);
    let lines: Vec<&str> = said.lines().collect();
    let read = lines
        .iter()
        .position(|l| l.starts_with("→ mcp_read kit resource test://text/hello"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(lines[read + 1].starts_with("← ok "), "{said}");
    assert_clean(&output);
}
