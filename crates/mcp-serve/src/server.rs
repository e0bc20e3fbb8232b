//! The served tools as an MCP server: one handler per downstream session.

use std::sync::Arc;

use agent_core::{ToolCall, ToolCatalog, ToolDispatcher};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, ServerNotification,
    SubscriptionFilter, Tool, ToolListChangedNotification,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::convert::{call_result, error_result, mcp_tool};
use crate::drain::Lifecycle;
use crate::exposure::Exposure;

/// A catalog that can also run its tools: what a [`ToolServer`] serves.
trait ServedTools: ToolCatalog + ToolDispatcher {}
impl<T: ToolCatalog + ToolDispatcher + ?Sized> ServedTools for T {}

/// The longest tool name an error message repeats (a client's text, so it is cut).
const MAX_NAME_SHOWN: usize = 128;

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
    tools: Arc<dyn ServedTools>,
    exposure: Exposure,
    name: String,
    version: String,
    instructions: Option<String>,
    max_calls_per_session: usize,
    max_calls: usize,
    max_request_bytes: usize,
    changes: Option<ToolListChanges>,
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
        Self {
            tools,
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

    /// The MCP definitions of the tools served now, in the catalog's order.
    pub fn exposed_tools(&self) -> Vec<Tool> {
        self.tools
            .tools()
            .iter()
            .filter(|t| self.exposure.allows(t))
            .map(mcp_tool)
            .collect()
    }

    /// The handler of one new session.
    pub(crate) fn session(&self, shared: &Arc<Shared>) -> Session {
        let ended = CancellationToken::new();
        Session {
            shared: shared.clone(),
            calls: Arc::new(Semaphore::new(self.max_calls_per_session)),
            // Subscribed now, so a change during the handshake is not missed.
            changes: std::sync::Mutex::new(self.changes.as_ref().map(ToolListChanges::subscribe)),
            ended: ended.clone(),
            _ended_on_drop: ended.drop_guard(),
        }
    }

    /// What every session of one served endpoint shares.
    pub(crate) fn shared(&self, lifecycle: Lifecycle) -> Arc<Shared> {
        Arc::new(Shared {
            server: self.clone(),
            calls: Arc::new(Semaphore::new(self.max_calls)),
            lifecycle,
        })
    }
}

/// A signal that the served catalog's tool list changed (see [`ToolServer::list_changes`]).
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

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// What the sessions of one endpoint share.
#[derive(Debug)]
pub(crate) struct Shared {
    server: ToolServer,
    /// Calls in flight across every session.
    calls: Arc<Semaphore>,
    pub(crate) lifecycle: Lifecycle,
}

/// The rmcp handler of one downstream session.
pub(crate) struct Session {
    shared: Arc<Shared>,
    calls: Arc<Semaphore>,
    /// The change signal, until the session is initialised and starts forwarding it.
    changes: std::sync::Mutex<Option<watch::Receiver<u64>>>,
    /// Cancelled when the session's handler is dropped (the session ended).
    ended: CancellationToken,
    _ended_on_drop: DropGuard,
}

impl Session {
    fn server(&self) -> &ToolServer {
        &self.shared.server
    }

    fn exposed(&self, name: &str) -> Option<agent_core::ToolDescriptor> {
        let server = self.server();
        server
            .tools
            .tool(name)
            .filter(|t| server.exposure.allows(t))
    }

    /// Sends `notifications/tools/list_changed` on each change until the session ends.
    fn forward_changes(&self, peer: rmcp::Peer<RoleServer>) {
        let taken = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(mut rx) = taken else {
            return;
        };
        let ended = self.ended.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = ended.cancelled() => break,
                    changed = rx.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }
}

/// `name` as an error message may repeat it: cut and escaped.
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(MAX_NAME_SHOWN).collect();
    let more = if cut.len() < name.len() { "…" } else { "" };
    format!("{}{more}", cut.escape_debug())
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let server = self.server();
        let capabilities = if server.changes.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        let info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            server.name.clone(),
            server.version.clone(),
        ));
        match &server.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.server().exposed_tools(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.exposed(name).as_ref().map(mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if self.exposed(&name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", shown(&name)),
                None,
            ));
        }
        if !self.shared.lifecycle.is_serving() {
            return Ok(error_result(format!(
                "the server is shutting down; `{}` was not run",
                shown(&name)
            ))
            .into());
        }
        let Ok(_session_permit) = self.calls.clone().try_acquire_owned() else {
            return Ok(error_result(format!(
                "too many calls in flight on this session (at most {}); `{}` was not run",
                self.server().max_calls_per_session,
                shown(&name)
            ))
            .into());
        };
        let Ok(_server_permit) = self.shared.calls.clone().try_acquire_owned() else {
            return Ok(error_result(format!(
                "too many calls in flight on this server (at most {}); `{}` was not run",
                self.server().max_calls,
                shown(&name)
            ))
            .into());
        };
        let call = ToolCall::new(
            context.id.to_string(),
            name,
            request.arguments.unwrap_or_default(),
        );
        tokio::select! {
            outcome = self.server().tools.dispatch(call) => Ok(call_result(outcome).into()),
            () = context.ct.cancelled() => Err(ErrorData::internal_error("the call was cancelled", None)),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.forward_changes(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.server().changes.as_ref()?;
        Some(requested.intersection(&SubscriptionFilter::builder().tools_list_changed().build()))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let Some(changes) = &self.server().changes else {
            return Ok(());
        };
        let mut rx = changes.subscribe();
        let lifecycle = self.shared.lifecycle.clone();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                // A shutdown ends the subscription gracefully, so its stream is not in flight.
                () = lifecycle.leaving() => return Ok(()),
                changed = rx.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let notification = ServerNotification::ToolListChangedNotification(
                        ToolListChangedNotification::default(),
                    );
                    if context.sink().send(notification).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}
