//! How a session starts: protocol revision 2026-07-28's `server/discover` first, the
//! `initialize` handshake of older revisions when the server does not speak it.
//!
//! rmcp's [`ClientLifecycleMode::Auto`] does the protocol: it sends `server/discover` with the
//! client's metadata, and on a discover result keeps the server's identity and sends every
//! later request with per-request `_meta` (and, over HTTP, the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers); on a JSON-RPC error answering the probe it falls back
//! to `initialize` on the same connection. What a legacy server answers is not always an error,
//! though, nor always prompt (docs/upstream.md#rmcp-discover-probe), so [`serve`] puts a
//! [`DiscoverProbe`] between rmcp and the transport, which turns each of these into the error
//! rmcp falls back on:
//!
//! - an answer that is not a discover result (an empty `{}` from a server that answers every
//!   unknown method, or any other result);
//! - no answer within the probe's bound (a server that ignores requests before `initialize`),
//!   so the fallback comes after that bound rather than rmcp's fixed 10 s.
//!
//! A modern server that was only slow to start then refuses the `initialize` that followed;
//! [`gave_up_on_a_modern_server`] tells that case, which a caller opens again on a new
//! connection with [`serve_discover`].
//!
//! A late answer to the probe is dropped, so it cannot be taken for the answer to
//! `initialize`. Errors that rmcp reads as a modern server's refusal (a missing capability, a
//! header mismatch) still fail the open, and an unsupported version is negotiated by rmcp.
//!
//! A session's whole start (connect, lifecycle, tool listing, and the attempts again on a new
//! connection) is `start`; a server that refused the probe once starts with `initialize` alone
//! in the client's later sessions (`known`).

pub(crate) mod known;
pub(crate) mod start;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::Either;
use mcp_connector::BoxTransport;
use rmcp::model::{
    ClientRequest, ErrorCode, ErrorData, JsonRpcMessage, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, ClientLifecycleMode};

/// How long a server has to answer `server/discover` before the client takes it for a server
/// of an older revision and sends `initialize` (rmcp's own figure; a session caps it at half
/// its connect timeout).
pub const DEFAULT_DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound on the `server/discover` probe: [`DEFAULT_DISCOVER_TIMEOUT`], or half the spec's
/// connect timeout when that is shorter, so a server that ignores the probe still has time for
/// `initialize` and its tool list.
pub(crate) fn discover_timeout(spec: &mcp_config::ServerSpec) -> Duration {
    let default = DEFAULT_DISCOVER_TIMEOUT;
    spec.connect_timeout.map_or(default, |t| default.min(t / 2))
}

/// The message of the error the probe answers in an unanswered server's stead.
const UNANSWERED: &str = "server/discover went unanswered";

/// The revisions the client asks for with `server/discover`, most preferred first.
pub fn discover_versions() -> Vec<ProtocolVersion> {
    vec![ProtocolVersion::V_2026_07_28]
}

/// The revision the client asks for in `initialize` when a server does not discover: the
/// newest one that still has the handshake.
pub const INITIALIZE_VERSION: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// Starts the MCP lifecycle over `transport`: `server/discover`, falling back to `initialize`
/// when the server does not answer it with a discover result within `discover_timeout`.
///
/// The server's identity (`serverInfo`, protocol version, capabilities, instructions) is the
/// peer info of the returned service, whichever path set it.
///
/// # Errors
///
/// rmcp's [`ClientInitializeError`] when neither path opens the session.
pub async fn serve<H: ClientHandler>(
    handler: H,
    transport: BoxTransport,
    discover_timeout: Duration,
) -> Result<RunningService<RoleClient, H>, ClientInitializeError> {
    rmcp::serve_client_with_lifecycle(
        handler,
        DiscoverProbe::new(transport, discover_timeout),
        probe_first(),
    )
    .await
}

/// rmcp's lifecycle of [`serve`]: `server/discover`, falling back to `initialize`.
fn probe_first() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: discover_versions(),
        legacy_version: Some(INITIALIZE_VERSION),
    }
}

/// [`serve`], also telling whether the server itself refused the probe (a JSON-RPC error, or
/// an answer that is not a discover result; not a probe that went unanswered).
pub(crate) async fn serve_noting_refusal<H: ClientHandler>(
    handler: H,
    transport: BoxTransport,
    discover_timeout: Duration,
) -> (
    Result<RunningService<RoleClient, H>, ClientInitializeError>,
    bool,
) {
    let refused = Arc::new(AtomicBool::new(false));
    let mut probe = DiscoverProbe::new(transport, discover_timeout);
    probe.refused = Some(refused.clone());
    let served = rmcp::serve_client_with_lifecycle(handler, probe, probe_first()).await;
    (served, refused.load(Ordering::Acquire))
}

/// Whether `error` is the failure of [`serve`] after a probe that went unanswered and an
/// `initialize` the server refused with a JSON-RPC error: a server of revision 2026-07-28 that
/// was slower to answer than the probe's bound.
pub fn gave_up_on_a_modern_server(error: &ClientInitializeError) -> bool {
    matches!(
        error,
        ClientInitializeError::LegacyFallbackFailed { discover, fallback }
            if matches!(&**discover, ClientInitializeError::JsonRpcError(e) if e.message == UNANSWERED)
                && matches!(&**fallback, ClientInitializeError::JsonRpcError(_))
    )
}

/// Starts the lifecycle of revision 2026-07-28 over `transport`: `server/discover`, waited for
/// as long as the caller's own bound allows, with no fallback.
///
/// # Errors
///
/// rmcp's [`ClientInitializeError`] when discovery fails.
pub async fn serve_discover<H: ClientHandler>(
    handler: H,
    transport: BoxTransport,
) -> Result<RunningService<RoleClient, H>, ClientInitializeError> {
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: discover_versions(),
    };
    rmcp::serve_client_with_lifecycle(handler, transport, lifecycle).await
}

/// Starts the lifecycle of the older revisions over `transport`: `initialize` alone, for a
/// server known not to discover (one that answered `server/discover` but refused what followed
/// until initialised).
///
/// # Errors
///
/// rmcp's [`ClientInitializeError`] when the handshake fails.
pub async fn serve_initialize<H: ClientHandler>(
    handler: H,
    transport: BoxTransport,
) -> Result<RunningService<RoleClient, H>, ClientInitializeError> {
    rmcp::serve_client_with_lifecycle(handler, transport, ClientLifecycleMode::Initialize).await
}

/// A transport that watches the `server/discover` probe (see the [module docs](self)).
pub struct DiscoverProbe {
    inner: BoxTransport,
    timeout: Duration,
    /// The probe awaiting its answer, and when the wait ends.
    pending: Option<(RequestId, Pin<Box<tokio::time::Sleep>>)>,
    /// Probes answered here (an error in the server's stead): a late answer is dropped.
    abandoned: Vec<RequestId>,
    /// Set when the server refused a probe ([`serve_noting_refusal`]).
    refused: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for DiscoverProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoverProbe")
            .field("inner", &self.inner)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl DiscoverProbe {
    /// Watches `inner`'s probes, each bounded by `timeout`.
    pub fn new(inner: BoxTransport, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            pending: None,
            abandoned: Vec::new(),
            refused: None,
        }
    }

    /// Notes that the server refused the probe.
    fn note_refusal(&self) {
        if let Some(refused) = &self.refused {
            refused.store(true, Ordering::Release);
        }
    }

    /// The error rmcp takes for a server without `server/discover`.
    fn legacy(id: RequestId, why: &str) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::error(
            ErrorData::new(ErrorCode::METHOD_NOT_FOUND, why.to_owned(), None),
            Some(id),
        )
    }

    /// What the client sees of `message`: a probe's answer checked, a late one dropped.
    fn screen(&mut self, message: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let answered = match &message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered
            && let Some(index) = self.abandoned.iter().position(|a| a == id)
        {
            self.abandoned.swap_remove(index);
            return None;
        }
        let Some((probe, _)) = &self.pending else {
            return Some(message);
        };
        match message {
            JsonRpcMessage::Response(response) if &response.id == probe => {
                self.pending = None;
                if matches!(response.result, ServerResult::DiscoverResult(_)) {
                    Some(JsonRpcMessage::Response(response))
                } else {
                    self.note_refusal();
                    Some(Self::legacy(
                        response.id,
                        "server/discover was answered with something that is not a discover result",
                    ))
                }
            }
            JsonRpcMessage::Error(error) if error.id.as_ref().is_none_or(|id| id == probe) => {
                self.pending = None;
                self.note_refusal();
                Some(JsonRpcMessage::Error(error))
            }
            other => Some(other),
        }
    }
}

impl Transport<RoleClient> for DiscoverProbe {
    type Error = <BoxTransport as Transport<RoleClient>>::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.pending = Some((
                request.id.clone(),
                Box::pin(tokio::time::sleep(self.timeout)),
            ));
        }
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        // Past the lifecycle's start (no probe awaited, no late answer to drop), what arrives
        // goes to rmcp as it came, through no future of the probe's.
        if self.pending.is_none() && self.abandoned.is_empty() {
            Either::Left(self.inner.receive())
        } else {
            Either::Right(self.screened())
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl DiscoverProbe {
    /// The next message the client sees while a probe is awaited or was abandoned.
    async fn screened(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = match &mut self.pending {
                None => self.inner.receive().await?,
                Some((id, deadline)) => {
                    tokio::select! {
                        message = self.inner.receive() => message?,
                        () = deadline.as_mut() => {
                            let id = id.clone();
                            self.pending = None;
                            self.abandoned.push(id.clone());
                            return Some(Self::legacy(id, UNANSWERED));
                        }
                    }
                }
            };
            if let Some(message) = self.screen(message) {
                return Some(message);
            }
        }
    }
}
