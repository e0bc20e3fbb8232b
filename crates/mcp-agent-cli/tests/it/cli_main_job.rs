//! The main job (`mcp-agent` with no command: with no configuration, a whole agent run of the
//! embedded scripted model on the embedded demo server) and the `tools` / `servers` commands,
//! end to end against the demo server spawned from the binary itself.

use std::process::Output;

use serde_json::Value;

use support::mcp_agent;

use crate::support;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn all(output: &Output) -> String {
    format!(
        "{}{}",
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `MCP_AGENT__SERVERS` naming the demo server of this binary as `demo`.
fn demo_servers() -> String {
    serde_json::json!([{
        "name": "demo",
        "transport": "stdio",
        "command": env!("CARGO_BIN_EXE_mcp-agent"),
        "args": ["demo-server"],
    }])
    .to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn with_no_configuration_the_main_job_is_a_whole_agent_run_on_the_demo_server() {
    let output = mcp_agent(&[], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let said = stderr(&output);
    assert!(said.contains("connected: demo (mcp-demo"), "{said}");
    assert!(
        said.contains(
            "the model sees 3 tools: mcp_search_tools, mcp_call_tool, mcp_read_output (4 MCP tools"
        ),
        "{said}"
    );
    // The scripted model searched, then called what the search found and the word counter in
    // one answer (concurrently: either may end first), each through the governed layer.
    let lines: Vec<&str> = said.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line `{prefix}…` in:\n{said}"))
    };
    let search = at(r#"→ mcp_search_tools {"query":"add two numbers","limit":3}"#);
    let add = at(r#"→ demo__add {"a":2,"b":3}"#);
    let count = at(r#"→ demo__word_count {"text":"the quick brown fox"}"#);
    assert!(search < add && search < count, "{said}");
    assert!(lines[search + 1].starts_with("← ok "), "{said}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("← ok ")).count(),
        3,
        "{said}"
    );
    assert!(said.contains("done in 3 steps"), "{said}");
    // The answer, on stdout alone, holds what the tools returned.
    assert_eq!(
        stdout(&output),
        "2 + 3 = 5, and \"the quick brown fox\" has 4 words (I asked the demo server's tools: \
         its adder and its word counter).\n"
    );
}

#[test]
fn the_main_job_s_session_is_recorded_like_a_real_run_s() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("demo");
    let output = mcp_agent(&["--history", history.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let output = mcp_agent(&["history", "show", history.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let shown = stdout(&output);
    for expected in [
        "user                What is 2 + 3",
        "model_responded     step 1: ",
        "tool_call_finished  call add: demo__add on demo (mcp-demo): ok",
        "tool_call_finished  call count: demo__word_count on demo (mcp-demo): ok",
        "run_finished        3 steps",
        "assistant           2 + 3 = 5",
    ] {
        assert!(shown.contains(expected), "`{expected}` not in:\n{shown}");
    }
}

#[test]
fn the_main_job_goes_through_the_policy_a_refused_call_reaches_the_model_and_yes_approves() {
    let policy = r#"{"approve": [{"server": "mcp-demo", "tool": "add"}]}"#;
    let output = mcp_agent(&[], &[("MCP_AGENT__POLICY", policy)]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let said = stderr(&output);
    assert!(said.contains("← denied "), "{said}");
    assert!(said.contains("--yes"), "{said}");
    // The model read the refusal and says so instead of a sum.
    let answer = stdout(&output);
    assert!(answer.starts_with("The tools did not give me"), "{answer}");
    assert!(answer.contains("approval"), "{answer}");

    let output = mcp_agent(&["--yes"], &[("MCP_AGENT__POLICY", policy)]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert!(stdout(&output).starts_with("2 + 3 = 5"), "{}", all(&output));
}

#[test]
fn with_servers_configured_the_main_job_shows_what_the_model_sees() {
    let servers = demo_servers();
    let output = mcp_agent(&[], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let out = stdout(&output);
    assert!(out.contains("connected: demo (mcp-demo"), "{out}");
    assert!(out.contains("the model sees 3 tools"), "{out}");
    assert!(out.contains("mcp-agent run --model NAME"), "{out}");
}

#[test]
fn tools_list_shows_every_tool_by_external_name() {
    let servers = demo_servers();
    let output = mcp_agent(
        &["tools", "list", "--json"],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let list: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "demo__add",
            "demo__current_time",
            "demo__echo",
            "demo__word_count"
        ]
    );
    assert_eq!(
        list[0]["input_schema"]["required"],
        serde_json::json!(["a", "b"])
    );
}

#[test]
fn tools_search_ranks_by_relevance() {
    let servers = demo_servers();
    let output = mcp_agent(
        &["tools", "search", "count the words in a text", "--json"],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(result["tools"][0]["name"], "demo__word_count");
    assert_eq!(result["count"], result["tools"].as_array().unwrap().len());
}

#[test]
fn tools_call_validates_arguments_and_returns_the_result() {
    let servers = demo_servers();
    let env = [("MCP_AGENT__SERVERS", servers.as_str())];
    let output = mcp_agent(
        &["tools", "call", "demo__echo", r#"{"text": "hello"}"#],
        &env,
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output).trim(), "hello");

    // Missing a required field: refused before anything is sent, naming the field.
    let output = mcp_agent(&["tools", "call", "demo__add", r#"{"a": 1}"#], &env);
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    assert!(all(&output).contains('b'), "{}", all(&output));

    // An unknown tool: suggestions.
    let output = mcp_agent(&["tools", "call", "demo__ad", "{}"], &env);
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    assert!(all(&output).contains("demo__add"), "{}", all(&output));

    // Not a JSON object: a usage error before connecting.
    let output = mcp_agent(&["tools", "call", "demo__echo", "[1]"], &env);
    assert_eq!(output.status.code(), Some(2), "{}", all(&output));
}

#[test]
fn servers_check_reports_identity_and_tool_count() {
    let servers = demo_servers();
    let output = mcp_agent(
        &["servers", "check", "--json"],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report[0]["server"], "demo");
    assert_eq!(report[0]["server_info"]["name"], "mcp-demo");
    assert_eq!(report[0]["tools"], 4);
}

#[test]
fn an_unreachable_server_fails_with_its_name() {
    let servers =
        r#"[{"name": "ghost", "transport": "stdio", "command": "/nonexistent/mcp-server"}]"#;
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", servers)]);
    assert_eq!(output.status.code(), Some(1), "{}", all(&output));
    assert!(all(&output).contains("ghost"), "{}", all(&output));
}
