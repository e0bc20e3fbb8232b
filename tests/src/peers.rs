//! Third-party MCP peers: where `cargo xtask peers` installed them, and how to run
//! them.
//!
//! `cargo xtask test` installs the peers (`peers/` at the workspace root) and hands their
//! absolute paths to the tests in `MCP_AGENT_PEER_*` variables. A test that needs a peer asks
//! for it here:
//!
//! - with `CI=true` or `MCP_AGENT_REQUIRE_PEERS=1` (which `cargo xtask test` sets), a missing
//!   variable **fails** the test: CI must never pass by skipping;
//! - otherwise (a plain `cargo test` by hand) the helper prints a note on stderr and returns
//!   `None`, and the test returns early. Run `eval "$(cargo xtask peers --env)"` first to run
//!   them by hand.
//!
//! ```no_run
//! # async fn demo() {
//! use integration_tests::peers;
//!
//! let Some(spec) = peers::everything_stdio_spec() else { return };
//! let Some(server) = peers::HttpPeer::python().await else { return };
//! println!("{} at {}", spec.name, server.url());
//! server.stop().await;
//! # }
//! ```

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_config::{HttpSpec, ServerSpec, StdioSpec, TransportSpec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use url::Url;

/// The Node 22 binary.
pub const NODE22: &str = "MCP_AGENT_PEER_NODE22";
/// server-everything's entry script.
pub const EVERYTHING: &str = "MCP_AGENT_PEER_EVERYTHING";
/// The venv python with the official `mcp` SDK.
pub const PYTHON: &str = "MCP_AGENT_PEER_PYTHON";
/// `peers/python/server.py`.
pub const PY_SERVER: &str = "MCP_AGENT_PEER_PY_SERVER";

/// How long a peer may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// When a missing peer fails a test ([`required`]) and where an installed one is ([`path`]):
/// the test kit's, shared with the crates' own peer tests.
pub use mcp_test_kit::peer::{path, required};

/// server-everything over stdio, on the Node 22 binary.
pub fn everything_stdio_spec() -> Option<ServerSpec> {
    let node = path(NODE22)?;
    let entry = path(EVERYTHING)?;
    Some(stdio_spec(
        "everything",
        node,
        vec![entry.to_string_lossy().into_owned(), "stdio".into()],
    ))
}

/// `peers/python/server.py` over stdio, on the venv's python.
pub fn python_stdio_spec() -> Option<ServerSpec> {
    let python = path(PYTHON)?;
    let script = path(PY_SERVER)?;
    Some(stdio_spec(
        "pysdk",
        python,
        vec![script.to_string_lossy().into_owned(), "stdio".into()],
    ))
}

fn stdio_spec(name: &str, command: PathBuf, args: Vec<String>) -> ServerSpec {
    ServerSpec::new(
        name,
        TransportSpec::Stdio(StdioSpec::new(command.to_string_lossy(), args)),
    )
}

/// A peer serving streamable HTTP on 127.0.0.1, in its own process group, killed by
/// [`stop`](Self::stop) or, as a safety net, on drop.
#[derive(Debug)]
pub struct HttpPeer {
    name: &'static str,
    url: Url,
    child: Option<Child>,
    pgid: u32,
    stderr: Arc<Mutex<String>>,
}

impl HttpPeer {
    /// server-everything with `streamableHttp` on a free port (`PORT`). It announces its port
    /// only as configured, so the port is picked here; a lost race for it is retried.
    pub async fn everything() -> Option<Self> {
        let node = path(NODE22)?;
        let entry = path(EVERYTHING)?;
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = free_port();
            let mut cmd = Command::new(&node);
            cmd.arg(&entry)
                .arg("streamableHttp")
                .env("PORT", port.to_string());
            match Self::start("everything", cmd, "listening on port").await {
                Ok(mut peer) => {
                    peer.url = format!("http://127.0.0.1:{port}/mcp").parse().expect("URL");
                    return Some(peer);
                }
                Err(e) => last_error = e,
            }
        }
        panic!("server-everything did not start over HTTP: {last_error}");
    }

    /// `server.py http 0`: the server binds a free port and names it.
    pub async fn python() -> Option<Self> {
        let python = path(PYTHON)?;
        let script = path(PY_SERVER)?;
        let mut cmd = Command::new(python);
        cmd.arg(script).args(["http", "0"]);
        match Self::start("pysdk", cmd, "listening on http://").await {
            Ok(peer) => Some(peer),
            Err(e) => panic!("the Python SDK server did not start over HTTP: {e}"),
        }
    }

    /// Spawns `cmd` and waits (bounded) for a stderr line containing `ready`. The URL is the
    /// first `http://…` word of that line, if any.
    async fn start(name: &'static str, mut cmd: Command, ready: &str) -> Result<Self, String> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
        let pgid = child.id().ok_or("no pid")?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let log = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(stderr).lines();
        let wait_ready = async {
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().unwrap().push_str(&format!("{line}\n"));
                if line.contains(ready) {
                    return Some(line);
                }
            }
            None
        };
        let line = match tokio::time::timeout(START_TIMEOUT, wait_ready).await {
            Ok(Some(line)) => line,
            outcome => {
                kill_group(pgid);
                let _ = child.wait().await;
                let why = if outcome.is_err() {
                    "timed out"
                } else {
                    "exited"
                };
                return Err(format!(
                    "{name} {why} before `{ready}`; stderr:\n{}",
                    log.lock().unwrap()
                ));
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        let sink = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = sink.lock().unwrap();
                if log.len() < 64 * 1024 {
                    log.push_str(&format!("{line}\n"));
                }
            }
        });
        let url = line
            .split_whitespace()
            .find_map(|w| w.parse::<Url>().ok().filter(|u| u.scheme() == "http"))
            .unwrap_or_else(|| "http://127.0.0.1/".parse().expect("URL"));
        Ok(Self {
            name,
            url,
            child: Some(child),
            pgid,
            stderr: log,
        })
    }

    /// The MCP endpoint.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// A spec for this peer's endpoint.
    pub fn spec(&self) -> ServerSpec {
        ServerSpec::new(
            self.name,
            TransportSpec::StreamableHttp(HttpSpec::new(self.url.clone())),
        )
    }

    /// The peer's pid (its process group id).
    pub fn pid(&self) -> u32 {
        self.pgid
    }

    /// What the peer wrote on stderr so far (bounded).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Kills the peer's process group and reaps it.
    pub async fn stop(mut self) {
        kill_group(self.pgid);
        if let Some(mut child) = self.child.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        if self.child.is_some() {
            kill_group(self.pgid);
        }
    }
}

/// True while a process with `pid` exists (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// SIGKILL to the process group `pgid` (a peer started with its own group). Never signals
/// group 0 or 1 (the caller's group, every process).
fn kill_group(pgid: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;

    match i32::try_from(pgid) {
        Ok(pgid) if pgid > 1 => {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        _ => {}
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// A live MCP session with a peer, opened through `mcp-client`'s low-level single-session
/// API ([`Session::open_standalone`](mcp_client::Session::open_standalone)) with the
/// workspace's connectors: the protocol as the client speaks it, with no run and no governed
/// layer around it, so a test sees the server's raw results.
pub struct PeerSession {
    session: std::sync::Arc<mcp_client::Session>,
}

impl PeerSession {
    /// Opens a session to `spec` through `connectors` (connect, initialise, list every tool),
    /// with `timeout` as the connect timeout.
    pub async fn open(
        connectors: mcp_client::Connectors,
        mut spec: ServerSpec,
        timeout: Duration,
    ) -> Self {
        spec.connect_timeout = Some(timeout);
        let name = spec.name.clone();
        // Bounded by the connect timeout inside; the outer bound only guards against a bug.
        let (session, _tools) = tokio::time::timeout(
            timeout + Duration::from_secs(5),
            mcp_client::Session::open_standalone(&connectors, spec),
        )
        .await
        .unwrap_or_else(|_| panic!("{name} not open within {timeout:?}"))
        .unwrap_or_else(|e| panic!("open {name}: {e}: {:?}", std::error::Error::source(&e)));
        Self { session }
    }

    /// The session itself, for what the helpers here do not cover (resources, prompts).
    pub fn session(&self) -> &mcp_client::Session {
        &self.session
    }

    /// What the server said about itself in its initialize result.
    pub fn identity(&self) -> &mcp_client::ServerIdentity {
        self.session().identity()
    }

    /// The server's process id, for a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.session().pid()
    }

    /// Every tool, across pages (listed again, not the runner's cached list).
    pub async fn list_tools(&self) -> Vec<rmcp::model::Tool> {
        self.session().list_tools().await.expect("tools/list")
    }

    /// Calls `tool` with `arguments` (a JSON object) through the session's call path (with
    /// the spec's call timeout).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
    ) -> rmcp::model::CallToolResult {
        let arguments = arguments.as_object().cloned().expect("arguments object");
        self.session()
            .call_tool(tool, arguments)
            .await
            .unwrap_or_else(|e| panic!("tools/call {tool}: {e}"))
    }

    /// Closes the session: it ends (stdin close or HTTP `DELETE`) and a child process gets
    /// the client's default grace period (2 s) before it is terminated.
    pub async fn close(self) {
        self.session.close(Duration::from_secs(2)).await;
    }
}

/// The text of every text content block of `result`, joined by newlines.
pub fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How long a peer may take to open; a whole peer test is bounded by [`PEER_TEST`].
pub const PEER_OPEN: Duration = Duration::from_secs(30);

/// The bound of one whole peer test.
pub const PEER_TEST: Duration = Duration::from_secs(90);

/// Opens `spec` over stdio through `mcp-client`, runs `check` on the session, closes it and
/// asserts that the server process (`what`, for messages) is gone.
pub async fn check_over_stdio(spec: ServerSpec, what: &str, check: impl AsyncFnOnce(&PeerSession)) {
    use mcp_client::Connectors;
    use mcp_transport_stdio::StdioConnector;
    tokio::time::timeout(PEER_TEST, async {
        let session = PeerSession::open(
            Connectors::new().with(StdioConnector::new()),
            spec,
            PEER_OPEN,
        )
        .await;
        let pid = session.pid().expect("a stdio server has a pid");
        check(&session).await;
        session.close().await;
        assert!(
            !process_alive(pid),
            "{what} (pid {pid}) outlived its session"
        );
    })
    .await
    .expect("test within its time limit");
}

/// Opens `server` over streamable HTTP through `mcp-client`, runs `check` on the session,
/// closes it, stops the server and asserts that its process (`what`) is gone. A timeout
/// reports the server's stderr.
pub async fn check_over_http(server: HttpPeer, what: &str, check: impl AsyncFnOnce(&PeerSession)) {
    use mcp_client::Connectors;
    use mcp_transport_http::{HttpConnector, HttpOptions};
    let spec = server.spec();
    let connectors = Connectors::new().with(HttpConnector::new(HttpOptions::default()).unwrap());
    let outcome = tokio::time::timeout(PEER_TEST, async {
        let session = PeerSession::open(connectors, spec, PEER_OPEN).await;
        check(&session).await;
        session.close().await;
    })
    .await;
    let log = server.stderr();
    let pid = server.pid();
    server.stop().await;
    outcome.unwrap_or_else(|_| panic!("test within its time limit; {what} stderr:\n{log}"));
    assert!(!process_alive(pid), "{what} (pid {pid}) survived");
}
