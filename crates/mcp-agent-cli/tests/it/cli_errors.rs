//! Every way a CLI command fails reads as one story: what failed, on which server and tool,
//! and why — once, with no Rust type paths and no sentence told twice.

use std::process::Output;

use serde_json::json;

use support::mcp_agent;

use crate::support;

fn kit(args: &[&str], extra: serde_json::Value) -> String {
    let mut server = json!({
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": args,
    });
    if let (Some(server), Some(extra)) = (server.as_object_mut(), extra.as_object()) {
        server.extend(extra.clone());
    }
    json!([server]).to_string()
}

/// Fails with `code`, and stderr reads as one story: it names `must_name`, shows no type path,
/// and tells no clause twice.
#[track_caller]
fn assert_story(output: &Output, code: i32, must_name: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    for name in must_name {
        assert!(stderr.contains(name), "does not name {name:?}: {stderr}");
    }
    for path in ["rmcp::", "mcp_", "::", "Box<", "dyn ", "Error {", "Some("] {
        assert!(!stderr.contains(path), "shows {path:?}: {stderr}");
    }
    let clauses: Vec<&str> = stderr
        .split([':', ';', '\n'])
        .map(str::trim)
        .filter(|c| c.len() >= 12)
        .collect();
    for (i, clause) in clauses.iter().enumerate() {
        assert!(
            !clauses[i + 1..].contains(clause),
            "tells {clause:?} twice: {stderr}"
        );
    }
}

#[test]
fn a_bad_config() {
    let output = mcp_agent(
        &["tools", "list"],
        &[("MCP_AGENT__SERVERS", r#"[{"name": "a", "comand": "x"}]"#)],
    );
    assert_story(
        &output,
        2,
        &["MCP_AGENT__SERVERS[0].comand", "did you mean `command`"],
    );
}

#[test]
fn a_tool_that_is_not_there() {
    let servers = kit(&[], json!({}));
    let output = mcp_agent(
        &["tools", "call", "nope__echo", "{}"],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_story(&output, 1, &["nope__echo"]);
}

#[test]
fn a_refused_connection() {
    let output = mcp_agent(
        &["tools", "list"],
        &[(
            "MCP_AGENT__SERVERS",
            r#"[{"name": "web", "url": "http://127.0.0.1:9/mcp"}]"#,
        )],
    );
    assert_story(&output, 1, &["`web`", "refused"]);
}

#[test]
fn an_initialize_that_takes_too_long() {
    let servers = kit(
        &["--init-delay-ms", "60000"],
        json!({"connect_timeout_seconds": 0.5}),
    );
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_story(&output, 1, &["`kit`", "connect timeout"]);
}

#[test]
fn an_oauth_failure() {
    let servers = json!([{
        "name": "billing",
        "url": "http://127.0.0.1:9/mcp",
        "auth": {"oauth_client_credentials": {
            "token_url": "http://127.0.0.1:9/token",
            "client_id": "agent",
            "client_secret": "s3cret-value-123",
        }},
    }])
    .to_string();
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_story(&output, 1, &["`billing`"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("s3cret-value-123"), "{stderr}");
}

#[test]
fn a_tool_that_fails() {
    let servers = kit(&[], json!({}));
    let output = mcp_agent(
        &[
            "tools",
            "call",
            "kit__fail",
            r#"{"message": "the disk is full"}"#,
        ],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_story(&output, 1, &["kit__fail", "the disk is full"]);
}

#[test]
fn a_call_that_takes_too_long() {
    let servers = kit(&[], json!({"call_timeout_seconds": 0.5}));
    let output = mcp_agent(
        &["tools", "call", "kit__slow", r#"{"ms": 60000}"#],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_story(&output, 1, &["kit__slow", "timed out"]);
}

#[test]
fn a_server_that_refuses_the_credentials() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let challenge = r#"Bearer realm="mcp", error="invalid_token""#;
    let locked = runtime
        .block_on(mcp_test_kit::serve_status(
            401,
            &[("www-authenticate", challenge)],
        ))
        .unwrap();
    let servers = json!([{
        "name": "locked",
        "url": locked.url(),
        "auth": {"bearer_token": "tok-refused-0123456789"},
    }])
    .to_string();
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_story(&output, 1, &["`locked`", "HTTP 401", challenge]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("the transport failed"), "{stderr}");
    assert!(!stderr.contains("tok-refused"), "{stderr}");
}

#[test]
fn a_server_that_answers_an_http_error() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let down = runtime
        .block_on(mcp_test_kit::serve_status(503, &[("retry-after", "120")]))
        .unwrap();
    let servers = json!([{"name": "down", "url": down.url()}]).to_string();
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_story(&output, 1, &["`down`", "HTTP 503"]);
}

/// The one JSON object on stdout of a `--json` command that failed with `code`.
#[track_caller]
fn json_failure(output: &Output, code: i32, stage: &str) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON value ({e}): {:?}; stderr: {stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_eq!(value["kind"], "error", "{value}");
    assert_eq!(value["exit_code"], code, "{value}");
    assert_eq!(value["stage"], stage, "{value}");
    value
}

#[test]
fn json_output_of_a_tool_that_fails_is_an_object() {
    let servers = kit(&[], json!({}));
    let output = mcp_agent(
        &[
            "tools",
            "call",
            "kit__fail",
            r#"{"message": "the disk is full"}"#,
            "--json",
        ],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    let value = json_failure(&output, 1, "call");
    assert_eq!(value["is_error"], true, "{value}");
    assert_eq!(value["tool"], "kit__fail", "{value}");
    assert_eq!(value["server"], "kit", "{value}");
    assert_eq!(
        value["message"], "the failing tool failed: the disk is full",
        "{value}"
    );
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .contains("the disk is full"),
        "{value}"
    );
}

#[test]
fn json_output_of_a_command_that_fails_before_it_starts_is_an_object() {
    // An invalid configuration.
    let output = mcp_agent(
        &["tools", "call", "a__b", "{}", "--json"],
        &[("MCP_AGENT__SERVERS", r#"[{"name": "a", "comand": "x"}]"#)],
    );
    let value = json_failure(&output, 2, "configuration");
    let problems = value["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("MCP_AGENT__SERVERS[0].comand")),
        "{value}"
    );
    // Arguments that are not JSON.
    let servers = kit(&[], json!({}));
    let env = [("MCP_AGENT__SERVERS", servers.as_str())];
    let output = mcp_agent(&["tools", "call", "kit__echo", "{not json", "--json"], &env);
    json_failure(&output, 2, "arguments");
    // No server can be reached.
    let refused = r#"[{"name": "web", "url": "http://127.0.0.1:9/mcp"}]"#;
    for args in [
        &["tools", "list", "--json"][..],
        &["tools", "call", "web__x", "{}", "--json"],
        &["servers", "check", "--json"],
        &[
            "run",
            "hello",
            "--json",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
    ] {
        let output = mcp_agent(args, &[("MCP_AGENT__SERVERS", refused)]);
        let value = json_failure(&output, 1, "connect");
        assert!(
            value["error"].as_str().unwrap().contains("`web`"),
            "{args:?}: {value}"
        );
    }
    // A run without a model.
    let output = mcp_agent(&["run", "hello", "--json"], &env);
    json_failure(&output, 2, "configuration");
}
