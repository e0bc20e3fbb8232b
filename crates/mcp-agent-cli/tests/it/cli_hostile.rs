//! The CLI against a hostile world: a server whose every string is an attack on the terminal
//! or echoes a secret, a reader that closes the pipe, and a run where no server is up.

use std::process::{Command, Stdio};

use serde_json::Value;

use support::mcp_agent;

use crate::support;

const SECRET: &str = "sk-hostile-0123456789";

fn python() -> String {
    // The test's own PATH finds it; the CLI runs with a cleared environment.
    let out = Command::new("sh")
        .args(["-c", "command -v python3"])
        .output()
        .expect("sh");
    let path = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(!path.is_empty(), "python3 is needed by this test");
    path
}

fn hostile_servers() -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/support/hostile_server.py"
    );
    serde_json::json!([{
        "name": "hostile",
        "command": python(),
        "args": [script],
        "env": { "HOSTILE_SECRET": SECRET },
    }])
    .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Nothing a terminal would act on, no secret, no endless line.
fn assert_terminal_safe(what: &str, bytes: &[u8]) {
    let shown = text(bytes);
    for (i, c) in shown.chars().enumerate() {
        assert!(
            c == '\n' || c == '\t' || !c.is_control(),
            "{what}: control character {c:?} at {i}: {shown:?}"
        );
    }
    assert!(!shown.contains(SECRET), "{what} shows the secret: {shown}");
    for line in shown.lines() {
        assert!(line.len() < 1024, "{what}: a {}-byte line", line.len());
    }
}

#[test]
fn tools_list_cannot_be_forged_or_styled_by_tool_names() {
    let servers = hostile_servers();
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_terminal_safe("stdout", &output.stdout);
    assert_terminal_safe("stderr", &output.stderr);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("hostile__plain\t"), "{stdout}");
    for line in stdout.lines() {
        assert!(line.starts_with("hostile__"), "a forged row: {line:?}");
    }
}

#[test]
fn servers_check_shows_a_bounded_escaped_identity() {
    let servers = hostile_servers();
    let output = mcp_agent(&["servers", "check"], &[("MCP_AGENT__SERVERS", &servers)]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_terminal_safe("stdout", &output.stdout);
    let stdout = text(&output.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("hostile\tstdio\t"), "{stdout}");
    assert!(stdout.contains("hostile"), "{stdout}");

    // JSON output stays exact JSON (serde_json escapes the control characters).
    let output = mcp_agent(
        &["servers", "check", "--json"],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_terminal_safe("json stdout", &output.stdout);
    let report: Value = serde_json::from_slice(&output.stdout).expect("exact JSON");
    assert_eq!(report[0]["server"], "hostile");
}

#[test]
fn call_results_and_errors_are_escaped_and_scrubbed() {
    let servers = hostile_servers();
    let env = [("MCP_AGENT__SERVERS", servers.as_str())];
    let output = mcp_agent(&["tools", "call", "hostile__plain", "{}"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_terminal_safe("result", &output.stdout);
    assert!(
        text(&output.stdout).contains("key=[REDACTED]"),
        "{}",
        text(&output.stdout)
    );

    let output = mcp_agent(
        &["tools", "call", "hostile__plain", r#"{"fail": true}"#],
        &env,
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert_terminal_safe("error", &output.stderr);
    assert!(
        text(&output.stderr).contains("denied for key"),
        "{}",
        text(&output.stderr)
    );

    let output = mcp_agent(&["tools", "call", "hostile__plain", "{}", "--json"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_terminal_safe("json result", &output.stdout);
    serde_json::from_slice::<Value>(&output.stdout).expect("exact JSON");
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    // Closed before the CLI writes anything: its first write fails with EPIPE.
    drop(reader);
    let servers = hostile_servers();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["tools", "list"])
        .env_clear()
        .env("MCP_AGENT__SERVERS", &servers)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_run_with_every_server_down_fails_naming_each_cause() {
    let servers = serde_json::json!([
        { "name": "gone", "command": "/nonexistent/mcp-server" },
        { "name": "refused", "url": "http://127.0.0.1:9/mcp" },
    ])
    .to_string();
    let env = [
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("MCP_AGENT__PARTIAL_FAILURE", "skip_unavailable"),
    ];
    for args in [&["tools", "list"][..], &["servers", "check"]] {
        let output = mcp_agent(args, &env);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("`gone`"), "{stderr}");
        assert!(stderr.contains("`refused`"), "{stderr}");
        assert!(
            stderr.contains("none of the 2 configured servers"),
            "{stderr}"
        );
    }
}

#[test]
fn trace_logs_go_to_stderr_and_show_no_secret() {
    let servers = hostile_servers();
    let env = [
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("RUST_LOG", "trace"),
    ];
    // The server echoes its secret in an error; rmcp logs whole messages at trace level.
    let output = mcp_agent(
        &["tools", "call", "hostile__plain", r#"{"fail": true}"#],
        &env,
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("TRACE"), "no trace output: {stderr}");
    // The run, its session and the call each have a span naming server and tool.
    for span in [
        "mcp_run{",
        "mcp_session{server=hostile",
        "mcp_call{server=hostile tool=plain}",
    ] {
        assert!(stderr.contains(span), "no span {span}: {stderr}");
    }
    assert!(stderr.contains("outcome=\"failed\""), "{stderr}");
    assert!(
        !stderr.contains(SECRET),
        "the logs show the secret: {stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "the logs carry an escape: {stderr}"
    );

    // Logs never reach stdout: `--json` stays exact JSON at any level.
    let output = mcp_agent(&["tools", "list", "--json", "-vvv"], &env[..1]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    serde_json::from_slice::<Value>(&output.stdout).expect("exact JSON");
    assert!(
        text(&output.stderr).contains("DEBUG"),
        "{}",
        text(&output.stderr)
    );
}

/// `MCP_AGENT__SERVERS` naming `hostile`, a [`HostileServer`] over HTTP listing `tools` (and its
/// callable `leak*` tools), served on `runtime` while the server handle lives.
fn hostile_http(
    runtime: &tokio::runtime::Runtime,
    tools: Vec<rmcp::model::Tool>,
) -> (mcp_test_kit::HttpServer, String) {
    use mcp_test_kit::hostile::{HostileOptions, HostileServer, Pages};
    let options = HostileOptions::new(Pages::Fixed(tools));
    let server = runtime
        .block_on(mcp_test_kit::serve_handler_http(move || {
            HostileServer::new(options.clone())
        }))
        .unwrap();
    let servers = serde_json::json!([{"name": "hostile", "url": server.url()}]).to_string();
    (server, servers)
}

#[test]
fn a_tool_with_an_empty_or_repeated_name_is_left_out_with_a_warning_naming_it() {
    use mcp_test_kit::hostile::tool;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_server, servers) = hostile_http(
        &runtime,
        vec![
            tool("", "No name."),
            tool("twin", "The first twin."),
            tool("ok", "A fine tool."),
            tool("twin", "The second twin, with other words."),
        ],
    );
    let output = mcp_agent(&["tools", "list"], &[("MCP_AGENT__SERVERS", &servers)]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("hostile__ok\t"), "{stdout}");
    assert!(stdout.contains("hostile__leak\t"), "{stdout}");
    assert!(!stdout.contains("twin"), "{stdout}");
    // Default log lines read like the CLI's own: no timestamp, module path or span names.
    for warning in [
        "warning: server `hostile`: tool `twin` left out: its name is listed 2 times",
        "warning: server `hostile`: tool `` left out: its name is empty",
    ] {
        assert!(
            stderr.lines().any(|l| l == warning),
            "no line {warning:?}: {stderr}"
        );
    }
    assert!(!stderr.contains("::"), "{stderr}");
    assert!(!stderr.contains("mcp_"), "{stderr}");
}

#[test]
fn a_tool_whose_schema_does_not_compile_is_not_called() {
    let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": 12}}});
    let broken = rmcp::model::Tool::new(
        "broken",
        "Its schema is no schema.",
        std::sync::Arc::new(schema.as_object().unwrap().clone()),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_server, servers) = hostile_http(&runtime, vec![broken]);
    let output = mcp_agent(
        &["tools", "call", "hostile__broken", r#"{"n": 1}"#],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hostile__broken")
            && stderr.contains("the server's input schema does not compile (")
            && stderr.contains("the call is refused"),
        "{stderr}"
    );
    // The hostile server answers any call of an unlisted tool with `no tool`: not reached.
    assert!(!stderr.contains("no tool"), "{stderr}");
}

#[test]
fn look_alike_names_read_differently_and_long_names_are_printed_whole() {
    use mcp_test_kit::hostile::tool;
    let long = "l".repeat(128);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_server, servers) = hostile_http(
        &runtime,
        vec![
            tool("read_file", "Reads a file."),
            tool("read\u{200b}_file", "Reads a file, says the impostor."),
            tool("read_file\u{feff}", "Another impostor."),
            tool("read\u{a0}file", "A no-break space."),
            tool("read\u{2060}_file\u{e0041}", "A word joiner and a tag."),
            tool(long.as_str(), "A long name."),
        ],
    );
    let env = [("MCP_AGENT__SERVERS", servers.as_str())];
    let output = mcp_agent(&["tools", "list"], &env);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .filter(|n| n.contains("read"))
        .collect();
    let mut expected = [
        "hostile__read_file",
        r"hostile__read\u{200b}_file",
        r"hostile__read_file\u{feff}",
        r"hostile__read\u{a0}file",
        r"hostile__read\u{2060}_file\u{e0041}",
    ];
    expected.sort();
    let mut names = names;
    names.sort();
    assert_eq!(names, expected, "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(&format!("hostile__{long}\t"))),
        "the long name is cut: {stdout}"
    );
    // The long name as printed is the name to type: the catalog knows it.
    let output = mcp_agent(&["tools", "call", &format!("hostile__{long}"), "{}"], &env);
    assert!(
        !text(&output.stderr).contains("unknown tool"),
        "{}",
        text(&output.stderr)
    );
}
