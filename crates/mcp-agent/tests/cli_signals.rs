//! Interrupting the CLI (SIGINT, SIGTERM) mid-call closes the run: the server it spawned —
//! which lives in its own process group, out of reach of a terminal's Ctrl-C — is gone too.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The children of `parent`, read from `/proc`.
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The fields after the parenthesised command name: state, ppid, …
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        if after.split_whitespace().nth(1) == Some(&parent.to_string()) {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state letter is `Z`.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
                != Some(true)
        })
        .unwrap_or(false)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn interrupted_mid_call_leaves_no_server(signal: Signal, expected_code: i32) {
    let servers = serde_json::json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": ["--ignore-stdin-close", "--ignore-sigterm"],
    }])
    .to_string();
    let mut cli = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["tools", "call", "kit__slow", r#"{"ms": 60000}"#])
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Vec::new();
    wait_until("the server to start", || {
        server = children(cli.id());
        !server.is_empty()
    });
    kill(Pid::from_raw(cli.id() as i32), signal).unwrap();
    let status = cli.wait().unwrap();
    assert_eq!(status.code(), Some(expected_code), "{status}");
    for pid in server {
        wait_until(&format!("server {pid} to be gone"), || !alive(pid));
    }
}

#[test]
fn sigterm_mid_call_closes_the_run() {
    interrupted_mid_call_leaves_no_server(Signal::SIGTERM, 143);
}

#[test]
fn sigint_mid_call_closes_the_run() {
    interrupted_mid_call_leaves_no_server(Signal::SIGINT, 130);
}
