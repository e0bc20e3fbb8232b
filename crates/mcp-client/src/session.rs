//! One live MCP session: opened (started by [`crate::lifecycle::start`]), listed, called,
//! closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use mcp_catalog::sanitize::Lines;
use mcp_catalog::{ReadRequest, ReadResult, SessionError as CallError, ToolSession};
use mcp_config::{Redactor, ServerSpec};
use mcp_connector::{BoxError, ConnectionHandle, Connectors};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, DEFAULT_MRTR_MAX_ROUNDS, InputRequest,
    InputResponses, JsonObject, RequestParamsMeta, ServerNotification, SubscriptionFilter, Tool,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError, SubscriptionEnd};
use tokio::sync::{Mutex, watch};
use tracing::Instrument;

use crate::error::{ProtocolError, stderr_suffix};
use crate::handler::{ElicitationHandler, SessionHandler};
use crate::last_listing::{LastListing, Listing, Stamp};
use crate::lifecycle::known::KnownLifecycles;
use crate::lifecycle::start::{StartOptions, Started, start_session};
use crate::list::list_all_tools;
use crate::scrub::{scrub_error, scrub_result, scrub_session_error, scrub_text, shown_text};
use crate::timer_anchor::TimerAnchor;
use crate::{ListLimits, SessionError};

/// The longest `serverInfo.name` kept, in bytes.
pub const MAX_SERVER_NAME_BYTES: usize = 256;
/// The longest `serverInfo.version` (and protocol version) kept, in bytes.
pub const MAX_SERVER_VERSION_BYTES: usize = 64;
/// The longest `instructions` kept, in bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 16 * 1024;
/// The longest JSON-RPC error message of a server kept, in bytes.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4 * 1024;

/// What a server said about itself in its initialize result.
///
/// Every text is the server's choice, so it is kept bounded and clean: control characters
/// removed (`instructions` keep `\n` and `\t`), cut to [`MAX_SERVER_NAME_BYTES`],
/// [`MAX_SERVER_VERSION_BYTES`] and [`MAX_INSTRUCTIONS_BYTES`] (a cut text ends with `…`), and
/// the run's known secret values replaced.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ServerIdentity {
    /// `serverInfo.name`, when the server gave one. Policy allowlists match this, not the
    /// configured key.
    pub name: Option<String>,
    /// `serverInfo.version`.
    pub version: Option<String>,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// The server's instructions for the model.
    pub instructions: Option<String>,
    /// The server's capabilities, as JSON.
    pub capabilities: serde_json::Value,
}

impl ServerIdentity {
    /// True when the server declared `capability` (`resources`, `prompts`, `completions`, …)
    /// in its initialize result with a value other than `null`.
    ///
    /// ```
    /// let identity = mcp_client::ServerIdentity::default();
    /// assert!(!identity.declares("resources"));
    /// ```
    pub fn declares(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|v| !v.is_null())
    }
}

/// What every session of a run shares: the bounds on listings, the run's known secrets and
/// who answers a server's requests for user input.
#[derive(Clone, Default)]
pub(crate) struct SessionOptions {
    pub(crate) limits: ListLimits,
    pub(crate) redactor: Redactor,
    pub(crate) elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// Start with `server/discover` (else `initialize`), not `initialize` alone.
    pub(crate) discover: bool,
    /// What the client learned of its servers' lifecycles.
    pub(crate) known: Arc<KnownLifecycles>,
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("limits", &self.limits)
            .field("redactor", &self.redactor)
            .field("elicitation", &self.elicitation.is_some())
            .field("discover", &self.discover)
            .field("known", &self.known)
            .finish()
    }
}

/// A live session with one server.
#[derive(Debug)]
pub struct Session {
    spec: Arc<ServerSpec>,
    peer: Peer<RoleClient>,
    /// Answers the input requests of input-required results.
    handler: SessionHandler,
    /// The negotiated revision has input-required results (2026-07-28 on, the revisions
    /// without `initialize`): a call keeps its parameters for the next round.
    input_required: bool,
    /// The `subscriptions/listen` of a discovered server that announces tool-list changes.
    listener: Option<AbortOnDrop>,
    service: Mutex<Option<RunningService<RoleClient, SessionHandler>>>,
    handle: Box<dyn ConnectionHandle>,
    identity: ServerIdentity,
    tools_changed: watch::Receiver<u64>,
    options: SessionOptions,
    /// Held by the client's session pool (`pool.rs`): [`close`](Self::close) leaves it open.
    pub(crate) shared: std::sync::atomic::AtomicBool,
    /// The skills `mcp_read` loaded, with the files read of them.
    skills: crate::skills::KeptSkills,
    /// The last complete listing of its tools, for [`standing_tools`](Self::standing_tools).
    last_listing: LastListing,
    /// Calls that failed in the transport or timed out (a server gone or hung, say).
    failed_calls: AtomicU64,
    /// Keeps the calls' timeouts from waking the runtime's timer driver.
    anchor: TimerAnchor,
}

impl Session {
    /// Opens a session: connect, initialise, list every tool page, all within `connect_timeout`.
    /// On any failure or expiry, whatever was opened is released (a child process is killed).
    /// Every error's server-chosen text is scrubbed of the run's known secrets.
    pub(crate) async fn open(
        connectors: &Connectors,
        spec: Arc<ServerSpec>,
        connect_timeout: Duration,
        options: SessionOptions,
    ) -> Result<(Self, Listing), SessionError> {
        let span =
            tracing::info_span!("mcp_session", server = %spec.name, transport = %spec.kind());
        let started = std::time::Instant::now();
        let outcome = Self::open_inner(connectors, spec, connect_timeout, options)
            .instrument(span.clone())
            .await;
        let _entered = span.enter();
        match &outcome {
            Ok((session, listing)) => tracing::info!(
                tools = listing.tools.len(),
                protocol = %session.identity.protocol_version,
                duration_ms = started.elapsed().as_millis() as u64,
                "session open"
            ),
            // The error itself reaches the caller; the log only records it (info, not warn,
            // so a command line's default output does not tell it twice).
            Err(e) => tracing::info!(
                duration_ms = started.elapsed().as_millis() as u64,
                error = %agent_core::error_chain(e),
                "session failed to open"
            ),
        }
        outcome
    }

    async fn open_inner(
        connectors: &Connectors,
        spec: Arc<ServerSpec>,
        connect_timeout: Duration,
        options: SessionOptions,
    ) -> Result<(Self, Listing), SessionError> {
        let (handler, tools_changed) = SessionHandler::new(&spec.name, options.elicitation.clone());
        let handler = handler
            .with_redactor(options.redactor.clone())
            .with_roots(&spec.roots);
        // What the first listing is asked for under: nothing heard yet, and a new transport
        // has renewed nothing and failed nothing it went on from.
        let first = Stamp {
            changes: *tools_changed.borrow(),
            renewals: 0,
            failures: 0,
        };
        let asked = std::time::Instant::now();
        let how = StartOptions {
            limits: options.limits,
            discover: options.discover,
            known: &options.known,
        };
        let Started {
            service,
            tools,
            handle,
        } = start_session(connectors, &spec, connect_timeout, how, handler.clone())
            .await
            .map_err(|e| scrub_session_error(&options.redactor, e))?;
        let peer = service.peer().clone();
        let identity = identity_of(&peer, &options.redactor);
        let input_required = peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        let listener =
            listen_for_tool_changes(&peer, &handler, &tools, options.limits, list_timeout(&spec));
        let last_listing = LastListing::default();
        last_listing.keep(&tools, first, asked);
        let session = Self {
            anchor: TimerAnchor::new(spec.call_timeout),
            spec,
            peer,
            handler,
            input_required,
            listener,
            service: Mutex::new(Some(service)),
            handle,
            identity,
            tools_changed,
            options,
            shared: Default::default(),
            skills: Default::default(),
            last_listing,
            failed_calls: AtomicU64::new(0),
        };
        let listing = Listing {
            tools,
            stamp: first,
        };
        Ok((session, listing))
    }

    /// True once the session's connection ended: closed, or its server went away (a child
    /// process that exited, a transport that failed for good). Its calls then fail.
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// The spec this session was opened from.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The configured name of the server.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the server said about itself.
    pub fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    /// The operating-system pid of a child-process server.
    pub fn pid(&self) -> Option<u32> {
        self.handle.pid()
    }

    /// Reports the secrets the session's transport obtains at run time (OAuth tokens), those
    /// of now and those to come, to `redactor` too: a run using this pooled session.
    pub(crate) fn report_secrets_to(&self, redactor: &Redactor) {
        self.handle.report_secrets_to(&redactor.sink());
    }

    /// Recent stderr of a child-process server, with the run's known secrets replaced.
    pub fn diagnostics(&self) -> Option<String> {
        scrub_text(&self.options.redactor, self.handle.diagnostics())
    }

    /// The session's connection to its server, for the requests beyond tools.
    pub(crate) fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// The skills `mcp_read` loaded on this session.
    pub(crate) fn kept_skills(&self) -> &crate::skills::KeptSkills {
        &self.skills
    }

    /// The run's secret engine.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.options.redactor
    }

    /// Where the session delivers `notifications/resources/updated`.
    pub(crate) fn updates(&self) -> &Arc<crate::updates::Updates> {
        self.handler.updates()
    }

    /// The bounds on this session's tool listings.
    pub fn list_limits(&self) -> ListLimits {
        self.options.limits
    }

    /// A receiver that changes whenever the server announces a new tool list.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_changed.clone()
    }

    /// A receiver that changes whenever the transport renewed the protocol session on its own
    /// (see [`ConnectionHandle::renewals`]); `None` for transports that never do.
    pub fn renewals(&self) -> Option<watch::Receiver<u64>> {
        self.handle.renewals()
    }

    /// Lists every tool again, across all pages, within the server's connect timeout and the
    /// session's [`ListLimits`].
    pub async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.listing().await.map(|listing| listing.tools)
    }

    /// [`list_tools`](Self::list_tools), with what the session had heard when it asked.
    async fn listing(&self) -> Result<Listing, SessionError> {
        let timeout = list_timeout(&self.spec);
        let (stamp, asked) = (self.stamp(), std::time::Instant::now());
        let listing = list_all_tools(&self.peer, self.options.limits);
        let outcome = match tokio::time::timeout(timeout, listing).await {
            Ok(Ok(tools)) => {
                self.last_listing.keep(&tools, stamp, asked);
                Ok(Listing { tools, stamp })
            }
            Ok(Err(e)) => Err(e.into_session_error(
                &self.spec.name,
                self.handle.diagnostics(),
                self.handle.failure(),
            )),
            Err(_) => Err(SessionError::ConnectTimeout {
                server: self.spec.name.clone(),
                after: timeout,
                diagnostics: self.handle.diagnostics(),
            }),
        };
        outcome.map_err(|e| scrub_session_error(&self.options.redactor, e))
    }

    /// The tools as last listed, when that listing still stands: the session is open, its
    /// server announces tool-list changes (and, on a revision without `initialize`, listens
    /// for them on a `subscriptions/listen` stream that is still open), none came and the
    /// transport did not renew its session since the listing was asked for, and it is less
    /// than a few seconds old (`LISTING_STANDS_FOR`, 5 s). Otherwise the tools are listed
    /// again ([`list_tools`](Self::list_tools)).
    pub(crate) async fn standing_tools(&self) -> Result<Listing, SessionError> {
        if !self.is_closed()
            && self.announces_changes()
            && let Some(listing) = self
                .last_listing
                .standing(self.stamp(), std::time::Instant::now())
        {
            return Ok(listing);
        }
        self.listing().await
    }

    /// True when the server's tool-list changes reach this session: it declared
    /// `tools.listChanged`, and on a revision without `initialize` the stream it announces
    /// them on is open.
    fn announces_changes(&self) -> bool {
        let declared = self
            .identity
            .capabilities
            .pointer("/tools/listChanged")
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        let heard = if self.input_required {
            self.listener
                .as_ref()
                .is_some_and(|listener| !listener.0.is_finished())
        } else {
            true
        };
        declared && heard
    }

    /// What the session has seen of tool-list changes and session renewals so far.
    fn stamp(&self) -> Stamp {
        Stamp {
            changes: *self.tools_changed.borrow(),
            renewals: self.handle.renewals().map_or(0, |r| *r.borrow()),
            failures: self.handle.failures() + self.failed_calls.load(Ordering::Relaxed),
        }
    }

    /// Calls a tool with the server's call timeout. On expiry the request is abandoned, which
    /// sends `notifications/cancelled` to the server.
    ///
    /// What the server chose is scrubbed of the run's known secrets before it is returned: the
    /// result's texts and structured content, a JSON-RPC error's message (also cut to
    /// [`MAX_ERROR_MESSAGE_BYTES`], without control characters) and a transport failure's text.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, CallError> {
        let span = tracing::info_span!("mcp_call", server = %self.spec.name, tool = %tool);
        let started = std::time::Instant::now();
        let outcome = self
            .call_tool_inner(tool, arguments)
            .instrument(span.clone())
            .await;
        let _entered = span.enter();
        let duration_ms = started.elapsed().as_millis() as u64;
        match &outcome {
            Ok(result) if result.is_error == Some(true) => {
                tracing::info!(duration_ms, outcome = "tool_error", "call finished")
            }
            Ok(_) => tracing::info!(duration_ms, outcome = "ok", "call finished"),
            Err(CallError::Timeout { .. }) => {
                tracing::info!(duration_ms, outcome = "timeout", "call finished")
            }
            Err(_) => tracing::info!(duration_ms, outcome = "failed", "call finished"),
        }
        outcome
    }

    async fn call_tool_inner(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // A caller listening to the call's progress (`agent_core::progress`) gets the server's:
        // the call carries a token of its own, registered while it is in flight.
        let _progress = agent_core::progress::current().map(|sink| {
            let relay = self.handler.relay_progress(sink);
            params.set_progress_token(relay.token());
            relay
        });
        // The caller's trace continues into the server (SEP-414).
        crate::trace_context::inject(&mut params);
        let timeout = self.spec.call_timeout;
        let redactor = &self.options.redactor;
        self.anchor.hold();
        let outcome = match tokio::time::timeout(timeout, self.call_tool_rounds(params)).await {
            Ok(Ok(result)) => {
                scrub_result(redactor, result).map_err(|e| CallError::Transport(Box::new(e)))
            }
            Ok(Err(ServiceError::Timeout { timeout })) => {
                Err(CallError::Timeout { after: timeout })
            }
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Rpc {
                code: e.code.0,
                message: shown_text(redactor, &e.message, MAX_ERROR_MESSAGE_BYTES, Lines::Multi),
            }),
            Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                if let Some(failure) = self.handle.failure() {
                    return Err(CallError::Transport(scrub_error(redactor, failure)));
                }
                match (&e, stderr_suffix(self.diagnostics().as_deref())) {
                    (ServiceError::TransportClosed, suffix) if suffix.is_empty() => {
                        Err(CallError::Closed)
                    }
                    (_, suffix) => Err(CallError::Transport(scrub_error(
                        redactor,
                        self.with_stderr(
                            ProtocolError::of_service(&e, "calling the tool"),
                            &suffix,
                        ),
                    ))),
                }
            }
            Ok(Err(e)) => {
                let suffix = stderr_suffix(self.diagnostics().as_deref());
                Err(CallError::Transport(scrub_error(
                    redactor,
                    self.with_stderr(ProtocolError::of_service(&e, "calling the tool"), &suffix),
                )))
            }
            Err(_) => Err(CallError::Timeout { after: timeout }),
        };
        if matches!(
            outcome,
            Err(CallError::Transport(_) | CallError::Closed | CallError::Timeout { .. })
        ) {
            // What the session knows of the server may no longer hold.
            self.failed_calls.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }

    /// `tools/call`: relayed, in one round on an older revision, or in rounds
    /// ([`call_tool_input_rounds`](Self::call_tool_input_rounds)). The future returned is rmcp's
    /// request boxed once, so what wraps it (timeout, span, the catalog's own box) moves a
    /// pointer, not the request's kilobytes of state.
    fn call_tool_rounds(
        &self,
        params: CallToolRequestParams,
    ) -> BoxFuture<'_, Result<CallToolResult, ServiceError>> {
        // A relaying caller (a gateway) answers the rounds itself (`relay.rs`). Asked from
        // within the call's own future (`call_tool_inner`), which runs inside the relay's
        // task-local scope: called any earlier, no round would be seen.
        if let Some(relayed) = self.call_tool_relayed(&params) {
            return relayed;
        }
        // An older revision has no input-required results: one round, its parameters sent
        // as they are rather than copied for a round that cannot come.
        if !self.input_required {
            return Box::pin(self.peer.call_tool(params));
        }
        Box::pin(self.call_tool_input_rounds(params))
    }

    /// `tools/call`, answering input-required results (SEP-2322) until the server completes
    /// the call: each round's elicitations go to the session's handler, and the retry carries
    /// the answers and the server's `requestState` exactly as sent, under a new request id.
    /// Bounded by rmcp's round cap; a round asking for what this client does not offer
    /// (sampling, roots) fails the call; so does an input-required result over a revision
    /// that has none. rmcp drives the rounds only on the running service, not on the peer
    /// this session calls through (docs/upstream.md#rmcp-mrtr-peer).
    async fn call_tool_input_rounds(
        &self,
        mut params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        for _ in 0..DEFAULT_MRTR_MAX_ROUNDS {
            let round = match self.peer.call_tool_once(params.clone()).await? {
                CallToolResponse::Complete(result) => return Ok(result),
                CallToolResponse::InputRequired(round) => round,
                _ => return Err(ServiceError::UnexpectedResponse),
            };
            let requests = round.input_requests.unwrap_or_default();
            if requests.is_empty() && round.request_state.is_none() {
                return Err(ServiceError::UnexpectedResponse);
            }
            let mut responses = InputResponses::new();
            for (key, request) in requests {
                let InputRequest::Elicitation(request) = request else {
                    return Err(ServiceError::McpError(rmcp::ErrorData::invalid_request(
                        "the server asked for input this client does not offer (only elicitation)",
                        None,
                    )));
                };
                let answer = self.handler.elicit(request.params).await;
                let answer = serde_json::to_value(answer).map_err(|e| {
                    ServiceError::McpError(rmcp::ErrorData::internal_error(e.to_string(), None))
                })?;
                responses.insert(key, answer);
            }
            params.input_responses = (!responses.is_empty()).then_some(responses);
            params.request_state = round.request_state;
        }
        Err(ServiceError::InputRequiredRoundsExceeded {
            max_rounds: DEFAULT_MRTR_MAX_ROUNDS,
        })
    }

    /// Why the transport ended the session, when it said.
    pub(crate) fn transport_failure(&self) -> Option<BoxError> {
        self.handle.failure()
    }

    fn with_stderr(&self, e: ProtocolError, suffix: &str) -> BoxError {
        if suffix.is_empty() {
            Box::new(e)
        } else {
            format!("{e}{suffix}").into()
        }
    }

    /// Closes the session: ends the protocol session (closing stdin or sending HTTP DELETE),
    /// then releases the transport's resources, giving a child `grace` to exit before it is
    /// terminated and killed. Idempotent. A [shared](Self::is_shared) session stays open: its
    /// pool closes it.
    pub async fn close(&self, grace: Duration) {
        if self.is_shared() {
            return;
        }
        if let Some(listener) = &self.listener {
            listener.0.abort();
        }
        let service = self.service.lock().await.take();
        if let Some(service) = service {
            // Bounded: a transport that cannot close cleanly is dropped, which tears it down.
            let _ = tokio::time::timeout(grace, service.cancel()).await;
        }
        self.handle.shutdown(grace).await;
    }
}

/// A task aborted when its owner is dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// On revision 2026-07-28 a server announces tool-list changes only on a `subscriptions/listen`
/// stream: for a discovered server whose capabilities say it announces them, one is opened in
/// the background and each `notifications/tools/list_changed` on it signals the session like
/// the notification of the older revisions. It ends with the session (or when the server ends
/// it); a server that refuses it leaves the session as it was.
///
/// A change made after the session's first listing (`listed`) and before the subscription
/// started is announced on no stream: once the subscription is acknowledged, the tools are
/// listed again (past rmcp's response cache, within `timeout`), and a listing unlike the first
/// — or none — signals a change, which the session's watcher lists and reports. A
/// subscription that fell behind (rmcp ends one whose buffer of notifications filled) is
/// opened again, with a change signalled for what it may have dropped.
fn listen_for_tool_changes(
    peer: &Peer<RoleClient>,
    handler: &SessionHandler,
    listed: &[Tool],
    limits: ListLimits,
    timeout: Duration,
) -> Option<AbortOnDrop> {
    let info = peer.peer_info()?;
    let announces = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if info.protocol_version.has_initialize() || !announces {
        return None;
    }
    let (peer, handler) = (peer.clone(), handler.clone());
    let mut first = Some(by_name(listed.to_vec()));
    Some(AbortOnDrop(tokio::spawn(async move {
        loop {
            let filter = SubscriptionFilter::builder().tools_list_changed().build();
            let Ok(mut subscription) = peer.listen(filter).await else {
                tracing::debug!("the server refused subscriptions/listen; no tool-list changes");
                return;
            };
            // Notifications arriving meanwhile wait in the subscription (up to rmcp's buffer).
            let unchanged = match first.take() {
                Some(first) => {
                    peer.clear_response_cache().await;
                    let listing = list_all_tools(&peer, limits);
                    match tokio::time::timeout(timeout, listing).await {
                        Ok(Ok(tools)) => by_name(tools) == first,
                        _ => false,
                    }
                }
                // Opened again after falling behind.
                None => false,
            };
            if !unchanged {
                handler.tools_changed();
            }
            while let Ok(Some(notification)) = subscription.next().await {
                if matches!(
                    notification,
                    ServerNotification::ToolListChangedNotification(_)
                ) {
                    handler.tools_changed();
                }
            }
            if !matches!(subscription.end(), Some(SubscriptionEnd::Lagged { .. })) {
                return;
            }
        }
    })))
}

/// How long a listing of `spec`'s tools after the session's start may take: its connect
/// timeout.
fn list_timeout(spec: &ServerSpec) -> Duration {
    spec.connect_timeout
        .unwrap_or(mcp_config::DEFAULT_CONNECT_TIMEOUT)
}

/// A tool listing in name order: two listings of the same tools compare equal whatever order
/// the server sent them in (and `serde_json`'s maps compare without regard to key order).
fn by_name(mut tools: Vec<Tool>) -> Vec<Tool> {
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// A server's identity, bounded, cleaned and scrubbed (see [`ServerIdentity`]).
fn identity_of(peer: &Peer<RoleClient>, redactor: &Redactor) -> ServerIdentity {
    let Some(info) = peer.peer_info() else {
        return ServerIdentity::default();
    };
    let text = |s: &str, max: usize, lines: Lines| shown_text(redactor, s, max, lines);
    let mut capabilities = serde_json::to_value(&info.capabilities).unwrap_or_default();
    redactor.scrub_json(&mut capabilities);
    ServerIdentity {
        name: info
            .server_info
            .as_ref()
            .map(|i| text(&i.name, MAX_SERVER_NAME_BYTES, Lines::Single)),
        version: info
            .server_info
            .as_ref()
            .map(|i| text(&i.version, MAX_SERVER_VERSION_BYTES, Lines::Single)),
        protocol_version: text(
            info.protocol_version.as_str(),
            MAX_SERVER_VERSION_BYTES,
            Lines::Single,
        ),
        instructions: info
            .instructions
            .as_deref()
            .map(|i| text(i, MAX_INSTRUCTIONS_BYTES, Lines::Multi)),
        capabilities,
    }
}

#[async_trait]
impl ToolSession for Session {
    async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, CallError> {
        Session::call_tool(self, tool, arguments).await
    }

    /// `mcp_read`: a resource within [`MAX_RESOURCE_BYTES`](crate::MAX_RESOURCE_BYTES), a
    /// prompt with its required arguments checked first, both scrubbed of the run's secrets
    /// ([`read_resource`](Self::read_resource), [`get_prompt`](Self::get_prompt)). The governed
    /// layer decided the read before this runs. A failure's message names the server, the URI
    /// or prompt and the limit it broke.
    async fn read(&self, request: &ReadRequest) -> Result<ReadResult, CallError> {
        let outcome = match request {
            ReadRequest::Resource { uri } => match self.skill_owning(uri).await {
                Ok(None) => self.read_resource(uri).await.map(ReadResult::Contents),
                Ok(Some(skill)) => {
                    return Err(CallError::Refused {
                        message: format!(
                            "`{uri}` is a file of the skill `{skill}`: read it with `skill` and \
                             `file`, which the skill rules and its manifest govern"
                        ),
                    });
                }
                Err(e) => Err(e),
            },
            ReadRequest::Prompt { name, arguments } => self
                .get_prompt(name, arguments.clone())
                .await
                .map(ReadResult::Prompt),
            ReadRequest::SkillFile { skill, file } => {
                if !self.offers_skills() {
                    return Err(CallError::NotOffered { what: "skills" });
                }
                self.skill_file(skill, file).await.map(ReadResult::Contents)
            }
            other => {
                return Err(CallError::NotOffered {
                    what: other.kind().plural(),
                });
            }
        };
        outcome.map_err(|e| match e {
            crate::FeatureError::Rpc { code, message, .. } => CallError::Rpc { code, message },
            crate::FeatureError::Timeout { after, .. } => CallError::Timeout { after },
            other => CallError::Refused {
                message: other.to_string(),
            },
        })
    }
}

#[cfg(test)]
mod future_sizes {
    use super::*;

    /// The size of the future `call` returns, without calling it.
    fn size_of_future<'a, A, Fut, F: Fn(&'a Session, A) -> Fut>(_: F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// A call's future stays within the allocator's small sizes (glibc's per-thread cache
    /// serves up to 1,032 bytes), so the box a caller puts it in is cheap: rmcp's request state
    /// (over 4 KiB) is boxed once, inside, rather than carried by every future around it.
    #[test]
    fn a_calls_future_is_small_around_rmcps_request() {
        let rmcp = size_of_future(|s: &Session, p: CallToolRequestParams| s.peer.call_tool(p));
        let call = size_of_future(|s: &Session, a: JsonObject| s.call_tool("tool", a));
        assert!(
            call <= 1024,
            "Session::call_tool's future: {call} bytes (rmcp's request: {rmcp})"
        );
    }
}
