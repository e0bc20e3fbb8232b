//! Child-process (stdio) transport for MCP sessions.
//!
//! [`StdioConnector`] implements [`mcp_connector::Connector`] for
//! [`TransportKind::Stdio`] specs. It spawns `command args` in `cwd` as the leader of a new
//! process group, with an environment of a small safe set inherited from the parent
//! ([`SAFE_ENV_VARS`]) plus the spec's declared `env` (the whole parent environment only with
//! `inherit_env`). The child's stderr is kept as a bounded tail (64 KiB by default) for
//! [`ConnectionHandle::diagnostics`] and for error messages, with declared environment values
//! redacted.
//!
//! The protocol runs over the child's stdin/stdout with rmcp's own framing
//! ([`StdioTransport`]). The process side is owned by a [`StdioHandle`]: closing the transport
//! closes stdin, then [`ConnectionHandle::shutdown`] waits a grace period, sends SIGTERM to the
//! group, waits again and sends SIGKILL; dropping the handle (a cancelled run, a panic, a
//! timeout) kills the group at once. The server is always reaped, and whatever it left in its
//! group is killed.
//!
//! Every message the server writes is bounded as it arrives: one larger than
//! [`StdioOptions::max_message_bytes`] (16 MiB) or nested deeper than
//! [`StdioOptions::max_nesting_depth`] (127) ends the session at once — pending requests fail
//! instead of waiting out their timeout — and [`StdioHandle::read_error`] (and the
//! diagnostics) name the server and the limit.
//!
//! # Process hygiene on Linux
//!
//! - **The server dies with the host**, even when the host is SIGKILLed, and so does every
//!   process it started: a supervisor runs between the host and each server (a child
//!   subreaper that asks for a signal at the host's death and forks the server, which dies
//!   with it). With glibc the supervisor is a clone of a helper process (see the `zygote`
//!   module): the host's own executable started once with `posix_spawn` and caught before
//!   `main` ([`ZYGOTE_COMM`]), which clones a supervisor per server as a child of the host, so
//!   a server's start costs neither a copy of the host's memory nor a load of its executable,
//!   and servers start concurrently. Where the helper does not work, each supervisor is the
//!   executable started anew (the `reexec` module); elsewhere, or where that does not work
//!   either, the host forks it instead, on a blocking-pool thread (the signal follows the thread
//!   that forked, and comes again at every change of parent, so a thread that ends only wakes
//!   the supervisor, which sees the host still alive); that path needs `Command::pre_exec`
//!   (async-signal-safe system calls only; see the `supervisor` module). Either way the
//!   supervisor checks that the host is still its parent after arming the signal, and gives up
//!   otherwise.
//! - **What escapes the group is still killed**: at close and on drop, the server's tree —
//!   its descendants by parent pid, and every group or session one of them leads — is read
//!   from `/proc`, frozen with SIGSTOP until no new member appears, then SIGKILLed. The server
//!   is made a child subreaper, so a daemon's double fork stays in its tree; and because a
//!   server that exits hands its children to init, the tree is noted before each step that may
//!   end it (closing stdin, SIGTERM, SIGKILL) and what was noted is killed with it. Every
//!   signal goes to a pid whose start time was just checked, never to a reused pid.
//!
//!   Why not make the *host* a subreaper instead: that is process-wide state of the embedding
//!   application, which would then adopt the orphans of all its children, and reaping them
//!   would race with its own `wait` calls (taking an exit status it expects).
//! - **Not covered**: when the host is SIGKILLed, only the server gets the signal (nothing of
//!   the host runs to kill the rest of its tree); and a server that crashes or exits on its
//!   own mid-session leaves any children outside its group to init unless a note saw them.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
//! use mcp_connector::Connector as _;
//! use mcp_transport_stdio::StdioConnector;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = ServerSpec::new(
//!     "everything",
//!     TransportSpec::Stdio(StdioSpec::new("npx", ["-y", "@modelcontextprotocol/server-everything"])),
//! );
//! let connection = StdioConnector::new().connect(&spec).await?;
//! let client = rmcp::serve_client((), connection.transport).await?;
//! println!("{} tools", client.list_all_tools().await?.len());
//! client.cancel().await?; // closes the transport, so the child's stdin
//! connection.handle.shutdown(Duration::from_secs(2)).await;
//! # Ok(())
//! # }
//! ```
//!
//! Unix only: process groups and signals are POSIX; the hygiene above is Linux only.
//!
//! # Architecture invariant
//!
//! Knows specs (`mcp-config`), the connector seam (`mcp-connector`) and rmcp's transport;
//! never the catalog, the orchestration or HTTP.

#[cfg(not(unix))]
compile_error!(
    "mcp-transport-stdio supports Unix only: it manages process groups with POSIX signals"
);

mod child;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod entry;
mod env;
mod error;
mod handle;
mod limits;
mod lines;
mod plan;
mod process;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod reexec;
#[cfg(target_os = "linux")]
mod spawner;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod startup;
mod stderr;
#[cfg(target_os = "linux")]
mod supervisor;
mod transport;
#[cfg(target_os = "linux")]
mod tree;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod zygote;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_config::{ServerSpec, TransportKind, TransportSpec};
use mcp_connector::{ConnectError, Connection, ConnectionHandle, Connector};

pub use env::SAFE_ENV_VARS;
pub use error::StdioError;
pub use handle::StdioHandle;
pub use transport::StdioTransport;

use crate::handle::Shared;
use crate::plan::Plan;
use crate::process::Leader;
use crate::stderr::StderrTail;

/// Settings of a [`StdioConnector`].
///
/// ```
/// use std::time::Duration;
/// use mcp_transport_stdio::StdioOptions;
///
/// let options = StdioOptions::default()
///     .with_stderr_capacity(16 * 1024)
///     .with_terminate_grace(Duration::from_millis(500))
///     .inherit_var("SSL_CERT_FILE");
/// assert!(options.inherited_env.iter().any(|v| v == "PATH"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StdioOptions {
    /// How many bytes of the child's stderr to keep (the most recent). Default 64 KiB.
    pub stderr_capacity: usize,
    /// How long shutdown waits after SIGTERM before SIGKILL. Default 2 s.
    pub terminate_grace: Duration,
    /// The variables inherited from the parent when a spec does not set `inherit_env`.
    /// Default [`SAFE_ENV_VARS`].
    pub inherited_env: Vec<String>,
    /// The largest message accepted from the server, in bytes (one line of stdout, its line
    /// break not counted). A larger one ends the session at once with
    /// [`StdioError::MessageTooLarge`]. Default [`DEFAULT_MAX_MESSAGE_BYTES`] (16 MiB, as the
    /// HTTP transport's `max_response_bytes`).
    pub max_message_bytes: usize,
    /// How many JSON arrays and objects a message from the server may nest. A deeper one ends
    /// the session at once with [`StdioError::MessageTooDeep`]. Default and maximum
    /// [`MAX_NESTING_DEPTH`] (127): rmcp's JSON parser refuses deeper messages whatever this
    /// says, so larger values count as 127.
    pub max_nesting_depth: usize,
}

/// The command name (`comm`, as `top`, `pgrep` and `/proc/PID/stat` show it) of the helper
/// process that starts the servers' supervisors on Linux with glibc: one per host, a child of
/// it, started with the first stdio server and ended after 10 s without a new one (or with the
/// host). It is no server's ancestor. Each supervisor is named `mcp-supervisor`.
pub const ZYGOTE_COMM: &str = "mcp-zygote";

/// The default of [`StdioOptions::max_message_bytes`]: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The default and largest [`StdioOptions::max_nesting_depth`]: 127, the deepest nesting
/// rmcp's JSON parser (serde_json, recursion limit 128) reads
/// (docs/upstream.md#rmcp-stdio-dropped-lines).
pub const MAX_NESTING_DEPTH: usize = limits::PARSER_MAX_DEPTH;

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            stderr_capacity: 64 * 1024,
            terminate_grace: Duration::from_secs(2),
            inherited_env: SAFE_ENV_VARS.iter().map(|v| (*v).to_owned()).collect(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_nesting_depth: MAX_NESTING_DEPTH,
        }
    }
}

impl StdioOptions {
    /// Sets how many bytes of stderr to keep.
    pub fn with_stderr_capacity(mut self, bytes: usize) -> Self {
        self.stderr_capacity = bytes;
        self
    }

    /// Sets the wait between SIGTERM and SIGKILL.
    pub fn with_terminate_grace(mut self, grace: Duration) -> Self {
        self.terminate_grace = grace;
        self
    }

    /// Adds a variable to the inherited set.
    pub fn inherit_var(mut self, name: impl Into<String>) -> Self {
        self.inherited_env.push(name.into());
        self
    }

    /// Sets the largest accepted message, in bytes.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets how deep a message may nest (at most [`MAX_NESTING_DEPTH`]).
    pub fn with_max_nesting_depth(mut self, levels: usize) -> Self {
        self.max_nesting_depth = levels;
        self
    }
}

/// Opens stdio MCP servers: spawns the process and returns its transport and handle.
///
/// ```
/// use mcp_config::TransportKind;
/// use mcp_connector::Connector as _;
/// use mcp_transport_stdio::{StdioConnector, StdioOptions};
///
/// let connector = StdioConnector::with_options(StdioOptions::default());
/// assert_eq!(connector.kind(), TransportKind::Stdio);
/// ```
#[derive(Debug, Clone, Default)]
pub struct StdioConnector {
    options: StdioOptions,
}

impl StdioConnector {
    /// A connector with default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// A connector with `options`.
    pub fn with_options(options: StdioOptions) -> Self {
        Self { options }
    }

    /// Its options.
    pub fn options(&self) -> &StdioOptions {
        &self.options
    }

    /// Spawns `spec`'s server and returns its transport (for the MCP handshake) and the
    /// handle that owns its process group. Must run inside a Tokio runtime.
    ///
    /// ```no_run
    /// use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
    /// use mcp_transport_stdio::StdioConnector;
    ///
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let spec = ServerSpec::new("files", TransportSpec::Stdio(StdioSpec::new("my-server", ["--stdio"])));
    /// let (transport, handle) = StdioConnector::new().spawn(&spec).await?;
    /// println!("server pid {}", handle.process_id());
    /// let client = rmcp::serve_client((), transport).await?;
    /// # drop(client);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn spawn(
        &self,
        spec: &ServerSpec,
    ) -> Result<(StdioTransport, StdioHandle), StdioError> {
        let server = spec.name.clone();
        let TransportSpec::Stdio(stdio) = &spec.transport else {
            return Err(StdioError::NotStdio { server });
        };
        if let Some(cwd) = &stdio.cwd {
            match std::fs::metadata(cwd) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(StdioError::Cwd {
                        server,
                        cwd: cwd.clone(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotADirectory,
                            "not a directory",
                        ),
                    });
                }
                Err(source) => {
                    return Err(StdioError::Cwd {
                        server,
                        cwd: cwd.clone(),
                        source,
                    });
                }
            }
        }
        let env = env::plan(stdio, &self.options.inherited_env, |name| {
            std::env::var_os(name)
        });
        let plan = Plan {
            program: stdio.command.clone().into(),
            args: stdio.args.iter().map(Into::into).collect(),
            cwd: stdio.cwd.clone(),
            env,
        };
        let (leader, pipes) = Leader::spawn(plan)
            .await
            .map_err(|source| StdioError::Spawn {
                server: server.clone(),
                command: stdio.command.clone(),
                source,
            })?;
        tracing::debug!(server = %server, pid = leader.pid(), command = %stdio.command, "spawned stdio server");
        let redactor = mcp_config::Redactor::new().with_secrets(stdio.env.values());
        let tail = Arc::new(StderrTail::new(self.options.stderr_capacity));
        // The reader holds only the tail: it must not keep the process group alive.
        let reader = tail.clone();
        tokio::spawn(async move { stderr::copy_into(pipes.stderr, &reader).await });
        let shared = Arc::new(Shared::new(server, leader, tail, redactor));
        let transport = StdioTransport::new(
            pipes.stdout,
            pipes.stdin,
            self.options.max_message_bytes,
            self.options.max_nesting_depth,
            shared.clone(),
        );
        Ok((
            transport,
            StdioHandle::new(shared, self.options.terminate_grace),
        ))
    }
}

#[async_trait]
impl Connector for StdioConnector {
    fn kind(&self) -> TransportKind {
        TransportKind::Stdio
    }

    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let (transport, handle) = self.spawn(spec).await?;
        Ok(Connection::new(transport, handle))
    }
}

/// `StdioHandle` is what [`Connector::connect`] puts in a [`Connection`].
const _: fn() = || {
    fn is_handle<T: ConnectionHandle>() {}
    is_handle::<StdioHandle>();
};
