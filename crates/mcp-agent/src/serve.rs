//! A run as the tools of one downstream session of a gateway (feature `serve`): [`RunTools`]
//! adapts an [`McpRunner`] to `mcp_serve::SessionTools` — its tools, and its upstream servers'
//! resources, resource templates, prompts, completions, subscriptions and skills: tool calls
//! through the run's governed layer (`[policy]` rules, approval, events, history), the rest
//! through its `[policy]` `resource` / `prompt` / `skill` rules and its events.
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcp_agent::serve::{RunTools, ToolNames};
//! use mcp_agent::{McpClient, OpenOptions, RunInput};
//! use mcp_serve::{OpenError, OpenTools, SessionTools};
//!
//! struct Gateway(McpClient);
//! #[async_trait::async_trait]
//! impl OpenTools for Gateway {
//!     async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
//!         let runner = self.0.open_runner_with(&RunInput::new("session", ""), OpenOptions::new()).await?;
//!         Ok(Arc::new(RunTools::new(runner, ToolNames::Prefixed)))
//!     }
//!     fn offered(&self) -> mcp_serve::Offered {
//!         RunTools::MAY_OFFER
//!     }
//! }
//! ```

mod directory;
mod features;
mod relay;
mod skills;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_catalog::{CALL_TOOL, CallTarget, READ_OUTPUT_TOOL, READ_TOOL, SEARCH_TOOL};
use mcp_client::{ClientError, McpRunner};
use mcp_serve::{Offered, SessionFeatures, SessionTools, ToolListChanges, UpstreamNames};
use tokio::task::JoinHandle;

/// The lazy surface's names, which no upstream tool is listed under.
const SURFACE_NAMES: [&str; 4] = [SEARCH_TOOL, CALL_TOOL, READ_OUTPUT_TOOL, READ_TOOL];

/// How first-class upstream tools are named to a gateway's clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolNames {
    /// `server__tool`, whatever the servers call their tools (the default).
    #[default]
    Prefixed,
    /// Each tool's own name where no other tool of the run has it (else `server__tool`).
    Upstream,
}

/// What is done with a run's close: its outcome, with the run (for its redactor).
type OnClose = Box<dyn Fn(&McpRunner, Result<(), ClientError>) + Send + Sync>;

/// One downstream session's upstream run as `mcp_serve::SessionTools`: its tools (named by
/// [`ToolNames`]), list changes, elicitation origins, promotions, and, as
/// `mcp_serve::SessionFeatures`, its servers' resources, templates, prompts, completions,
/// subscriptions and skills, named by [`UpstreamNames`] (one server: their own names; several:
/// `upstream://server/uri`, `skill://server/path`, `server__prompt`), each request through the
/// run's governed features (`McpRunner::read_resource`, `get_prompt`, `complete`,
/// `subscribe_resource`, `list_skills`, `skill`, `read_skill_resource`, `read_directory`).
pub struct RunTools {
    runner: McpRunner,
    names: ToolNames,
    upstream: UpstreamNames,
    changes: ToolListChanges,
    watcher: JoinHandle<()>,
    /// The relay of the run's `resource_updated` events, once a subscription started it.
    relay: Mutex<Option<JoinHandle<()>>>,
    /// Set when a call failed in transport: an upstream connection broke.
    broken: AtomicBool,
    on_close: Option<OnClose>,
}

impl std::fmt::Debug for RunTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTools")
            .field("names", &self.names)
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl RunTools {
    /// What a run's tools may offer beyond tools: what an opener of them declares
    /// (`mcp_serve::OpenTools::offered`) before a session's run is open.
    pub const MAY_OFFER: Offered = Offered::ALL;

    /// `runner`'s tools, named by `names`. Must be called within a tokio runtime (a task
    /// watches the run's re-listings).
    pub fn new(runner: McpRunner, names: ToolNames) -> Self {
        let changes = ToolListChanges::new();
        // The run's re-listings alone: a subscriber to all of its events would hold a buffer
        // of a thousand of them per session.
        let mut relisted = runner.tools_changed();
        let notify = changes.clone();
        let watcher = tokio::spawn(async move {
            while relisted.changed().await.is_ok() {
                notify.notify();
            }
        });
        let upstream = UpstreamNames::new(
            runner
                .sessions()
                .iter()
                .map(|s| s.name().to_owned())
                .chain(runner.skipped().iter().map(|s| s.server.clone())),
        );
        Self {
            runner,
            names,
            upstream,
            changes,
            watcher,
            relay: Mutex::new(None),
            broken: AtomicBool::new(false),
            on_close: None,
        }
    }

    /// Calls `hook` with the outcome of the run's shutdown when the session closes.
    #[must_use]
    pub fn on_close(
        mut self,
        hook: impl Fn(&McpRunner, Result<(), ClientError>) + Send + Sync + 'static,
    ) -> Self {
        self.on_close = Some(Box::new(hook));
        self
    }

    /// The run.
    pub fn runner(&self) -> &McpRunner {
        &self.runner
    }

    /// With `tool_names = "upstream"`, the catalog name (`server__tool`) of the tool a client
    /// names by the tool's own name; `None` for any other name, which goes to the run as it is.
    ///
    /// A tool's own name stands for it only when no other tool of the run has that name (on
    /// another server), it is no tool's `server__tool` name, and it is none of the lazy
    /// surface's names: otherwise the tool is listed as `server__tool`. The listing
    /// ([`tools`](ToolCatalog::tools)) counts the same rule over the catalog, so a name listed
    /// is a name that calls that tool, and `server__tool` always works.
    fn catalog_name(&self, name: &str) -> Option<String> {
        if self.names != ToolNames::Upstream || SURFACE_NAMES.contains(&name) {
            return None;
        }
        // `lookup` finds a model-facing name, then an id, then a name only one server has.
        let tool = self.runner.catalog().lookup(name)?;
        (tool.remote_name == name && tool.model_name() != name && tool.id != name)
            .then(|| tool.model_name().to_owned())
    }

    /// `call` with the tool named as the run knows it.
    fn to_run(&self, mut call: ToolCall) -> ToolCall {
        if let Some(name) = self.catalog_name(&call.name) {
            call.name = name;
        }
        call
    }

    fn stop_tasks(&self) {
        self.watcher.abort();
        if let Some(relay) = self
            .relay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            relay.abort();
        }
    }
}

impl ToolCatalog for RunTools {
    /// With `tool_names = "upstream"`, each tool whose own name stands for it (the rule of
    /// `catalog_name`, counted over the catalog once rather than looked up tool by tool, which
    /// would scan every tool for each) is listed under that name.
    fn tools(&self) -> Vec<ToolDescriptor> {
        let mut tools = self.runner.tools();
        if self.names != ToolNames::Upstream {
            return tools;
        }
        let entries = self.runner.catalog().entries();
        let mut remote: HashMap<&str, usize> = HashMap::new();
        let mut taken: HashSet<&str> = HashSet::new();
        let mut by_model: HashMap<&str, &str> = HashMap::new();
        for tool in &entries {
            *remote.entry(tool.remote_name.as_str()).or_default() += 1;
            taken.extend([tool.model_name(), tool.id.as_str()]);
            by_model.insert(tool.model_name(), tool.remote_name.as_str());
        }
        for descriptor in &mut tools {
            let Some(&own) = by_model.get(descriptor.name.as_str()) else {
                continue;
            };
            if remote.get(own) == Some(&1) && !taken.contains(own) && !SURFACE_NAMES.contains(&own)
            {
                descriptor.name = own.to_owned();
            }
        }
        tools
    }

    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        match self.catalog_name(name) {
            Some(listed) => self.runner.tool(&listed).map(|mut descriptor| {
                descriptor.name = name.to_owned();
                descriptor
            }),
            None => self.runner.tool(name),
        }
    }
}

#[async_trait]
impl ToolDispatcher for RunTools {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let outcome = self.runner.dispatch(self.to_run(call)).await;
        if matches!(outcome, Err(ToolError::Transport { .. })) {
            self.broken.store(true, Ordering::Release);
        }
        outcome
    }
}

#[async_trait]
impl SessionTools for RunTools {
    /// The server of the tool `call` runs (behind `mcp_call_tool` too), so its elicitations
    /// ride this call's stream.
    ///
    /// A tool called by its own name resolves without its arguments, which resolving would
    /// copy (only `mcp_call_tool` names its tool in them).
    fn origin(&self, call: &ToolCall) -> Option<String> {
        let by_name;
        let call = if call.name == CALL_TOOL {
            call
        } else {
            let name = self
                .catalog_name(&call.name)
                .unwrap_or_else(|| call.name.clone());
            by_name = ToolCall::new(call.id.clone(), name, Default::default());
            &by_name
        };
        match self.runner.catalog().resolve(call) {
            Ok(CallTarget::Mcp(resolved)) => Some(resolved.tool.server.clone()),
            _ => None,
        }
    }

    fn list_changes(&self) -> Option<ToolListChanges> {
        Some(self.changes.clone())
    }

    fn promoted(&self) -> Vec<String> {
        self.runner.catalog().promoted()
    }

    /// A run is lent again only as a fresh one would be: every upstream it opened still
    /// connected (none skipped, none closed, no call broken in transport), no tool promoted
    /// (a promotion would change the next request's tool list) and no resource subscribed to.
    /// Its kept outputs stay, readable by the principal's later requests (`mcp_read_output`)
    /// while the run is pooled.
    fn reusable(&self) -> bool {
        !self.broken.load(Ordering::Acquire)
            && self.runner.skipped().is_empty()
            && self.runner.sessions().iter().all(|s| !s.is_closed())
            && self.runner.catalog().promoted().is_empty()
            && self
                .relay
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none()
    }

    fn features(&self) -> Option<&dyn SessionFeatures> {
        Some(self)
    }

    async fn close(&self) {
        self.stop_tasks();
        let outcome = self.runner.shutdown().await;
        if let Some(hook) = &self.on_close {
            hook(&self.runner, outcome);
        }
    }
}

impl Drop for RunTools {
    fn drop(&mut self) {
        self.stop_tasks();
    }
}
