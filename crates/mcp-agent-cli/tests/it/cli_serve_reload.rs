//! SIGHUP reloads `mcp-agent serve`'s configuration: a session opened before keeps its servers
//! and policy, one opened after gets the new ones; a replaced configuration's shared upstream
//! closes when its last session ends; a stateless client's pooled run is not lent after a
//! policy-only reload; an invalid configuration is refused naming every problem (a secret of
//! the configuration in use scrubbed) while the gateway serves on with it; a storm of SIGHUPs
//! while the file is rewritten leaves the gateway up with the last configuration; over stdio
//! the session goes on.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, LIMIT, open_session, request};
use crate::support::{alive, children};

/// A secret in every configuration's server environment: never printed.
const SECRET: &str = "reload-secret-value-9f2c41";

/// Lists every upstream tool as `server__tool`.
const EAGER: &str = "[serve]\nexpose = \"eager\"\n";

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A configuration: the test-kit server under each name of `servers` (each with `server`'s
/// keys besides), then `rest`.
fn config(servers: &[&str], server: &str, rest: &str) -> String {
    let kit = mcp_test_kit::stdio::binary().display().to_string();
    let mut text = String::new();
    for name in servers {
        text.push_str(&format!(
            "[[servers]]\nname = {name:?}\ncommand = {kit:?}\nenv = {{ KIT_TOKEN = {SECRET:?} }}\n{server}\n"
        ));
    }
    text + rest
}

/// A directory holding the config file `text`, and the file.
fn config_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.toml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

fn hang_up(pid: u32) {
    kill(Pid::from_raw(pid as i32), Signal::SIGHUP).unwrap();
}

/// Posts `message` in `session`: the JSON-RPC answer (from JSON or the event stream).
fn send(addr: &str, session: &str, message: &Value) -> Value {
    let headers = [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (status, _, body) = request(addr, "POST", &headers, message.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(body.as_str()))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}

/// The upstream tools `session` lists (not the gateway's `mcp_*` ones), sorted.
fn listed(addr: &str, session: &str) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    upstream_tools(&send(addr, session, &list))
}

fn upstream_tools(answer: &Value) -> Vec<String> {
    let tools = answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {answer}"));
    let mut names: Vec<String> = tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| !n.starts_with("mcp_"))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// Calls `tool` with `arguments` in `session`: the answer.
fn call(addr: &str, session: &str, tool: &str, arguments: Value) -> Value {
    let message = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    });
    send(addr, session, &message)
}

/// The servers of `tools` (`server__tool`), sorted, once each.
fn servers_of(tools: &[String]) -> Vec<String> {
    let mut servers: Vec<String> = tools
        .iter()
        .filter_map(|t| t.split_once("__").map(|(s, _)| s.to_owned()))
        .collect();
    servers.dedup();
    servers
}

/// The live upstream processes of the gateway `pid`.
fn upstreams(pid: u32) -> Vec<u32> {
    children(pid).into_iter().filter(|p| alive(*p)).collect()
}

#[test]
fn a_session_keeps_its_configuration_and_new_sessions_get_the_reloaded_one() {
    let (_dir, file) = config_file(&config(&["kit"], "", EAGER));
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    let before = open_session(&addr);
    assert_eq!(servers_of(&listed(&addr, &before)), ["kit"]);
    assert!(listed(&addr, &before).contains(&"kit__add".to_owned()));

    // A second server, `add` denied, and a key that needs a restart.
    let reloaded = config(
        &["kit", "other"],
        "",
        &format!(
            "{EAGER}max_sessions = 8\n\n[policy]\ndeny = [{{ server = \"*\", tool = \"add\" }}]\n"
        ),
    );
    std::fs::write(&file, reloaded).unwrap();
    hang_up(gateway.pid());
    let lines = gateway.lines_until("reloaded: 2 servers");
    eprintln!("{lines:#?}");
    assert!(
        lines.iter().any(|l| l.starts_with(
            "warning: reload: changed, but kept as started until a restart: serve.max_sessions"
        )),
        "{lines:#?}"
    );

    // The session opened before keeps its servers and its policy…
    let tools = listed(&addr, &before);
    assert_eq!(servers_of(&tools), ["kit"]);
    assert!(tools.contains(&"kit__add".to_owned()), "{tools:?}");
    let sum = call(&addr, &before, "kit__add", json!({"a": 1, "b": 2}));
    assert_eq!(
        sum["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{sum}"
    );

    // …a new one gets the new ones.
    let after = open_session(&addr);
    let tools = listed(&addr, &after);
    assert_eq!(servers_of(&tools), ["kit", "other"]);
    assert!(!tools.contains(&"kit__add".to_owned()), "{tools:?}");
    assert!(tools.contains(&"other__echo".to_owned()), "{tools:?}");
    let refused = call(&addr, &after, "kit__add", json!({"a": 1, "b": 2}));
    let refusal = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(refusal.contains("unknown tool `kit__add`"), "{refused}");
    let echoed = call(&addr, &after, "other__echo", json!({"x": 1}));
    assert_eq!(
        echoed["result"]["structuredContent"],
        json!({"x": 1}),
        "{echoed}"
    );
}

#[test]
fn a_replaced_configuration_s_shared_upstream_closes_with_its_last_session() {
    let shared = "shared = true\n";
    let (_dir, file) = config_file(&config(&["kit"], shared, EAGER));
    let mut gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    let before = open_session(&addr);
    assert_eq!(servers_of(&listed(&addr, &before)), ["kit"]);
    let old = upstreams(gateway.pid());
    assert_eq!(old.len(), 1, "one shared upstream: {old:?}");
    let old = old[0];

    let policy = format!("{EAGER}\n[policy]\ndeny = [{{ server = \"*\", tool = \"add\" }}]\n");
    std::fs::write(&file, config(&["kit"], shared, &policy)).unwrap();
    hang_up(gateway.pid());
    gateway.line_containing("reloaded: 1 server");
    let after = open_session(&addr);
    listed(&addr, &after);
    let now = upstreams(gateway.pid());
    assert_eq!(
        now.len(),
        2,
        "the new configuration's shared upstream too: {now:?}"
    );
    let new = *now.iter().find(|p| **p != old).unwrap();

    // The old configuration's shared upstream lives as long as a session uses it.
    assert!(alive(old));
    let headers = [
        ("Mcp-Session-Id", before.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (status, _, _) = request(&addr, "DELETE", &headers, b"");
    assert!(status < 300, "DELETE answered {status}");
    wait_until("the replaced shared upstream to exit", || !alive(old));
    assert!(alive(new), "the shared upstream in use stays");
    listed(&addr, &after);

    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(gateway.exit_code(), Some(0));
    wait_until("the shared upstream to be gone", || !alive(new));
}

#[test]
fn an_invalid_configuration_is_refused_naming_every_problem_and_the_gateway_serves_on() {
    let (_dir, file) = config_file(&config(&["kit"], "", EAGER));
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();

    // The secret the configuration in use holds, misplaced: scrubbed from the problem.
    let broken = config(
        &["kit"],
        "",
        &format!(
            "[[servers]]\nname = \"broken\"\n\n[serve]\nexpose = {SECRET:?}\nmax_sessions = 0\n"
        ),
    );
    std::fs::write(&file, broken).unwrap();
    hang_up(gateway.pid());
    let lines = gateway.lines_until("reload refused");
    let text = lines.join("\n");
    eprintln!("{text}");
    assert!(
        text.contains("error: invalid MCP configuration (3 problems)"),
        "{text}"
    );
    for path in ["servers[1]", "serve.expose", "serve.max_sessions"] {
        assert!(text.contains(path), "`{path}` named: {text}");
    }
    assert!(
        lines
            .last()
            .unwrap()
            .contains("still serving the configuration in use (1 server)"),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");

    // Served on with the configuration in use.
    let session = open_session(&addr);
    assert_eq!(servers_of(&listed(&addr, &session)), ["kit"]);
    let echoed = call(&addr, &session, "kit__echo", json!({"x": 1}));
    assert_eq!(
        echoed["result"]["structuredContent"],
        json!({"x": 1}),
        "{echoed}"
    );

    // A valid one is taken at the next SIGHUP.
    std::fs::write(&file, config(&["kit", "other"], "", EAGER)).unwrap();
    hang_up(gateway.pid());
    gateway.line_containing("reloaded: 2 servers");
    let session = open_session(&addr);
    assert_eq!(servers_of(&listed(&addr, &session)), ["kit", "other"]);
}

#[test]
fn a_sighup_storm_while_the_file_changes_leaves_the_gateway_up_with_the_last_configuration() {
    let (_dir, file) = config_file(&config(&["kit"], "", EAGER));
    let mut gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    let versions = [
        config(&["kit", "other"], "", EAGER),
        config(&["kit"], "", EAGER),
        // Invalid: refused whenever a reload reads it (or a half-written file).
        "[[servers]]\nname = 7\n".to_owned(),
    ];
    let last = config(&["kit", "other", "third"], "", EAGER);
    // 20 SIGHUPs within a second, the file rewritten before each; the last one valid.
    let started = Instant::now();
    for i in 0..20 {
        let text = if i == 19 {
            &last
        } else {
            &versions[i % versions.len()]
        };
        std::fs::write(&file, text).unwrap();
        hang_up(gateway.pid());
        std::thread::sleep(Duration::from_millis(45));
    }
    eprintln!("20 SIGHUPs in {:?}", started.elapsed());
    let lines = gateway.lines_until("reloaded: 3 servers");
    let reloads = lines
        .iter()
        .filter(|l| l.starts_with("reloaded: ") || l.contains("reload refused"))
        .count();
    eprintln!("{reloads} reloads: {lines:#?}");
    assert!(reloads <= 10, "a storm is coalesced: {reloads} reloads");
    assert!(gateway.is_running());
    let session = open_session(&addr);
    assert_eq!(
        servers_of(&listed(&addr, &session)),
        ["kit", "other", "third"]
    );
    let echoed = call(&addr, &session, "third__echo", json!({"x": 3}));
    assert_eq!(
        echoed["result"]["structuredContent"],
        json!({"x": 3}),
        "{echoed}"
    );
}

/// A stateless (2026-07-28) `tools/call` of `mcp_call_tool` running `tool` with `arguments`:
/// the result.
fn stateless_call(addr: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": tool, "arguments": arguments},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "mcp_call_tool"),
    ];
    let (status, _, text) = request(addr, "POST", &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    let answer: Value = text
        .lines()
        .filter_map(|line| serde_json::from_str(line.trim_start_matches("data:").trim()).ok())
        .find(|m: &Value| m.get("result").is_some())
        .unwrap_or_else(|| panic!("no result in {text}"));
    answer["result"].clone()
}

/// Stateless requests share a pooled run; after a reload that changes only the policy, the
/// next one is served by a run of the new configuration.
#[test]
fn a_stateless_client_s_pooled_run_is_not_lent_after_a_policy_only_reload() {
    let (_dir, file) = config_file(&config(&["kit"], "", ""));
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    for _ in 0..2 {
        let sum = stateless_call(&addr, "kit__add", json!({"a": 1, "b": 2}));
        assert_eq!(sum["structuredContent"], json!({"sum": 3.0}), "{sum}");
    }
    let pooled = upstreams(gateway.pid());
    assert_eq!(pooled.len(), 1, "one pooled run: {pooled:?}");

    let policy = "[policy]\ndeny = [{ server = \"*\", tool = \"add\" }]\n";
    std::fs::write(&file, config(&["kit"], "", policy)).unwrap();
    hang_up(gateway.pid());
    gateway.line_containing("reloaded: 1 server");
    let denied = stateless_call(&addr, "kit__add", json!({"a": 1, "b": 2}));
    assert_eq!(denied["isError"], true, "{denied}");
    let echoed = stateless_call(&addr, "kit__echo", json!({"x": 1}));
    assert_eq!(echoed["structuredContent"], json!({"x": 1}), "{echoed}");
}

/// `serve --stdio` on `file`: the process, its stdin, its stdout and its stderr lines.
struct StdioGateway {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    stderr: mpsc::Receiver<String>,
}

fn serve_stdio(file: &Path) -> StdioGateway {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--stdio", "--file"])
        .arg(file)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, stderr) = mpsc::channel();
    let lines = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    StdioGateway {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        child,
        stderr,
    }
}

impl StdioGateway {
    /// Sends `message`; with an id, reads the answer with that id.
    fn send(&mut self, message: &Value) -> Value {
        writeln!(self.stdin, "{message}").unwrap();
        let Some(id) = message.get("id") else {
            return Value::Null;
        };
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "stdout closed"
            );
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer.get("id") == Some(id) {
                return answer;
            }
        }
    }

    fn line_containing(&self, text: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .stderr
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no stderr line with `{text}`: {e}"));
            if line.contains(text) {
                return line;
            }
        }
    }
}

#[test]
fn over_stdio_sighup_reloads_and_the_session_goes_on() {
    let (_dir, file) = config_file(&config(&["kit"], "", EAGER));
    let mut gateway = serve_stdio(&file);
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    });
    gateway.send(&init);
    gateway.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(servers_of(&upstream_tools(&gateway.send(&list))), ["kit"]);

    std::fs::write(&file, config(&["kit", "other"], "", EAGER)).unwrap();
    hang_up(gateway.child.id());
    gateway.line_containing("reloaded: 2 servers");
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "kit__add", "arguments": {"a": 2, "b": 2}},
    });
    let answer = gateway.send(&call);
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"sum": 4.0}),
        "{answer}"
    );
    assert_eq!(servers_of(&upstream_tools(&gateway.send(&list))), ["kit"]);
    assert!(gateway.child.try_wait().unwrap().is_none(), "still serving");

    let StdioGateway {
        mut child, stdin, ..
    } = gateway;
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
