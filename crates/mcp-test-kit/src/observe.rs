//! What a test server saw, for tests to assert on: handshakes answered, tool listings asked
//! for, cancellations received and calls started.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// One thing a test server observed. Also the line format of a record file (JSON lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A tool call started.
    Call {
        /// The tool.
        tool: String,
        /// The JSON-RPC request id.
        request_id: String,
        /// The W3C `traceparent` of the request's `_meta` (SEP-414), as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<String>,
        /// The W3C `tracestate` of the request's `_meta`, as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tracestate: Option<String>,
        /// The request's HTTP `traceparent` header (streamable HTTP only), as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent_header: Option<String>,
    },
    /// A client opened the MCP lifecycle: an `initialize` answered, or a `server/discover`
    /// answered with a discover result (a server that refuses it records nothing).
    Handshake {
        /// The request: `initialize` or `server/discover`.
        method: String,
    },
    /// A request beyond tools arrived (`resources/read`, `resources/subscribe`,
    /// `resources/unsubscribe`, `prompts/get`), with its URI or prompt name.
    Request {
        /// The method.
        method: String,
        /// The URI or prompt name.
        target: String,
    },
    /// A page of `tools/list` was asked for, with the request's cursor (none for the first page).
    Listing {
        /// The cursor sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cursor: Option<String>,
    },
    /// `notifications/cancelled` arrived.
    Cancelled {
        /// The request it cancels.
        request_id: String,
        /// The reason the client gave.
        reason: Option<String>,
    },
}

/// What a test server saw so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// Every event, in order.
    pub events: Vec<Event>,
}

impl Snapshot {
    /// The request ids named by `notifications/cancelled`, in order.
    pub fn cancelled(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Cancelled { request_id, .. } => Some(request_id.as_str()),
                _ => None,
            })
            .collect()
    }

    /// How many handshakes were answered: each is a client's way in (a new process's, or a
    /// new session's over HTTP).
    pub fn handshakes(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Handshake { .. }))
            .count()
    }

    /// How many listings of the tools started (a `tools/list` without a cursor: the first
    /// page of each).
    pub fn listings(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Listing { cursor: None }))
            .count()
    }

    /// How many requests of `method` (see [`Event::Request`]) arrived.
    pub fn requests_of(&self, method: &str) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Request { method: m, .. } if m == method))
            .count()
    }

    /// The URIs or prompt names of the requests of `method` (see [`Event::Request`]), in order.
    pub fn targets_of(&self, method: &str) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Request { method: m, target } if m == method => Some(target.clone()),
                _ => None,
            })
            .collect()
    }

    /// How many tool calls of `tool` started.
    pub fn calls_of(&self, tool: &str) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Call { tool: t, .. } if t == tool))
            .count()
    }
}

/// A shared log of what one or more test servers observed (cheap to clone).
///
/// In memory and over HTTP, a test keeps a clone and waits on it; a stdio server appends the
/// same events to a record file (see [`RecordFile`]) and answers the `observations` tool.
///
/// ```
/// use mcp_test_kit::{Event, Observations};
///
/// let seen = Observations::new();
/// seen.record(Event::Cancelled { request_id: "7".into(), reason: None });
/// assert_eq!(seen.snapshot().cancelled(), ["7"]);
/// ```
#[derive(Debug, Clone)]
pub struct Observations {
    state: Arc<watch::Sender<Snapshot>>,
    file: Option<Arc<PathBuf>>,
}

impl Default for Observations {
    fn default() -> Self {
        Self::new()
    }
}

impl Observations {
    /// An empty log kept in memory.
    pub fn new() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(Snapshot::default())),
            file: None,
        }
    }

    /// An empty log that also appends every event to `path`, one JSON object a line.
    pub fn with_record_file(path: impl Into<PathBuf>) -> Self {
        Self {
            file: Some(Arc::new(path.into())),
            ..Self::new()
        }
    }

    /// Records an event.
    pub fn record(&self, event: Event) {
        if let Some(path) = &self.file {
            // A test double: a failing record file is reported on stderr, not fatal.
            if let Err(e) = append_line(path, &event) {
                eprintln!("mcp-test-kit: cannot write {}: {e}", path.display());
            }
        }
        self.state.send_modify(|s| s.events.push(event));
    }

    /// Everything seen so far.
    pub fn snapshot(&self) -> Snapshot {
        self.state.borrow().clone()
    }

    /// Waits until `done` holds for what was seen, at most `timeout`. Returns the snapshot that
    /// satisfied it, or `None` on timeout.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&Snapshot) -> bool,
    ) -> Option<Snapshot> {
        let mut rx = self.state.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|s| done(s))).await;
        match waited {
            Ok(Ok(snapshot)) => Some(snapshot.clone()),
            _ => None,
        }
    }

    /// Waits until at least `count` cancellations arrived, at most `timeout`.
    pub async fn wait_for_cancelled(&self, count: usize, timeout: Duration) -> Option<Snapshot> {
        self.wait_until(timeout, |s| s.cancelled().len() >= count)
            .await
    }
}

fn append_line(path: &Path, event: &Event) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(event)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(&line)
}

/// The record file of a stdio test server (`--record PATH`), read from the test's side.
///
/// ```no_run
/// use std::time::Duration;
/// use mcp_test_kit::RecordFile;
///
/// # async fn demo() {
/// let record = RecordFile::new("/tmp/record.jsonl");
/// let seen = record.wait_for_cancelled(1, Duration::from_secs(5)).await;
/// assert!(seen.is_some(), "the server never saw notifications/cancelled");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RecordFile {
    path: PathBuf,
}

impl RecordFile {
    /// The record file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Its path (pass it as `--record PATH`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Everything recorded so far; empty if the file does not exist yet.
    pub fn snapshot(&self) -> Snapshot {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        Snapshot {
            events: text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        }
    }

    /// Waits until `done` holds for the file's events, at most `timeout`. Another process
    /// writes the file, so this re-reads it every 10 ms until the condition holds or the time
    /// is up.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&Snapshot) -> bool,
    ) -> Option<Snapshot> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let snapshot = self.snapshot();
            if done(&snapshot) {
                return Some(snapshot);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until at least `count` cancellations were recorded, at most `timeout`.
    pub async fn wait_for_cancelled(&self, count: usize, timeout: Duration) -> Option<Snapshot> {
        self.wait_until(timeout, |s| s.cancelled().len() >= count)
            .await
    }
}
