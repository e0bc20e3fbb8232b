//! The rmcp handler of one downstream session ([`Session`]) and what the sessions of one
//! endpoint share ([`Shared`]): tools opened per session, calls bounded and dispatched,
//! list changes forwarded. What is served, and within which bounds, is the
//! [`ToolServer`]'s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agent_core::telemetry::SESSIONS_ACTIVE;
use agent_core::{Principal, ToolCall, ToolDescriptor, ToolError, ToolOutput};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
    GetSkillResult, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    ServerNotification, SubscribeRequestParams, SubscriptionFilter, Tool,
    ToolListChangedNotification, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::SessionRestoreMarker;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::{OnceCell, Semaphore, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument as _;

mod directory;
mod features;
mod pages;
mod relay;
mod skills;

use crate::convert::{call_result, error_result, mcp_tool};
use crate::downstream::{CallGuard, Calls, Downstream};
use crate::drain::{InFlight, InFlightGuard, Lifecycle};
use crate::features::{ResourceUpdates, shown};
use crate::list_changes::ToolListChanges;
use crate::per_session::SessionTools;
use crate::progress;
use crate::relay::Round;
use crate::restore::{Records, Restoring};
use crate::server::{ServedTools, Source, ToolServer};

/// How many listens' subscriptions a session keeps waiting for their listen.
const MAX_PENDING_LISTENS: usize = 16;

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
    /// What the sessions being restored from a shared store were.
    pub(crate) restoring: Arc<Restoring>,
    /// Where a shared session's record is written again (with shared sessions).
    pub(crate) records: std::sync::OnceLock<Arc<dyn Records>>,
    /// Seals the `requestState`s relayed to clients (`handler/relay.rs`).
    seal: crate::relay::RelaySeal,
}

impl Shared {
    /// What every session of an endpoint serving `server` shares.
    pub(crate) fn new(
        server: &ToolServer,
        lifecycle: Lifecycle,
        max_open: Option<usize>,
    ) -> Arc<Self> {
        Arc::new(Self {
            server: server.clone(),
            calls: Arc::new(Semaphore::new(server.max_calls)),
            lifecycle,
            live: Arc::default(),
            open_tools: InFlight::default(),
            max_open,
            restoring: Arc::default(),
            records: std::sync::OnceLock::new(),
            seal: crate::relay::RelaySeal::random(),
        })
    }
}

/// A session's per-session tools, or why they could not be opened; the guard counts them
/// open until they are closed.
type Opened = Result<(Arc<dyn SessionTools>, InFlightGuard), String>;

/// A `subscriptions/listen` accepted and about to be acknowledged.
enum Accepted {
    /// Subscribed to the signal it will forward.
    Subscribed(watch::Receiver<u64>),
    /// Accepted at this moment, before the per-session tools whose signal it will forward
    /// were opened.
    Before(std::time::Instant),
}

/// The rmcp handler of one downstream session.
pub(crate) struct Session {
    shared: Arc<Shared>,
    calls: Arc<Semaphore>,
    /// The change signal, subscribed when the handler is made (or its per-session tools
    /// open), until the session forwards it after `initialize`.
    changes: std::sync::Mutex<Option<watch::Receiver<u64>>>,
    /// Each `subscriptions/listen` accepted (right before rmcp acknowledges it): subscribed to
    /// the signal it will forward, or when it was accepted if that signal does not exist yet;
    /// oldest first, each taken by the listen that follows; at most [`MAX_PENDING_LISTENS`] (a
    /// listen whose acknowledgment failed leaves its own behind).
    listens: std::sync::Mutex<VecDeque<Accepted>>,
    /// Cancelled when the session's handler is dropped (the session ended).
    ended: CancellationToken,
    _ended_on_drop: DropGuard,
    /// Per-session tools, opened once.
    opened: OnceCell<Opened>,
    /// Whether this session counts in [`Shared::live`].
    counted: AtomicBool,
    /// Whether this handler serves one request without a session (its tools are opened for
    /// it alone).
    stateless: AtomicBool,
    /// The client, once a request of it was seen, and its `tools/call` requests in flight.
    peer: std::sync::OnceLock<rmcp::Peer<RoleServer>>,
    calls_in_flight: Calls,
    /// Who the session acts for: the authenticated subject of its first request (none over
    /// stdio or without a subject). Later requests must act for the same one.
    principal: std::sync::OnceLock<Option<Principal>>,
    /// The session's label, once a request named its id (HTTP sessions only).
    label: std::sync::OnceLock<String>,
    /// The tools its per-session tools promoted, as last seen (or as restored).
    promoted: std::sync::Mutex<Vec<String>>,
    /// The resources the session subscribed to, and their updates not yet relayed.
    updates: ResourceUpdates,
    /// Whether the relay of resource updates runs.
    relaying: AtomicBool,
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.counted.load(Ordering::Acquire) {
            self.shared.live.fetch_sub(1, Ordering::AcqRel);
            metrics::gauge!(SESSIONS_ACTIVE).decrement(1.0);
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
    /// The handler of one new session of the endpoint `shared` belongs to.
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        let server = &shared.server;
        let ended = CancellationToken::new();
        Self {
            shared: shared.clone(),
            calls: Arc::new(Semaphore::new(server.max_calls_per_session)),
            // Subscribed now, so a change during the handshake is not missed.
            changes: std::sync::Mutex::new(server.changes.as_ref().map(ToolListChanges::subscribe)),
            listens: std::sync::Mutex::default(),
            ended: ended.clone(),
            _ended_on_drop: ended.drop_guard(),
            opened: OnceCell::new(),
            counted: AtomicBool::new(false),
            stateless: AtomicBool::new(false),
            peer: std::sync::OnceLock::new(),
            calls_in_flight: Calls::default(),
            principal: std::sync::OnceLock::new(),
            label: std::sync::OnceLock::new(),
            promoted: std::sync::Mutex::default(),
            updates: ResourceUpdates::default(),
            relaying: AtomicBool::new(false),
        }
    }

    /// Notes the session's label from the id a request of it names (its header, or rmcp's
    /// restore marker).
    fn note_session(&self, extensions: &rmcp::model::Extensions) {
        if self.label.get().is_some() {
            return;
        }
        let id = extensions
            .get::<SessionRestoreMarker>()
            .map(|marker| marker.id.to_string())
            .or_else(|| {
                extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.headers.get("mcp-session-id"))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            });
        if let Some(id) = id {
            let _ = self.label.set(crate::restore::label(&id));
        }
    }

    /// Notes that this handler serves a request without a session: one over HTTP that names
    /// no session id, is no restored session's, and came without an `initialize` (rmcp makes
    /// a handler for each such request). Not over stdio, where the handler is the session's.
    fn note_stateless(&self, extensions: &rmcp::model::Extensions) {
        if self.counted.load(Ordering::Acquire)
            || extensions.get::<SessionRestoreMarker>().is_some()
        {
            return;
        }
        let Some(parts) = extensions.get::<http::request::Parts>() else {
            return;
        };
        if !parts.headers.contains_key("mcp-session-id") {
            self.stateless.store(true, Ordering::Release);
        }
    }

    /// The promoted tools of the session's per-session tools, written to the session's
    /// shared record when they changed since last seen.
    async fn keep_promoted(&self, served: &Served, context: &RequestContext<RoleServer>) {
        let (Served::Session(tools), Some(records)) = (served, self.shared.records.get()) else {
            return;
        };
        let now = tools.promoted();
        {
            let mut last = self
                .promoted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last == now {
                return;
            }
            last.clone_from(&now);
        }
        let id = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok());
        let (Some(id), Some(initialize)) = (id, context.peer.peer_info()) else {
            return;
        };
        let principal = self.principal.get().cloned().flatten();
        records
            .promoted(id, principal.as_ref(), &initialize, &now)
            .await;
    }

    /// Binds the session to the principal of its first request (the HTTP front puts an
    /// authenticated subject in the request's extensions); a request acting for another one is
    /// refused, so a session id is never a credential for someone else's session.
    fn bind(&self, extensions: &rmcp::model::Extensions) -> Result<(), ErrorData> {
        let principal = extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned();
        if *self.principal.get_or_init(|| principal.clone()) == principal {
            Ok(())
        } else {
            Err(ErrorData::invalid_request(
                "this session was opened for another principal; initialize a session of your own",
                None,
            ))
        }
    }

    /// Binds a session restored from a shared store (rmcp replays its `initialize` with the
    /// request of whoever presented the id) to the principal it was opened for, which the
    /// store's read left in [`Shared::restoring`]; that request is then checked against it
    /// like any other. The marker is rmcp's alone: no client can send it.
    fn bind_restored(&self, marker: &SessionRestoreMarker) -> Result<(), ErrorData> {
        let Some(restored) = self.shared.restoring.take(&marker.id) else {
            return Err(ErrorData::invalid_request(
                "this session cannot be restored here; initialize a new one",
                None,
            ));
        };
        *self
            .promoted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = restored.promoted;
        let principal = restored.principal;
        if *self.principal.get_or_init(|| principal.clone()) == principal {
            Ok(())
        } else {
            Err(ErrorData::invalid_request(
                "this session was opened for another principal; initialize a session of your own",
                None,
            ))
        }
    }

    fn server(&self) -> &ToolServer {
        &self.shared.server
    }

    /// Counts this session among the live ones (once), and in
    /// [`SESSIONS_ACTIVE`] until it drops.
    fn count_live(&self) {
        if !self.counted.swap(true, Ordering::AcqRel) {
            self.shared.live.fetch_add(1, Ordering::AcqRel);
            metrics::gauge!(SESSIONS_ACTIVE).increment(1.0);
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
                let promoted = self
                    .promoted
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let downstream = match self.peer.get() {
                    Some(peer) => Downstream::new(peer.clone(), self.calls_in_flight.clone()),
                    None => Downstream::none(),
                }
                .acting_for(self.principal.get().cloned().flatten())
                .of_session(self.label.get().cloned(), promoted)
                .stateless(self.stateless.load(Ordering::Acquire));
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

    /// The change signal the handler subscribed to when it was made or its per-session
    /// tools opened, if nothing forwards it yet.
    fn take_changes(&self) -> Option<watch::Receiver<u64>> {
        self.changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    fn pending_listens(&self) -> std::sync::MutexGuard<'_, VecDeque<Accepted>> {
        self.listens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes a listen being accepted to the signal it will forward, when that signal
    /// exists already (the server's, or the opened per-session tools'); else notes when it
    /// was accepted.
    fn subscribe_listen(&self) {
        let accepted = match &self.server().changes {
            Some(changes) => Accepted::Subscribed(changes.subscribe()),
            None => match self.served_now() {
                Some(Served::Session(tools)) => match tools.list_changes() {
                    Some(changes) => Accepted::Subscribed(changes.subscribe()),
                    None => return,
                },
                Some(Served::Fixed(_)) => return,
                // Per-session tools not opened yet.
                None => Accepted::Before(std::time::Instant::now()),
            },
        };
        let mut pending = self.pending_listens();
        if pending.len() == MAX_PENDING_LISTENS {
            pending.pop_front();
        }
        pending.push_back(accepted);
    }

    /// Sends `notifications/tools/list_changed` on each change until the session ends.
    fn forward_changes(&self, peer: rmcp::Peer<RoleServer>) {
        let Some(mut rx) = self.take_changes() else {
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

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let server = self.server();
        let mut capabilities = if server.announces_changes() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        // Beyond tools: what the session's tools offer (or may, before they are open).
        let offered = self.offered();
        let more = ServerCapabilities::builder()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_completions()
            .build();
        // The skills extension: its files are read as resources, so it needs `resources`.
        if offered.skills {
            let skills = ServerCapabilities::builder();
            capabilities.extensions = if offered.directory_read {
                skills.enable_skills_with_directory_read()
            } else {
                skills.enable_skills()
            }
            .build()
            .extensions;
        }
        if offered.resources || offered.skills {
            capabilities.resources = more.resources.map(|mut resources| {
                if !offered.subscribe {
                    resources.subscribe = None;
                }
                resources
            });
        }
        if offered.prompts {
            capabilities.prompts = more.prompts;
        }
        if offered.completions {
            capabilities.completions = more.completions;
        }
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
        self.bind(&context.extensions)?;
        self.note_session(&context.extensions);
        self.note_stateless(&context.extensions);
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
        self.bind(&context.extensions)?;
        self.note_session(&context.extensions);
        self.note_stateless(&context.extensions);
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
        // The call's span: the caller's trace (`_meta` or HTTP headers) continues in it.
        let (span, passed) =
            crate::trace_context::call_span(&shown(&name), &context.meta, &context.extensions);
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
        let origin = served.origin(&call);
        // A 2026-07-28 client answers the upstream's input requests itself.
        let features = match &served {
            Served::Session(tools) => tools.features(),
            Served::Fixed(_) => None,
        };
        let relaying = self.relay_round(
            features,
            ("tools/call", &tool.name),
            origin.clone(),
            request.input_responses,
            request.request_state.as_deref(),
            &context,
        )?;
        let round = relaying.as_ref().map(|r| r.round.clone());
        // Requests the tools send the client meanwhile (for this call's upstream) travel on
        // this call's stream, and end with it.
        let _in_flight = CallGuard::new(&self.calls_in_flight, context.id.clone(), origin);
        // A client asking for the call's progress gets what the tool (or its upstream)
        // reports, on this call's stream.
        let dispatch = async {
            match token {
                Some(token) => {
                    progress::relayed(
                        &context.peer,
                        token,
                        relay::dispatch_round(&served, call, round),
                    )
                    .await
                }
                None => relay::dispatch_round(&served, call, round).await,
            }
        };
        // Without a tracer here, the caller's trace context reaches the upstream unchanged.
        let dispatch = async move {
            match passed {
                Some(passed) => agent_core::trace::with_context(passed, dispatch).await,
                None => dispatch.await,
            }
        }
        .instrument(span);
        tokio::select! {
            outcome = dispatch => {
                self.keep_promoted(&served, &context).await;
                match (outcome, &relaying) {
                    (Ok(Round::InputRequired(asked)), Some(relaying)) => {
                        Ok(CallToolResponse::InputRequired(self.seal_asked(relaying, asked)?))
                    }
                    (Ok(Round::InputRequired(_)), None) => Err(ErrorData::internal_error(
                        "the tool asked for input, which this client cannot be asked for",
                        None,
                    )),
                    (Ok(Round::Complete(output)), _) => Ok(call_result(Ok(output)).into()),
                    (Err(e), _) => Ok(call_result(Err(e)).into()),
                }
            }
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
        match context.extensions.get::<SessionRestoreMarker>() {
            Some(marker) => self.bind_restored(marker)?,
            None => self.bind(&context.extensions)?,
        }
        self.note_session(&context.extensions);
        // Counted before the client has its answer, so its next request sees the count.
        self.count_live();
        context.peer.set_peer_info(request.clone());
        let _ = self.peer.set(context.peer);
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.note_session(&context.extensions);
        // Per-session tools open now, so the session's first request finds them ready (and
        // their change signal is subscribed).
        let _ = self.served().await;
        self.forward_changes(context.peer);
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.serve_list_resources(&context).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.serve_list_templates(&context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.serve_read(&request, &context).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.serve_subscribe(&request.uri, &context).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.serve_unsubscribe(&request.uri, &context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.serve_list_prompts(&context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.serve_get_prompt(request, &context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.serve_complete(request, &context).await
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.serve_list_skills(request.and_then(|r| r.cursor), &context)
            .await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.serve_get_skill(&request.uri, &context).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.serve_read_directory(&request.uri, request.cursor.as_deref(), &context)
            .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        if !self.server().announces_changes() {
            return None;
        }
        // rmcp calls this for each listen right before it acknowledges it, and calls `listen`
        // only after: subscribed now, a change the client causes as soon as it sees the
        // acknowledgment is not missed.
        self.subscribe_listen();
        Some(requested.intersection(&SubscriptionFilter::builder().tools_list_changed().build()))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // The tools listened to are those of the request's principal.
        let extensions = &context.request_context().extensions;
        let accepted = self.pending_listens().pop_front();
        self.bind(extensions)?;
        self.note_stateless(extensions);
        let changes = match &self.server().changes {
            Some(changes) => changes.clone(),
            None => match self.served().await {
                Ok(Served::Session(tools)) => match tools.list_changes() {
                    Some(changes) => changes,
                    None => return Ok(()),
                },
                _ => return Ok(()),
            },
        };
        // The receiver subscribed before the acknowledgment (`accepted_subscription_filter`).
        // Per-session tools opened or changed since an acknowledgment that came before them
        // (a request without a session opens them only now) may list what the client has not
        // seen: the listen starts with a notification.
        let mut rx = match accepted {
            Some(Accepted::Subscribed(rx)) => rx,
            Some(Accepted::Before(at)) => {
                let mut rx = changes.subscribe();
                if changes.news_since(at) && context.accepted().tools_list_changed == Some(true) {
                    rx.mark_changed();
                }
                rx
            }
            None => self.take_changes().unwrap_or_else(|| changes.subscribe()),
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
