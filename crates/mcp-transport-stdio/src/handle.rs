//! The connection handle: owns the child's process group for the life of a session.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use mcp_config::Redactor;
use mcp_connector::ConnectionHandle;
use nix::sys::signal::Signal;

use crate::error::StdioError;
use crate::limits::Violation;
use crate::process::Leader;
use crate::stderr::StderrTail;

/// How long SIGKILL may take to end the leader before shutdown stops waiting (it is still
/// reaped later, on a reaper thread).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How long shutdown waits, after the group is gone, for the last stderr bytes to arrive.
const STDERR_DRAIN: Duration = Duration::from_secs(1);

/// What the transport and the handle share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) server: String,
    pub(crate) leader: Leader,
    pub(crate) stderr: Arc<StderrTail>,
    /// Set when the transport refused a message and ended the session.
    pub(crate) violation: Arc<OnceLock<Violation>>,
    /// Knows the declared environment values, removed from diagnostics and logged lines.
    redactor: Redactor,
}

impl Shared {
    pub(crate) fn new(
        server: String,
        leader: Leader,
        stderr: Arc<StderrTail>,
        redactor: Redactor,
    ) -> Self {
        Self {
            server,
            leader,
            stderr,
            violation: Arc::default(),
            redactor,
        }
    }

    /// The stderr tail, the message the transport refused if it did, and, once known, how the
    /// process ended; secrets redacted.
    pub(crate) fn diagnostics(&self) -> Option<String> {
        let mut text = self.stderr.text().unwrap_or_default();
        let mut note = |line: String| {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&line);
        };
        if let Some(violation) = self.violation.get() {
            note(format!("[stopped reading stdout: {violation}]"));
        }
        if let Some(exit) = self.leader.exit() {
            note(format!("[process {} {exit}]", self.leader.pid()));
        }
        if text.is_empty() {
            return None;
        }
        Some(self.redact(text))
    }

    /// `text` with the declared environment values replaced by `[REDACTED]`.
    pub(crate) fn redact(&self, mut text: String) -> String {
        self.redactor.scrub_string(&mut text);
        text
    }

    /// The error for the message the transport refused, if it did.
    pub(crate) fn read_error(&self) -> Option<StdioError> {
        let server = self.server.clone();
        self.violation.get().map(|violation| match *violation {
            Violation::TooLarge { limit } => StdioError::MessageTooLarge { server, limit },
            Violation::TooDeep { limit } => StdioError::MessageTooDeep { server, limit },
        })
    }

    pub(crate) fn write_error(&self, source: std::io::Error) -> StdioError {
        StdioError::Write {
            server: self.server.clone(),
            diagnostics: self.diagnostics(),
            source,
        }
    }
}

/// Owns a stdio server's process group: [`shutdown`](ConnectionHandle::shutdown) ends it
/// gracefully, dropping the handle kills it at once.
///
/// Shutdown, after the transport was closed (which closes the child's stdin): wait up to
/// `grace` for the server to exit → SIGTERM to its group → wait up to the connector's
/// `terminate_grace` → SIGKILL to the group. Whatever the server left in its group is killed
/// once the server has exited, and the server is always reaped. On Linux, its processes
/// outside the group (`setsid`, double forks) are killed too, at shutdown and on drop.
pub struct StdioHandle {
    shared: Arc<Shared>,
    terminate_grace: Duration,
}

impl std::fmt::Debug for StdioHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioHandle")
            .field("server", &self.shared.server)
            .field("pid", &self.shared.leader.pid())
            .field("terminate_grace", &self.terminate_grace)
            .finish_non_exhaustive()
    }
}

impl StdioHandle {
    pub(crate) fn new(shared: Arc<Shared>, terminate_grace: Duration) -> Self {
        Self {
            shared,
            terminate_grace,
        }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.shared.server
    }

    /// The server's pid, which is also its process group id. On Linux, the pid of the
    /// server's supervisor: the server's parent, which leads the group the server is in and
    /// exits as the server does; signal the group (a negative pid) to reach the server.
    pub fn process_id(&self) -> u32 {
        self.shared.leader.pid()
    }

    /// Why the transport ended the session on its own, once it has: a message from the server
    /// over [`StdioOptions::max_message_bytes`](crate::StdioOptions::max_message_bytes) or
    /// [`max_nesting_depth`](crate::StdioOptions::max_nesting_depth)
    /// ([`StdioError::MessageTooLarge`] or [`StdioError::MessageTooDeep`]). The requests
    /// pending then fail at once as the session closes; the same text is in
    /// [`diagnostics`](ConnectionHandle::diagnostics).
    pub fn read_error(&self) -> Option<StdioError> {
        self.shared.read_error()
    }

    /// Kills the process group (on Linux, the server's whole process tree) now and reaps the
    /// server without waiting (what dropping the handle does).
    pub fn kill(&self) {
        self.shared.leader.kill_group_and_reap();
    }
}

#[async_trait]
impl ConnectionHandle for StdioHandle {
    fn failure(&self) -> Option<mcp_connector::BoxError> {
        self.read_error()
            .map(|e| Box::new(e) as mcp_connector::BoxError)
    }

    async fn shutdown(&self, grace: Duration) {
        let leader = &self.shared.leader;
        leader.note_tree();
        if leader.wait_exit(grace).await.is_none() {
            tracing::debug!(server = %self.shared.server, "no exit within the grace period; SIGTERM");
            leader.note_tree();
            leader.signal_group(Signal::SIGTERM);
            if leader.wait_exit(self.terminate_grace).await.is_none() {
                tracing::warn!(server = %self.shared.server, "SIGTERM ignored; SIGKILL");
                leader.note_tree();
                leader.signal_group(Signal::SIGKILL);
                leader.wait_exit(KILL_WAIT).await;
            }
        }
        leader.kill_group_and_reap();
        self.shared.stderr.wait_closed(STDERR_DRAIN).await;
    }

    fn diagnostics(&self) -> Option<String> {
        self.shared.diagnostics()
    }

    fn pid(&self) -> Option<u32> {
        Some(self.shared.leader.pid())
    }
}

impl Drop for StdioHandle {
    fn drop(&mut self) {
        self.shared.leader.kill_group_and_reap();
    }
}
