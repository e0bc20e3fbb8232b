//! The third-party peers of the OAuth tests (`cargo xtask peers`, `MCP_AGENT_PEER_*`): where
//! they are, and a peer process started, waited for and killed on drop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// How long the peers may take to start.
pub(crate) const START: Duration = Duration::from_secs(60);

pub(crate) fn required() -> bool {
    let on = |var: &str| {
        std::env::var(var).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    };
    on("CI") || on("MCP_AGENT_REQUIRE_PEERS")
}

/// The path in `var`; missing, a failure when peers are required, else `None`.
pub(crate) fn peer(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(path) if path.exists() => Some(path),
        _ => {
            assert!(
                !required(),
                "{var} is not set or does not exist; run `cargo xtask peers`"
            );
            eprintln!(
                "note: skipping: {var} is not set (run `eval \"$(cargo xtask peers --env)\"`)"
            );
            None
        }
    }
}

pub(crate) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// A peer process, killed on drop; its stderr is drained into a bounded buffer.
pub(crate) struct Peer {
    child: Child,
    /// The first URL of its ready line.
    pub(crate) url: String,
}

impl Peer {
    pub(crate) async fn start(mut cmd: Command, ready: &str) -> Self {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn the peer");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let wait = async {
            while let Ok(Some(line)) = lines.next_line().await {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(ready) {
                    return Some(line);
                }
            }
            None
        };
        let line = tokio::time::timeout(START, wait)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("the peer did not print `{ready}`; stderr:\n{seen}"));
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
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
        let _ = self.child.start_kill();
    }
}

/// One plain HTTP/1.1 exchange on loopback (as a browser would): status line, headers, body.
pub(crate) async fn exchange(method: &str, url: &str) -> (String, String) {
    let url = url::Url::parse(url).unwrap();
    let host = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: {host}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.to_owned(), body.to_owned())
}

/// A `tools/call` of `name` with `arguments` (an object).
pub(crate) fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap())
}

/// The text blocks of a tool result, joined.
pub(crate) fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}
