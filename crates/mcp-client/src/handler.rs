//! The client-side handler of one session: identifies the client and turns server
//! notifications into signals for the runner.

use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
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
        // The newest protocol version that still has the `initialize` handshake: servers in
        // the wild (and the conformance suite) negotiate down from it; a version without the
        // handshake would skip the identity and capabilities this client keeps (SPEC C3).
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-agent", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.send_modify(|n| *n += 1);
    }
}
