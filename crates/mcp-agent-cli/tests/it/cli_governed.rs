//! `tools call` through the governed layer: `[policy]` identity rules, approval (asked on a
//! terminal, `--yes`, refused with no terminal), the output limit (`--full`), and
//! `--history DIR` read back by `history show`.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::support::{alive, children, mcp_agent};

/// `MCP_AGENT__SERVERS` with the test kit's stdio server as `kit` (identity `mcp-test-kit`).
fn kit() -> String {
    json!([{ "name": "kit", "command": mcp_test_kit::stdio::binary() }]).to_string()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `mcp-agent` with the kit server and `policy` as `MCP_AGENT__POLICY`.
fn with_policy(args: &[&str], policy: &Value) -> Output {
    let servers = kit();
    let policy = policy.to_string();
    mcp_agent(
        args,
        &[
            ("MCP_AGENT__SERVERS", &servers),
            ("MCP_AGENT__POLICY", &policy),
        ],
    )
}

/// The text of the kit's `huge` tool for `bytes`.
fn huge_text(bytes: usize) -> String {
    const LINE: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_\n";
    let mut text = LINE.repeat(bytes / LINE.len() + 1);
    text.truncate(bytes);
    text
}

#[track_caller]
fn assert_safe(output: &Output) {
    let all = format!("{}{}", stdout(output), stderr(output));
    assert!(
        !all.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{all:?}"
    );
}

#[test]
fn a_policy_deny_refuses_the_call_and_names_the_rule() {
    let policy = json!({"deny": [{"server": "mcp-test-kit", "tool": "ec*"}]});
    let output = with_policy(&["tools", "call", "kit__echo", r#"{"a": 1}"#], &policy);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("kit__echo"), "{said}");
    assert!(
        said.contains(r#"{ server = "mcp-test-kit", tool = "ec*" }"#),
        "{said}"
    );
    assert!(said.contains("deny"), "{said}");
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert_safe(&output);

    // Another tool of the same server is not refused.
    let output = with_policy(
        &["tools", "call", "kit__add", r#"{"a": 1, "b": 2}"#],
        &policy,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn tools_list_marks_what_the_policy_refuses_and_counts_only_what_the_model_sees() {
    let policy = json!({"deny": [{"server": "mcp-test-kit", "tool": "ec*"}]});
    let output = with_policy(&["tools", "list"], &policy);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listed = stdout(&output);
    let echo = listed
        .lines()
        .find(|l| l.starts_with("kit__echo\t"))
        .expect("the refused tool is still listed for the operator");
    assert!(echo.contains("(refused by [policy])"), "{echo}");
    let add = listed
        .lines()
        .find(|l| l.starts_with("kit__add\t"))
        .unwrap();
    assert!(!add.contains("refused"), "{add}");
    let total = listed.lines().count();
    let said = stderr(&output);
    assert!(
        said.contains(&format!(
            "{} tools from 1 servers (1 more refused by [policy])",
            total - 1
        )),
        "{said}"
    );

    let output = with_policy(&["tools", "list", "--json"], &policy);
    let tools: Vec<serde_json::Value> = serde_json::from_str(&stdout(&output)).unwrap();
    let refused: Vec<_> = tools
        .iter()
        .filter(|t| t["refused_by_policy"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(refused, ["kit__echo"]);
}

#[test]
fn a_call_that_needs_approval_with_no_terminal_is_refused_saying_how_to_allow_it() {
    let policy = json!({"approve": [{"server": "mcp-test-kit", "tool": "echo"}]});
    let output = with_policy(&["tools", "call", "kit__echo", r#"{"a": 1}"#], &policy);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("kit__echo"), "{said}");
    assert!(said.contains("approval"), "{said}");
    assert!(said.contains("--yes"), "{said}");
    assert!(said.contains("answer on a terminal"), "{said}");
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert_safe(&output);
}

#[test]
fn with_yes_a_call_that_needs_approval_runs() {
    let policy = json!({"approve": [{"server": "mcp-test-kit", "tool": "echo"}]});
    for args in [
        &["tools", "call", "kit__echo", r#"{"a": 1}"#, "--yes"][..],
        &["--yes", "tools", "call", "kit__echo", r#"{"a": 1}"#][..],
    ] {
        let output = with_policy(args, &policy);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout(&output).trim(), r#"{"a":1}"#);
    }
}

#[test]
fn a_big_result_is_cut_with_its_marker_and_full_prints_all_of_it() {
    let policy = json!({"max_output_bytes": 4096});
    let args = ["tools", "call", "kit__huge", r#"{"bytes": 100000}"#];
    let output = with_policy(&args, &policy);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(shown.len() <= 4096 + 1, "{} bytes shown", shown.len());
    assert!(shown.starts_with(&huge_text(1000)), "{shown}");
    assert!(shown.contains("of 100000 bytes"), "{shown}");
    assert!(shown.contains("mcp_read_output"), "{shown}");

    let output = with_policy(&[&args[..], &["--full"]].concat(), &policy);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let whole = stdout(&output);
    assert_eq!(whole.len(), 100_000 + 1);
    assert!(
        whole == format!("{}\n", huge_text(100_000)),
        "not the whole text"
    );

    // A result under the limit is printed as it is, with or without --full.
    let output = with_policy(
        &["tools", "call", "kit__huge", r#"{"bytes": 100}"#, "--full"],
        &policy,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("{}\n", huge_text(100)));
}

#[test]
fn full_prints_a_multi_byte_result_whole_across_its_pieces() {
    // 2-, 3- and 4-byte characters: read in pieces of the limit, cut only between characters.
    let unit = "é€😀x";
    let policy = json!({"max_output_bytes": 1024});
    let arguments = json!({"bytes": 300_000, "unit": unit}).to_string();
    let args = ["tools", "call", "kit__huge", arguments.as_str()];
    let output = with_policy(&args, &policy);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).len() <= 1024 + 1);

    let output = with_policy(&[&args[..], &["--full"]].concat(), &policy);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let whole = stdout(&output);
    let expected = unit.repeat(300_000 / unit.len()) + "\n";
    assert_eq!(whole.len(), expected.len());
    assert!(whole == expected, "not the whole text");
}

#[test]
fn history_records_the_call_and_history_show_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session");
    let session = session.to_str().unwrap();
    let servers = json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "env": {"KIT_TOKEN": "tok-history-secret-7"},
    }])
    .to_string();
    let env = [("MCP_AGENT__SERVERS", servers.as_str())];
    let output = mcp_agent(
        &[
            "tools",
            "call",
            "kit__echo",
            r#"{"text": "hello", "key": "tok-history-secret-7"}"#,
            "--history",
            session,
        ],
        &env,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stdout(&output).contains("tok-history-secret-7"));

    let output = mcp_agent(&["history", "show", session], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(shown.contains("call cli-1: kit__echo"), "{shown}");
    let finished = shown
        .lines()
        .find(|l| l.contains("tool_call_finished"))
        .unwrap_or_else(|| panic!("no finished call: {shown}"));
    assert!(
        finished.contains("kit__echo on kit (mcp-test-kit): ok in "),
        "{finished}"
    );
    assert!(shown.contains("result of cli-1"), "{shown}");

    let output = mcp_agent(&["history", "show", session, "--json"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let records: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = records
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .filter(|k| k.starts_with("tool_call_"))
        .collect();
    assert_eq!(kinds, ["tool_call_started", "tool_call_finished"]);
    assert!(
        records
            .iter()
            .any(|r| r["file"] == "messages.jsonl" && r["tool_call_id"] == "cli-1")
    );
    // The run's secret is nowhere in the files.
    for file in ["messages.jsonl", "events.jsonl"] {
        let text = std::fs::read_to_string(dir.path().join("session").join(file)).unwrap();
        assert!(!text.contains("tok-history-secret-7"), "{file}: {text}");
    }
}

#[test]
fn an_unwritable_history_directory_fails_before_any_server_is_contacted() {
    let dir = tempfile::tempdir().unwrap();
    // A file where a directory should be: unwritable whoever runs the test.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let session = blocker.join("session");
    let servers = r#"[{"name": "ghost", "command": "/nonexistent/mcp-server"}]"#;
    let output = mcp_agent(
        &[
            "tools",
            "call",
            "ghost__echo",
            "{}",
            "--history",
            session.to_str().unwrap(),
        ],
        &[("MCP_AGENT__SERVERS", servers)],
    );
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains(session.to_str().unwrap()), "{said}");
    assert!(said.contains("history"), "{said}");
    // Had the server been started first, its failure would be the one told.
    assert!(!said.contains("ghost"), "{said}");
}

/// A pseudo-terminal: the child's stdin and stderr are its slave side, the test reads and
/// answers on its master side.
struct Terminal {
    master: std::fs::File,
    screen: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl Terminal {
    /// Spawns `mcp-agent args` on a new terminal (stdout stays a pipe).
    fn spawn(args: &[&str], env: &[(&str, &str)]) -> (Self, std::process::Child) {
        let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
        let slave: OwnedFd = pty.slave;
        let child = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .stdout(Stdio::piped())
            .spawn()
            .expect("run mcp-agent");
        let master = std::fs::File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, screen) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once every slave descriptor is closed (the child exited).
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        (
            Self {
                master,
                screen,
                seen: String::new(),
            },
            child,
        )
    }

    /// Reads the terminal until `text` appears.
    #[track_caller]
    fn wait_for(&mut self, text: &str) {
        while !self.seen.contains(text) {
            match self.screen.recv_timeout(mcp_test_kit::TEST_LIMIT) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(e) => panic!(
                    "{text:?} never shown ({e}); the terminal shows: {}",
                    self.seen
                ),
            }
        }
    }

    fn answer(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.write_all(b"\n").unwrap();
    }
}

#[test]
fn on_a_terminal_the_call_is_asked_about_and_the_answer_decides() {
    let servers = kit();
    let policy = json!({"approve": [{"server": "mcp-test-kit", "tool": "echo"}]}).to_string();
    let env = [
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("MCP_AGENT__POLICY", policy.as_str()),
    ];
    let args = [
        "tools",
        "call",
        "kit__echo",
        r#"{"text": "hi", "password": "hunter2-secret"}"#,
    ];

    let (mut terminal, child) = Terminal::spawn(&args, &env);
    terminal.wait_for("[n] no (default): ");
    assert!(
        terminal.seen.contains("`echo` of MCP server `kit`"),
        "{}",
        terminal.seen
    );
    assert!(
        !terminal.seen.contains("hunter2-secret"),
        "{}",
        terminal.seen
    );
    terminal.answer("y");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", terminal.seen);
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["text"], "hi");

    let (mut terminal, child) = Terminal::spawn(&args, &env);
    terminal.wait_for("[n] no (default): ");
    terminal.answer("n");
    let output = child.wait_with_output().unwrap();
    terminal.wait_for("refused on the terminal");
    assert_eq!(output.status.code(), Some(1), "{}", terminal.seen);
    assert!(stdout(&output).is_empty());
}

#[test]
fn a_signal_while_the_terminal_is_asked_closes_the_run() {
    let servers = kit();
    let policy = json!({"approve": [{"server": "mcp-test-kit"}]}).to_string();
    let env = [
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("MCP_AGENT__POLICY", policy.as_str()),
    ];
    let (mut terminal, mut child) = Terminal::spawn(&["tools", "call", "kit__echo", "{}"], &env);
    terminal.wait_for("[n] no (default): ");
    // Connected before asking: the server is running.
    let server = children(child.id());
    assert_eq!(server.len(), 1, "{server:?}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    // The prompt still waiting for a line does not hold the exit up.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{}", terminal.seen);
    assert!(!alive(server[0]), "the server outlived the CLI");
    terminal.wait_for("interrupted");
}

#[test]
fn tools_call_prints_the_server_s_progress() {
    let servers = crate::support::kit_with_suite_tools();
    let output = mcp_agent(
        &["tools", "call", "kit__test_tool_with_progress", "{}"],
        &[("MCP_AGENT__SERVERS", &servers)],
    );
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    let lines: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    assert_eq!(
        lines,
        ["progress: 0/100", "progress: 50/100", "progress: 100/100"],
        "{said}"
    );
    assert!(
        stdout(&output).contains("Progress tool completed"),
        "{}",
        stdout(&output)
    );
    assert_safe(&output);
}
