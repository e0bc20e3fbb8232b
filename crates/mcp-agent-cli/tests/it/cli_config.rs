//! `mcp-agent config check`: prints the resolved configuration without secrets (exit 0), or
//! every problem with its path (exit 2).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use support::mcp_agent;

use crate::support;

const BEARER: &str = "bearer-SECRET-4d1c";
const CLIENT_SECRET: &str = "client-SECRET-9e07";
const ENV_SECRET: &str = "ghp_SECRET-77f3";

/// Runs the binary with exactly `env` as its environment.
fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_no_secret(output: &Output) {
    let all = text(output);
    for secret in [BEARER, CLIENT_SECRET, ENV_SECRET] {
        assert!(!all.contains(secret), "{secret} leaked:\n{all}");
    }
}

fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_valid_configuration_prints_redacted_json_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "mcp.toml",
        &format!(
            r#"
connect_timeout_seconds = 5

[[servers]]
name = "linear"
url = "https://mcp.example.com/linear"
auth = {{ bearer_token = "{BEARER}" }}

[[servers]]
name = "tenant"
url = "https://tenant.example.com/mcp"

[servers.auth.oauth_client_credentials]
client_id = "agent"
client_secret = "${{TENANT_CLIENT_SECRET}}"
"#
        ),
    );
    let servers_env = format!(
        r#"[{{"name": "github", "command": "github-mcp-server", "env": {{"GITHUB_TOKEN": "{ENV_SECRET}"}}}}]"#
    );
    let output = mcp_agent(
        &["config", "check", "--file", &file],
        &[
            ("MCP_AGENT__SERVERS", &servers_env),
            ("TENANT_CLIENT_SECRET", CLIENT_SECRET),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_no_secret(&output);

    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let names: Vec<&str> = json["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["linear", "tenant", "github"]);
    assert_eq!(json["connect_timeout_seconds"], 5.0);
    assert_eq!(json["servers"][0]["auth"]["bearer"]["inline"], "[REDACTED]");
    assert_eq!(
        json["servers"][1]["auth"]["oauth_client_credentials"]["client_secret"]["inline"],
        "[REDACTED]"
    );
    assert_eq!(json["servers"][2]["env"]["GITHUB_TOKEN"], "[REDACTED]");
}

#[test]
fn an_invalid_configuration_prints_every_problem_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "mcp.json",
        &format!(
            r#"{{"servers": [{{"name": "files", "url": "ftp://files.example.com/",
                               "auth": {{"bearer_token": "{BEARER}"}}}}],
                "mcpServers": {{"git": {{"command": "git-mcp", "url": "https://git.example.com"}}}}}}"#
        ),
    );
    let servers_env =
        format!(r#"[{{"name": "bad name", "comand": "x", "env": {{"TOKEN": "{ENV_SECRET}"}}}}]"#);
    let output = mcp_agent(
        &["config", "check", "--file", &file],
        &[("MCP_AGENT__SERVERS", &servers_env)],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert_no_secret(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for path in [
        "servers[0].url",
        "mcpServers.git",
        "MCP_AGENT__SERVERS[0].name",
        "MCP_AGENT__SERVERS[0].comand",
    ] {
        assert!(stderr.contains(path), "{path} not in:\n{stderr}");
    }
    assert!(stderr.contains("did you mean `command`?"), "{stderr}");
    assert!(
        stderr.contains("mcp.json"),
        "problems name the file:\n{stderr}"
    );
    assert!(output.stdout.is_empty(), "nothing on stdout when invalid");
}

#[test]
fn bad_json_in_the_environment_names_the_variable() {
    let output = mcp_agent(&["config", "check"], &[("MCP_AGENT__SERVERS", "not json")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("MCP_AGENT__SERVERS is not valid JSON"),
        "{}",
        text(&output)
    );
}

#[test]
fn an_unreadable_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let output = mcp_agent(&["config", "check", "-f", missing.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output).contains("missing.toml"), "{}", text(&output));
    // The cause is told once, after what failed.
    let cause = "No such file or directory";
    assert_eq!(text(&output).matches(cause).count(), 1, "{}", text(&output));
}

#[test]
fn no_configuration_is_valid_and_empty() {
    let output = mcp_agent(&["config", "check"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["servers"], serde_json::json!([]));
    assert_eq!(json["tool_server"]["name"], "mcp-agent");
    assert_eq!(json["partial_failure"], "fail_fast");
}
