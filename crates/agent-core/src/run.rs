//! Runs: the input of one agent run, the runner that serves its tools, and the factory that
//! opens a runner for exactly the lifetime of a scope.

use std::ops::Deref;

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::{JsonObject, RunnerError, ToolCatalog, ToolDispatcher};

/// The input of one agent run.
///
/// `metadata` carries per-run options from the inbound adapter; the MCP client reads
/// `metadata["mcp"]` to select the run's servers.
///
/// ```
/// use agent_core::RunInput;
/// use serde_json::json;
///
/// let input = RunInput::new("state-1", "summarise my open issues")
///     .with_metadata(json!({"mcp": {"servers": ["github"]}}).as_object().unwrap().clone());
/// assert_eq!(input.metadata["mcp"]["servers"][0], "github");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunInput {
    /// The conversation/session this run belongs to.
    pub state_id: String,
    /// What the user asked for.
    pub instruction: String,
    /// Per-run options.
    #[serde(default)]
    pub metadata: JsonObject,
}

impl RunInput {
    /// A run input with empty metadata.
    pub fn new(state_id: impl Into<String>, instruction: impl Into<String>) -> Self {
        Self {
            state_id: state_id.into(),
            instruction: instruction.into(),
            metadata: JsonObject::new(),
        }
    }

    /// Sets the metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: JsonObject) -> Self {
        self.metadata = metadata;
        self
    }

    /// Sets one metadata entry, replacing an earlier one under the same key.
    ///
    /// ```
    /// use agent_core::RunInput;
    /// use serde_json::json;
    ///
    /// let input = RunInput::new("state-1", "hi").with_meta("locale", "en").with_meta("n", 3);
    /// assert_eq!(input.metadata["locale"], json!("en"));
    /// assert_eq!(input.metadata["n"], json!(3));
    /// ```
    #[must_use]
    pub fn with_meta(
        mut self,
        key: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
}

/// The tools of one run: a catalog to show the model and a dispatcher to call them, alive until
/// [`close`](Runner::close).
///
/// ```
/// use agent_core::{Runner, ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// struct Empty;
/// impl ToolCatalog for Empty {
///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
/// }
/// #[async_trait]
/// impl ToolDispatcher for Empty {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Err(ToolError::unknown_tool(call.name, Vec::new()))
///     }
/// }
/// #[async_trait]
/// impl Runner for Empty {
///     async fn close(&self) {}
/// }
/// ```
#[async_trait]
pub trait Runner: ToolCatalog + ToolDispatcher {
    /// Releases everything the run holds (sessions, processes, connections). Idempotent; after
    /// it returns, calls fail.
    async fn close(&self);
}

/// A runner valid for one scope.
///
/// Close it with [`RunScope::close`] to release its resources gracefully. If it is dropped
/// without being closed (an early return, a panic, a cancelled task), the runner's own `Drop`
/// implementations release what they hold — for example a stdio transport kills its process
/// group — so nothing outlives the scope either way.
pub struct RunScope {
    runner: Box<dyn Runner>,
}

impl RunScope {
    /// Wraps a runner.
    pub fn new(runner: Box<dyn Runner>) -> Self {
        Self { runner }
    }

    /// Closes the runner and ends the scope.
    pub async fn close(self) {
        self.runner.close().await;
    }
}

impl Deref for RunScope {
    type Target = dyn Runner;

    fn deref(&self) -> &Self::Target {
        &*self.runner
    }
}

impl std::fmt::Debug for RunScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunScope")
            .field("tools", &self.runner.tools().len())
            .finish()
    }
}

/// Opens runners. An inbound adapter (HTTP API, CLI, queue worker) that opens its runners
/// through this trait gets whatever tools the factory provides — MCP tools included — with no
/// code of its own.
///
/// ```
/// use agent_core::{RunInput, RunScope, Runner, RunnerError, RunnerFactory};
/// use async_trait::async_trait;
///
/// async fn handle(factory: &dyn RunnerFactory, input: RunInput) -> Result<usize, RunnerError> {
///     let scope = factory.open(&input).await?;
///     let count = scope.tools().len();
///     scope.close().await;
///     Ok(count)
/// }
/// ```
#[async_trait]
pub trait RunnerFactory: Send + Sync {
    /// Opens a runner for `input`. The caller closes the returned scope when the run ends.
    async fn open(&self, input: &RunInput) -> Result<RunScope, RunnerError>;
}

/// Opens a runner, runs `body` with it and closes it, whether `body` succeeds or fails.
///
/// ```
/// use agent_core::{with_runner, RunInput, RunnerFactory};
///
/// async fn count_tools(factory: &dyn RunnerFactory) -> usize {
///     with_runner(factory, &RunInput::new("s", "hi"), |runner| {
///         Box::pin(async move { runner.tools().len() })
///     })
///     .await
///     .unwrap_or(0)
/// }
/// ```
pub async fn with_runner<T>(
    factory: &dyn RunnerFactory,
    input: &RunInput,
    body: impl for<'r> FnOnce(&'r dyn Runner) -> BoxFuture<'r, T>,
) -> Result<T, RunnerError> {
    let scope = factory.open(input).await?;
    let out = body(&*scope).await;
    scope.close().await;
    Ok(out)
}
