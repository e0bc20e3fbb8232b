//! Counting what is in flight, and the state a server is in, for graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Where a server is in its life.
///
/// ```
/// use mcp_serve::ServeState;
///
/// assert_ne!(ServeState::Serving, ServeState::Draining);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServeState {
    /// Accepting connections and calls.
    Serving,
    /// Shutting down: no new connection is accepted and new calls are refused; calls in
    /// flight run to their end (bounded by the drain timeout).
    Draining,
    /// Every session and connection is closed.
    Stopped,
}

/// How a shutdown went.
///
/// ```
/// let report = mcp_serve::ShutdownReport::default();
/// assert_eq!(report.in_flight, 0);
/// assert_eq!(report.abandoned, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Exchanges in flight when the shutdown began (HTTP: requests whose answer was not yet
    /// sent; stdio: requests not yet answered).
    pub in_flight: usize,
    /// Of those, how many were still unanswered when the drain timeout expired, and were
    /// cut off.
    pub abandoned: usize,
}

/// A count of exchanges in flight that can be awaited to reach zero.
#[derive(Debug, Clone)]
pub(crate) struct InFlight(Arc<watch::Sender<usize>>);

impl Default for InFlight {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }
}

impl InFlight {
    /// Counts one more until the guard drops.
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.0.send_modify(|n| *n += 1);
        InFlightGuard(self.0.clone())
    }

    pub(crate) fn count(&self) -> usize {
        *self.0.borrow()
    }

    /// Resolves once nothing has been in flight for `quiet` without a break.
    pub(crate) async fn quiet_for(&self, quiet: Duration) {
        let mut rx = self.0.subscribe();
        loop {
            if rx.wait_for(|n| *n == 0).await.is_err() {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(quiet) => return,
                changed = rx.changed() => if changed.is_err() { return },
            }
        }
    }

    /// Waits until nothing is in flight, at most `timeout`; returns what is left.
    pub(crate) async fn drained(&self, timeout: Duration) -> usize {
        let mut rx = self.0.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0)).await;
        self.count()
    }
}

/// One exchange in flight; dropping it ends it.
#[derive(Debug)]
pub(crate) struct InFlightGuard(Arc<watch::Sender<usize>>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The state of one server, shared by its parts, and the signal that cuts off the calls
/// that outlived the drain timeout.
#[derive(Debug, Clone)]
pub(crate) struct Lifecycle(Arc<watch::Sender<ServeState>>, CancellationToken);

impl Default for Lifecycle {
    fn default() -> Self {
        Self(
            Arc::new(watch::Sender::new(ServeState::Serving)),
            CancellationToken::new(),
        )
    }
}

/// How long the calls cut off at the drain timeout get to send their error answers.
pub(crate) const CUT_GRACE: Duration = Duration::from_secs(2);

impl Lifecycle {
    /// Cuts off every call still running: each answers with an error saying so.
    pub(crate) fn cut(&self) {
        self.1.cancel();
    }

    /// Resolves once the calls still running are cut off.
    pub(crate) async fn cut_off(&self) {
        self.1.cancelled().await;
    }

    pub(crate) fn set(&self, state: ServeState) {
        self.0.send_replace(state);
    }

    pub(crate) fn get(&self) -> ServeState {
        *self.0.borrow()
    }

    pub(crate) fn is_serving(&self) -> bool {
        self.get() == ServeState::Serving
    }

    pub(crate) fn watch(&self) -> watch::Receiver<ServeState> {
        self.0.subscribe()
    }

    /// Resolves once the state is no longer [`ServeState::Serving`].
    pub(crate) async fn leaving(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|s| *s != ServeState::Serving).await;
    }
}
