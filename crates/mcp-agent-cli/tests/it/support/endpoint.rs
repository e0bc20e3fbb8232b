//! A model endpoint for agent runs: `llmposter`, a third-party mock OpenAI-compatible
//! chat-completions server (a test peer built by `cargo xtask peers`), serving a YAML script of
//! answers — text, tool calls, HTTP errors, slow streams — on a port of its own.
//!
//! Without the peer (`MCP_AGENT_PEER_LLMPOSTER` unset) a test skips with a note, and fails
//! under `CI=true` or `MCP_AGENT_REQUIRE_PEERS=1`.

use std::io::Read;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the endpoint may take to start listening.
const START: Duration = Duration::from_secs(30);

/// A running endpoint, killed on drop.
pub(crate) struct Endpoint {
    child: Child,
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub(crate) base_url: String,
    _dir: tempfile::TempDir,
}

fn required() -> bool {
    let on = |var: &str| {
        std::env::var(var).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    };
    on("CI") || on("MCP_AGENT_REQUIRE_PEERS")
}

fn binary() -> Option<PathBuf> {
    const VAR: &str = "MCP_AGENT_PEER_LLMPOSTER";
    match std::env::var_os(VAR).map(PathBuf::from) {
        Some(path) if path.exists() => Some(path),
        _ => {
            assert!(
                !required(),
                "{VAR} is not set or does not exist; run `cargo xtask peers`"
            );
            eprintln!(
                "note: skipping: {VAR} is not set (run `eval \"$(cargo xtask peers --env)\"`)"
            );
            None
        }
    }
}

impl Endpoint {
    /// An endpoint answering by `fixtures` (llmposter's YAML: `fixtures: [...]`), or `None`
    /// when the peer is not installed and not required.
    pub(crate) fn start(fixtures: &str) -> Option<Self> {
        let binary = binary()?;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fixtures.yaml");
        std::fs::write(&path, fixtures).unwrap();
        // The peer announces its port on a block-buffered stdout, so it gets a free port and
        // is ready once that port takes connections. A port taken in between ends the peer
        // at once: then another one is tried.
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(&binary)
                .arg("--fixtures")
                .arg(&path)
                .args(["--port", &port.to_string(), "--capture-capacity", "0"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn llmposter");
            let deadline = Instant::now() + START;
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    let mut said = String::new();
                    let _ = child.stderr.take().unwrap().read_to_string(&mut said);
                    assert!(
                        said.contains("in use"),
                        "llmposter exited ({status}): {said}"
                    );
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(Self {
                        child,
                        base_url: format!("http://127.0.0.1:{port}/v1"),
                        _dir: dir,
                    });
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("llmposter did not listen on port {port} within {START:?}");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("no free port for llmposter after 5 tries");
    }
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
