//! One request's use of a pooled run ([`Lease`]): the run's tools for the request, given back
//! to the pool when the request ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;

use super::book::{Run, RunId};
use super::state::PoolState;
use crate::list_changes::ToolListChanges;
use crate::per_session::SessionTools;

/// A pooled run, lent to one request: its tools, until [`close`](SessionTools::close) (or a
/// drop) gives it back. Then the pool keeps it, or closes it when it is not pooled or no
/// longer [reusable](SessionTools::reusable).
pub(crate) struct Lease {
    run: Run,
    id: RunId,
    pool: Arc<PoolState>,
    given_back: AtomicBool,
}

impl Lease {
    pub(crate) fn new(run: Run, id: RunId, pool: Arc<PoolState>) -> Self {
        Self {
            run,
            id,
            pool,
            given_back: AtomicBool::new(false),
        }
    }

    /// Gives the run back, once: the run to close now, if any.
    fn give_back(&self) -> Option<Run> {
        if self.given_back.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.pool.release(self.id, self.run.reusable())
    }
}

impl ToolCatalog for Lease {
    fn tools(&self) -> Vec<ToolDescriptor> {
        self.run.tools()
    }

    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.run.tool(name)
    }
}

#[async_trait]
impl ToolDispatcher for Lease {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        self.run.dispatch(call).await
    }
}

#[async_trait]
impl SessionTools for Lease {
    fn list_changes(&self) -> Option<ToolListChanges> {
        self.run.list_changes()
    }

    fn origin(&self, call: &ToolCall) -> Option<String> {
        self.run.origin(call)
    }

    fn promoted(&self) -> Vec<String> {
        self.run.promoted()
    }

    fn features(&self) -> Option<&dyn crate::SessionFeatures> {
        self.run.features()
    }

    fn reusable(&self) -> bool {
        self.run.reusable()
    }

    async fn close(&self) {
        if let Some(run) = self.give_back() {
            run.close().await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(run) = self.give_back() {
            self.pool.close_later(run);
        }
    }
}
