//! The served tools as an MCP server: one handler per downstream session.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, ServerNotification,
    SubscriptionFilter, Tool, ToolListChangedNotification,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::{OnceCell, Semaphore, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::convert::{call_result, error_result, mcp_tool};
use crate::downstream::{CallGuard, Calls, Downstream};
use crate::drain::{InFlight, InFlightGuard, Lifecycle};
use crate::exposure::Exposure;
use crate::list_changes::ToolListChanges;
use crate::per_session::{OpenTools, SessionTools};
use crate::progress;

/// A catalog that can also run its tools: what a [`ToolServer`] serves.
trait ServedTools: ToolCatalog + ToolDispatcher {}
impl<T: ToolCatalog + ToolDispatcher + ?Sized> ServedTools for T {}

/// Where a server's tools come from.
#[derive(Clone)]
enum Source {
    /// One set of tools for every session, filtered by the exposure.
    Fixed(Arc<dyn ServedTools>),
    /// Tools opened for each session, served whole.
    PerSession(Arc<dyn OpenTools>),
}

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
    source: Source,
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
        Self::with_source(Source::Fixed(tools), exposure)
    }

    /// Serves tools opened for each downstream session by `opener` (a gateway: one upstream
    /// run per session), every tool they list. They are opened when the session is
    /// initialised (or at its first request) and closed when it ends; a shutdown waits for
    /// those closes. The server declares `tools.listChanged` and forwards each session's
    /// [`SessionTools::list_changes`]. [`exposed_tools`](Self::exposed_tools) is empty:
    /// there are no tools outside a session. Over HTTP, a 2026-07-28 call's `Mcp-Param-*`
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

    fn announces_changes(&self) -> bool {
        self.changes.is_some() || matches!(self.source, Source::PerSession(_))
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
            opened: OnceCell::new(),
            counted: AtomicBool::new(false),
            peer: std::sync::OnceLock::new(),
            calls_in_flight: Calls::default(),
        }
    }

    /// What every session of one served endpoint shares.
    pub(crate) fn shared(&self, lifecycle: Lifecycle, max_open: Option<usize>) -> Arc<Shared> {
        Arc::new(Shared {
            server: self.clone(),
            calls: Arc::new(Semaphore::new(self.max_calls)),
            lifecycle,
            live: Arc::default(),
            open_tools: InFlight::default(),
            max_open,
        })
    }
}

/// What the sessions of one endpoint share.
#[derive(Debug)]
pub(crate) struct Shared {
    server: ToolServer,
    /// Calls in flight across every session.
    calls: Arc<Semaphore>,
    pub(crate) lifecycle: Lifecycle,
    /// Initialised sessions not yet ended.
    pub(crate) live: Arc<AtomicUsize>,
    /// Per-session tools opened and not yet closed.
    pub(crate) open_tools: InFlight,
    /// At most this many per-session tools open at once (HTTP `max_sessions`: stateless
    /// requests open tools too).
    max_open: Option<usize>,
}

/// A session's per-session tools, or why they could not be opened; the guard counts them
/// open until they are closed.
type Opened = Result<(Arc<dyn SessionTools>, InFlightGuard), String>;

/// The rmcp handler of one downstream session.
pub(crate) struct Session {
    shared: Arc<Shared>,
    calls: Arc<Semaphore>,
    /// The change signal, until the session is initialised and starts forwarding it.
    changes: std::sync::Mutex<Option<watch::Receiver<u64>>>,
    /// Cancelled when the session's handler is dropped (the session ended).
    ended: CancellationToken,
    _ended_on_drop: DropGuard,
    /// Per-session tools, opened once.
    opened: OnceCell<Opened>,
    /// Whether this session counts in [`Shared::live`].
    counted: AtomicBool,
    /// The client, once a request of it was seen, and its `tools/call` requests in flight.
    peer: std::sync::OnceLock<rmcp::Peer<RoleServer>>,
    calls_in_flight: Calls,
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.counted.load(Ordering::Acquire) {
            self.shared.live.fetch_sub(1, Ordering::AcqRel);
        }
        let Some(Ok((tools, guard))) = self.opened.take() else {
            return;
        };
        // Closed on the runtime; the guard keeps a shutdown waiting until it is done.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tools.close().await;
                drop(guard);
            });
        }
    }
}

/// The tools a session serves now.
enum Served {
    Fixed(Arc<dyn ServedTools>),
    Session(Arc<dyn SessionTools>),
}

impl Served {
    fn tools(&self) -> Vec<ToolDescriptor> {
        match self {
            Self::Fixed(t) => t.tools(),
            Self::Session(t) => t.tools(),
        }
    }

    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        match self {
            Self::Fixed(t) => t.tool(name),
            Self::Session(t) => t.tool(name),
        }
    }

    fn origin(&self, call: &ToolCall) -> Option<String> {
        match self {
            Self::Fixed(_) => None,
            Self::Session(t) => t.origin(call),
        }
    }

    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        match self {
            Self::Fixed(t) => t.dispatch(call).await,
            Self::Session(t) => t.dispatch(call).await,
        }
    }
}

impl Session {
    fn server(&self) -> &ToolServer {
        &self.shared.server
    }

    /// Counts this session among the live ones (once).
    fn count_live(&self) {
        if !self.counted.swap(true, Ordering::AcqRel) {
            self.shared.live.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The session's tools: the fixed ones, or its own, opened on first need.
    async fn served(&self) -> Result<Served, String> {
        let opener = match &self.server().source {
            Source::Fixed(tools) => return Ok(Served::Fixed(tools.clone())),
            Source::PerSession(opener) => opener.clone(),
        };
        let opened = self
            .opened
            .get_or_init(|| async {
                if !self.shared.lifecycle.is_serving() {
                    return Err("the server is shutting down".to_owned());
                }
                if let Some(max) = self.shared.max_open
                    && self.shared.open_tools.count() >= max
                {
                    return Err(format!(
                        "too many sessions: this server allows {max} at once; close one and retry"
                    ));
                }
                let guard = self.shared.open_tools.enter();
                let downstream = match self.peer.get() {
                    Some(peer) => Downstream::new(peer.clone(), self.calls_in_flight.clone()),
                    None => Downstream::none(),
                };
                match opener.open_for(downstream).await {
                    Ok(tools) => {
                        // Subscribed at once, so no change after the open is missed.
                        if let Some(changes) = tools.list_changes() {
                            let mut slot = self
                                .changes
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                            if slot.is_none() {
                                *slot = Some(changes.subscribe());
                            }
                        }
                        Ok((tools, guard))
                    }
                    Err(e) => Err(crate::cut(&agent_core::error_chain(&*e), 2048)),
                }
            })
            .await;
        match opened {
            Ok((tools, _)) => Ok(Served::Session(tools.clone())),
            Err(reason) => Err(reason.clone()),
        }
    }

    /// The tools served now, without waiting for per-session tools to open.
    fn served_now(&self) -> Option<Served> {
        match &self.server().source {
            Source::Fixed(tools) => Some(Served::Fixed(tools.clone())),
            Source::PerSession(_) => match self.opened.get()? {
                Ok((tools, _)) => Some(Served::Session(tools.clone())),
                Err(_) => None,
            },
        }
    }

    fn admits(&self, tool: &ToolDescriptor) -> bool {
        match &self.server().source {
            Source::Fixed(_) => self.server().exposure.allows(tool),
            Source::PerSession(_) => true,
        }
    }

    fn exposed(&self, served: &Served, name: &str) -> Option<ToolDescriptor> {
        served.tool(name).filter(|t| self.admits(t))
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
        let capabilities = if server.announces_changes() {
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let _ = self.peer.set(context.peer);
        let served = self.served().await.map_err(|reason| {
            ErrorData::internal_error(format!("the tools could not be opened: {reason}"), None)
        })?;
        let tools = served
            .tools()
            .iter()
            .filter(|t| self.admits(t))
            .map(mcp_tool)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let served = self.served_now()?;
        self.exposed(&served, name).as_ref().map(mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // rmcp keeps the request's `_meta` (its progress token included) in the context.
        let token = context.meta.get_progress_token();
        let _ = self.peer.set(context.peer.clone());
        let served = match self.served().await {
            Ok(served) => served,
            Err(reason) => {
                return Ok(error_result(format!(
                    "the tools could not be opened: {reason}; `{}` was not run",
                    shown(&name)
                ))
                .into());
            }
        };
        let Some(tool) = self.exposed(&served, &name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", shown(&name)),
                None,
            ));
        };
        // Per-session tools are known only now: their `Mcp-Param-*` headers are checked here
        // (a fixed catalog's were checked by the HTTP front already).
        crate::param_headers::check_call(&tool, request.arguments.as_ref(), &context.extensions)?;
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
        // Requests the tools send the client meanwhile (for this call's upstream) travel on
        // this call's stream, and end with it.
        let _in_flight = CallGuard::new(
            &self.calls_in_flight,
            context.id.clone(),
            served.origin(&call),
        );
        // A client asking for the call's progress gets what the tool (or its upstream)
        // reports, on this call's stream.
        let dispatch = async {
            match token {
                Some(token) => progress::relayed(&context.peer, token, served.dispatch(call)).await,
                None => served.dispatch(call).await,
            }
        };
        tokio::select! {
            outcome = dispatch => Ok(call_result(outcome).into()),
            () = context.ct.cancelled() => Err(ErrorData::internal_error("the call was cancelled", None)),
            // A shutdown whose drain timeout ran out answers the call instead of dropping it.
            () = self.shared.lifecycle.cut_off() => Err(ErrorData::internal_error(
                format!("the server shut down before `{}` finished (drain timeout)", shown(&tool.name)),
                None,
            )),
        }
    }

    /// rmcp reads a request of a known method whose params do not fit it (`tools/call`
    /// with `arguments` that are no object) as a custom one: it is answered -32602, not
    /// "method not found" (docs/upstream.md#rmcp-unfit-params).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(
            crate::message::unfit_params(&request.method, request.params.as_ref()).unwrap_or_else(
                || ErrorData::new(ErrorCode::METHOD_NOT_FOUND, shown(&request.method), None),
            ),
        )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Counted before the client has its answer, so its next request sees the count.
        self.count_live();
        context.peer.set_peer_info(request.clone());
        let _ = self.peer.set(context.peer);
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Per-session tools open now, so the session's first request finds them ready (and
        // their change signal is subscribed).
        let _ = self.served().await;
        self.forward_changes(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        if !self.server().announces_changes() {
            return None;
        }
        Some(requested.intersection(&SubscriptionFilter::builder().tools_list_changed().build()))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut rx = match &self.server().changes {
            Some(changes) => changes.subscribe(),
            None => match self.served().await {
                Ok(Served::Session(tools)) => match tools.list_changes() {
                    Some(changes) => changes.subscribe(),
                    None => return Ok(()),
                },
                _ => return Ok(()),
            },
        };
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
