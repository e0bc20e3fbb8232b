//! Serving over an in-memory duplex pipe.

use rmcp::{ServerHandler, ServiceExt};
use tokio::io::DuplexStream;
use tokio_util::sync::CancellationToken;

use crate::TestServer;

/// Buffer size of each direction of the pipe.
const PIPE_BUFFER: usize = 64 * 1024;

/// Serves `server` over an in-memory pipe and returns the client's end, ready for
/// `rmcp::serve_client`. The server runs on a spawned task until the client's end is dropped
/// or the server's `crash` tool disconnects it.
///
/// ```
/// use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let stream = serve_in_memory(TestServer::new(TestServerOptions::default()));
/// let client = rmcp::serve_client((), stream).await?;
/// let tools = client.list_all_tools().await?;
/// assert!(tools.iter().any(|t| t.name == "echo"));
/// client.cancel().await?;
/// # Ok(())
/// # }
/// ```
pub fn serve_in_memory(server: TestServer) -> DuplexStream {
    let token = server.crash_token().unwrap_or_default();
    serve_handler_in_memory(server, token)
}

/// Serves any rmcp server handler (any `rmcp::ServerHandler`) over an
/// in-memory pipe, until the client's end is dropped or `stop` is cancelled.
pub fn serve_handler_in_memory<S: ServerHandler>(
    server: S,
    stop: CancellationToken,
) -> DuplexStream {
    let (client, server_end) = tokio::io::duplex(PIPE_BUFFER);
    tokio::spawn(async move {
        // A client that goes away during the handshake is not an error of the test server.
        if let Ok(running) = server.serve_with_ct(server_end, stop).await {
            let _ = running.waiting().await;
        }
    });
    client
}
