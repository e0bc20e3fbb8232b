//! A terminating signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) at any moment — while connecting,
//! mid-call, during the close — closes the run: the server the CLI spawned, which lives in its
//! own process group out of reach of a terminal's signals, is gone too, and the CLI exits with
//! 128 + the signal.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_test_kit::{Event, RecordFile};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::{alive, children};

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The CLI calling `kit__slow` for a minute on a test-kit server started with `server_args`.
fn cli_calling_slow(server_args: &[impl AsRef<str>]) -> Child {
    let server_args: Vec<&str> = server_args.iter().map(AsRef::as_ref).collect();
    let servers = serde_json::json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": server_args,
    }])
    .to_string();
    Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["tools", "call", "kit__slow", r#"{"ms": 60000}"#])
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(cli: &Child, signal: Signal) {
    kill(Pid::from_raw(cli.id() as i32), signal).unwrap();
}

/// Waits for the CLI's exit and for every server pid to be gone; returns the exit code.
fn exit_leaving_no_server(mut cli: Child, server: Vec<u32>) -> Option<i32> {
    let status = cli.wait().unwrap();
    for pid in server {
        wait_until(&format!("server {pid} to be gone"), || !alive(pid));
    }
    status.code()
}

fn started_servers(cli: &Child) -> Vec<u32> {
    let mut server = Vec::new();
    wait_until("the server to start", || {
        server = children(cli.id());
        !server.is_empty()
    });
    server
}

/// Waits until the server recorded the start of the call.
fn call_started(record: &RecordFile) {
    wait_until("the call to start", || {
        record
            .snapshot()
            .events
            .iter()
            .any(|e| matches!(e, Event::Call { .. }))
    });
}

/// A record file in a fresh directory, and the server arguments that write it.
fn recorded(args: &[&str]) -> (tempfile::TempDir, RecordFile, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let record = RecordFile::new(dir.path().join("record.jsonl"));
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.push("--record".into());
    args.push(record.path().to_string_lossy().into_owned());
    (dir, record, args)
}

fn interrupted_mid_call_leaves_no_server(sig: Signal, expected_code: i32) {
    let (_dir, record, args) = recorded(&["--ignore-stdin-close", "--ignore-sigterm"]);
    let cli = cli_calling_slow(&args);
    let server = started_servers(&cli);
    call_started(&record);
    signal(&cli, sig);
    assert_eq!(exit_leaving_no_server(cli, server), Some(expected_code));
}

#[test]
fn sigterm_mid_call_closes_the_run() {
    interrupted_mid_call_leaves_no_server(Signal::SIGTERM, 143);
}

#[test]
fn sigint_mid_call_closes_the_run() {
    interrupted_mid_call_leaves_no_server(Signal::SIGINT, 130);
}

#[test]
fn sighup_mid_call_closes_the_run() {
    interrupted_mid_call_leaves_no_server(Signal::SIGHUP, 129);
}

#[test]
fn sigquit_mid_call_closes_the_run() {
    interrupted_mid_call_leaves_no_server(Signal::SIGQUIT, 131);
}

#[test]
fn a_signal_while_connecting_stops_the_half_open_server() {
    // The server takes a minute to answer `initialize`: the signal lands mid-handshake.
    let cli = cli_calling_slow(&["--init-delay-ms", "60000", "--ignore-sigterm"]);
    let server = started_servers(&cli);
    signal(&cli, Signal::SIGTERM);
    assert_eq!(exit_leaving_no_server(cli, server), Some(143));
}

#[test]
fn a_second_signal_during_the_close_kills_at_once() {
    // This server outlasts the whole close (stdin close, grace, SIGTERM, grace) unless the
    // second signal cuts it short; the exit code tells which signal ended the CLI.
    let (_dir, record, args) = recorded(&["--ignore-stdin-close", "--ignore-sigterm"]);
    let mut cli = cli_calling_slow(&args);
    let server = started_servers(&cli);
    call_started(&record);
    signal(&cli, Signal::SIGTERM);
    let mut stderr = BufReader::new(cli.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("closing the MCP sessions") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "stderr closed");
    }
    signal(&cli, Signal::SIGINT);
    assert_eq!(exit_leaving_no_server(cli, server), Some(130));
}

/// `run` ends on SIGHUP too (only `serve` reloads on it): here while it waits for the model,
/// an endpoint that accepts the request and never answers.
#[test]
fn sighup_ends_a_run_waiting_for_its_model() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (asked, asking) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Held open, unanswered, until the test process ends.
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            held.push(stream);
            let _ = asked.send(());
        }
    });
    let servers = serde_json::json!([{"name": "kit", "command": mcp_test_kit::stdio::binary()}]);
    let cli = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["run", "say hello", "--model", "m", "--base-url", &base_url])
        .env_clear()
        .env("MCP_AGENT__SERVERS", servers.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = started_servers(&cli);
    asking
        .recv_timeout(Duration::from_secs(20))
        .expect("the run asks its model");
    signal(&cli, Signal::SIGHUP);
    assert_eq!(exit_leaving_no_server(cli, server), Some(129));
}
