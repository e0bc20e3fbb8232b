//! The protocol transport: rmcp's newline-delimited JSON over the child's stdin/stdout, with
//! write errors that name the server and carry its diagnostics, and stdout read through the
//! size and depth bounds of [`crate::limits`], then rid of lines that are not JSON-RPC
//! ([`crate::lines`]).

use std::sync::Arc;

use futures::TryFutureExt as _;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{ChildStdin, ChildStdout};

use crate::StdioError;
use crate::handle::Shared;
use crate::limits::Guarded;
use crate::lines::JsonRpcLines;

/// The MCP transport to a child process: its stdout in, its stdin out. Closing it closes the
/// child's stdin, which asks a well-behaved server to exit.
///
/// Framing and the handshake are rmcp's; this type adds error context and bounds each message
/// the server writes: one larger than [`StdioOptions::max_message_bytes`] or nested deeper than
/// [`StdioOptions::max_nesting_depth`] ends the session at once (the stream ends for rmcp, so
/// pending requests fail), and [`StdioHandle::read_error`] says why. A line without a
/// `"jsonrpc"` member (a server's log line on stdout) is dropped before rmcp reads it, so rmcp
/// never answers it. Hand it to `rmcp::serve_client` (or box it in an
/// `mcp_connector::Connection`).
///
/// [`StdioOptions::max_message_bytes`]: crate::StdioOptions::max_message_bytes
/// [`StdioOptions::max_nesting_depth`]: crate::StdioOptions::max_nesting_depth
/// [`StdioHandle::read_error`]: crate::StdioHandle::read_error
pub struct StdioTransport {
    inner: AsyncRwTransport<RoleClient, JsonRpcLines<Guarded<ChildStdout>>, ChildStdin>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport")
            .field("server", &self.shared.server)
            .field("pid", &self.shared.leader.pid())
            .finish_non_exhaustive()
    }
}

impl StdioTransport {
    pub(crate) fn new(
        stdout: ChildStdout,
        stdin: ChildStdin,
        max_message_bytes: usize,
        max_nesting_depth: usize,
        shared: Arc<Shared>,
    ) -> Self {
        let stdout = Guarded::new(
            stdout,
            max_message_bytes,
            max_nesting_depth,
            shared.violation.clone(),
            shared.server.clone(),
        );
        let stdout = JsonRpcLines::new(stdout, shared.server.clone(), Some(shared.clone()));
        // rmcp's own cap (which drops a line silently) stays above ours, line break included
        // (docs/upstream.md#rmcp-stdio-dropped-lines).
        let rmcp_cap = max_message_bytes.saturating_add(2);
        Self {
            inner: AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(rmcp_cap),
            shared,
        }
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = StdioError;

    fn name() -> std::borrow::Cow<'static, str> {
        "stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let shared = self.shared.clone();
        // A combinator, not an `async` block, which would hold rmcp's send future twice over
        // (as captured and as awaited).
        self.inner
            .send(item)
            .map_err(move |source| shared.write_error(source))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin may end the server; its tree is noted while the links still hold.
        self.shared.leader.note_tree();
        let shared = self.shared.clone();
        self.inner
            .close()
            .await
            .map_err(|source| shared.write_error(source))
    }
}
