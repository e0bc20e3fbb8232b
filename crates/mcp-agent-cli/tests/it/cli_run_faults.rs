//! `mcp-agent run` when the model endpoint fails — unreachable, 401, an unknown model, a
//! stream cut in the middle of a tool call — or the user interrupts it mid-stream; and which
//! model configuration wins (a flag over `[model]` over the environment).

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::cli_run::{KEY, all, assert_clean, demo_servers, run, stderr, stdout};
use crate::support::canned::{Canned, sse};
use crate::support::endpoint::Endpoint;
use crate::support::{alive, children, mcp_agent};

/// The failure names the endpoint and the model, says what went wrong, and nothing printed
/// holds the key.
#[track_caller]
fn assert_model_failure(output: &std::process::Output, base_url: &str, model: &str, what: &str) {
    let said = stderr(output);
    assert_eq!(output.status.code(), Some(1), "{}", all(output));
    assert!(said.contains(&format!("model `{model}`")), "{said}");
    assert!(said.contains(base_url), "{said}");
    assert!(said.contains(what), "`{what}` not in: {said}");
    assert!(stdout(output).is_empty(), "{}", stdout(output));
    assert_clean(output);
}

#[test]
fn an_unreachable_endpoint_is_a_clear_error_naming_base_url_and_model() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let servers = demo_servers();
    let output = mcp_agent(
        &[
            "run",
            "--model",
            "test-model",
            "--base-url",
            &base_url,
            "hi",
        ],
        &[("MCP_AGENT__SERVERS", &servers), ("OPENAI_API_KEY", KEY)],
    );
    assert_model_failure(&output, &base_url, "test-model", "could not connect");
}

/// A 401 whose message echoes the whole key (as a careless provider might), a 404 for an
/// unknown model, and a stream that ends in the middle of a tool call.
const FAILURES: &str = r#"
fixtures:
  - match: { model: { regex: "^no-such-model$" } }
    error:
      status: 404
      message: "The model `no-such-model` does not exist or you do not have access to it."
  - match: { model: { regex: "^cut-model$" } }
    response:
      tool_calls:
        - name: mcp_call_tool
          arguments: { tool_name: demo__add, arguments: { a: 2, b: 3 } }
    failure: { truncate_after_frames: 1 }
  - error:
      status: 401
      message: "Incorrect API key provided: sk-test-4f9a2c7e1b8d6053. Find your key in your account."
"#;

#[test]
fn a_401_is_a_clear_error_naming_base_url_and_model_and_never_the_key_it_echoed() {
    let Some(endpoint) = Endpoint::start(FAILURES) else {
        return;
    };
    assert!(FAILURES.contains(KEY), "the endpoint must echo the key");
    let output = run(&endpoint, &["hi"], &[]);
    assert_model_failure(&output, &endpoint.base_url, "test-model", "401");
}

#[test]
fn an_unknown_model_is_a_clear_error_naming_base_url_and_model() {
    let Some(endpoint) = Endpoint::start(FAILURES) else {
        return;
    };
    let output = run(&endpoint, &["--model", "no-such-model", "hi"], &[]);
    assert_model_failure(&output, &endpoint.base_url, "no-such-model", "404");
    assert!(
        stderr(&output).contains("does not exist"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_stream_cut_in_the_middle_of_a_tool_call_fails_clearly_and_runs_no_call() {
    let Some(endpoint) = Endpoint::start(FAILURES) else {
        return;
    };
    let output = run(&endpoint, &["--model", "cut-model", "hi"], &[]);
    assert_model_failure(&output, &endpoint.base_url, "cut-model", "stream");
    assert!(!stderr(&output).contains('→'), "{}", stderr(&output));
}

#[test]
fn arguments_that_are_not_json_are_an_error_the_model_sees_and_the_run_goes_on() {
    // No registry mock sends unreadable arguments: this endpoint is a few lines of its own.
    let endpoint = Canned::start(|body| {
        let chunk = |delta: serde_json::Value, finish: Option<&str>| serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if body.contains("could not be read") {
            sse(&[
                chunk(
                    serde_json::json!({"content": "I wrote broken arguments."}),
                    None,
                ),
                chunk(serde_json::json!({}), Some("stop")),
            ])
        } else {
            sse(&[
                chunk(
                    serde_json::json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                        "function": {"name": "mcp_call_tool",
                                     "arguments": "{\"tool_name\": \"demo__add\", \"arg"}}]}),
                    None,
                ),
                chunk(serde_json::json!({}), Some("tool_calls")),
            ])
        }
    });
    let servers = demo_servers();
    let output = mcp_agent(
        &[
            "run",
            "--model",
            "test-model",
            "--base-url",
            &endpoint.base_url,
            "hi",
        ],
        &[("MCP_AGENT__SERVERS", &servers), ("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "I wrote broken arguments.\n");
    let said = stderr(&output);
    assert!(
        said.contains("→ mcp_call_tool (arguments not readable)"),
        "{said}"
    );
    assert!(said.contains("← invalid arguments "), "{said}");
    assert!(said.contains("done in 2 steps"), "{said}");
    assert_clean(&output);
}

#[test]
fn a_10_mb_reply_is_streamed_to_stdout_whole() {
    const PIECE: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_. \n";
    const PIECES_PER_EVENT: usize = 1024;
    let events = 10 * 1024 * 1024 / (PIECE.len() * PIECES_PER_EVENT);
    let endpoint = Canned::start(move |_| {
        let text = PIECE.repeat(PIECES_PER_EVENT);
        let mut chunks: Vec<serde_json::Value> = (0..events)
            .map(|_| serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]}))
            .collect();
        chunks.push(
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        sse(&chunks)
    });
    let servers = demo_servers();
    let output = mcp_agent(
        &[
            "run",
            "--model",
            "test-model",
            "--base-url",
            &endpoint.base_url,
            "Talk.",
        ],
        &[("MCP_AGENT__SERVERS", &servers), ("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let expected = PIECE.repeat(PIECES_PER_EVENT * events);
    assert!(
        expected.len() >= 10 * 1000 * 1000,
        "{} bytes",
        expected.len()
    );
    assert!(
        output.stdout == expected.as_bytes(),
        "{} bytes printed",
        output.stdout.len()
    );
}

/// Which configuration answers: the model name and the key decide the fixture.
const WHO_ANSWERS: &str = r#"
fixtures:
  - match: { model: "flag-model", headers: { authorization: "Bearer sk-team-key-7781" } }
    response: { content: "flag model, table key" }
  - match: { model: "table-model", headers: { authorization: "Bearer sk-team-key-7781" } }
    response: { content: "table model, table key" }
  - match: { model: "env-model", headers: { authorization: "Bearer sk-test-4f9a2c7e1b8d6053" } }
    response: { content: "environment key" }
  - error: { status: 401, message: "no such key" }
"#;

#[test]
fn a_flag_wins_over_the_model_table_and_the_table_over_the_environment() {
    let Some(endpoint) = Endpoint::start(WHO_ANSWERS) else {
        return;
    };
    let servers = demo_servers();
    let table = serde_json::json!({
        "base_url": endpoint.base_url,
        "model": "table-model",
        "api_key_env": "TEAM_KEY",
    })
    .to_string();
    let unreachable = "http://127.0.0.1:9/v1";
    let env = [
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("MCP_AGENT__MODEL", &table),
        ("TEAM_KEY", "sk-team-key-7781"),
        ("OPENAI_BASE_URL", unreachable),
        ("OPENAI_API_KEY", KEY),
    ];
    let output = mcp_agent(&["run", "hi"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "table model, table key\n");

    let output = mcp_agent(&["run", "--model", "flag-model", "hi"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "flag model, table key\n");

    // Without the table: the environment's base URL and key.
    let output = mcp_agent(
        &["run", "--model", "env-model", "hi"],
        &[
            ("MCP_AGENT__SERVERS", servers.as_str()),
            ("OPENAI_BASE_URL", &endpoint.base_url),
            ("OPENAI_API_KEY", KEY),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", all(&output));
    assert_eq!(stdout(&output), "environment key\n");
    assert_clean(&output);

    // The table names a variable that is not set: refused before any server starts.
    let output = mcp_agent(&["run", "hi"], &env[..2]);
    assert_eq!(output.status.code(), Some(2), "{}", all(&output));
    assert!(
        stderr(&output).contains("`TEAM_KEY`"),
        "{}",
        stderr(&output)
    );
}

/// A long answer, streamed a few characters at a time, slowly.
const SLOW_STREAM: &str = r#"
fixtures:
  - streaming: { latency: 200, chunk_size: 4 }
    response:
      content: "This answer arrives a few characters at a time, slowly enough that the run is interrupted long before its end, which is what this test needs."
"#;

#[test]
fn sigint_mid_stream_exits_130_and_leaves_no_server() {
    interrupted_mid_stream(Signal::SIGINT, 130);
}

#[test]
fn sigterm_mid_stream_exits_143_and_leaves_no_server() {
    interrupted_mid_stream(Signal::SIGTERM, 143);
}

fn interrupted_mid_stream(signal: Signal, code: i32) {
    let Some(endpoint) = Endpoint::start(SLOW_STREAM) else {
        return;
    };
    let mut cli = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args([
            "run",
            "--model",
            "test-model",
            "--base-url",
            &endpoint.base_url,
            "Tell me something long.",
        ])
        .env_clear()
        .env("MCP_AGENT__SERVERS", demo_servers())
        .env("OPENAI_API_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first streamed text shows the model is mid-answer (the servers are open by then).
    let mut stdout = cli.stdout.take().unwrap();
    let (first, arrived) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let n = stdout.read(&mut buf).unwrap_or(0);
        let _ = first.send(String::from_utf8_lossy(&buf[..n]).into_owned());
        // Keep reading, so the CLI never blocks on a full pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    let text = arrived
        .recv_timeout(Duration::from_secs(30))
        .expect("streamed text within 30 s");
    assert!(text.starts_with("This"), "{text:?}");
    let server = children(cli.id());
    assert!(!server.is_empty(), "the demo server runs during the stream");
    kill(Pid::from_raw(cli.id() as i32), signal).unwrap();
    let status = cli.wait().unwrap();
    assert_eq!(status.code(), Some(code));
    let deadline = Instant::now() + Duration::from_secs(20);
    for pid in server {
        while alive(pid) {
            assert!(Instant::now() < deadline, "server {pid} outlived the CLI");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An endpoint that takes connections and never says a word; its connections stay open
/// until the test ends.
type Held = std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>;

fn silent_endpoint() -> (std::net::SocketAddr, Held) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream);
        }
    });
    (addr, held)
}

#[test]
fn a_model_that_never_answers_fails_after_the_configured_timeout() {
    let (addr, held) = silent_endpoint();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp.toml");
    std::fs::write(
        &file,
        format!(
            "[model]\nbase_url = \"http://{addr}/v1\"\nmodel = \"mute\"\ntimeout_seconds = 1.5\n"
        ),
    )
    .unwrap();
    let started = Instant::now();
    let output = mcp_agent(
        &["--file", file.to_str().unwrap(), "run", "hello"],
        &[("OPENAI_API_KEY", "sk-test-0123456789")],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("request timeout of 1.5 s expired"),
        "{stderr}"
    );
    assert!(!held.lock().unwrap().is_empty(), "the endpoint was asked");
    // Not the HTTP adapter's 300 s: the configured bound (the deadline only catches a hang).
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
