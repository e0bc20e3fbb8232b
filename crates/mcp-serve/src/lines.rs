//! Newline-delimited JSON-RPC over a byte stream (stdio): lines bounded in size, and every
//! line that is no message this server can take answered with an error saying why — too
//! large (naming `max_request_bytes`), nested too deep, or not fitting its method — instead
//! of dropped in silence (docs/upstream.md#rmcp-stdio-dropped-lines) or answered without its
//! id (docs/upstream.md#rmcp-stdio-invalid-request), as rmcp's transport does. A line that is
//! no JSON at all is ignored, as rmcp and the other MCP SDKs do (answering garbage can start
//! an error storm with a peer that echoes it).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// A server transport reading lines from `R` and writing lines to `W`.
pub(crate) struct Lines<R, W> {
    read: BufReader<R>,
    /// The line read so far (kept across a cancelled `receive`).
    line: Vec<u8>,
    /// Set once a line outgrew `max`, until its end is seen.
    discarding: bool,
    max: usize,
    write: Arc<Mutex<W>>,
}

/// One bounded line read.
enum Read {
    Line,
    Oversized,
    Eof,
}

impl<R: AsyncRead + Unpin, W> Lines<R, W> {
    pub(crate) fn new(read: R, write: W, max: usize) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max,
            write: Arc::new(Mutex::new(write)),
        }
    }

    /// Reads one line into `self.line`, never holding more than `max` bytes of it. Cancel
    /// safe: bytes are copied and consumed with no await between.
    async fn read_line(&mut self) -> std::io::Result<Read> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Read::Eof);
            }
            let (take, ends) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            if self.discarding {
                self.read.consume(take);
                if ends {
                    self.discarding = false;
                }
                continue;
            }
            if self.line.len() + take > self.max + 1 {
                self.read.consume(take);
                self.line.clear();
                self.discarding = !ends;
                return Ok(Read::Oversized);
            }
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if ends {
                return Ok(Read::Line);
            }
        }
    }
}

/// Writes `error` as the answer to request `id` (`null` when unknown), in a task of its own
/// so a cancelled `receive` cannot cut the line short.
fn answer<W>(write: &Arc<Mutex<W>>, id: Option<RequestId>, error: ErrorData)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let line = json!({"jsonrpc": "2.0", "id": id, "error": error});
    let write = write.clone();
    tokio::spawn(async move {
        let _ = write_line(&write, Ok(line.to_string().into_bytes())).await;
    });
}

/// Writes one message's JSON (`bytes`) and its newline, then flushes.
async fn write_line<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    bytes: std::io::Result<Vec<u8>>,
) -> std::io::Result<()> {
    let mut bytes = bytes?;
    bytes.push(b'\n');
    let mut write = write.lock().await;
    write.write_all(&bytes).await?;
    write.flush().await
}

impl<R, W> Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let bytes = serde_json::to_vec(&item).map_err(std::io::Error::from);
        async move { write_line(&write, bytes).await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.read_line().await {
                Ok(Read::Line) => {}
                Ok(Read::Oversized) => {
                    tracing::debug!(max = self.max, "an oversized message was dropped");
                    answer(&self.write, None, crate::message::too_large(self.max));
                    continue;
                }
                Ok(Read::Eof) => return None,
                Err(error) => {
                    tracing::debug!(%error, "reading stdin failed");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(text) {
                return Some(message);
            }
            // Notifications of other protocols (LSP and the like) are not answered.
            let foreign_notification = serde_json::from_slice::<Value>(text)
                .is_ok_and(|v| v.get("id").is_none() && v.get("method").is_some());
            if foreign_notification {
                continue;
            }
            if let Some((id, error)) = crate::message::refusal(text, true) {
                answer(&self.write, id, error);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}
