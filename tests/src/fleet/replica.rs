//! One gateway replica: `mcp-agent serve --http 127.0.0.1:0 --file <config>` as a child
//! process, its stderr kept line by line, signalled and killed by pid.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

/// How long a replica may take to listen, or to exit once asked.
pub const REPLICA_BOUND: Duration = Duration::from_secs(30);

/// The most stderr lines kept per replica.
const LINES_KEPT: usize = 10_000;

/// The `mcp-agent` binary the replicas run: `$MCP_AGENT_BIN` (the benchmark sets it to the
/// release build), else the one beside this test executable (`cargo xtask test` builds every
/// binary first; by hand: `cargo build -p mcp-agent-cli`).
///
/// # Panics
///
/// When it does not exist, saying how to build it.
pub fn agent_binary() -> PathBuf {
    let path = std::env::var_os("MCP_AGENT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_bin("mcp-agent"));
    assert!(
        path.is_file(),
        "{} not found: run `cargo build -p mcp-agent-cli` (or `cargo xtask test`), or set \
         MCP_AGENT_BIN",
        path.display()
    );
    path
}

/// A replica that did not come up: how it exited and what it printed.
#[derive(Debug)]
pub struct Refused {
    /// Its exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    /// Everything it printed on stderr.
    pub stderr: String,
}

/// The stderr lines of a replica, as they come.
#[derive(Debug, Default)]
struct Lines {
    lines: Mutex<Vec<String>>,
    more: Notify,
    ended: std::sync::atomic::AtomicBool,
}

impl Lines {
    fn snapshot(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// `mcp-agent serve --http` on 127.0.0.1 (a free port), listening. Dropping it kills it
/// (SIGKILL).
///
/// ```no_run
/// # async fn demo(config: &std::path::Path) {
/// use integration_tests::fleet::Replica;
///
/// let replica = Replica::start(config, &[]).await;
/// println!("replica {} at {}", replica.pid(), replica.url());
/// # }
/// ```
#[derive(Debug)]
pub struct Replica {
    child: Child,
    pid: u32,
    addr: SocketAddr,
    lines: Arc<Lines>,
    exited: Option<ExitStatus>,
}

impl Replica {
    /// Starts a replica on `config` with only the variables of `env`, and waits until it
    /// listens. Panics (with its stderr) when it exits or does not listen in time.
    pub async fn start(config: &Path, env: &[(String, String)]) -> Self {
        Self::start_binary(&agent_binary(), config, env).await
    }

    /// [`start`](Self::start) with the `mcp-agent` binary at `binary`.
    pub async fn start_binary(binary: &Path, config: &Path, env: &[(String, String)]) -> Self {
        match Self::try_start_binary(binary, config, env).await {
            Ok(replica) => replica,
            Err(refused) => panic!(
                "the replica exited ({:?}) instead of listening; its stderr:\n{}",
                refused.code, refused.stderr
            ),
        }
    }

    /// Starts a replica and waits until it listens (`Ok`) or exits (`Err`: its exit code and
    /// stderr). Panics when neither happens within [`REPLICA_BOUND`].
    pub async fn try_start(config: &Path, env: &[(String, String)]) -> Result<Self, Refused> {
        Self::try_start_binary(&agent_binary(), config, env).await
    }

    /// [`try_start`](Self::try_start) with the `mcp-agent` binary at `binary`.
    pub async fn try_start_binary(
        binary: &Path,
        config: &Path,
        env: &[(String, String)],
    ) -> Result<Self, Refused> {
        let mut child = Command::new(binary)
            .args(["serve", "--http", "127.0.0.1:0", "--file"])
            .arg(config)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn mcp-agent serve");
        let pid = child.id().expect("a running child has a pid");
        let lines = Arc::new(Lines::default());
        let stderr = child.stderr.take().expect("piped stderr");
        let keep = lines.clone();
        // Reading on until the replica exits also keeps it from blocking on a full pipe.
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Ok(mut lines) = keep.lines.lock()
                    && lines.len() < LINES_KEPT
                {
                    lines.push(line);
                }
                keep.more.notify_waiters();
            }
            keep.ended.store(true, std::sync::atomic::Ordering::SeqCst);
            keep.more.notify_waiters();
        });
        let deadline = tokio::time::Instant::now() + REPLICA_BOUND;
        let watched = lines.clone();
        loop {
            let more = watched.more.notified();
            tokio::pin!(more);
            more.as_mut().enable();
            let listening = lines
                .snapshot()
                .iter()
                .find_map(|l| l.split("listening on ").nth(1).map(str::to_owned));
            if let Some(url) = listening {
                let addr = url
                    .trim()
                    .trim_start_matches("http://")
                    .split('/')
                    .next()
                    .and_then(|a| a.parse().ok())
                    .unwrap_or_else(|| panic!("no address in `listening on {url}`"));
                return Ok(Self {
                    child,
                    pid,
                    addr,
                    lines,
                    exited: None,
                });
            }
            if lines.ended.load(std::sync::atomic::Ordering::SeqCst) {
                let status = tokio::time::timeout(REPLICA_BOUND, child.wait())
                    .await
                    .expect("a replica whose stderr closed exits")
                    .expect("wait for the replica");
                return Err(Refused {
                    code: status.code(),
                    stderr: lines.snapshot().join("\n"),
                });
            }
            if tokio::time::timeout_at(deadline, more).await.is_err() {
                panic!(
                    "the replica neither listened nor exited within {REPLICA_BOUND:?}; its \
                     stderr:\n{}",
                    lines.snapshot().join("\n")
                );
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The address it listens on (`127.0.0.1:port`), as the load balancer names it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its endpoint, `http://127.0.0.1:port/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Everything it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.lines.snapshot().join("\n")
    }

    /// Sends SIGTERM: the replica stops accepting, drains the calls in flight and exits.
    pub fn terminate(&self) {
        kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM).expect("SIGTERM the replica");
    }

    /// Sends SIGKILL (nothing of it runs after) and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
        self.exited = self.child.wait().await.ok();
    }

    /// Waits for it to exit (at most [`REPLICA_BOUND`]): its exit code, `None` for a signal.
    /// Panics when it does not exit in time.
    pub async fn exit_code(&mut self) -> Option<i32> {
        if let Some(status) = self.exited {
            return status.code();
        }
        let status = tokio::time::timeout(REPLICA_BOUND, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "replica {} did not exit within {REPLICA_BOUND:?}; its stderr:\n{}",
                    self.pid,
                    self.stderr()
                )
            })
            .expect("wait for the replica");
        self.exited = Some(status);
        status.code()
    }
}
