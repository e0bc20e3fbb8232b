//! `mcp-agent serve --http` as a child process in front of the test-kit server, and raw
//! HTTP/1.1 exchanges with it: what the serve tests share.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mcp_test_kit::RecordFile;

/// Every wait on a gateway is bounded by this.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// A config file with the test-kit server `kit` (recording its calls) and `serve` as the
/// `[serve]` table; its directory and the record.
pub(crate) fn kit_config(serve: &str) -> (tempfile::TempDir, PathBuf, RecordFile) {
    kit_config_with(serve, &[])
}

/// [`kit_config`] with more arguments of the test-kit server (e.g. `--header-params`).
pub(crate) fn kit_config_with(
    serve: &str,
    kit_args: &[&str],
) -> (tempfile::TempDir, PathBuf, RecordFile) {
    let dir = tempfile::tempdir().unwrap();
    let record = RecordFile::new(dir.path().join("record.jsonl"));
    let extra: String = kit_args.iter().map(|a| format!(", {a:?}")).collect();
    let text = format!(
        "[[servers]]\nname = \"kit\"\ncommand = {:?}\nargs = [\"--record\", {:?}{extra}]\n\n[serve]\n{serve}\n",
        mcp_test_kit::stdio::binary().display().to_string(),
        record.path().display().to_string(),
    );
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path, record)
}

/// `mcp-agent serve --http` on a config file, with only the variables given: killed on drop.
/// Its stderr lines are kept for [`Gateway::line_containing`].
pub(crate) struct Gateway {
    child: Child,
    /// The URL it listens on, as it printed it.
    pub(crate) url: String,
    /// The stderr lines it printed before `listening on`.
    pub(crate) head: Vec<String>,
    lines: mpsc::Receiver<String>,
}

impl Gateway {
    /// Listening on 127.0.0.1 at a free port.
    pub(crate) fn start(file: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_on(file, "127.0.0.1:0", env)
    }

    /// Listening on `bind`.
    pub(crate) fn start_on(file: &Path, bind: &str, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
            .args(["serve", "--http", bind, "--file"])
            .arg(file)
            .env_clear()
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        // Reading on until the gateway exits also keeps it from blocking on a full pipe.
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut gateway = Self {
            child,
            url: String::new(),
            head: Vec::new(),
            lines,
        };
        let deadline = Instant::now() + LIMIT;
        let line = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = gateway.lines.recv_timeout(left).unwrap_or_else(|e| {
                panic!(
                    "no `listening on` line ({e}); before it: {:?}",
                    gateway.head
                )
            });
            if line.contains("listening on ") {
                break line;
            }
            gateway.head.push(line);
        };
        gateway.url = line.rsplit(' ').next().unwrap().to_owned();
        gateway
    }

    /// The next stderr line containing `text` (waiting at most [`LIMIT`]).
    pub(crate) fn line_containing(&self, text: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no stderr line with `{text}`: {e}"));
            if line.contains(text) {
                return line;
            }
        }
    }

    /// Every stderr line up to the next one containing `text`, that one last (waiting at most
    /// [`LIMIT`]).
    pub(crate) fn lines_until(&self, text: &str) -> Vec<String> {
        let deadline = Instant::now() + LIMIT;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|e| {
                panic!("no stderr line with `{text}` ({e}); before it: {lines:#?}")
            });
            let done = line.contains(text);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (at most [`LIMIT`]) for the gateway to exit: its exit code.
    pub(crate) fn exit_code(&mut self) -> Option<i32> {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the gateway did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the gateway with SIGKILL (no cleanup can run) and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// `host:port` of [`Gateway::url`].
    pub(crate) fn addr(&self) -> String {
        let rest = self.url.trim_start_matches("http://");
        rest.split('/').next().unwrap().to_owned()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange with `/mcp` on a fresh connection: status, head (lower-cased) and
/// body. A `Host` among `headers` replaces the connection's own.
pub(crate) fn request(
    addr: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let host = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("host"))
        .map_or(addr, |(_, value)| *value);
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("host") {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // The gateway may answer (413) before reading it all; what it then drops is fine.
    for chunk in body.chunks(1 << 20) {
        if stream.write_all(chunk).is_err() {
            break;
        }
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// Opens a 2025-11-25 session on the gateway at `addr` (`initialize`, then
/// `notifications/initialized`); its id.
pub(crate) fn open_session(addr: &str) -> String {
    let init = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    });
    let (status, head, body) = request(addr, "POST", &[], init.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no session id in {head}"));
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = request(addr, "POST", &headers, initialized.to_string().as_bytes());
    assert_eq!(status, 202);
    session
}

/// Posts `body` to `/mcp` on a fresh connection and reads the answer's event stream as it
/// comes, on a thread: each JSON-RPC message (an event's `data`) is sent on the channel,
/// which closes when the stream ends.
pub(crate) fn post_streaming(
    addr: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> mpsc::Receiver<serde_json::Value> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Chunk-size lines of the chunked encoding are not `data:` lines: skipped.
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            if let Ok(message) = serde_json::from_str(data.trim())
                && tx.send(message).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// A stateless `tools/call` of `mcp_call_tool` running `tool` with `arguments`, with `token`
/// as bearer, on the gateway at `addr`: the JSON-RPC result (`Null` for an error answer).
pub(crate) fn stateless_call(
    addr: &str,
    token: Option<&str>,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "mcp_call_tool",
            "arguments": {"tool_name": tool, "arguments": arguments},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "mcp_call_tool"),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    let (status, _, text) = request(addr, "POST", &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    let answer: serde_json::Value = text
        .lines()
        .filter_map(|line| serde_json::from_str(line.trim_start_matches("data:").trim()).ok())
        .find(|m: &serde_json::Value| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {text}"));
    answer["result"].clone()
}

/// One JSON-RPC request on the 2025-11-25 session `session` of the gateway at `addr`; the
/// answer's message ([`message`]). Panics unless the answer is `200`.
pub(crate) fn rpc(
    addr: &str,
    session: &str,
    id: u64,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let headers = [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let (status, _, text) = request(addr, "POST", &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{method}: {text}");
    message(&text)
}

/// The JSON-RPC message of an answer: the last `data:` line of an event stream, or the body.
pub(crate) fn message(text: &str) -> serde_json::Value {
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|d| d.starts_with('{'));
    serde_json::from_str(data.unwrap_or(text)).unwrap_or_else(|e| panic!("{e}: {text}"))
}
