//! The downstream client of one session, as the tools opened for it can reach it: what it
//! declared, and its elicitation requests (a gateway forwards an upstream server's there).
//!
//! A URL request's `notifications/elicitation/complete` goes to the client that was sent the
//! request ([`Downstream::complete_from`]); rmcp 3.11 has no type of its own for it, so it
//! travels as a custom notification (docs/upstream.md#rmcp-elicitation-complete).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::Principal;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientResult, CustomNotification,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ProtocolVersion,
    RequestId, ServerNotification, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleServer};

use tokio_util::sync::CancellationToken;

use crate::error::DownstreamError;

/// The `tools/call` requests of one session in flight, oldest first: an elicitation is sent
/// on the stream of one of them.
pub(crate) type Calls = Arc<Mutex<Vec<InFlight>>>;

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
    calls: Calls,
    urls: SentUrls,
    principal: Option<Principal>,
    /// The tools the session had promoted where it was served before.
    promoted: Vec<String>,
    /// The session's label.
    session: Option<String>,
    /// Whether the tools are opened for one request without a session.
    stateless: bool,
}

/// The URL requests sent, newest last: their origin and elicitation id.
type SentUrls = Arc<Mutex<VecDeque<(Option<String>, String)>>>;

/// At most this many URL requests are remembered for their completion.
const MAX_URLS: usize = 64;

/// The notification telling a client a URL request's interaction is over.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

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
            calls: Calls::default(),
            urls: Arc::default(),
            principal: None,
            promoted: Vec::new(),
            session: None,
            stateless: false,
        }
    }

    /// Nobody to ask, acting for `principal`, for stateless requests: what a pool opens the
    /// tools it keeps with, so that they hold nothing of the request that opened them.
    pub(crate) fn detached(principal: Option<Principal>) -> Self {
        Self {
            stateless: true,
            ..Self::none().acting_for(principal)
        }
    }

    /// The client behind `peer`; `calls` are its session's calls in flight.
    pub(crate) fn new(peer: Peer<RoleServer>, calls: Calls) -> Self {
        Self {
            peer: Some(peer),
            calls,
            urls: Arc::default(),
            principal: None,
            promoted: Vec::new(),
            session: None,
            stateless: false,
        }
    }

    /// The same client, `stateless` or not.
    pub(crate) fn stateless(mut self, stateless: bool) -> Self {
        self.stateless = stateless;
        self
    }

    /// The same client, of the session labelled `session`, which had promoted `promoted`.
    pub(crate) fn of_session(mut self, session: Option<String>, promoted: Vec<String>) -> Self {
        self.session = session;
        self.promoted = promoted;
        self
    }

    /// The same client, whose session acts for `principal`.
    pub(crate) fn acting_for(mut self, principal: Option<Principal>) -> Self {
        self.principal = principal;
        self
    }

    /// Who the session acts for: the authenticated subject (a JWT's `sub`) of its first
    /// request, when the endpoint checks tokens and the token names one. A gateway opens the
    /// session's run for it (`mcp_client::OpenOptions::with_principal`).
    ///
    /// ```
    /// assert!(mcp_serve::Downstream::none().principal().is_none());
    /// ```
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// The tools (their ids, in promotion order, as [`SessionTools::promoted`] gave them) the
    /// session had promoted on the replica that served it before this one (a session of a
    /// fleet, restored here from the store it shares): the tools opened for it promote them
    /// again. Empty otherwise.
    ///
    /// ```
    /// assert!(mcp_serve::Downstream::none().promoted().is_empty());
    /// ```
    ///
    /// [`SessionTools::promoted`]: crate::SessionTools::promoted
    pub fn promoted(&self) -> &[String] {
        &self.promoted
    }

    /// A label of the downstream session over HTTP (2025-11-25 and older): the first digits of
    /// a digest of its id, the same on every replica that serves it, never the id itself. A
    /// gateway names the session's history after it. `None` over stdio and for stateless
    /// requests.
    ///
    /// ```
    /// assert!(mcp_serve::Downstream::none().session().is_none());
    /// ```
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Whether the tools are opened for one request of a client without a session, and closed
    /// after it: a 2026-07-28 client over HTTP (each of its `tools/list`, `tools/call` and
    /// `subscriptions/listen` requests is served on its own). False for the client of a
    /// session, over HTTP or stdio, and for [`none`](Self::none).
    ///
    /// ```
    /// assert!(!mcp_serve::Downstream::none().is_stateless());
    /// ```
    pub fn is_stateless(&self) -> bool {
        self.stateless
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

    /// Asks the client `request` and returns its answer: [`elicit_from`](Self::elicit_from)
    /// for a request no call in flight is known to have caused (it rides the newest one).
    pub async fn elicit(
        &self,
        request: ElicitRequestParams,
        timeout: Duration,
    ) -> Result<ElicitResult, DownstreamError> {
        self.send(None, request, timeout).await
    }

    /// Asks the client `request`, which the upstream `origin` sent, and returns its answer,
    /// waiting at most `timeout`.
    ///
    /// Over HTTP the request travels on the stream of the newest call in flight whose
    /// [`SessionTools::origin`](crate::SessionTools::origin) is `origin` (else the newest
    /// call in flight, else as the server's own request), so the client ties it to the call
    /// that caused it. It lasts no longer than that call (when it is `origin`'s or the only
    /// one in flight): when the call ends (answered, failed, cancelled by the client), when
    /// `timeout` passes, or when this future is dropped (the upstream cancelled its own
    /// request), the request is cancelled (`notifications/cancelled` to the client).
    ///
    /// Its texts are cleaned first (the client shows them as untrusted): control characters
    /// other than line feed and tab removed from every string, the message cut to 4 KiB and
    /// every other string to 1 KiB. A request the client cannot be asked
    /// ([`can_elicit`](Self::can_elicit)), and a URL request whose URL is not `http(s)` or
    /// holds control characters, is declined at once without being sent.
    pub async fn elicit_from(
        &self,
        origin: &str,
        request: ElicitRequestParams,
        timeout: Duration,
    ) -> Result<ElicitResult, DownstreamError> {
        self.send(Some(origin), request, timeout).await
    }

    /// Tells the client that the out-of-band interaction of the URL request `elicitation_id`,
    /// which the upstream `origin` sent through [`elicit_from`](Self::elicit_from), is over
    /// (`notifications/elicitation/complete`). Only a request this client was sent from that
    /// origin (among the last 64) is completed, once; returns whether the client was told.
    pub async fn complete_from(&self, origin: &str, elicitation_id: &str) -> bool {
        let Some(peer) = &self.peer else {
            return false;
        };
        {
            let mut urls = self.urls.lock().unwrap_or_else(PoisonError::into_inner);
            let sent = urls
                .iter()
                .position(|(from, id)| from.as_deref() == Some(origin) && id == elicitation_id);
            let Some(at) = sent else {
                return false;
            };
            urls.remove(at);
        }
        let params = serde_json::json!({"elicitationId": elicitation_id});
        let notification = CustomNotification::new(ELICITATION_COMPLETE, Some(params));
        peer.send_notification(ServerNotification::CustomNotification(notification))
            .await
            .is_ok()
    }

    async fn send(
        &self,
        origin: Option<&str>,
        request: ElicitRequestParams,
        timeout: Duration,
    ) -> Result<ElicitResult, DownstreamError> {
        let peer = match &self.peer {
            Some(peer) if self.can_elicit(&request) => peer.clone(),
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        let Some(request) = crate::untrusted::clean_request(request) else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        if let ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } = &request {
            let mut urls = self.urls.lock().unwrap_or_else(PoisonError::into_inner);
            if urls.len() >= MAX_URLS {
                urls.pop_front();
            }
            urls.push_back((origin.map(str::to_owned), elicitation_id.clone()));
        }
        let mut message = ElicitRequest::new(request);
        // Cancelled when the call it rides ends, or when the caller gives up.
        let stop = CancellationToken::new();
        let (carrier, carrier_ended) = pick(&self.calls, origin).unzip();
        if let Some(id) = carrier {
            message.extensions.insert(OriginatingRequestId(id));
        }
        if let Some(call_ended) = carrier_ended.flatten() {
            let stop = stop.clone();
            // Ends with the request (the stop token is cancelled on every way out).
            tokio::spawn(async move {
                tokio::select! {
                    () = call_ended.cancelled() => stop.cancel(),
                    () = stop.cancelled() => {}
                }
            });
        }
        let _stop_on_drop = stop.clone().drop_guard();
        // On a task of its own: the caller's task may be another session's request handler,
        // whose request id rmcp would otherwise take for this request's origin
        // (docs/upstream.md#rmcp-originating-request).
        let task = tokio::spawn(async move {
            let handle = peer
                .send_request_with_option(
                    ServerRequest::ElicitRequest(message),
                    PeerRequestOptions::with_timeout(timeout),
                )
                .await?;
            let (id, peer) = (handle.id.clone(), handle.peer.clone());
            tokio::select! {
                answer = handle.await_response() => answer,
                () = stop.cancelled() => {
                    let notification = CancelledNotification::new(CancelledNotificationParam::new(
                        Some(id),
                        Some("the call that asked has ended".to_owned()),
                    ));
                    let _ = peer.send_notification(notification.into()).await;
                    Err(ServiceError::Cancelled { reason: None })
                }
            }
        });
        let answer = match task.await {
            Ok(answer) => answer,
            Err(_) => return Err(DownstreamError::Closed),
        };
        match answer {
            Ok(ClientResult::ElicitResult(result)) => Ok(result),
            Ok(_) => Err(DownstreamError::Refused {
                reason: "an answer that is not an elicitation result".to_owned(),
            }),
            Err(ServiceError::Timeout { .. }) => Err(DownstreamError::Timeout { after: timeout }),
            Err(ServiceError::Cancelled { .. }) => Err(DownstreamError::CallEnded),
            Err(ServiceError::McpError(error)) => Err(DownstreamError::Refused {
                reason: clean(&error.message),
            }),
            Err(_) => Err(DownstreamError::Closed),
        }
    }
}

/// The call in flight a request from `origin` rides: the newest of `origin`'s, else the
/// newest. Its id, and the token cancelled when it ends if the request is known to be that
/// call's (the call is `origin`'s, or the only one in flight): a request that only rides a
/// call of another upstream outlives it (bounded by its timeout).
fn pick(calls: &Calls, origin: Option<&str>) -> Option<(RequestId, Option<CancellationToken>)> {
    let calls = calls.lock().unwrap_or_else(PoisonError::into_inner);
    let own = origin.and_then(|origin| {
        calls
            .iter()
            .rev()
            .find(|call| call.origin.as_deref() == Some(origin))
    });
    if let Some(call) = own {
        return Some((call.id.clone(), Some(call.ended.clone())));
    }
    let newest = calls.last()?;
    let ended = (calls.len() == 1).then(|| newest.ended.clone());
    Some((newest.id.clone(), ended))
}

/// A client's text as an error may repeat it: control characters removed, cut.
fn clean(text: &str) -> String {
    let text: String = text.chars().filter(|c| !c.is_control()).collect();
    crate::cut(&text, 256)
}

/// One `tools/call` request in flight.
pub(crate) struct InFlight {
    id: RequestId,
    /// The upstream it goes to, when its tools say ([`crate::SessionTools::origin`]).
    origin: Option<String>,
    /// Cancelled when the call ends: the requests riding its stream are cancelled.
    ended: CancellationToken,
}

/// Counts a call among `calls` until dropped.
pub(crate) struct CallGuard {
    calls: Calls,
    id: RequestId,
    ended: CancellationToken,
}

impl CallGuard {
    pub(crate) fn new(calls: &Calls, id: RequestId, origin: Option<String>) -> Self {
        let ended = CancellationToken::new();
        calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(InFlight {
                id: id.clone(),
                origin,
                ended: ended.clone(),
            });
        Self {
            calls: Arc::clone(calls),
            id,
            ended,
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.ended.cancel();
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = calls.iter().position(|call| call.id == self.id) {
            calls.remove(at);
        }
    }
}
