//! The fleet's upstream: the test kit's server over streamable HTTP, as a process of its own
//! (`mcp-test-server --http`), so that its cost is not the load driver's.

use std::process::Stdio;
use std::time::Duration;

use mcp_test_kit::RecordFile;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// How long the server may take to print its URL.
const START: Duration = Duration::from_secs(30);

/// `mcp-test-server --http` on 127.0.0.1 (a free port): its tools are the test kit's (`echo`,
/// `slow`, …), each call it starts recorded when asked ([`Upstream::recording`]). It serves
/// until its stdin closes; dropping it kills it.
///
/// ```no_run
/// # async fn demo() {
/// let upstream = integration_tests::fleet::Upstream::start().await;
/// assert!(upstream.url().starts_with("http://127.0.0.1:"));
/// # }
/// ```
#[derive(Debug)]
pub struct Upstream {
    child: Child,
    /// Held open: the server stops when it closes.
    stdin: Option<ChildStdin>,
    url: String,
    record: Option<(RecordFile, tempfile::TempDir)>,
}

impl Upstream {
    /// Starts the server and waits for the URL it prints. Panics when it does not start.
    pub async fn start() -> Self {
        Self::launch(None).await
    }

    /// [`start`](Self::start), recording every call the server starts ([`record`](Self::record)).
    pub async fn recording() -> Self {
        let dir = tempfile::tempdir().expect("a directory for the record");
        let record = RecordFile::new(dir.path().join("calls.jsonl"));
        Self::launch(Some((record, dir))).await
    }

    async fn launch(record: Option<(RecordFile, tempfile::TempDir)>) -> Self {
        let binary = mcp_test_kit::stdio::binary();
        let mut command = Command::new(&binary);
        command.arg("--http");
        if let Some((file, _)) = &record {
            command.arg("--record").arg(file.path());
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(START, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("mcp-test-server --http printed no URL in {START:?}"))
            .expect("read mcp-test-server's stdout")
            .expect("mcp-test-server --http exited before printing its URL");
        Self {
            child,
            stdin,
            url: url.trim().to_owned(),
            record,
        }
    }

    /// The calls the server started, when it was started [`recording`](Self::recording).
    pub fn record(&self) -> Option<&RecordFile> {
        self.record.as_ref().map(|(file, _)| file)
    }

    /// The endpoint's URL (`http://127.0.0.1:port/mcp`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's process id (0 once it has been waited for).
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Stops the server: closes its stdin and waits for it to exit (killed after 10 s).
    pub async fn stop(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
