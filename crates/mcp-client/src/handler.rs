//! The client side of one session: identifies the client, declares what it offers, answers a
//! server's requests for user input through the embedding runtime's [`ElicitationHandler`],
//! and turns server notifications into signals for the runner.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::progress::{Progress, ProgressSink};
use async_trait::async_trait;
use mcp_config::Scrubber;
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

/// The method of the notification a server sends once a URL request's interaction is done.
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
    scrubber: Scrubber,
    /// Bumped on every `notifications/tools/list_changed`.
    tools_changed: watch::Sender<u64>,
    /// The calls in flight whose caller listens to their progress, by the token sent with
    /// each.
    progress: Relays,
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

/// Keeps a call's progress token registered with its session until the call ends.
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
        self.relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
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
                scrubber: Scrubber::default(),
                tools_changed: tx,
                progress: Relays::default(),
            },
            rx,
        )
    }

    /// Replaces `scrubber`'s secrets (a run's: its specs' secrets, and those learned at run
    /// time) in every string of an elicitation request before the handler sees it: a server
    /// cannot make the handler show — or a gateway relay — a secret of the client.
    pub fn with_scrubber(mut self, scrubber: Scrubber) -> Self {
        self.scrubber = scrubber;
        self
    }

    /// The capabilities this client declares: elicitation (form and URL) when a handler is
    /// set, nothing else.
    pub fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation.is_some() {
            let mut elicitation = ElicitationCapability::new();
            elicitation.form = Some(FormElicitationCapability::new());
            elicitation.url = Some(UrlElicitationCapability::new());
            capabilities.elicitation = Some(elicitation);
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
            scrubber: self.scrubber.clone(),
        })
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
        let request = scrub_request(&self.scrubber, request);
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
/// answer reached the caller and its token was dropped).
pub(crate) struct ProgressTap {
    relays: Relays,
    scrubber: Scrubber,
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
            relay(&self.relays, &self.scrubber, &progress.params);
        }
    }
}

/// Passes a server's progress report on to its call's caller: only for a token of a call in
/// flight, only increasing finite progress, its message without the run's secrets or control
/// characters and bounded ([`Progress::bounded`]).
fn relay(relays: &Relays, scrubber: &Scrubber, params: &ProgressNotificationParam) {
    let mut relays = relays.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(relay) = relays.get_mut(&params.progress_token) else {
        return;
    };
    let mut report = Progress::new(params.progress);
    report.total = params.total;
    report.message = params
        .message
        .as_deref()
        .map(|m| scrubber.scrub(m).into_owned());
    let Some(report) = report.bounded(relay.last) else {
        return;
    };
    relay.last = Some(report.progress);
    // Under the lock, so that reports reach the caller in the order they were checked.
    (relay.sink)(report);
}

/// `request` with `scrubber`'s secrets replaced in every string (unchanged if it cannot be
/// read back, which a request just read from JSON always can).
fn scrub_request(scrubber: &Scrubber, request: ElicitRequestParams) -> ElicitRequestParams {
    let Ok(mut value) = serde_json::to_value(&request) else {
        return request;
    };
    let before = value.clone();
    scrubber.scrub_json(&mut value);
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
        let scrubber = Scrubber::new([mcp_config::Secret::new("tok-123456789")]);
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "paste tok-123456789 here",
            "url": "https://example.com/?t=tok-123456789", "elicitationId": "e1",
        }))
        .unwrap();
        let text = serde_json::to_string(&scrub_request(&scrubber, request)).unwrap();
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
}
