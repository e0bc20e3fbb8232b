//! The signal that a served tool list changed, raised by the catalog or a session's tools
//! and turned by each session into `notifications/tools/list_changed`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::watch;

/// A signal that the served catalog's tool list changed (see [`ToolServer::list_changes`](crate::ToolServer::list_changes)).
/// Clones signal the same servers.
///
/// ```
/// let changes = mcp_serve::ToolListChanges::new();
/// changes.notify(); // no session yet: nothing to tell
/// ```
#[derive(Debug, Clone)]
pub struct ToolListChanges(Arc<Signal>);

#[derive(Debug)]
struct Signal {
    sender: watch::Sender<u64>,
    /// When the signal was made, then when it was last raised.
    last: Mutex<Instant>,
}

impl Default for ToolListChanges {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolListChanges {
    /// A signal nobody has raised.
    pub fn new() -> Self {
        Self(Arc::new(Signal {
            sender: watch::Sender::new(0),
            last: Mutex::new(Instant::now()),
        }))
    }

    /// Tells every session that the tool list changed.
    pub fn notify(&self) {
        {
            let mut last = self.0.last.lock().unwrap_or_else(PoisonError::into_inner);
            // Read under the lock: a raise that took it later is never set back.
            *last = (*last).max(Instant::now());
        }
        self.0.sender.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.sender.subscribe()
    }

    /// Whether the signal was made or raised at or after `at`: what a subscriber of `at` would
    /// not know of the tools it stands for.
    pub(crate) fn news_since(&self, at: Instant) -> bool {
        *self.0.last.lock().unwrap_or_else(PoisonError::into_inner) >= at
    }
}
