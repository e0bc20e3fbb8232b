//! SIGKILL gives the CLI no chance to close anything: the stdio servers it started, and every
//! process those servers started — in their process group, with `setsid`, double-forked
//! away — die all the same (Linux).

#![cfg(target_os = "linux")]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::cli_run::KEY;
use crate::support::endpoint::Endpoint;
use crate::support::{alive, children};

/// How long a condition may take to come about: a bound for failing, never a delay.
const BOUND: Duration = Duration::from_secs(30);

/// SIGKILLs what still runs of `pids` when dropped, so a failing test leaves nothing behind.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}

/// `MCP_AGENT__SERVERS` with the test kit's server as `kit`, writing its own pid and its four
/// escapees' to `escapees`.
fn servers(escapees: &Path) -> String {
    json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": ["--escapees", escapees],
    }])
    .to_string()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the server to have written `escapees`, SIGKILLs `host`, and asserts that the
/// host's children (the server, or what stands for it), the server and its four escapees all
/// stop running.
fn sigkill_leaves_nothing(mut host: Child, escapees: &Path) {
    let mut host_children = Vec::new();
    wait_until("the server to start", || {
        host_children = children(host.id());
        !host_children.is_empty()
    });
    let mut pids = Vec::new();
    wait_until("the server's escapees", || {
        pids = mcp_test_kit::stdio::escapees(escapees).unwrap_or_default();
        !pids.is_empty()
    });
    assert_eq!(pids.len(), 5, "{pids:?}");
    pids.extend(&host_children);
    let _guard = KillOnDrop(pids.clone());
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");

    kill(Pid::from_raw(host.id() as i32), Signal::SIGKILL).unwrap();
    host.wait().unwrap();
    let running = || {
        pids.iter()
            .copied()
            .filter(|&p| alive(p))
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + BOUND;
    while !running().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = running();
    assert!(
        left.is_empty(),
        "{} of {} processes outlived the SIGKILLed host: {left:?}",
        left.len(),
        pids.len()
    );
}

fn escapees_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("escapees");
    (dir, path)
}

#[test]
fn a_sigkilled_tools_call_leaves_no_process_of_its_server() {
    let (_dir, escapees) = escapees_file();
    let host = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["tools", "call", "kit__slow", r#"{"ms": 60000}"#])
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers(&escapees))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    sigkill_leaves_nothing(host, &escapees);
}

#[test]
fn a_sigkilled_stdio_gateway_leaves_no_process_of_its_upstream() {
    let (_dir, escapees) = escapees_file();
    let mut host = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--stdio"])
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers(&escapees))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = host.stdin.take().unwrap();
    let mut stdout = BufReader::new(host.stdout.take().unwrap());
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    });
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    for message in [initialize, initialized, list] {
        writeln!(stdin, "{message}").unwrap();
    }
    // The listing is answered once the upstream session is open.
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout closed");
        if serde_json::from_str::<serde_json::Value>(&line).unwrap()["id"] == 2 {
            break;
        }
    }
    sigkill_leaves_nothing(host, &escapees);
    drop(stdin);
}

/// A model that has the kit's `slow` tool run for a minute, whatever it is shown.
const SLOW_CALL: &str = r#"
fixtures:
  - response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: kit__slow, arguments: { ms: 60000 } }
"#;

#[test]
fn a_sigkilled_run_leaves_no_process_of_its_server() {
    let Some(endpoint) = Endpoint::start(SLOW_CALL) else {
        return;
    };
    let (_dir, escapees) = escapees_file();
    let mut host = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["run", "--model", "test-model", "--base-url"])
        .arg(&endpoint.base_url)
        .arg("Take your time.")
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers(&escapees))
        .env("OPENAI_API_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run prints each tool call as it makes it: the host is mid-run, its server busy.
    let stderr = BufReader::new(host.stderr.take().unwrap());
    let (calling, called) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("→ kit__slow") {
                let _ = calling.send(());
            }
        }
    });
    if called.recv_timeout(BOUND).is_err() {
        let _ = host.kill();
        let _ = host.wait();
        panic!("the run did not call kit__slow within {BOUND:?}");
    }
    sigkill_leaves_nothing(host, &escapees);
}
