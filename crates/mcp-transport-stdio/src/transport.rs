//! The protocol transport: rmcp's newline-delimited JSON over the child's stdin/stdout, with
//! write errors that name the server and carry its diagnostics.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{ChildStdin, ChildStdout};

use crate::StdioError;
use crate::handle::Shared;

/// The MCP transport to a child process: its stdout in, its stdin out. Closing it closes the
/// child's stdin, which asks a well-behaved server to exit.
///
/// Framing and the handshake are rmcp's; this type adds only error context. Hand it to
/// `rmcp::serve_client` (or box it in an `mcp_connector::Connection`).
pub struct StdioTransport {
    inner: AsyncRwTransport<RoleClient, ChildStdout, ChildStdin>,
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
        max_line_length: usize,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            inner: AsyncRwTransport::new_client(stdout, stdin)
                .with_max_line_length(max_line_length),
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
        let sent = self.inner.send(item);
        let shared = self.shared.clone();
        async move { sent.await.map_err(|source| shared.write_error(source)) }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let shared = self.shared.clone();
        self.inner
            .close()
            .await
            .map_err(|source| shared.write_error(source))
    }
}
