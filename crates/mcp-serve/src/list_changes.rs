//! The signal that a served tool list changed, raised by the catalog or a session's tools
//! and turned by each session into `notifications/tools/list_changed`.

use std::sync::Arc;

use tokio::sync::watch;

/// A signal that the served catalog's tool list changed (see [`ToolServer::list_changes`](crate::ToolServer::list_changes)).
/// Clones signal the same servers.
///
/// ```
/// let changes = mcp_serve::ToolListChanges::new();
/// changes.notify(); // no session yet: nothing to tell
/// ```
#[derive(Debug, Clone)]
pub struct ToolListChanges(Arc<watch::Sender<u64>>);

impl Default for ToolListChanges {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolListChanges {
    /// A signal nobody has raised.
    pub fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    /// Tells every session that the tool list changed.
    pub fn notify(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}
