//! `mcp-agent auth login|status|logout` against peers nobody here wrote: the pinned npm
//! `oauth2-mock-server` (dynamic registration, RFC 9207 `iss`, PKCE checked) and the pinned
//! fastmcp server verifying its JWTs — the scripts of `mcp-transport-http`'s login peer test.
//! The browser is a plain HTTP GET of the printed authorization URL; its redirect is pasted
//! back with `--no-browser`. The token store lives under a temporary `XDG_STATE_HOME`.
//!
//! The peers come from `cargo xtask peers` (`MCP_AGENT_PEER_*`); without them the test fails
//! under `CI=true` or `MCP_AGENT_REQUIRE_PEERS=1`, and otherwise returns early with a note.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp_agent;

fn peer(var: &str) -> Option<PathBuf> {
    let required = ["CI", "MCP_AGENT_REQUIRE_PEERS"].iter().any(|v| {
        std::env::var(v).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    });
    match std::env::var_os(var).map(PathBuf::from) {
        Some(path) if path.exists() => Some(path),
        _ => {
            assert!(
                !required,
                "{var} is not set or does not exist; run `cargo xtask peers`"
            );
            eprintln!(
                "note: skipping: {var} is not set (run `eval \"$(cargo xtask peers --env)\"`)"
            );
            None
        }
    }
}

/// A peer process, killed on drop, with the first URL of its ready line (on stderr).
struct Peer {
    child: Child,
    url: String,
}

impl Peer {
    fn start(mut cmd: Command, ready: &str) -> Self {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the peer");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let line = loop {
            match lines.next() {
                Some(Ok(line)) if line.contains(ready) => break line,
                Some(Ok(line)) => {
                    seen.push_str(&line);
                    seen.push('\n');
                }
                _ => panic!("the peer did not print `{ready}`; stderr:\n{seen}"),
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("a URL on the ready line")
            .to_owned();
        Self { child, url }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One plain HTTP/1.1 GET on loopback, as a browser would: the head of the answer.
fn get(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_once("\r\n\r\n")
        .map_or(answer.clone(), |(h, _)| h.to_owned())
}

fn location(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no redirect: {head}"))
}

/// The peers and a state directory for one test.
struct World {
    _auth: Peer,
    _mcp: Peer,
    state: tempfile::TempDir,
    servers: String,
}

impl World {
    fn start() -> Option<Self> {
        Self::with_oauth(json!({}))
    }

    /// With this `oauth` table.
    fn with_oauth(oauth: Value) -> Option<Self> {
        let (Some(node), Some(mock), Some(python)) = (
            peer("MCP_AGENT_PEER_NODE22"),
            peer("MCP_AGENT_PEER_OAUTH2_MOCK"),
            peer("MCP_AGENT_PEER_PYTHON"),
        ) else {
            return None;
        };
        let scripts =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp-transport-http/tests/peers");
        let mut cmd = Command::new(node);
        cmd.arg(scripts.join("oauth_login_as.mjs"))
            .arg(mock.parent().expect("the mock's dist directory"))
            .arg("600");
        let auth = Peer::start(cmd, "issuer ");
        let mut cmd = Command::new(python);
        cmd.arg(scripts.join("oauth_mcp_server.py")).arg(&auth.url);
        let mcp = Peer::start(cmd, "listening on ");
        let servers = json!([{
            "name": "fastmcp",
            "url": mcp.url,
            "connect_timeout_seconds": 30,
            "auth": {"oauth": oauth},
        }])
        .to_string();
        Some(Self {
            _auth: auth,
            _mcp: mcp,
            state: tempfile::tempdir().unwrap(),
            servers,
        })
    }

    fn state(&self) -> &str {
        self.state.path().to_str().unwrap()
    }

    fn env(&self) -> Vec<(&str, &str)> {
        vec![
            ("MCP_AGENT__SERVERS", self.servers.as_str()),
            ("XDG_STATE_HOME", self.state()),
            ("HOME", self.state()),
        ]
    }

    fn run(&self, args: &[&str]) -> Output {
        mcp_agent(args, &self.env())
    }

    /// `auth login fastmcp` with `args` started, stdin piped when `paste`: the child, its
    /// stdout, and the authorization URL it printed first.
    fn start_login(&self, args: &[&str], paste: bool) -> (Child, BufReader<ChildStdout>, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
            .args(["auth", "login", "fastmcp"])
            .args(args)
            .env_clear()
            .envs(self.env())
            .stdin(if paste { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run mcp-agent");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let url = first.trim_end().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        (child, stdout, url)
    }

    /// `auth login fastmcp --no-browser`: the URL read from stdout, followed, the redirect
    /// pasted. Returns the output and the code the authorization server issued.
    fn login(&self) -> (Output, String) {
        let (mut child, mut stdout, url) =
            self.start_login(&["--no-browser", "--timeout", "60"], true);
        let first = format!("{url}\n");
        let redirect = location(&get(&url));
        assert!(redirect.contains("/callback?"), "{redirect}");
        let code = code_of(&redirect).to_owned();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{redirect}").unwrap();
        drop(stdin);
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).unwrap();
        let mut output = child.wait_with_output().unwrap();
        let mut all = first.into_bytes();
        all.extend(rest);
        output.stdout = all;
        (output, code)
    }

    /// The stored token files (the access and refresh tokens in them).
    fn tokens(&self) -> Vec<(PathBuf, Vec<String>)> {
        let dir = self.state.path().join("mcp-agent/oauth");
        std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .map(|e| {
                        let file: Value =
                            serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
                        let secrets = ["access_token", "refresh_token"]
                            .iter()
                            .filter_map(|k| file[k].as_str().map(str::to_owned))
                            .collect();
                        (e.path(), secrets)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The authorization code in a redirect URL.
fn code_of(redirect: &str) -> &str {
    redirect
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("code="))
        .expect("a code")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[track_caller]
fn assert_code(output: &Output, code: i32) {
    assert_eq!(output.status.code(), Some(code), "{}", text(output));
}

#[test]
fn login_status_tools_logout_against_a_real_authorization_server() {
    let Some(world) = World::start() else { return };
    let mut shown = String::new();

    // Before the login, the server's tools need one.
    let before = world.run(&["tools", "list"]);
    assert_code(&before, 1);
    assert!(
        text(&before).contains("mcp-agent auth login fastmcp"),
        "{}",
        text(&before)
    );

    let (login, code) = world.login();
    assert_code(&login, 0);
    let said = text(&login);
    assert!(said.contains("logged in to `fastmcp`"), "{said}");
    assert!(said.contains("client registered-1"), "{said}");
    assert!(said.contains("expires in"), "{said}");
    shown.push_str(&said);
    let tokens = world.tokens();
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    let (file, secrets) = &tokens[0];
    assert!(!secrets.is_empty());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let status = world.run(&["auth", "status"]);
    assert_code(&status, 0);
    let out = String::from_utf8_lossy(&status.stdout).into_owned();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("fastmcp\t"), "{out}");
    assert!(out.contains("registered-1"), "{out}");
    shown.push_str(&text(&status));
    let json_status = world.run(&["auth", "status", "--json"]);
    assert_code(&json_status, 0);
    let listed: Value = serde_json::from_slice(&json_status.stdout).unwrap();
    assert_eq!(listed[0]["server"], "fastmcp");
    assert_eq!(listed[0]["client_id"], "registered-1");
    assert_eq!(listed[0]["refresh_token"], true);
    shown.push_str(&text(&json_status));

    // The stored token opens the session.
    let listed = world.run(&["tools", "list"]);
    assert_code(&listed, 0);
    let out = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(out.contains("echo"), "{out}");
    shown.push_str(&text(&listed));
    let called = world.run(&[
        "tools",
        "call",
        "fastmcp__add",
        r#"{"a": 2, "b": 3}"#,
        "--yes",
    ]);
    assert_code(&called, 0);
    assert!(String::from_utf8_lossy(&called.stdout).contains('5'));
    shown.push_str(&text(&called));

    let logout = world.run(&["auth", "logout", "fastmcp"]);
    assert_code(&logout, 0);
    assert!(text(&logout).contains("logged out of `fastmcp`"));
    shown.push_str(&text(&logout));
    assert!(world.tokens().is_empty());
    let status = world.run(&["auth", "status"]);
    assert_code(&status, 0);
    assert!(status.stdout.is_empty());

    let after = world.run(&["tools", "list"]);
    assert_code(&after, 1);
    assert!(
        text(&after).contains("log in again with `mcp-agent auth login fastmcp`"),
        "{}",
        text(&after)
    );
    shown.push_str(&text(&after));

    for secret in secrets.iter().chain([&code]) {
        assert!(!shown.contains(secret.as_str()), "a secret was shown");
    }
}

#[test]
fn a_token_file_others_can_read_is_refused_naming_the_fix() {
    let Some(world) = World::start() else { return };
    let (login, _) = world.login();
    assert_code(&login, 0);
    let (file, secrets) = world.tokens().pop().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

    for args in [&["auth", "status"][..], &["tools", "list"][..]] {
        let refused = world.run(args);
        assert_code(&refused, 1);
        let said = text(&refused);
        assert!(
            said.contains(&format!("chmod 600 {}", file.display())),
            "{args:?}: {said}"
        );
        for secret in &secrets {
            assert!(!said.contains(secret.as_str()), "a secret was shown");
        }
    }
}

#[test]
fn a_wrong_state_is_refused_and_nothing_is_stored() {
    let Some(world) = World::start() else { return };
    let (mut child, stdout, url) = world.start_login(&["--no-browser"], true);
    let redirect = location(&get(&url));
    let forged: String = redirect
        .split('&')
        .map(|p| {
            if p.starts_with("state=") {
                "state=forged".to_owned()
            } else {
                p.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("&");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{forged}").unwrap();
    drop(stdin);
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert_code(&output, 1);
    assert!(text(&output).contains("state"), "{}", text(&output));
    let code = code_of(&redirect);
    assert!(!text(&output).contains(code), "the code was shown");
    assert!(world.tokens().is_empty());
}

#[test]
fn a_server_that_cannot_log_in_is_named_with_exit_2() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap();
    let servers = json!([
        {"name": "plain", "url": "http://127.0.0.1:9/mcp"},
        {"name": "local", "command": "true"},
    ])
    .to_string();
    let env = [
        ("MCP_AGENT__SERVERS", servers.as_str()),
        ("XDG_STATE_HOME", state),
        ("HOME", state),
    ];
    for (server, why) in [
        ("nope", "no server `nope` is configured"),
        ("plain", "no `oauth` auth table"),
        ("local", "not an HTTP server"),
    ] {
        for cmd in ["login", "logout"] {
            let output = mcp_agent(&["auth", cmd, server], &env);
            assert_code(&output, 2);
            let said = String::from_utf8_lossy(&output.stderr);
            assert!(said.contains(why), "{said}");
        }
    }
    let status = mcp_agent(&["auth", "status"], &env);
    assert_code(&status, 0);
    assert!(String::from_utf8_lossy(&status.stderr).contains("no stored logins"));
}

#[test]
fn a_second_login_is_refused_while_one_waits_and_a_signal_ends_the_wait_cleanly() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let Some(world) = World::start() else { return };
    let (mut waiting, stdout, _) = world.start_login(&["--no-browser"], true);

    let second = world.run(&["auth", "login", "fastmcp", "--no-browser"]);
    assert_code(&second, 1);
    assert!(
        text(&second).contains("another login for this server is in progress"),
        "{}",
        text(&second)
    );

    // Stdin stays open: the login is still waiting for a paste when the signal comes.
    let stdin = waiting.stdin.take().unwrap();
    kill(Pid::from_raw(waiting.id() as i32), Signal::SIGINT).unwrap();
    drop(stdout);
    let ended = waiting.wait_with_output().unwrap();
    drop(stdin);
    assert_code(&ended, 130);
    assert!(text(&ended).contains("interrupted"), "{}", text(&ended));
    assert!(world.tokens().is_empty());

    // The lock went with it: the next login runs to the end.
    let (login, _) = world.login();
    assert_code(&login, 0);
}

#[test]
fn the_browser_redirect_to_the_loopback_listener_completes_the_login() {
    // The configured redirect URI's port is the one listened on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let Some(world) = World::with_oauth(json!({ "redirect_uri": redirect_uri })) else {
        return;
    };
    let (child, mut stdout, url) = world.start_login(&["--timeout", "60"], false);
    let redirect = location(&get(&url));
    assert!(redirect.starts_with(&redirect_uri), "{redirect}");
    // The browser follows the redirect to the CLI's listener, which answers a short page.
    let page = get(&redirect);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_code(&output, 0);
    assert!(rest.contains("logged in to `fastmcp`"), "{rest}");
    assert_eq!(world.tokens().len(), 1);
    assert_code(&world.run(&["tools", "list"]), 0);
}
