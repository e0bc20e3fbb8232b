//! What a served endpoint serves and within which bounds: [`ToolServer`], the builder. Each
//! downstream session's handler (`handler.rs`) reads it.

use std::sync::Arc;

use agent_core::{ToolCatalog, ToolDispatcher};
use rmcp::model::Tool;

use crate::convert::mcp_tool;
use crate::exposure::Exposure;
use crate::list_changes::ToolListChanges;
use crate::per_session::OpenTools;

/// A catalog that can also run its tools: what a [`ToolServer`] serves.
pub(crate) trait ServedTools: ToolCatalog + ToolDispatcher {}
impl<T: ToolCatalog + ToolDispatcher + ?Sized> ServedTools for T {}

/// Where a server's tools come from.
#[derive(Clone)]
pub(crate) enum Source {
    /// One set of tools for every session, filtered by the exposure.
    Fixed(Arc<dyn ServedTools>),
    /// Tools opened for each session, served whole.
    PerSession(Arc<dyn OpenTools>),
}

/// Tools of a [`ToolCatalog`] + [`ToolDispatcher`] (native tools, or an
/// `mcp_client::McpRunner`, whose calls then go through its governed layer) served as an MCP
/// server, over stdio ([`ToolServer::serve_stdio`]) or streamable HTTP
/// ([`ToolServer::serve_http`]).
///
/// Every downstream session gets its own handler: its own bound on concurrent calls, its own
/// list-changed subscription. Results are mapped by [`call_result`](crate::call_result).
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use mcp_serve::{Exposure, ToolServer};
///
/// struct Clock;
/// impl ToolCatalog for Clock {
///     fn tools(&self) -> Vec<ToolDescriptor> {
///         vec![ToolDescriptor::new("now", Default::default())]
///     }
/// }
/// #[async_trait::async_trait]
/// impl ToolDispatcher for Clock {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("12:00"))
///     }
/// }
///
/// let server = ToolServer::new(Arc::new(Clock), Exposure::only(["now"]))
///     .name("clock", "1.0.0")
///     .instructions("Tells the time.")
///     .max_calls_per_session(4)
///     .max_calls(64);
/// assert_eq!(server.exposed_tools().len(), 1);
/// ```
#[derive(Clone)]
pub struct ToolServer {
    pub(crate) source: Source,
    pub(crate) exposure: Exposure,
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) instructions: Option<String>,
    pub(crate) max_calls_per_session: usize,
    pub(crate) max_calls: usize,
    pub(crate) max_request_bytes: usize,
    pub(crate) changes: Option<ToolListChanges>,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("exposure", &self.exposure)
            .field("name", &self.name)
            .field("version", &self.version)
            .field("max_calls_per_session", &self.max_calls_per_session)
            .field("max_calls", &self.max_calls)
            .field("max_request_bytes", &self.max_request_bytes)
            .field("list_changes", &self.changes.is_some())
            .finish_non_exhaustive()
    }
}

impl ToolServer {
    /// How many calls one downstream session may have in flight by default.
    pub const DEFAULT_MAX_CALLS_PER_SESSION: usize = 16;

    /// How many calls all sessions of one served endpoint may have in flight by default.
    pub const DEFAULT_MAX_CALLS: usize = 256;

    /// The largest request a client may send by default (4 MiB): an HTTP body, a stdio line.
    pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

    /// Serves the tools of `tools` that `exposure` admits. The server calls itself
    /// `mcp-serve` with this crate's version until [`name`](Self::name) says otherwise.
    pub fn new<T>(tools: Arc<T>, exposure: Exposure) -> Self
    where
        T: ToolCatalog + ToolDispatcher + 'static,
    {
        Self::with_source(Source::Fixed(tools), exposure)
    }

    /// Serves tools opened for each downstream session by `opener` (a gateway: one upstream
    /// run per session), every tool they list. They are opened when the session is
    /// initialised (or at its first request) and closed when it ends; a shutdown waits for
    /// those closes. The server declares `tools.listChanged` and forwards each session's
    /// [`SessionTools::list_changes`](crate::SessionTools::list_changes). A 2026-07-28 client
    /// has no session: each of its requests opens tools, unless the opener is a
    /// [`PooledTools`](crate::PooledTools), which lends kept ones.
    /// [`exposed_tools`](Self::exposed_tools) is empty: there are no tools outside a session. Over HTTP, a 2026-07-28 call's `Mcp-Param-*`
    /// headers are checked against the opened tool's `x-mcp-header` declarations before it
    /// is dispatched (`400`, JSON-RPC error `-32020` naming the header and the tool).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
    /// use mcp_serve::{OpenError, OpenTools, SessionTools, ToolServer};
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
    /// let server = ToolServer::per_session(Arc::new(Opener)).name("gateway", "1.0.0");
    /// assert!(server.exposed_tools().is_empty());
    /// ```
    pub fn per_session<O: OpenTools>(opener: Arc<O>) -> Self {
        Self::with_source(Source::PerSession(opener), Exposure::read_only())
    }

    fn with_source(source: Source, exposure: Exposure) -> Self {
        Self {
            source,
            exposure,
            name: env!("CARGO_PKG_NAME").to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            max_calls_per_session: Self::DEFAULT_MAX_CALLS_PER_SESSION,
            max_calls: Self::DEFAULT_MAX_CALLS,
            max_request_bytes: Self::DEFAULT_MAX_REQUEST_BYTES,
            changes: None,
        }
    }

    /// The `serverInfo` name and version clients see.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// The instructions clients see in the initialize result.
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// At most this many calls of one downstream session run at once (at least 1); a call
    /// beyond it is answered at once with an `isError` result saying so, and is not run.
    #[must_use]
    pub fn max_calls_per_session(mut self, max: usize) -> Self {
        self.max_calls_per_session = max.max(1);
        self
    }

    /// At most this many calls of all sessions of one endpoint run at once (at least 1),
    /// refused like calls beyond [`max_calls_per_session`](Self::max_calls_per_session).
    /// 2026-07-28 clients over HTTP have no session: each of their requests is bounded by
    /// this limit alone.
    #[must_use]
    pub fn max_calls(mut self, max: usize) -> Self {
        self.max_calls = max.max(1);
        self
    }

    /// The largest request a client may send, in bytes (at least 1 KiB): over HTTP a larger
    /// body is answered `413 Payload Too Large`, over stdio a longer line is dropped unread.
    #[must_use]
    pub fn max_request_bytes(mut self, max: usize) -> Self {
        self.max_request_bytes = max.max(1024);
        self
    }

    pub(crate) fn display_name(&self) -> String {
        self.name.clone()
    }

    pub(crate) fn max_request_bytes_value(&self) -> usize {
        self.max_request_bytes
    }

    /// Announces tool-list changes: each [`ToolListChanges::notify`] sends
    /// `notifications/tools/list_changed` to every session (2025-11-25 sessions, and
    /// 2026-07-28 clients listening with `subscriptions/listen`), and the server declares
    /// `tools.listChanged`.
    #[must_use]
    pub fn list_changes(mut self, changes: ToolListChanges) -> Self {
        self.changes = Some(changes);
        self
    }

    /// The MCP definitions of the tools served now, in the catalog's order (none for
    /// [`per_session`](Self::per_session) tools, which exist only in a session).
    pub fn exposed_tools(&self) -> Vec<Tool> {
        match &self.source {
            Source::Fixed(tools) => tools
                .tools()
                .iter()
                .filter(|t| self.exposure.allows(t))
                .map(mcp_tool)
                .collect(),
            Source::PerSession(_) => Vec::new(),
        }
    }

    /// Whether sessions are told of tool-list changes (declaring `tools.listChanged`).
    pub(crate) fn announces_changes(&self) -> bool {
        self.changes.is_some() || matches!(self.source, Source::PerSession(_))
    }
}
