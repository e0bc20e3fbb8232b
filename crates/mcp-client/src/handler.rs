//! The client side of one session: identifies the client, declares what it offers, answers a
//! server's requests for user input through the embedding runtime's [`ElicitationHandler`],
//! and turns server notifications into signals for the runner.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::progress::{Progress, ProgressSink};
use async_trait::async_trait;
use mcp_config::Redactor;
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, GetMeta, Implementation,
    NumberOrString, ProgressNotificationParam, ProgressToken, RequestParamsMeta,
    UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::Value;
use tokio::sync::watch;

use crate::lifecycle::INITIALIZE_VERSION;

/// What the embedding runtime answers when a server asks the user for input
/// (`elicitation/create`, in form or URL mode, as a request of its own or inside an
/// input-required tool result).
///
/// With one set for a session, the client declares the elicitation capability; without, it
/// declares none and a server that asks anyway is declined. An accepted form answer gets the schema's `default` for each
/// property it leaves out.
#[async_trait]
pub trait ElicitationHandler: Send + Sync + 'static {
    /// Answers `request` from the server configured as `server`. The request's texts are the
    /// server's choice: show them as untrusted. When the server cancels its request (or its
    /// session ends) first, this future is dropped and the server gets nothing.
    async fn elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult;

    /// The server configured as `server` says the out-of-band interaction of its URL request
    /// `elicitation_id` is over (`notifications/elicitation/complete`). The id is the
    /// server's text: at most 256 bytes, without control characters, never trusted to name
    /// a request of another server. Default: nothing.
    async fn completed(&self, server: &str, elicitation_id: &str) {
        let _ = (server, elicitation_id);
    }
}

/// The method of the notification a server sends once a URL request's interaction is done
/// (a custom notification: docs/upstream.md#rmcp-elicitation-complete).
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// Declines every request: what a client without a user to ask answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeclineElicitation;

#[async_trait]
impl ElicitationHandler for DeclineElicitation {
    async fn elicit(&self, _server: &str, _request: ElicitRequestParams) -> ElicitResult {
        ElicitResult::new(ElicitationAction::Decline)
    }
}

/// Handles server-to-client traffic of one session.
#[derive(Clone)]
pub struct SessionHandler {
    server: Arc<str>,
    elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// The run's known secrets, replaced in every request before the handler sees it.
    redactor: Redactor,
    /// Bumped on every `notifications/tools/list_changed`.
    tools_changed: watch::Sender<u64>,
    /// The calls in flight whose caller listens to their progress, by the token sent with
    /// each.
    progress: Relays,
    /// Where `notifications/resources/updated` goes.
    updates: Arc<crate::updates::Updates>,
    /// The roots answered to `roots/list` (the spec's `roots`); none: no roots capability.
    roots: Arc<[String]>,
}

/// The progress tokens of calls in flight, and where each call's progress goes.
type Relays = Arc<Mutex<HashMap<ProgressToken, Relay>>>;

/// Where one call's progress goes, and the last progress passed on (progress must increase).
struct Relay {
    sink: ProgressSink,
    last: Option<f64>,
}

/// Makes every progress token this process sends unique, so that a session shared by runs
/// never passes one call's progress to another's caller.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Keeps a call's progress token registered with its session until the call ends. Every round
/// of an input-required call (SEP-2322) carries the same token: its progress increases over the
/// whole call, as the caller sees one call.
pub(crate) struct ProgressRelay {
    relays: Relays,
    token: ProgressToken,
}

impl ProgressRelay {
    /// The token to send with the call.
    pub(crate) fn token(&self) -> ProgressToken {
        self.token.clone()
    }
}

impl Drop for ProgressRelay {
    fn drop(&mut self) {
        let removed = self
            .relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
        // The caller's sink goes after the lock does.
        drop(removed);
    }
}

impl std::fmt::Debug for SessionHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandler")
            .field("server", &self.server)
            .field("elicitation", &self.elicitation.is_some())
            .finish_non_exhaustive()
    }
}

impl SessionHandler {
    /// The handler of a session with the server configured as `server`, and a receiver that
    /// changes whenever the server announces a new tool list.
    pub fn new(
        server: &str,
        elicitation: Option<Arc<dyn ElicitationHandler>>,
    ) -> (Self, watch::Receiver<u64>) {
        let (tx, rx) = watch::channel(0);
        (
            Self {
                server: server.into(),
                elicitation,
                redactor: Redactor::new(),
                tools_changed: tx,
                progress: Relays::default(),
                updates: Arc::default(),
                roots: Arc::new([]),
            },
            rx,
        )
    }

    /// Replaces `redactor`'s secrets (a run's: its specs' secrets, and those learned at run
    /// time) in every string of an elicitation request before the handler sees it: a server
    /// cannot make the handler show — or a gateway relay — a secret of the client.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Declares the roots capability and answers the server's `roots/list` with `roots`
    /// (the spec's `roots`, `file://` URIs). Without roots the capability is not declared.
    pub fn with_roots(mut self, roots: &[String]) -> Self {
        self.roots = roots.into();
        self
    }

    /// The redactor's learning end: where the transport reports the secrets it obtains.
    pub(crate) fn secret_sink(&self) -> std::sync::Arc<dyn mcp_config::SecretSink> {
        self.redactor.sink()
    }

    /// The capabilities this client declares: elicitation (form and URL) when a handler is
    /// set, roots when [`with_roots`](Self::with_roots) gave some, nothing else.
    pub fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation.is_some() {
            let mut elicitation = ElicitationCapability::new();
            elicitation.form = Some(FormElicitationCapability::new());
            elicitation.url = Some(UrlElicitationCapability::new());
            capabilities.elicitation = Some(elicitation);
        }
        if !self.roots.is_empty() {
            capabilities.roots = Some(rmcp::model::RootsCapabilities::default());
        }
        capabilities
    }

    /// A progress token for a call whose progress goes to `sink`, registered until the
    /// returned relay is dropped.
    pub(crate) fn relay_progress(&self, sink: ProgressSink) -> ProgressRelay {
        let n = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let token = ProgressToken(NumberOrString::String(format!("mcp-agent-{n}").into()));
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), Relay { sink, last: None });
        ProgressRelay {
            relays: self.progress.clone(),
            token,
        }
    }

    /// What the session's transport shows each message (see [`ProgressTap`]).
    pub(crate) fn progress_tap(&self) -> Arc<ProgressTap> {
        Arc::new(ProgressTap {
            relays: self.progress.clone(),
            redactor: self.redactor.clone(),
        })
    }

    /// Where the session delivers `notifications/resources/updated`.
    pub(crate) fn updates(&self) -> &Arc<crate::updates::Updates> {
        &self.updates
    }

    /// Signals a new tool list, as `notifications/tools/list_changed` does.
    pub(crate) fn tools_changed(&self) {
        self.tools_changed.send_modify(|n| *n += 1);
    }

    /// The answer to an elicitation request, asked of the handler (declined without one), an
    /// accepted form answer completed with the schema's defaults.
    pub(crate) async fn elicit(&self, request: ElicitRequestParams) -> ElicitResult {
        let Some(handler) = &self.elicitation else {
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let schema = match &request {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => serde_json::to_value(requested_schema).ok(),
            _ => None,
        };
        let request = scrub_request(&self.redactor, request);
        let mut result = handler.elicit(&self.server, request).await;
        if let (ElicitationAction::Accept, Some(schema)) = (&result.action, schema) {
            result.content = Some(with_defaults(&schema, result.content.take()));
        }
        result
    }
}

/// Relays a server's progress reports to the callers of the session's calls, on the session's
/// transport ([`mcp_connector::Tap`]).
///
/// rmcp gives every request a progress token of its own, which would replace the one a call
/// was registered under: a `tools/call` carrying a token of this handler's in its parameters
/// goes out with that token. A report is relayed as it arrives, in the order sent and before
/// the call's answer (rmcp hands notifications to tasks of their own, which may run after the
/// answer reached the caller and its token was dropped). See docs/upstream.md#rmcp-progress-token
/// and docs/upstream.md#rmcp-notification-tasks.
pub(crate) struct ProgressTap {
    relays: Relays,
    redactor: Redactor,
}

impl mcp_connector::Tap for ProgressTap {
    fn sending(&self, message: &mut rmcp::service::TxJsonRpcMessage<RoleClient>) {
        if let rmcp::model::ClientJsonRpcMessage::Request(request) = message
            && let rmcp::model::ClientRequest::CallToolRequest(call) = &request.request
            && let Some(token) = call.params.progress_token()
            && self
                .relays
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&token)
        {
            request.request.get_meta_mut().set_progress_token(token);
        }
    }

    fn received(&self, message: &rmcp::service::RxJsonRpcMessage<RoleClient>) {
        if let rmcp::model::ServerJsonRpcMessage::Notification(notification) = message
            && let rmcp::model::ServerNotification::ProgressNotification(progress) =
                &notification.notification
        {
            relay(&self.relays, &self.redactor, &progress.params);
        }
    }
}

/// The longest progress message read from a server before its secrets are replaced: far more
/// than is passed on ([`agent_core::progress::MAX_PROGRESS_MESSAGE_BYTES`]), so that no secret
/// is cut in two before the redactor sees it, and a bound on the work a message costs.
const MAX_PROGRESS_MESSAGE_READ: usize = 64 * 1024;

/// Passes a server's progress report on to its call's caller: only for a token of a call in
/// flight, only increasing finite progress, its message without the run's secrets or unsafe
/// characters (controls, bidirectional overrides; removed before the secrets are looked for, so
/// none can hide a secret) and bounded ([`Progress::bounded`]). Runs on the session's receiving
/// loop only, so reports reach the caller in the order sent; the caller's sink is called
/// without the lock, and a sink that panics loses its report, not the session.
fn relay(relays: &Relays, redactor: &Redactor, params: &ProgressNotificationParam) {
    use mcp_catalog::sanitize::{Lines, clean};
    let sink = {
        let mut relays = relays.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(relay) = relays.get_mut(&params.progress_token) else {
            return;
        };
        if !params.progress.is_finite() || relay.last.is_some_and(|p| params.progress <= p) {
            return;
        }
        relay.last = Some(params.progress);
        relay.sink.clone()
    };
    let mut report = Progress::new(params.progress);
    report.total = params.total;
    report.message = params.message.as_deref().map(|m| {
        let safe = clean(m, MAX_PROGRESS_MESSAGE_READ, Lines::Single);
        redactor.scrub(&safe).into_owned()
    });
    let Some(report) = report.bounded(None) else {
        return;
    };
    let delivered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(report))).is_ok();
    if !delivered {
        tracing::warn!("a progress sink panicked; its report was dropped");
    }
}

/// `request` with `redactor`'s secrets replaced in every string (unchanged if it cannot be
/// read back, which a request just read from JSON always can).
fn scrub_request(redactor: &Redactor, request: ElicitRequestParams) -> ElicitRequestParams {
    let Ok(mut value) = serde_json::to_value(&request) else {
        return request;
    };
    let before = value.clone();
    redactor.scrub_json(&mut value);
    if value == before {
        return request;
    }
    serde_json::from_value(value).unwrap_or(request)
}

/// `content` with each property of `schema` it leaves out set to that property's `default`.
fn with_defaults(schema: &Value, content: Option<Value>) -> Value {
    let mut content = match content {
        Some(Value::Object(content)) => content,
        None => serde_json::Map::new(),
        Some(other) => return other,
    };
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(default) = property.get("default")
                && !content.contains_key(name)
            {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    Value::Object(content)
}

impl ClientHandler for SessionHandler {
    fn get_info(&self) -> ClientConfig {
        // For `initialize`, the newest revision that still has the handshake: older servers
        // negotiate down from it. `server/discover` asks for the newer ones (see
        // `crate::lifecycle`).
        ClientConfig::new(
            self.capabilities(),
            Implementation::new("mcp-agent", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(INITIALIZE_VERSION)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        // The server cancelled its request (`notifications/cancelled`, or the session
        // ended): the handler is dropped, so a gateway's request downstream ends too.
        tokio::select! {
            answer = self.elicit(request) => Ok(answer),
            () = context.ct.cancelled() => Ok(ElicitResult::new(ElicitationAction::Cancel)),
        }
    }

    // Roots are deprecated by SEP-2577 but part of revision 2025-11-25, which most servers
    // speak.
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let roots = self.roots.iter().map(rmcp::model::Root::new).collect();
        Ok(rmcp::model::ListRootsResult::new(roots))
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updates.note(&params.uri);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed();
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(handler) = &self.elicitation else {
            return;
        };
        if notification.method != ELICITATION_COMPLETE {
            return;
        }
        let id = notification
            .params
            .as_ref()
            .and_then(|params| params.get("elicitationId"))
            .and_then(Value::as_str);
        // An id that is not a short plain string names no request this client sent on.
        let Some(id) = id.filter(|id| id.len() <= 256 && !id.chars().any(char::is_control)) else {
            return;
        };
        handler.completed(&self.server, id).await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_fill_what_an_accepted_answer_leaves_out() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "plain": {"type": "string"},
        }});
        assert_eq!(
            with_defaults(&schema, Some(json!({"name": "Grace"}))),
            json!({"name": "Grace", "age": 36})
        );
        assert_eq!(
            with_defaults(&schema, None),
            json!({"name": "Ada", "age": 36})
        );
    }

    #[test]
    fn a_request_s_strings_lose_the_run_s_secrets() {
        let redactor = Redactor::new().with_secrets([mcp_config::Secret::new("tok-123456789")]);
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "paste tok-123456789 here",
            "url": "https://example.com/?t=tok-123456789", "elicitationId": "e1",
        }))
        .unwrap();
        let text = serde_json::to_string(&scrub_request(&redactor, request)).unwrap();
        assert!(!text.contains("tok-123456789"), "{text}");
        assert!(text.contains("elicitationId"), "{text}");
    }

    #[tokio::test]
    async fn without_a_handler_nothing_is_declared_and_every_request_declined() {
        let (handler, _) = SessionHandler::new("s", None);
        assert_eq!(handler.capabilities().elicitation, None);
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "name?",
            "requestedSchema": {"type": "object", "properties": {}},
        }))
        .unwrap();
        assert_eq!(
            handler.elicit(request).await.action,
            ElicitationAction::Decline
        );
    }

    /// A `tools/call` as rmcp sends it: `params_token` in its parameters' `_meta`, rmcp's own
    /// token in the request's.
    fn call_message(params_token: Option<ProgressToken>) -> rmcp::model::ClientJsonRpcMessage {
        use rmcp::model::{CallToolRequestParams, ClientRequest, JsonRpcRequest, RequestId};
        let mut params = CallToolRequestParams::new("echo");
        if let Some(token) = params_token {
            params.set_progress_token(token);
        }
        let mut request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        request
            .get_meta_mut()
            .set_progress_token(ProgressToken(NumberOrString::Number(7)));
        rmcp::model::ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            RequestId::Number(1),
            request,
        ))
    }

    fn wire_token(message: &rmcp::model::ClientJsonRpcMessage) -> Value {
        serde_json::to_value(message).unwrap()["params"]["_meta"]["progressToken"].clone()
    }

    fn progress_message(
        token: &ProgressToken,
        progress: f64,
        message: &str,
    ) -> rmcp::service::RxJsonRpcMessage<RoleClient> {
        let mut params = ProgressNotificationParam::new(token.clone(), progress);
        params.message = Some(message.to_owned());
        rmcp::model::ServerJsonRpcMessage::notification(
            rmcp::model::ServerNotification::ProgressNotification(
                rmcp::model::ProgressNotification::new(params),
            ),
        )
    }

    #[test]
    fn the_tap_sends_a_call_s_own_token_and_relays_only_its_reports() {
        use mcp_connector::Tap as _;
        let redactor = Redactor::new().with_secrets([mcp_config::Secret::new("tok-123456789")]);
        let (handler, _changes) = SessionHandler::new("srv", None);
        let handler = handler.with_redactor(redactor);
        let tap = handler.progress_tap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink: ProgressSink = {
            let seen = seen.clone();
            Arc::new(move |p: Progress| seen.lock().unwrap().push(p))
        };
        let relay = handler.relay_progress(sink);
        let ours = relay.token();

        // A call registered here goes out with its own token; others keep rmcp's.
        let mut registered = call_message(Some(ours.clone()));
        tap.sending(&mut registered);
        assert_eq!(
            wire_token(&registered),
            serde_json::to_value(&ours).unwrap()
        );
        for params_token in [
            None,
            Some(ProgressToken(NumberOrString::String("x".into()))),
        ] {
            let mut other = call_message(params_token);
            tap.sending(&mut other);
            assert_eq!(wire_token(&other), json!(7));
        }

        // Reports: only increasing ones for our token, the secret gone even when a control
        // character splits it, nothing for another token.
        let other = ProgressToken(NumberOrString::Number(7));
        tap.received(&progress_message(
            &ours,
            1.0,
            "key tok-1234\u{7}56789 \u{202e}here",
        ));
        tap.received(&progress_message(&other, 2.0, "not ours"));
        tap.received(&progress_message(&ours, 1.0, "again"));
        tap.received(&progress_message(&ours, f64::NAN, "nan"));
        tap.received(&progress_message(&ours, 2.0, "two"));
        let got: Vec<_> = seen.lock().unwrap().drain(..).collect();
        assert_eq!(
            got,
            [
                Progress::new(1.0).with_message(format!("key {} here", mcp_config::REDACTED)),
                Progress::new(2.0).with_message("two"),
            ]
        );

        // Once the call is over, its token relays nothing.
        drop(relay);
        tap.received(&progress_message(&ours, 3.0, "late"));
        assert!(seen.lock().unwrap().is_empty());
    }

    #[test]
    fn a_sink_that_panics_loses_its_report_not_the_session() {
        use mcp_connector::Tap as _;
        let (handler, _changes) = SessionHandler::new("srv", None);
        let tap = handler.progress_tap();
        let relay = handler.relay_progress(Arc::new(|_: Progress| panic!("a broken sink")));
        tap.received(&progress_message(&relay.token(), 1.0, "one"));
        tap.received(&progress_message(&relay.token(), 2.0, "two"));
    }
}
