//! `resources list|read` and `prompts list|get` against server-everything (a Node server
//! nobody here wrote, pinned in `peers/npm`): listings, reads of text and binary contents,
//! prompts with arguments, missing arguments named, `[policy]` refusals, `--json`, and output
//! that stays terminal-safe.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::mcp_agent;

/// `MCP_AGENT__SERVERS` with server-everything over stdio as `everything`, or `None` when the
/// peer is not installed (and not required).
fn everything() -> Option<String> {
    let node = mcp_test_kit::peer::path("MCP_AGENT_PEER_NODE22")?;
    let entry = mcp_test_kit::peer::path("MCP_AGENT_PEER_EVERYTHING")?;
    Some(
        json!([{
            "name": "everything",
            "command": node,
            "args": [entry, "stdio"],
        }])
        .to_string(),
    )
}

fn run(servers: &str, policy: Option<&Value>, args: &[&str]) -> Output {
    let policy = policy.map(Value::to_string);
    let mut env = vec![("MCP_AGENT__SERVERS", servers)];
    if let Some(policy) = &policy {
        env.push(("MCP_AGENT__POLICY", policy));
    }
    mcp_agent(args, &env)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn assert_safe(output: &Output) {
    let all = format!("{}{}", stdout(output), stderr(output));
    assert!(
        !all.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{all:?}"
    );
}

const DOCUMENT: &str = "demo://resource/static/document/architecture.md";

#[test]
fn resources_are_listed_with_templates_and_read() {
    let Some(servers) = everything() else { return };
    let listed = run(&servers, None, &["resources", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(
        text.contains(&format!("everything\t{DOCUMENT}\t")),
        "{text}"
    );
    assert!(text.contains("(template)"), "{text}");
    assert_safe(&listed);

    let json = run(
        &servers,
        None,
        &["resources", "list", "everything", "--json"],
    );
    let rows: Value = serde_json::from_slice(&json.stdout).expect("a JSON array");
    let rows = rows.as_array().expect("an array");
    assert!(
        rows.iter()
            .any(|r| r["uri"] == DOCUMENT && r["mime_type"] == "text/markdown")
    );
    assert!(rows.iter().any(|r| r["uri_template"].is_string()));

    let read = run(
        &servers,
        None,
        &["resources", "read", "everything", DOCUMENT],
    );
    assert_eq!(read.status.code(), Some(0), "{}", stderr(&read));
    assert!(
        stdout(&read).contains('#'),
        "a markdown document: {}",
        stdout(&read)
    );
    assert_safe(&read);
}

#[test]
fn a_binary_resource_is_summarised_or_printed_as_json() {
    let Some(servers) = everything() else { return };
    let uri = "demo://resource/dynamic/blob/1";
    let read = run(&servers, None, &["resources", "read", "everything", uri]);
    assert_eq!(read.status.code(), Some(0), "{}", stderr(&read));
    assert!(stderr(&read).contains("binary"), "{}", stderr(&read));
    let json = run(
        &servers,
        None,
        &["resources", "read", "everything", uri, "--json"],
    );
    let contents: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(contents[0]["uri"], uri);
    assert!(contents[0]["blob"].is_string(), "{contents}");
}

#[test]
fn a_resource_policy_refuses_denies_and_hides() {
    let Some(servers) = everything() else { return };
    let policy = json!({"deny": [{"server": "*", "resource": "demo://resource/static/*"}]});
    let read = run(
        &servers,
        Some(&policy),
        &["resources", "read", "everything", DOCUMENT],
    );
    assert_eq!(read.status.code(), Some(1), "{}", stderr(&read));
    assert!(stderr(&read).contains("refused"), "{}", stderr(&read));
    let listed = run(&servers, Some(&policy), &["resources", "list", "--json"]);
    let rows: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert!(
        rows.as_array().unwrap().iter().all(|r| !r["uri"]
            .as_str()
            .unwrap_or("")
            .starts_with("demo://resource/static/")),
        "{rows}"
    );
}

#[test]
fn prompts_are_listed_and_got_with_arguments() {
    let Some(servers) = everything() else { return };
    let listed = run(&servers, None, &["prompts", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(
        text.contains("everything__args-prompt(city*, state)"),
        "{text}"
    );
    assert!(text.contains("everything__simple-prompt()"), "{text}");

    let got = run(
        &servers,
        None,
        &[
            "prompts",
            "get",
            "everything__args-prompt",
            "--arg",
            "city=Seoul",
        ],
    );
    assert_eq!(got.status.code(), Some(0), "{}", stderr(&got));
    assert_eq!(stdout(&got), "user:\nWhat's weather in Seoul?\n");

    let json = run(
        &servers,
        None,
        &["prompts", "get", "everything__simple-prompt", "--json"],
    );
    let result: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(result["messages"][0]["role"], "user");
}

#[test]
fn a_missing_argument_is_named_and_bad_names_are_usage_errors() {
    let Some(servers) = everything() else { return };
    let missing = run(
        &servers,
        None,
        &["prompts", "get", "everything__args-prompt"],
    );
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("city"), "{}", stderr(&missing));

    let bad = run(&servers, None, &["prompts", "get", "args-prompt"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("server__prompt"), "{}", stderr(&bad));
}
