//! `mcp-agent serve`: the gateway in front of a test-kit upstream, reached by the official
//! Python MCP SDK (the client script of mcp-serve's tests, on the venv `cargo xtask peers`
//! installs) over stdio and streamable HTTP, and by raw HTTP requests for what the gateway
//! refuses before any upstream is opened. Each downstream session gets its own upstream
//! process; a crashed upstream fails its call (an `isError` result naming the server) and
//! the next session gets a fresh one; SIGTERM drains a call in flight and leaves no process.
//!
//! The Python tests need `MCP_AGENT_PEER_PYTHON`: they fail without it under `CI=true` /
//! `MCP_AGENT_REQUIRE_PEERS=1`, and skip with a note otherwise.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mcp_test_kit::Event;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, LIMIT, kit_config, open_session, request};
use crate::support::{alive, children};

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../mcp-serve/tests/peers/client.py"
);

const TOKEN: &str = "gateway-test-token-7f3a";

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the upstream recording in `record` got a call.
fn until_the_upstream_is_called(record: &mcp_test_kit::RecordFile) {
    wait_until("a call to reach the upstream", || {
        record
            .snapshot()
            .events
            .iter()
            .any(|e| matches!(e, Event::Call { .. }))
    });
}

/// The venv's python, or `None` (with a note) when peers are not required.
pub(crate) fn python() -> Option<String> {
    let required = ["CI", "MCP_AGENT_REQUIRE_PEERS"].iter().any(|var| {
        std::env::var(var).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    });
    match std::env::var("MCP_AGENT_PEER_PYTHON") {
        Ok(path) if std::path::Path::new(&path).exists() => Some(path),
        _ => {
            assert!(
                !required,
                "MCP_AGENT_PEER_PYTHON is not set; run `cargo xtask peers`"
            );
            eprintln!("note: skipping: MCP_AGENT_PEER_PYTHON is not set");
            None
        }
    }
}

/// Runs the Python client with `args`, the calls on stdin: its report, or its stderr.
fn python_client(python: &str, args: &[&str], calls: &Value) -> Result<Value, String> {
    let mut child = Command::new(python)
        .arg(CLIENT)
        .args(args)
        .env("GW_TOKEN", TOKEN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the Python client");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(calls.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    Ok(serde_json::from_str(last).unwrap_or_else(|e| panic!("not a report ({e}): {stdout}")))
}

/// One POST exchange on a fresh connection: status, head (lower-cased) and body.
fn http(addr: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, String) {
    request(addr, "POST", headers, body)
}

fn initialize(id: u32) -> String {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    })
    .to_string()
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// The session id of an initialize answer's head.
fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

/// Opens a session on `gateway`, starts a `kit__slow` call of `ms` on a thread and waits until
/// the upstream recorded it: the call's answer (status, head, body) and the upstream's pids.
fn slow_call_in_flight(
    gateway: &Gateway,
    record: &mcp_test_kit::RecordFile,
    ms: u64,
) -> (std::thread::JoinHandle<(u16, String, String)>, Vec<u32>) {
    let addr = gateway.addr();
    let (status, head, body) = http(&addr, &[], initialize(1).as_bytes());
    assert_eq!(status, 200, "{body}");
    let headers = [
        ("Mcp-Session-Id", session_id(&head)),
        ("MCP-Protocol-Version", "2025-11-25".to_owned()),
    ];
    let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http(&addr, &refs, initialized.to_string().as_bytes());
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": "kit__slow", "arguments": {"ms": ms}},
        },
    });
    let in_flight = std::thread::spawn(move || {
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        http(&addr, &refs, call.to_string().as_bytes())
    });
    until_the_upstream_is_called(record);
    let upstream = children(gateway.pid());
    assert!(!upstream.is_empty());
    (in_flight, upstream)
}

#[test]
fn python_sdk_through_the_gateway_over_stdio_eager_and_lazy() {
    let Some(python) = python() else { return };
    let (_dir, file, _record) = kit_config("");
    let file = file.to_string_lossy().into_owned();
    let gateway = env!("CARGO_BIN_EXE_mcp-agent");

    let calls = json!({
        "kit__add": {"a": 40, "b": 2},
        "kit__fail": {"message": "as asked"},
    });
    let args = [
        "legacy", "stdio", gateway, "serve", "--stdio", "--expose", "eager", "--file", &file,
    ];
    let report = python_client(&python, &args, &calls).unwrap();
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_eq!(report["server"], "mcp-agent");
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("kit__add")), "{report}");
    assert!(tools.contains(&json!("kit__slow")), "{report}");
    assert!(!tools.contains(&json!("mcp_search_tools")), "{report}");
    let calls = &report["calls"];
    assert_eq!(calls["kit__add"]["structured"], json!({"sum": 42.0}));
    assert_eq!(calls["kit__fail"]["is_error"], true);
    let text = calls["kit__fail"]["text"].as_str().unwrap();
    assert!(
        text.contains("`kit`") && text.contains("as asked"),
        "{text}"
    );

    // Lazy (the default): the search surface, a call through it; revision 2026-07-28.
    let calls = json!({
        "mcp_search_tools": {"query": "add two numbers"},
        "mcp_call_tool": {"tool_name": "kit__add", "arguments": {"a": 1, "b": 2}},
    });
    let args = ["auto", "stdio", gateway, "serve", "--file", &file];
    let report = python_client(&python, &args, &calls).unwrap();
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("mcp_search_tools")), "{report}");
    assert!(tools.contains(&json!("mcp_call_tool")), "{report}");
    assert!(!tools.contains(&json!("kit__add")), "{report}");
    let calls = &report["calls"];
    let found = calls["mcp_search_tools"]["text"].as_str().unwrap();
    assert!(found.contains("kit__add"), "{found}");
    assert_eq!(calls["mcp_call_tool"]["structured"], json!({"sum": 3.0}));
}

#[test]
fn python_sdk_over_http_with_a_token_and_a_crashed_upstream_replaced_for_the_next_session() {
    let Some(python) = python() else { return };
    // The `auto` client speaks 2026-07-28: its requests share a pooled run, closed once idle.
    let (_dir, file, record) = kit_config(
        "expose = \"eager\"\nauth = { bearer_token_env = \"GW_TOKEN\" }\nrun_pool = { idle_timeout_seconds = 0.5 }",
    );
    let mut gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let url = gateway.url.clone();

    for mode in ["legacy", "auto"] {
        let calls = json!({"kit__add": {"a": 2, "b": 3}});
        let report = python_client(&python, &[mode, "http", &url, TOKEN], &calls)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(report["server"], "mcp-agent", "{report}");
        assert_eq!(
            report["calls"]["kit__add"]["structured"],
            json!({"sum": 5.0}),
            "{mode}: {report}"
        );
    }

    // The upstream dies mid-call: the call is an isError result naming the server.
    let calls = json!({"kit__crash": {}});
    let report = python_client(&python, &["legacy", "http", &url, TOKEN], &calls).unwrap();
    let crashed = &report["calls"]["kit__crash"];
    assert_eq!(crashed["is_error"], true, "{report}");
    let text = crashed["text"].as_str().unwrap();
    assert!(text.contains("server `kit`"), "{text}");
    assert!(!text.contains(TOKEN));
    assert!(gateway.is_running(), "the gateway stays up");

    // The next session gets a fresh upstream.
    let calls = json!({"kit__add": {"a": 1, "b": 1}});
    let report = python_client(&python, &["legacy", "http", &url, TOKEN], &calls).unwrap();
    assert_eq!(
        report["calls"]["kit__add"]["structured"],
        json!({"sum": 2.0})
    );
    let calls = record
        .snapshot()
        .events
        .iter()
        .filter(|e| matches!(e, Event::Call { .. }))
        .count();
    assert_eq!(calls, 4, "each call reached an upstream once");

    // Every session ended and the pooled run closed: no upstream process is left behind.
    wait_until("the upstream processes to close", || {
        children(gateway.pid()).is_empty()
    });
}

#[test]
fn refused_requests_reach_no_upstream_and_the_gateway_stays_up() {
    let (_dir, file, record) = kit_config("auth = { bearer_token_env = \"GW_TOKEN\" }");
    let mut gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let addr = gateway.addr();
    let init = initialize(1);

    let (status, head, _) = http(&addr, &[], init.as_bytes());
    assert_eq!(status, 401);
    assert!(
        head.contains("www-authenticate: bearer resource_metadata=\"http://")
            && head.contains("/.well-known/oauth-protected-resource/mcp\""),
        "{head}"
    );
    let (status, head, _) = http(
        &addr,
        &[("Authorization", "Bearer not-the-token")],
        init.as_bytes(),
    );
    assert_eq!(status, 401);
    assert!(head.contains("error=\"invalid_token\""), "{head}");
    assert!(head.contains("resource_metadata="), "{head}");

    let token = bearer();
    let (status, _, _) = http(
        &addr,
        &[("Authorization", &token), ("Origin", "http://evil.example")],
        init.as_bytes(),
    );
    assert_eq!(status, 403);

    let mut big = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.to_vec();
    big.resize(50 * 1024 * 1024, b'a');
    big.extend_from_slice(br#""}}"#);
    let (status, _, _) = http(&addr, &[("Authorization", &token)], &big);
    assert_eq!(status, 413);

    let (status, _, body) = http(&addr, &[("Authorization", &token)], b"{not json");
    assert_eq!(status, 400);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], -32700, "{body}");

    assert!(gateway.is_running());
    assert!(children(gateway.pid()).is_empty(), "no upstream was opened");
    assert!(record.snapshot().events.is_empty());

    // A good client still gets through.
    let (status, head, body) = http(&addr, &[("Authorization", &token)], init.as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"serverInfo\""), "{body}");
    session_id(&head);
}

#[test]
fn sessions_beyond_max_sessions_are_refused_with_a_clear_error() {
    let (_dir, file, _record) = kit_config("max_sessions = 1");
    let gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let addr = gateway.addr();

    let (status, head, body) = http(&addr, &[], initialize(1).as_bytes());
    assert_eq!(status, 200, "{body}");
    let first = session_id(&head);

    let (status, head, body) = http(&addr, &[], initialize(2).as_bytes());
    assert_eq!(status, 503, "{head}{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["id"], 2);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("too many sessions") && message.contains('1'),
        "{message}"
    );

    // The first session goes on.
    let list = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _, _) = http(
        &addr,
        &[
            ("Mcp-Session-Id", &first),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        list.as_bytes(),
    );
    assert!(status < 300, "{status}");
}

#[test]
fn sigterm_drains_the_call_in_flight_and_leaves_no_process() {
    let (_dir, file, record) = kit_config("");
    let mut gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let (in_flight, upstream) = slow_call_in_flight(&gateway, &record, 1500);

    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    let (status, _, body) = in_flight.join().unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("slept_ms"), "the call was drained: {body}");

    let code = gateway.exit_code();
    assert_eq!(code, Some(0));
    for pid in upstream {
        wait_until(&format!("upstream {pid} to be gone"), || !alive(pid));
    }
}

#[test]
fn bad_serve_settings_are_named() {
    let (_dir, file, _record) =
        kit_config("expose = \"everything\"\nmax_sessions = 0\nrate_limit = { burst = 2 }");
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--file"])
        .arg(&file)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serve.expose"), "{stderr}");
    assert!(stderr.contains("serve.max_sessions"), "{stderr}");
    assert!(stderr.contains("serve.rate_limit.per_second"), "{stderr}");

    let (_dir, file, _record) = kit_config("auth = { bearer_token_env = \"GW_UNSET_TOKEN\" }");
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--http", "127.0.0.1:0", "--file"])
        .arg(&file)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("GW_UNSET_TOKEN"), "{stderr}");
}

#[test]
fn an_upstream_tool_list_change_reaches_the_downstream_session() {
    let (_dir, file, _record) = kit_config("expose = \"eager\"");
    let gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let addr = gateway.addr();

    let (status, head, body) = http(&addr, &[], initialize(1).as_bytes());
    assert_eq!(status, 200, "{body}");
    let session = session_id(&head);
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http(&addr, &headers, initialized.to_string().as_bytes());

    // The session's event stream, read line by line on a thread.
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    .unwrap();
    let (tx, events) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = |what: &str| {
        events
            .recv_timeout(LIMIT)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    let status = next("the stream's status line");
    assert!(status.contains(" 200 "), "{status}");

    let add = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "kit__add_tool", "arguments": {"name": "extra"}},
    });
    let (status, _, body) = http(&addr, &headers, add.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("\"isError\":true"), "{body}");
    loop {
        let line = next("notifications/tools/list_changed");
        if line.contains("notifications/tools/list_changed") {
            break;
        }
    }
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, body) = http(&addr, &headers, list.to_string().as_bytes());
    assert_eq!(status, 200);
    assert!(body.contains("\"kit__extra\""), "{body}");
}

#[test]
fn calls_needing_approval_are_denied_unless_allowed_and_each_session_is_recorded() {
    let Some(python) = python() else { return };
    let history = tempfile::tempdir().unwrap();
    let policy = format!(
        "expose = \"eager\"\nhistory = {:?}\n\n[policy]\napprove = [{{ server = \"*\", tool = \"add\" }}]",
        history.path().display().to_string()
    );
    let (_dir, file, record) = kit_config(&policy);
    let file = file.to_string_lossy().into_owned();
    let gateway = env!("CARGO_BIN_EXE_mcp-agent");
    let calls = json!({"kit__add": {"a": 1, "b": 2}, "kit__echo": {"x": 1}});
    let args = ["legacy", "stdio", gateway, "serve", "--file", &file];
    let report = python_client(&python, &args, &calls).unwrap();
    let denied = &report["calls"]["kit__add"];
    assert_eq!(denied["is_error"], true, "{report}");
    let text = denied["text"].as_str().unwrap();
    assert!(
        text.contains("needs approval") && text.contains("approve = \"allow\""),
        "{text}"
    );
    assert_eq!(report["calls"]["kit__echo"]["structured"], json!({"x": 1}));
    let reached: Vec<String> = record
        .snapshot()
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Call { tool, .. } => Some(tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reached,
        ["echo"],
        "the denied call never reached the upstream"
    );

    // The session's run was recorded in a directory of its own.
    let runs: Vec<_> = std::fs::read_dir(history.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let events = std::fs::read_to_string(runs[0].join("events.jsonl")).unwrap();
    assert!(
        events.contains("kit__add") && events.contains("kit__echo"),
        "{events}"
    );

    let allowed = format!("{policy}\n").replace(
        "expose = \"eager\"",
        "expose = \"eager\"\napprove = \"allow\"",
    );
    let (_dir, file, _record) = kit_config(&allowed);
    let file = file.to_string_lossy().into_owned();
    let args = ["legacy", "stdio", gateway, "serve", "--file", &file];
    let report = python_client(&python, &args, &calls).unwrap();
    assert_eq!(
        report["calls"]["kit__add"]["structured"],
        json!({"sum": 3.0}),
        "{report}"
    );
}

#[test]
fn stdio_closed_by_the_client_ends_the_gateway_and_its_upstream() {
    let (_dir, file, _record) = kit_config("");
    let mut gateway = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--stdio", "--file"])
        .arg(&file)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = gateway.stdin.take().unwrap();
    let mut stdout = BufReader::new(gateway.stdout.take().unwrap());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": "kit__add", "arguments": {"a": 2, "b": 2}},
        },
    });
    for message in [initialize(1), initialized.to_string(), call.to_string()] {
        writeln!(stdin, "{message}").unwrap();
    }
    let answer = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout closed");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"sum": 4.0}),
        "{answer}"
    );
    let upstream = children(gateway.id());
    assert_eq!(upstream.len(), 1, "one upstream for the session");

    drop(stdin);
    let status = gateway.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    for pid in upstream {
        wait_until(&format!("upstream {pid} to be gone"), || !alive(pid));
    }
}

#[test]
fn sessions_opened_and_ended_leave_no_upstream_process() {
    let (_dir, file, _record) = kit_config("max_sessions = 8");
    let gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let addr = gateway.addr();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    for round in 0..24 {
        let (status, head, body) = http(&addr, &[], initialize(1).as_bytes());
        assert_eq!(status, 200, "round {round}: {body}");
        let session = session_id(&head);
        let headers = [
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        http(&addr, &headers, initialized.to_string().as_bytes());
        let (status, _, body) = http(&addr, &headers, list.to_string().as_bytes());
        assert_eq!(status, 200);
        assert!(body.contains("mcp_search_tools"), "{body}");
        let (status, _, _) = request(&addr, "DELETE", &headers, b"");
        assert!(status < 300, "round {round}: DELETE answered {status}");
    }
    // Ended sessions free their places: the bound of 8 never refused one of the 24, and
    // every upstream process is gone.
    wait_until("every upstream to close", || {
        children(gateway.pid()).is_empty()
    });
}

#[test]
fn worker_threads_size_the_gateways_runtime_and_one_serves_calls_side_by_side() {
    // Unset: as many workers as the process may use CPUs.
    let (_dir, file, _record) = kit_config("");
    let gateway = Gateway::start(&file, &[]);
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(
        gateway.head.contains(&format!("worker threads: {cpus}")),
        "{:?}",
        gateway.head
    );
    drop(gateway);

    let (_dir, file, record) = kit_config("worker_threads = 1");
    let gateway = Gateway::start(&file, &[]);
    assert!(
        gateway.head.contains(&"worker threads: 1".to_owned()),
        "{:?}",
        gateway.head
    );
    // A call that sleeps upstream (for longer than any wait here) holds no worker: another
    // session's call is answered while it is in flight.
    let addr = gateway.addr();
    let sleeper = open_session(&addr);
    let slow = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": "kit__slow", "arguments": {"ms": 600_000}},
        },
    })
    .to_string();
    let mut in_flight = TcpStream::connect(&addr).unwrap();
    write!(
        in_flight,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sleeper}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{slow}",
        slow.len()
    )
    .unwrap();
    until_the_upstream_is_called(&record);
    let caller = open_session(&addr);
    let headers = [
        ("Mcp-Session-Id", caller.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let add = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": "kit__add", "arguments": {"a": 2, "b": 3}},
        },
    });
    let (status, _, body) = http(&addr, &headers, add.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"isError\":false") && body.contains('5'),
        "{body}"
    );
    // The slow call is still running: its client leaves, and the gateway with it.
    drop(in_flight);
}

#[test]
fn a_drain_delay_without_metrics_is_noted_at_start_and_still_waited_out() {
    let (_dir, file, _record) = kit_config("drain_delay_seconds = 1");
    let mut gateway = Gateway::start(&file, &[]);
    assert!(
        gateway
            .head
            .iter()
            .any(|l| l.contains("drain_delay_seconds is set without metrics")),
        "{:?}",
        gateway.head
    );
    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    let said = gateway.lines_until("draining calls in flight");
    assert!(
        said.iter()
            .any(|l| l.contains("stopping: serving 1s more before draining")),
        "{said:?}"
    );
    assert!(
        !said.iter().any(|l| l.contains("/readyz")),
        "no /readyz to speak of: {said:?}"
    );
    assert_eq!(gateway.exit_code(), Some(0), "one signal is enough");
}

#[test]
fn serve_settings_bound_bodies_concurrent_calls_and_request_rates() {
    let (_dir, file, record) = kit_config(
        "expose = \"eager\"\nmax_body_bytes = 2048\nmax_calls_per_session = 1\n\
         rate_limit = { per_second = 0.01, burst = 5 }",
    );
    let gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let addr = gateway.addr();

    let (status, head, body) = http(&addr, &[], initialize(1).as_bytes());
    assert_eq!(status, 200, "{body}");
    let session = session_id(&head);
    let headers = vec![
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25".to_owned()),
    ];
    let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http(&addr, &refs, initialized.to_string().as_bytes());

    // A body over max_body_bytes: 413.
    let padded =
        json!({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"pad": "x".repeat(4096)}});
    let (status, _, _) = http(&addr, &refs, padded.to_string().as_bytes());
    assert_eq!(status, 413);

    // One call in flight on the session: a second one is refused at once, not run.
    let slow = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "kit__slow", "arguments": {"ms": 1500}},
    });
    let in_flight = {
        let addr = addr.clone();
        let headers = headers.clone();
        std::thread::spawn(move || {
            let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http(&addr, &refs, slow.to_string().as_bytes())
        })
    };
    until_the_upstream_is_called(&record);
    let add = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "kit__add", "arguments": {"a": 1, "b": 1}},
    });
    let (status, _, body) = http(&addr, &refs, add.to_string().as_bytes());
    assert_eq!(status, 200);
    assert!(
        body.contains("\"isError\":true")
            && body.contains("too many calls in flight on this session"),
        "{body}"
    );
    let (status, _, body) = in_flight.join().unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("slept_ms"), "{body}");

    // Five requests were the burst (initialize, initialized, the 413, two calls); the next
    // one is over the rate.
    let (status, head, _) = http(&addr, &refs, add.to_string().as_bytes());
    assert_eq!(status, 429, "{head}");
    assert!(head.contains("retry-after:"), "{head}");
    let calls = record
        .snapshot()
        .events
        .iter()
        .filter(|e| matches!(e, Event::Call { .. }))
        .count();
    assert_eq!(calls, 1, "only the slow call reached the upstream");
}

#[test]
fn a_second_sigterm_during_the_drain_stops_at_once_and_leaves_no_process() {
    // An upstream that ignores both stdin closing and SIGTERM, with a call of a minute in
    // flight: the drain would wait; the second signal cuts it short.
    let (dir, _file, record) = kit_config("");
    let text = format!(
        "[[servers]]\nname = \"kit\"\ncommand = {:?}\nargs = [\"--ignore-stdin-close\", \"--ignore-sigterm\", \"--record\", {:?}]\n",
        mcp_test_kit::stdio::binary().display().to_string(),
        record.path().display().to_string(),
    );
    let file = dir.path().join("stubborn.toml");
    std::fs::write(&file, text).unwrap();
    let mut gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let (in_flight, upstream) = slow_call_in_flight(&gateway, &record, 60_000);

    let pid = Pid::from_raw(gateway.pid() as i32);
    kill(pid, Signal::SIGTERM).unwrap();
    gateway.line_containing("draining");
    let started = Instant::now();
    kill(pid, Signal::SIGINT).unwrap();
    let code = gateway.exit_code();
    assert_eq!(code, Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    for pid in upstream {
        wait_until(&format!("upstream {pid} to be gone"), || !alive(pid));
    }
    let _ = in_flight.join();
}

/// A `shared = true` upstream serves every downstream session from one process, outlives the
/// sessions that used it, and is closed by the gateway's shutdown (exit 0, no process left).
#[test]
fn a_shared_upstream_serves_every_session_from_one_process_until_shutdown() {
    let (_dir, file, _record) = kit_config("");
    let text =
        std::fs::read_to_string(&file)
            .unwrap()
            .replacen("args = ", "shared = true\nargs = ", 1);
    std::fs::write(&file, text).unwrap();
    let mut gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let addr = gateway.addr();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let mut upstreams = std::collections::BTreeSet::new();
    for round in 0..3 {
        let (status, head, body) = http(&addr, &[], initialize(1).as_bytes());
        assert_eq!(status, 200, "round {round}: {body}");
        let session = session_id(&head);
        let headers = [
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        http(&addr, &headers, initialized.to_string().as_bytes());
        let (status, _, body) = http(&addr, &headers, list.to_string().as_bytes());
        assert_eq!(status, 200);
        assert!(body.contains("mcp_search_tools"), "{body}");
        upstreams.extend(children(gateway.pid()));
        let (status, _, _) = request(&addr, "DELETE", &headers, b"");
        assert!(status < 300, "round {round}: DELETE answered {status}");
    }
    assert_eq!(
        upstreams.len(),
        1,
        "three sessions, one shared upstream process: {upstreams:?}"
    );
    let upstream = *upstreams.first().unwrap();
    assert!(alive(upstream), "the shared upstream outlives its sessions");

    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    let code = gateway.exit_code();
    assert_eq!(code, Some(0));
    wait_until("the shared upstream to be gone", || !alive(upstream));
}

/// Bound to every address, the gateway needs the hosts clients use named (`allowed_hosts` or
/// `public_url`): without them it refuses to start, naming the keys; with them it answers
/// those hosts and refuses any other `Host` (DNS rebinding).
#[test]
fn an_unspecified_bind_answers_only_the_hosts_serve_names() {
    let (_dir, file, _record) = kit_config("");
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--http", "0.0.0.0:0", "--file"])
        .arg(&file)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("allowed_hosts"), "{stderr}");

    let (_dir, file, _record) = kit_config("allowed_hosts = [\"gw.test\"]");
    let gateway = Gateway::start_on(&file, "0.0.0.0:0", &[("GW_TOKEN", TOKEN)]);
    let port = gateway.addr().rsplit(':').next().unwrap().to_owned();
    let addr = format!("127.0.0.1:{port}");
    let named = format!("gw.test:{port}");
    let (status, _, body) = http(&addr, &[("Host", &named)], initialize(1).as_bytes());
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = http(
        &addr,
        &[("Host", "rebound.example")],
        initialize(2).as_bytes(),
    );
    assert!(
        (400..500).contains(&status),
        "a foreign Host answered {status}"
    );
}

/// `mcp-agent serve` on `file` with `args` and `env`, expected to stop at once.
fn serve_fails(
    file: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .arg("serve")
        .args(args)
        .arg("--file")
        .arg(file)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Whether a gateway said nothing before `listening on` but its worker threads: no warning, no
/// error.
fn says_nothing_more(head: &[String]) -> bool {
    matches!(head, [only] if only.starts_with("worker threads: "))
}

#[test]
fn a_short_bearer_token_is_refused() {
    let (_dir, file, _record) = kit_config("auth = { bearer_token_env = \"GW_TOKEN\" }");
    let short = "tok-15-bytes-xx";
    let (code, stderr) = serve_fails(&file, &["--http", "127.0.0.1:0"], &[("GW_TOKEN", short)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("has 15 bytes, fewer than the 16 required"),
        "{stderr}"
    );
    assert!(!stderr.contains(short), "{stderr}");
    // Sixteen bytes are enough.
    let gateway = Gateway::start(&file, &[("GW_TOKEN", "tok-16-bytes-xxx")]);
    assert!(
        says_nothing_more(gateway.head.as_slice()),
        "{:?}",
        gateway.head
    );
}

#[test]
fn an_address_that_cannot_be_bound_is_a_configuration_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (_dir, file, _record) = kit_config("");
    let (code, stderr) = serve_fails(&file, &["--http", &addr], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
}

#[test]
fn serving_beyond_loopback_without_auth_warns_at_start() {
    let (_dir, file, _record) = kit_config("allowed_hosts = [\"gw.test\"]");
    let open = Gateway::start_on(&file, "0.0.0.0:0", &[]);
    assert!(
        open.head
            .iter()
            .any(|l| l.starts_with("warning: serving on 0.0.0.0:")
                && l.contains("without `[serve] auth`")),
        "{:?}",
        open.head
    );
    // On loopback, or with auth, nothing to warn about.
    let local = Gateway::start(&file, &[]);
    assert!(says_nothing_more(local.head.as_slice()), "{:?}", local.head);
    let (_dir, file, _record) =
        kit_config("allowed_hosts = [\"gw.test\"]\nauth = { bearer_token_env = \"GW_TOKEN\" }");
    let guarded = Gateway::start_on(&file, "0.0.0.0:0", &[("GW_TOKEN", TOKEN)]);
    assert!(
        says_nothing_more(guarded.head.as_slice()),
        "{:?}",
        guarded.head
    );
}
