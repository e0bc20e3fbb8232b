//! The output limit on every result and the bound on spilled outputs, through the CLI and the
//! gateway: a 12 MB `isError` text reaches the caller, the gateway's client and the history
//! cut to `max_output_bytes`; spilled outputs stay under `max_spill_bytes` in a per-process
//! directory that is gone after the process ends, and that a later start sweeps when its owner
//! was killed.

use std::path::{Path, PathBuf};
use std::process::Output;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, kit_config, open_session, request};
use crate::support::mcp_agent;

/// The error text of the kit's `fail` tool with `bytes`.
const FLOOD: u64 = 12_000_000;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Bytes of regular files under `dir`, recursively.
fn du(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                du(&path)
            } else {
                size(&path)
            }
        })
        .sum()
}

/// Every file and directory under `dir`, recursively.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(tree(&path));
        }
        out.push(path);
    }
    out
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `tool_call_failed` event of call `id` in a history's events.
fn failed_event(history: &Path, id: &str) -> Value {
    lines(&history.join("events.jsonl"))
        .into_iter()
        .find(|e| e["kind"] == "tool_call_failed" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_call_failed event of {id}"))
}

#[test]
fn a_12_mb_is_error_text_reaches_the_cli_and_its_history_cut_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h");
    let servers = json!([{ "name": "kit", "command": mcp_test_kit::stdio::binary() }]).to_string();
    let arguments = json!({"bytes": FLOOD}).to_string();
    let output = mcp_agent(
        &[
            "tools",
            "call",
            "--history",
            history.to_str().unwrap(),
            "kit__fail",
            &arguments,
        ],
        &[
            ("MCP_AGENT__SERVERS", &servers),
            ("TMPDIR", dir.path().to_str().unwrap()),
        ],
    );
    let said = stderr(&output);
    let messages = size(&history.join("messages.jsonl"));
    let events = size(&history.join("events.jsonl"));
    eprintln!(
        "12 MB isError through `tools call`: stderr {} B, messages.jsonl {messages} B, \
         events.jsonl {events} B",
        said.len()
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(said.contains("the failing tool failed"), "{}", &said[..200]);
    assert!(said.len() <= 64 * 1024 + 512, "stderr {} B", said.len());
    assert!(
        said.contains(&format!("of {FLOOD} bytes")),
        "{}",
        tail(&said)
    );
    assert!(said.contains("mcp_read_output"), "{}", tail(&said));
    assert!(messages <= 64 * 1024 + 4096, "messages.jsonl {messages} B");
    assert!(events <= 64 * 1024 + 4096, "events.jsonl {events} B");
    let event = failed_event(&history, "cli-1");
    assert!(event["result_bytes"].as_u64().unwrap() >= FLOOD, "{event}");
    assert!(
        event["output_bytes"].as_u64().unwrap() <= 64 * 1024,
        "{event}"
    );
    assert!(event["output_handle"].is_string(), "{event}");
    // The 12 MB text was spilled (beyond the 8 MiB memory budget); its directory is gone.
    let left: Vec<PathBuf> = tree(dir.path())
        .into_iter()
        .filter(|p| !p.starts_with(&history))
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "left behind");
}

fn tail(text: &str) -> &str {
    let mut at = text.len().saturating_sub(400);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// `body` without the chunked transfer encoding's framing (a body sent with its length, one
/// JSON message, has no line break and is returned as it is).
fn dechunk(body: &str) -> String {
    if !body.contains("\r\n") {
        return body.to_owned();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_owned();
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// The JSON-RPC message of an HTTP answer's body (plain JSON or one SSE event, chunked or not).
fn message(body: &str) -> Value {
    let body = &dechunk(body);
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(body);
    serde_json::from_str(data.trim()).unwrap_or_else(|e| panic!("{e}: {}", tail(body)))
}

/// One `tools/call` of `mcp_call_tool` on the gateway: the HTTP body.
fn call(addr: &str, session: &str, id: u64, tool: &str, arguments: &Value) -> String {
    let headers = [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": tool, "arguments": arguments},
        },
    });
    let (status, _, body) = request(addr, "POST", &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{}", tail(&body));
    body
}

#[test]
fn a_12_mb_is_error_text_reaches_the_gateways_client_and_its_history_cut_to_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("serve-history");
    let serve = format!("history = {:?}", history.to_str().unwrap());
    let (_dir, file, _record) = kit_config(&serve);
    let mut gateway = Gateway::start(&file, &[("TMPDIR", tmp.path().to_str().unwrap())]);
    let addr = gateway.addr();
    let session = open_session(&addr);

    let body = call(&addr, &session, 2, "kit__fail", &json!({"bytes": FLOOD}));
    eprintln!(
        "12 MB isError through `serve`: the client's answer {} B",
        body.len()
    );
    let answer = message(&body);
    assert_eq!(answer["result"]["isError"], true, "{}", tail(&body));
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("the failing tool failed"));
    assert!(text.len() <= 64 * 1024, "the client reads {} B", text.len());
    assert!(body.len() <= 64 * 1024 + 4096, "answer {} B", body.len());
    let handle = text
        .split("\"handle\": \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no handle in {}", tail(text)));

    // The client reads the rest of the error text through `mcp_read_output`.
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let read = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "mcp_read_output", "arguments": {"handle": handle, "offset": FLOOD - 10}},
    });
    let (status, _, body) = request(&addr, "POST", &headers, read.to_string().as_bytes());
    assert_eq!(status, 200);
    let rest = message(&body);
    assert_eq!(rest["result"]["isError"], false, "{}", tail(&body));
    let rest = rest["result"]["content"][1]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(rest.contains(&format!("of {FLOOD}")), "{rest}");
    assert!(rest.contains("end of output"), "{rest}");

    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(gateway.exit_code(), Some(0), "a drained gateway exits 0");
    let run = std::fs::read_dir(&history)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let messages = size(&run.join("messages.jsonl"));
    let events = size(&run.join("events.jsonl"));
    eprintln!(
        "12 MB isError through `serve`: messages.jsonl {messages} B, events.jsonl {events} B"
    );
    assert!(
        messages <= 2 * 64 * 1024 + 4096,
        "messages.jsonl {messages} B"
    );
    assert!(events <= 64 * 1024 + 4096, "events.jsonl {events} B");
    let event = lines(&run.join("events.jsonl"))
        .into_iter()
        .find(|e| e["kind"] == "tool_call_failed")
        .unwrap();
    assert!(event["result_bytes"].as_u64().unwrap() >= FLOOD, "{event}");
    assert!(
        event["output_bytes"].as_u64().unwrap() <= 64 * 1024,
        "{event}"
    );
}

/// Calls of the kit's `huge` tool through one gateway session: the spill directory stays
/// under `max_spill_bytes` while the session lives, the oldest outputs dropped (reading one
/// says why), and nothing is left once the gateway exits on SIGTERM. Each output is over the
/// 8 MiB memory budget, so each is spilled; the limit holds two, so four are dropped.
#[test]
fn a_gateway_session_keeps_its_spilled_outputs_under_max_spill_bytes() {
    const CALLS: u64 = 6;
    const BYTES: u64 = 9_000_000;
    const LIMIT: u64 = 20 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let (_dir, file, _record) = kit_config(&format!("\n[policy]\nmax_spill_bytes = {LIMIT}"));
    let mut gateway = Gateway::start(&file, &[("TMPDIR", tmp.path().to_str().unwrap())]);
    let addr = gateway.addr();
    let session = open_session(&addr);
    let mut most = 0;
    let mut first = None;
    for id in 0..CALLS {
        let body = call(
            &addr,
            &session,
            10 + id,
            "kit__huge",
            &json!({"bytes": BYTES}),
        );
        let text = message(&body)["result"]["content"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.contains(&format!("of {BYTES} bytes")), "{text}");
        first = first.or_else(|| {
            text.split("\"handle\": \"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(str::to_owned)
        });
        most = most.max(du(tmp.path()));
    }
    eprintln!(
        "{CALLS} x {BYTES} B through one `serve` session: spill directory at most {most} B \
         (max_spill_bytes {LIMIT})"
    );
    assert!(most <= LIMIT, "{most} B spilled");
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let read = json!({
        "jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": {"name": "mcp_read_output", "arguments": {"handle": first.unwrap()}},
    });
    let (_, _, body) = request(&addr, "POST", &headers, read.to_string().as_bytes());
    let read = message(&body);
    assert_eq!(read["result"]["isError"], true, "{}", tail(&body));
    let said = read["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("max_spill_bytes") && said.contains(&LIMIT.to_string()),
        "{said}"
    );

    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(gateway.exit_code(), Some(0), "a drained gateway exits 0");
    assert_eq!(tree(tmp.path()), Vec::<PathBuf>::new(), "left behind");
}

/// A gateway killed with SIGKILL cannot clean up: its spill directory stays until the next
/// `mcp-agent` that spills finds its lock free and removes it.
#[test]
fn a_spill_directory_left_by_a_killed_process_is_swept_by_the_next_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (_dir, file, _record) = kit_config("");
    let env = [("TMPDIR", tmp.path().to_str().unwrap())];
    let mut gateway = Gateway::start(&file, &env);
    let addr = gateway.addr();
    let session = open_session(&addr);
    call(
        &addr,
        &session,
        2,
        "kit__huge",
        &json!({"bytes": 10_000_000}),
    );
    let left = du(tmp.path());
    assert!(left >= 10_000_000, "spilled {left} B");
    gateway.kill();
    assert!(
        du(tmp.path()) >= 10_000_000,
        "the killed gateway's outputs stay"
    );

    // A second process spills: the first one's directory is swept, its own remains while it
    // runs.
    let mut second = Gateway::start(&file, &env);
    let addr = second.addr();
    let session = open_session(&addr);
    call(
        &addr,
        &session,
        2,
        "kit__huge",
        &json!({"bytes": 9_000_000}),
    );
    let now = du(tmp.path());
    assert!(
        (9_000_000..10_000_000).contains(&now),
        "{now} B under the spill root: {:?}",
        tree(tmp.path())
    );
    kill(Pid::from_raw(second.pid() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(second.exit_code(), Some(0), "a drained gateway exits 0");
    assert_eq!(tree(tmp.path()), Vec::<PathBuf>::new(), "left behind");
}

/// A `huge` output (spilled), then a slow call: `run` is interrupted during the slow call.
const HUGE_THEN_SLOW: &str = r#"
fixtures:
  - scenario: { name: run, required_state: "", set_state: huge }
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: kit__huge, arguments: { bytes: 9000000 } }
  - scenario: { name: run, required_state: huge, set_state: slow }
    match:
      body_jsonpath: "$.messages[?@.role == 'tool' && search(@.content, 'output cut')]"
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: kit__slow, arguments: { ms: 600000 } }
"#;

#[test]
fn sigterm_mid_run_removes_the_runs_spilled_outputs() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let Some(endpoint) = crate::support::endpoint::Endpoint::start(HUGE_THEN_SLOW) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let servers = json!([{ "name": "kit", "command": mcp_test_kit::stdio::binary() }]).to_string();
    let mut cli = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args([
            "run",
            "--model",
            "test-model",
            "--base-url",
            &endpoint.base_url,
            "Go.",
        ])
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers)
        .env("OPENAI_API_KEY", crate::cli_run::KEY)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The slow call's line on stderr: the huge output was spilled before it.
    let (started, slow) = std::sync::mpsc::channel();
    let stderr = BufReader::new(cli.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("kit__slow") {
                let _ = started.send(());
            }
        }
    });
    slow.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the slow call within 60 s");
    let spilled = du(tmp.path());
    assert!(
        spilled >= 9_000_000,
        "spilled {spilled} B: {:?}",
        tree(tmp.path())
    );
    kill(Pid::from_raw(cli.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(cli.wait().unwrap().code(), Some(143));
    assert_eq!(tree(tmp.path()), Vec::<PathBuf>::new(), "left behind");
}
