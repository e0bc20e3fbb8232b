//! The gateway `serve` opens sessions' tools with, replaced by a new one when the
//! configuration is reloaded ([`Gateways`]). A session keeps the tools it opened — its
//! configuration's servers and policy — until it ends; a replaced gateway's client (which
//! holds the sessions of its `shared = true` servers) is shut down once no session uses it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use async_trait::async_trait;
use mcp_agent::prelude::{ToolCatalog, ToolDispatcher};
use mcp_agent::{McpClient, ToolCall, ToolDescriptor, ToolError, ToolOutput};
use mcp_serve::{Downstream, OpenError, OpenTools, SessionTools, ToolListChanges};
use tokio::sync::OnceCell;

/// One configuration's gateway, as built.
pub(crate) struct Built {
    /// Opens each session's tools.
    pub(crate) opener: Arc<dyn OpenTools>,
    /// The client the opener's runs come from: the sessions of its `shared = true` servers
    /// outlive the runs, until [`McpClient::shutdown`].
    pub(crate) client: McpClient,
    /// How many servers the configuration has.
    pub(crate) servers: usize,
}

/// The gateway of the configuration in use, and the ones it replaced that sessions still use.
pub(crate) struct Gateways {
    current: RwLock<Arc<Generation>>,
    /// Every gateway not yet dropped (the current one, replaced ones still used or closing),
    /// for [`close_all`](Self::close_all).
    every: Mutex<Vec<Weak<Generation>>>,
}

/// A gateway and who uses it.
struct Generation {
    built: Built,
    /// 0 for the configuration `serve` started with, then one more for each reload.
    number: u64,
    /// Its opener's upstream digest, mixed with its number: pooled runs of the gateway it
    /// replaced are not lent again even when only the policy changed.
    digest: u64,
    users: Mutex<Users>,
    /// Set once its client is shut down; a second caller waits for the first.
    closed: OnceCell<()>,
}

/// The sessions (and pooled runs) whose tools a gateway opened and which are still open, and
/// whether it was replaced.
#[derive(Default)]
struct Users {
    count: usize,
    replaced: bool,
}

impl Generation {
    fn new(built: Built, number: u64) -> Self {
        let mut hasher = DefaultHasher::new();
        (built.opener.upstream_digest(), number).hash(&mut hasher);
        Self {
            built,
            number,
            digest: hasher.finish(),
            users: Mutex::new(Users::default()),
            closed: OnceCell::new(),
        }
    }

    fn users(&self) -> std::sync::MutexGuard<'_, Users> {
        self.users.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more user, until the tenancy is dropped.
    fn enter(self: &Arc<Self>) -> Tenancy {
        self.users().count += 1;
        Tenancy(Arc::clone(self))
    }

    /// Marks it replaced: its client is shut down now if nobody uses it, else when the last
    /// user leaves.
    fn replace(self: &Arc<Self>) {
        let idle = {
            let mut users = self.users();
            users.replaced = true;
            users.count == 0
        };
        if idle {
            self.close_later();
        }
    }

    fn leave(self: &Arc<Self>) {
        let idle = {
            let mut users = self.users();
            users.count = users.count.saturating_sub(1);
            users.replaced && users.count == 0
        };
        if idle {
            self.close_later();
        }
    }

    /// Shuts its client down on a task of its own. Outside a runtime (the process is ending)
    /// nothing is spawned: dropping the client kills what its shared sessions started.
    fn close_later(self: &Arc<Self>) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let generation = Arc::clone(self);
            runtime.spawn(async move { generation.close().await });
        }
    }

    /// Shuts its client down, once; a later call waits for that.
    async fn close(&self) {
        self.closed
            .get_or_init(|| self.built.client.shutdown())
            .await;
    }
}

/// A use of a gateway, ended when dropped.
struct Tenancy(Arc<Generation>);

impl Drop for Tenancy {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl Gateways {
    /// The gateway of the configuration `serve` started with.
    pub(crate) fn new(first: Built) -> Self {
        let first = Arc::new(Generation::new(first, 0));
        Self {
            every: Mutex::new(vec![Arc::downgrade(&first)]),
            current: RwLock::new(first),
        }
    }

    /// Opens new sessions' tools with `built` from now on; the gateway it replaces keeps its
    /// sessions, and its client is shut down once none is left.
    pub(crate) fn replace(&self, built: Built) {
        let old = {
            let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
            let mut every = self.every.lock().unwrap_or_else(PoisonError::into_inner);
            let next = Arc::new(Generation::new(built, current.number + 1));
            every.retain(|generation| generation.strong_count() > 0);
            every.push(Arc::downgrade(&next));
            std::mem::replace(&mut *current, next)
        };
        old.replace();
    }

    /// How many servers the configuration in use has.
    pub(crate) fn servers(&self) -> usize {
        self.current().built.servers
    }

    /// Shuts every gateway's client down (the one in use and those replaced), waiting for
    /// those already closing: the sessions of `shared = true` servers close.
    pub(crate) async fn close_all(&self) {
        let live = self.live();
        let mut closing = tokio::task::JoinSet::new();
        for generation in live {
            closing.spawn(async move { generation.close().await });
        }
        while closing.join_next().await.is_some() {}
    }

    /// Every gateway not yet dropped.
    fn live(&self) -> Vec<Arc<Generation>> {
        self.every
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    fn current(&self) -> Arc<Generation> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The gateway in use, entered before the lock is let go: a reload that replaces it
    /// meanwhile finds it in use.
    fn enter(&self) -> (Arc<dyn OpenTools>, Tenancy) {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        (Arc::clone(&current.built.opener), current.enter())
    }
}

#[async_trait]
impl OpenTools for Gateways {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        let (opener, tenancy) = self.enter();
        let tools = opener.open().await?;
        Ok(Arc::new(Tenant::new(tools, tenancy)))
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        let (opener, tenancy) = self.enter();
        let tools = opener.open_for(downstream).await?;
        Ok(Arc::new(Tenant::new(tools, tenancy)))
    }

    fn upstream_digest(&self) -> u64 {
        self.current().digest
    }

    fn offered(&self) -> mcp_serve::Offered {
        self.current().built.opener.offered()
    }

    async fn shutdown(&self) {
        for generation in self.live() {
            generation.built.opener.shutdown().await;
        }
    }
}

/// A session's tools, opened by one gateway, which stays in use until they are closed (or
/// dropped).
struct Tenant {
    tools: Arc<dyn SessionTools>,
    tenancy: Mutex<Option<Tenancy>>,
}

impl Tenant {
    fn new(tools: Arc<dyn SessionTools>, tenancy: Tenancy) -> Self {
        Self {
            tools,
            tenancy: Mutex::new(Some(tenancy)),
        }
    }
}

impl ToolCatalog for Tenant {
    fn tools(&self) -> Vec<ToolDescriptor> {
        self.tools.tools()
    }

    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.tools.tool(name)
    }
}

#[async_trait]
impl ToolDispatcher for Tenant {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        self.tools.dispatch(call).await
    }
}

#[async_trait]
impl SessionTools for Tenant {
    fn list_changes(&self) -> Option<ToolListChanges> {
        self.tools.list_changes()
    }

    fn origin(&self, call: &ToolCall) -> Option<String> {
        self.tools.origin(call)
    }

    fn promoted(&self) -> Vec<String> {
        self.tools.promoted()
    }

    fn features(&self) -> Option<&dyn mcp_serve::SessionFeatures> {
        self.tools.features()
    }

    /// Not once its gateway was replaced: a pool closes it rather than lend it again.
    fn reusable(&self) -> bool {
        let replaced = self
            .tenancy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_none_or(|tenancy| tenancy.0.users().replaced);
        !replaced && self.tools.reusable()
    }

    async fn close(&self) {
        self.tools.close().await;
        let tenancy = self
            .tenancy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(tenancy);
    }
}
