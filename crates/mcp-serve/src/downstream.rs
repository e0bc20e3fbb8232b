//! The downstream client of one session, as the tools opened for it can reach it: what it
//! declared, and its elicitation requests (a gateway forwards an upstream server's there).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ProtocolVersion, RequestId, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleServer};

use crate::error::DownstreamError;

/// The `tools/call` requests of one session in flight, oldest first: an elicitation is sent
/// on the stream of one of them.
pub(crate) type CallIds = Arc<Mutex<Vec<RequestId>>>;

/// The downstream client of one session, given to [`OpenTools::open_for`] so the tools opened
/// for the session can ask it for user input (a gateway forwards its upstream servers'
/// `elicitation/create` requests with [`Downstream::elicit`]).
///
/// Only a client of a session (protocol 2025-11-25 and older) that declared the elicitation
/// capability can be asked, and only in the modes it declared (form, URL; a capability naming
/// neither means form). A 2026-07-28 client has no server-to-client requests (its requests
/// are stateless; a server asks for input with an input-required result instead), so it is
/// never asked, and neither is a session without a client ([`Downstream::none`]).
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::Downstream;
/// use rmcp::model::{ElicitRequestParams, ElicitationAction};
///
/// # async fn demo() {
/// let request: ElicitRequestParams = serde_json::from_value(serde_json::json!({
///     "mode": "form", "message": "your name?",
///     "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
/// })).unwrap();
/// // Nobody to ask: declined at once.
/// let downstream = Downstream::none();
/// assert!(!downstream.declares_elicitation() && !downstream.can_elicit(&request));
/// let answer = downstream.elicit(request, Duration::from_secs(30)).await.unwrap();
/// assert_eq!(answer.action, ElicitationAction::Decline);
/// # }
/// ```
///
/// [`OpenTools::open_for`]: crate::OpenTools::open_for
#[derive(Clone)]
pub struct Downstream {
    peer: Option<Peer<RoleServer>>,
    calls: CallIds,
}

impl std::fmt::Debug for Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstream")
            .field("form", &self.accepts(Mode::Form))
            .field("url", &self.accepts(Mode::Url))
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Form,
    Url,
}

impl Downstream {
    /// A downstream client that can be asked nothing: every request is declined.
    pub fn none() -> Self {
        Self {
            peer: None,
            calls: CallIds::default(),
        }
    }

    /// The client behind `peer`; `calls` are its session's calls in flight.
    pub(crate) fn new(peer: Peer<RoleServer>, calls: CallIds) -> Self {
        Self {
            peer: Some(peer),
            calls,
        }
    }

    /// Whether the client can be asked `request`: a client of a session that declared the
    /// elicitation capability in the request's mode.
    pub fn can_elicit(&self, request: &ElicitRequestParams) -> bool {
        match request {
            ElicitRequestParams::FormElicitationParams { .. } => self.accepts(Mode::Form),
            ElicitRequestParams::UrlElicitationParams { .. } => self.accepts(Mode::Url),
            // A mode this server does not know: nothing says the client does.
            _ => false,
        }
    }

    /// Whether the client can be asked anything: it declared the elicitation capability (in
    /// either mode) on a session.
    pub fn declares_elicitation(&self) -> bool {
        self.accepts(Mode::Form) || self.accepts(Mode::Url)
    }

    fn accepts(&self, mode: Mode) -> bool {
        let Some(info) = self.peer.as_ref().and_then(Peer::peer_info) else {
            return false;
        };
        if info.protocol_version >= ProtocolVersion::V_2026_07_28 {
            return false;
        }
        let Some(elicitation) = &info.capabilities.elicitation else {
            return false;
        };
        match mode {
            // A capability naming no mode is form (2025-06-18).
            Mode::Form => elicitation.form.is_some() || elicitation.url.is_none(),
            Mode::Url => elicitation.url.is_some(),
        }
    }

    /// Asks the client `request` (its texts sent as they are: the client shows them as
    /// untrusted) and returns its answer, waiting at most `timeout` (then the request is
    /// cancelled). A request the client cannot be asked ([`can_elicit`](Self::can_elicit)) is
    /// declined at once without being sent. The request travels on the stream of one of the
    /// session's calls in flight (over HTTP), else as the server's own request.
    pub async fn elicit(
        &self,
        request: ElicitRequestParams,
        timeout: Duration,
    ) -> Result<ElicitResult, DownstreamError> {
        let peer = match &self.peer {
            Some(peer) if self.can_elicit(&request) => peer.clone(),
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        let mut message = ElicitRequest::new(request);
        let call = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first()
            .cloned();
        if let Some(call) = call {
            message.extensions.insert(OriginatingRequestId(call));
        }
        // On a task of its own: the caller's task may be another session's request handler,
        // whose request id rmcp would otherwise take for this request's origin.
        let task = tokio::spawn(async move {
            let handle = peer
                .send_request_with_option(
                    ServerRequest::ElicitRequest(message),
                    PeerRequestOptions::with_timeout(timeout),
                )
                .await?;
            handle.await_response().await
        });
        let mut sent = AbortOnDrop(task);
        let answer = match (&mut sent.0).await {
            Ok(answer) => answer,
            Err(_) => return Err(DownstreamError::Closed),
        };
        match answer {
            Ok(ClientResult::ElicitResult(result)) => Ok(result),
            Ok(_) => Err(DownstreamError::Refused {
                reason: "an answer that is not an elicitation result".to_owned(),
            }),
            Err(ServiceError::Timeout { .. }) => Err(DownstreamError::Timeout { after: timeout }),
            Err(ServiceError::McpError(error)) => Err(DownstreamError::Refused {
                reason: clean(&error.message),
            }),
            Err(_) => Err(DownstreamError::Closed),
        }
    }
}

/// A client's text as an error may repeat it: control characters removed, cut.
fn clean(text: &str) -> String {
    let text: String = text.chars().filter(|c| !c.is_control()).collect();
    crate::cut(&text, 256)
}

/// Aborts the task when dropped (the caller gave up): its request is cancelled.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Counts `id` among `calls` until dropped.
pub(crate) struct CallGuard {
    calls: CallIds,
    id: RequestId,
}

impl CallGuard {
    pub(crate) fn new(calls: &CallIds, id: RequestId) -> Self {
        calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(id.clone());
        Self {
            calls: Arc::clone(calls),
            id,
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = calls.iter().position(|id| *id == self.id) {
            calls.remove(at);
        }
    }
}
