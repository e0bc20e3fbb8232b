//! Tools kept open across stateless requests ([`PooledTools`]), an [`OpenTools`] around
//! another: a 2026-07-28 client over HTTP has no session, so without it each of its requests
//! opens tools (for a gateway: a run over every upstream server) and closes them after.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::downstream::Downstream;
use crate::per_session::{OpenError, OpenTools, SessionTools};

mod book;
mod lease;
mod state;

use book::Key;
use lease::Lease;
use state::PoolState;

/// How many runs a [`PooledTools`] keeps, and for how long. Plain data with `with_<field>`
/// setters.
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::PoolOptions;
///
/// let options = PoolOptions::default().with_max_runs(4).with_idle_timeout(Duration::from_secs(30));
/// assert_eq!((options.max_runs, options.idle_timeout.as_secs()), (4, 30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolOptions {
    /// At most this many runs are pooled at once, idle or in use (one per principal and
    /// upstream set); 0 pools nothing. Default 16.
    pub max_runs: usize,
    /// A pooled run no request has used for this long is closed. Default 60 s.
    pub idle_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_runs: 16,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl PoolOptions {
    /// Sets [`max_runs`](Self::max_runs).
    #[must_use]
    pub fn with_max_runs(mut self, max: usize) -> Self {
        self.max_runs = max;
        self
    }

    /// Sets [`idle_timeout`](Self::idle_timeout) (at least 1 ms).
    #[must_use]
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout.max(Duration::from_millis(1));
        self
    }
}

/// An [`OpenTools`] that keeps the tools it opens for stateless requests
/// ([`Downstream::is_stateless`]: a 2026-07-28 client over HTTP) and lends them to the next
/// ones, instead of opening and closing tools for each request. Sessions, and requests
/// whose client can be asked for input, get tools of their own from the inner opener, as
/// without it.
///
/// - **Keyed** by the request's principal ([`Downstream::principal`]; anonymous requests
///   share one key) and the inner opener's [`upstream_digest`](OpenTools::upstream_digest):
///   tools are never lent to another principal, nor after the upstream set changed. They are
///   opened with a [`Downstream`] that holds the principal alone, nothing of the request.
/// - **Shared** by the concurrent requests of a key: one opening at a time per key (the others
///   wait for it), then every request of the key uses the same tools, whose calls may run
///   concurrently, as a session's do.
/// - **Bounded**: at most [`PoolOptions::max_runs`] pooled at once; to make room, the one idle
///   the longest is closed; when every pooled one is in use, the request's tools are closed
///   after it, as without a pool.
/// - **Closed** when idle for [`PoolOptions::idle_timeout`] (by a task that ends with the
///   pool), when no longer [reusable](SessionTools::reusable) (once no request uses them),
///   and at [`shutdown`](OpenTools::shutdown), which [`HttpServer::shutdown`] calls.
///
/// [`HttpServer::shutdown`]: crate::HttpServer::shutdown
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use mcp_serve::{OpenError, OpenTools, PoolOptions, PooledTools, SessionTools, ToolServer};
///
/// struct Fresh;
/// impl ToolCatalog for Fresh {
///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
/// }
/// #[async_trait::async_trait]
/// impl ToolDispatcher for Fresh {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Err(ToolError::unknown_tool(call.name, Vec::new()))
///     }
/// }
/// impl SessionTools for Fresh {}
/// struct Opener;
/// #[async_trait::async_trait]
/// impl OpenTools for Opener {
///     async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
///         Ok(Arc::new(Fresh))
///     }
/// }
///
/// let pool = Arc::new(PooledTools::new(Arc::new(Opener), PoolOptions::default()));
/// assert_eq!((pool.pooled(), pool.idle()), (0, 0));
/// let server = ToolServer::per_session(pool);
/// ```
pub struct PooledTools<O> {
    inner: Arc<O>,
    max_runs: usize,
    state: Arc<PoolState>,
}

impl<O> std::fmt::Debug for PooledTools<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledTools")
            .field("max_runs", &self.max_runs)
            .field("pooled", &self.state.counts().0)
            .field("idle", &self.state.counts().1)
            .finish_non_exhaustive()
    }
}

impl<O: OpenTools> PooledTools<O> {
    /// Pools what `inner` opens for stateless requests, within `options`.
    pub fn new(inner: Arc<O>, options: PoolOptions) -> Self {
        Self {
            inner,
            max_runs: options.max_runs,
            state: Arc::new(PoolState::new(options.max_runs, options.idle_timeout)),
        }
    }

    /// How many runs are pooled now, in use or idle.
    pub fn pooled(&self) -> usize {
        self.state.counts().0
    }

    /// How many pooled runs no request uses now.
    pub fn idle(&self) -> usize {
        self.state.counts().1
    }

    /// `key`'s pooled run, lent to one more request, if it is still reusable; one that is not
    /// is handed out no more (and closed when no request uses it).
    fn lent(&self, key: &Key) -> Option<Arc<dyn SessionTools>> {
        let (id, run) = self.state.lease(key)?;
        if run.reusable() {
            return Some(Arc::new(Lease::new(run, id, Arc::clone(&self.state))));
        }
        if let Some(run) = self.state.release(id, false) {
            self.state.close_later(run);
        }
        None
    }
}

#[async_trait]
impl<O: OpenTools> OpenTools for PooledTools<O> {
    /// The inner opener's tools: without a downstream there is no key to pool them by.
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.inner.open().await
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        if !downstream.is_stateless() || downstream.declares_elicitation() || self.max_runs == 0 {
            return self.inner.open_for(downstream).await;
        }
        let key = Key {
            principal: downstream.principal().cloned(),
            upstream: self.inner.upstream_digest(),
        };
        if let Some(lent) = self.lent(&key) {
            return Ok(lent);
        }
        let gate = self.state.gate(&key);
        let _opening = gate.lock().await;
        if let Some(lent) = self.lent(&key) {
            self.state.ungate(&key, &gate);
            return Ok(lent);
        }
        let opened = self
            .inner
            .open_for(Downstream::detached(key.principal.clone()))
            .await;
        let run = match opened {
            Ok(run) => run,
            Err(e) => {
                self.state.ungate(&key, &gate);
                return Err(e);
            }
        };
        // Added before the gate is forgotten, so a request arriving meanwhile finds it.
        let id = self.state.add(key.clone(), Arc::clone(&run));
        self.state.ungate(&key, &gate);
        Ok(Arc::new(Lease::new(run, id, Arc::clone(&self.state))))
    }

    fn offered(&self) -> crate::Offered {
        self.inner.offered()
    }

    fn upstream_digest(&self) -> u64 {
        self.inner.upstream_digest()
    }

    async fn shutdown(&self) {
        self.state.shutdown().await;
        self.inner.shutdown().await;
    }
}
