//! The client-side handler of one session: identifies the client and turns server
//! notifications into signals for the runner.

use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::watch;

/// Handles server-to-client traffic of one session.
#[derive(Debug, Clone)]
pub(crate) struct SessionHandler {
    /// Bumped on every `notifications/tools/list_changed`.
    tools_changed: watch::Sender<u64>,
}

impl SessionHandler {
    pub(crate) fn new() -> (Self, watch::Receiver<u64>) {
        let (tx, rx) = watch::channel(0);
        (Self { tools_changed: tx }, rx)
    }
}

impl ClientHandler for SessionHandler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-agent", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.send_modify(|n| *n += 1);
    }
}
