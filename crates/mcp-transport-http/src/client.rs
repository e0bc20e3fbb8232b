//! rmcp's `StreamableHttpClient` on a pooled hyper-util client with rustls.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcp_auth::{AuthProvider, Credentials, OnUnauthorized};
use mcp_config::Secret;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcMessage, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use tokio::sync::watch;

use crate::body::{ReadError, content_length, read_bounded};
use crate::cause::{Cause, reason};
use crate::error::HttpError;
use crate::inbound::{Inbound, Secrets};
use crate::param_headers::ToolHeaders;
use crate::resolve::TcpConnect;
use crate::sse::bounded_sse;

/// A pooled hyper client the sessions of a connector share.
pub(crate) type Pool =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<TcpConnect>, Full<Bytes>>;

type Error = StreamableHttpError<HttpError>;

mod answer;
mod event_stream;
mod headers;

use self::event_stream::EventStreamGate;
use self::headers::{InvalidHeader, header_text, is_media_type};

/// The HTTP client of one server's session: rmcp's [`StreamableHttpClient`] over a pooled
/// hyper-util client with rustls.
///
/// Built by [`HttpConnector::client`](crate::HttpConnector::client). Every request carries
/// the credentials of its [`AuthProvider`] (asked anew for each request; the spec's static
/// headers come first in that provider), then rmcp's protocol headers (`Mcp-Session-Id`, `MCP-Protocol-Version`,
/// `Last-Event-ID`). A `401` asks the provider once and, on
/// [`OnUnauthorized::Retry`], resends the request once. Response bodies are bounded: JSON by
/// the transport's `max_json_response_size`, SSE per event by `max_sse_event_size`, and
/// nesting by [`MAX_JSON_DEPTH`](crate::MAX_JSON_DEPTH). Every credential value sent (the
/// spec's secrets, each header the auth hook gave) is replaced by `[REDACTED]` in whatever
/// the server answers — messages, events, error texts — before rmcp or an error sees it.
///
/// `Debug` shows the server and the auth hook's `Debug` (header names), never a header value.
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    server: Arc<str>,
    /// Scrubbing and depth checks of what the server sends.
    inbound: Inbound,
    /// The pool's TCP connect timeout, to name it when it expires.
    connect_timeout: Duration,
    pool: Pool,
    auth: Arc<dyn AuthProvider>,
    default_limits: StreamableHttpResponseLimits,
    initializations: AtomicUsize,
    /// Completed re-initialisations of the session.
    renewals: watch::Sender<u64>,
    /// The last error handed to rmcp.
    last_failure: std::sync::Mutex<Option<std::sync::Arc<HttpError>>>,
    /// How many failures were recorded (see [`HttpClient::failures`]).
    failures: AtomicU64,
    /// The `x-mcp-header` declarations of the tools listed so far.
    tool_headers: Arc<ToolHeaders>,
    /// Requests wait for the standalone GET stream after the handshake.
    event_stream: EventStreamGate,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("server", &self.inner.server)
            .field("auth", &self.inner.auth)
            .field("limits", &self.inner.default_limits)
            .finish_non_exhaustive()
    }
}

/// One request, ready to be built again for a retry with fresh credentials.
struct Template {
    method: Method,
    uri: Arc<str>,
    /// Protocol headers; they win over static headers and credentials.
    headers: HeaderMap,
    body: Bytes,
}

impl HttpClient {
    /// A client for `server`; `secrets` are the spec's static secret values (scrubbed from
    /// everything the server sends, as are the credentials the auth hook gives). After the
    /// handshake, requests wait up to `event_stream_wait` for the standalone GET stream.
    pub(crate) fn new(
        server: &str,
        pool: Pool,
        auth: Arc<dyn AuthProvider>,
        default_limits: StreamableHttpResponseLimits,
        secrets: Vec<Secret>,
        connect_timeout: Duration,
        event_stream_wait: Duration,
    ) -> Self {
        let server: Arc<str> = Arc::from(server);
        Self {
            inner: Arc::new(Inner {
                inbound: Inbound {
                    server: server.clone(),
                    secrets: Arc::new(Secrets::new(secrets)),
                },
                server,
                connect_timeout,
                pool,
                auth,
                default_limits,
                initializations: AtomicUsize::new(0),
                renewals: watch::Sender::new(0),
                last_failure: std::sync::Mutex::new(None),
                failures: AtomicU64::new(0),
                tool_headers: Arc::default(),
                event_stream: EventStreamGate::new(event_stream_wait),
            }),
        }
    }

    /// The server this client talks to.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// How many `initialize` requests this client has sent: 1 after the handshake, one more
    /// for each transparent re-initialisation after an HTTP 404.
    pub fn initializations(&self) -> usize {
        self.inner.initializations.load(Ordering::Relaxed)
    }

    /// A receiver of the number of completed re-initialisations: it changes each time a
    /// re-initialisation after HTTP 404 completes (the server accepted the replayed
    /// `notifications/initialized`), before the requests that failed with 404 are resent.
    /// Notifications of the old session (`tools/list_changed` among them) may have been lost,
    /// so a client re-lists what it caches when it changes.
    pub fn renewals(&self) -> watch::Receiver<u64> {
        self.inner.renewals.subscribe()
    }

    /// Reports the secrets the auth hook obtains at run time (OAuth tokens) to `sink`: see
    /// [`AuthProvider::report_secrets_to`].
    pub fn report_secrets_to(&self, sink: &Arc<dyn mcp_config::SecretSink>) {
        self.inner.auth.report_secrets_to(sink);
    }

    fn server_name(&self) -> String {
        self.inner.server.to_string()
    }

    /// The error handed to rmcp, recorded as the session's last failure first: rmcp reports a
    /// failed request with its own wrappers, so the orchestration reads the cause from the
    /// connection handle instead (docs/upstream.md#rmcp-error-source).
    fn client_error(&self, error: HttpError) -> Error {
        StreamableHttpError::Client(HttpError::Recorded(self.record(error)))
    }

    /// Records `error` as the session's last failure (rmcp gets its own error for it).
    fn record(&self, error: HttpError) -> std::sync::Arc<HttpError> {
        let error = std::sync::Arc::new(error);
        self.inner.failures.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut last) = self.inner.last_failure.lock() {
            *last = Some(error.clone());
        }
        error
    }

    /// How many of this session's requests failed so far.
    pub(crate) fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// The last error of this session's requests, if any failed.
    pub(crate) fn last_failure(&self) -> Option<std::sync::Arc<HttpError>> {
        self.inner.last_failure.lock().ok().and_then(|l| l.clone())
    }

    /// The auth hook's credentials for `template` (its method and URL: a DPoP proof names
    /// them).
    async fn credentials(&self, template: &Template) -> Result<Credentials, Error> {
        self.inner
            .auth
            .credentials_for(&template.method, &template.uri)
            .await
            .map_err(|error| self.auth_error(error))
    }

    fn auth_error(&self, error: mcp_auth::AuthError) -> Error {
        self.client_error(HttpError::Auth {
            server: self.server_name(),
            error,
        })
    }

    /// Sends `template` with fresh credentials; the hook sees the response's headers first.
    /// True with the response when the hook learned something worth a resend (a new DPoP
    /// nonce).
    async fn attempt(
        &self,
        template: &Template,
    ) -> Result<(Credentials, Response<Incoming>, bool), Error> {
        let credentials = self.credentials(template).await?;
        let response = self.execute(self.build(template, &credentials)?).await?;
        let learned = self
            .inner
            .auth
            .observe_response(&template.uri, response.headers());
        Ok((credentials, response, learned))
    }

    fn build(
        &self,
        template: &Template,
        credentials: &Credentials,
    ) -> Result<Request<Full<Bytes>>, Error> {
        let mut request = Request::builder()
            .method(template.method.clone())
            .uri(template.uri.as_ref())
            .body(Full::new(template.body.clone()))
            .map_err(|source| {
                self.client_error(HttpError::BuildRequest {
                    server: self.server_name(),
                    source,
                })
            })?;
        let headers = request.headers_mut();
        credentials.apply_to(headers);
        for (name, value) in &template.headers {
            headers.insert(name.clone(), value.clone());
        }
        // Before it is sent: an answer echoing it is scrubbed.
        self.inner.inbound.secrets.record(headers);
        Ok(request)
    }

    async fn execute(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, Error> {
        let uri = request.uri().clone();
        self.inner.pool.request(request).await.map_err(|error| {
            let cause = Cause::of(&error, &uri, self.inner.connect_timeout);
            self.client_error(cause.for_server(&self.inner.server))
        })
    }

    /// Server-chosen text for an error, with the credentials scrubbed.
    fn scrubbed(&self, text: &str) -> String {
        self.inner.inbound.text(text)
    }

    /// Sends `template` with the provider's credentials. On 401: asks the provider once and,
    /// if it says so, resends once with fresh credentials. A final 401 is
    /// [`StreamableHttpError::AuthRequired`] (whose challenge may be empty).
    ///
    /// A 401 `use_dpop_nonce` (RFC 9449 §9) to a request with a DPoP proof, whose
    /// `DPoP-Nonce` the hook had not seen, is resent once more with the nonce; asked again, the
    /// request fails with [`AuthError::Dpop`](mcp_auth::AuthError::Dpop).
    async fn send(&self, template: &Template) -> Result<Response<Incoming>, Error> {
        let mut nonce_retry = true;
        let mut auth_retry = true;
        loop {
            let (credentials, response, learned) = self.attempt(template).await?;
            if response.status() == StatusCode::FORBIDDEN && auth_retry {
                return self.after_forbidden(template, &credentials, response).await;
            }
            if response.status() != StatusCode::UNAUTHORIZED {
                return Ok(response);
            }
            let challenge = header_text(response.headers(), &WWW_AUTHENTICATE);
            // The body of a 401 is not needed; dropping it only costs the connection's reuse.
            drop(response);
            if credentials.get("dpop").is_some() && asks_for_nonce(challenge.as_deref()) {
                if nonce_retry && learned {
                    nonce_retry = false;
                    tracing::debug!(server = %self.inner.server, "HTTP 401 use_dpop_nonce: retrying with the server's DPoP nonce");
                    continue;
                }
                return Err(self.auth_error(mcp_auth::AuthError::Dpop {
                    server: self.server_name(),
                    reason: "the server asked for a new DPoP nonce again (`use_dpop_nonce`) after a retry with its nonce; stopped".to_owned(),
                }));
            }
            if !auth_retry {
                return Err(self.auth_required(challenge));
            }
            auth_retry = false;
            let decision = self
                .inner
                .auth
                .on_unauthorized(&credentials, challenge.as_deref())
                .await
                .map_err(|error| self.auth_error(error))?;
            if decision != OnUnauthorized::Retry {
                return Err(self.auth_required(challenge));
            }
            tracing::debug!(server = %self.inner.server, "HTTP 401: retrying once with fresh credentials");
        }
    }

    /// A 403 whose challenge says `insufficient_scope`: the provider may get a token with more
    /// scope ([`AuthProvider::on_insufficient_scope`](mcp_auth::AuthProvider::on_insufficient_scope)),
    /// then the request is resent once. Any other 403, or a provider that cannot, is returned
    /// as it is (the caller reports it).
    async fn after_forbidden(
        &self,
        template: &Template,
        rejected: &mcp_auth::Credentials,
        response: Response<Incoming>,
    ) -> Result<Response<Incoming>, Error> {
        let Some(challenge) = header_text(response.headers(), &WWW_AUTHENTICATE).filter(|c| {
            mcp_auth::Challenge::parse(c).error.as_deref() == Some("insufficient_scope")
        }) else {
            return Ok(response);
        };
        let decision = self
            .inner
            .auth
            .on_insufficient_scope(rejected, &challenge)
            .await
            .map_err(|error| {
                self.client_error(HttpError::Auth {
                    server: self.server_name(),
                    error,
                })
            })?;
        if decision != OnUnauthorized::Retry {
            return Ok(response);
        }
        drop(response);
        tracing::debug!(server = %self.inner.server, "HTTP 403 insufficient_scope: retrying once with more scope");
        Ok(self.attempt(template).await?.1)
    }

    /// A JSON body as a message (scrubbed, depth-checked).
    fn message(&self, body: &[u8]) -> Result<ServerJsonRpcMessage, Error> {
        self.inner
            .inbound
            .message(body)
            .map_err(StreamableHttpError::Client)
    }

    /// Reads a whole body of at most `max` bytes; a larger body is an error, not a buffer.
    async fn read_bounded(&self, response: Response<Incoming>, max: usize) -> Result<Bytes, Error> {
        let (parts, body) = response.into_parts();
        read_bounded(&parts.headers, body, max)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge { declared } => self.client_error(HttpError::BodyTooLarge {
                    server: self.server_name(),
                    size: declared,
                    limit: max,
                }),
                ReadError::Body(source) => self.client_error(HttpError::Body {
                    server: self.server_name(),
                    reason: reason(source.as_ref()),
                }),
            })
    }

    /// A `notifications/initialized` accepted by the server: a handshake completed. One
    /// after a re-initialisation is a renewal of the session. With a session, rmcp opens its
    /// standalone GET stream next: requests wait for it from now on
    /// (docs/upstream.md#rmcp-get-stream-order).
    fn handshake_completed(&self, with_session: bool) {
        if with_session {
            self.inner.event_stream.handshake_completed();
        }
        if self.initializations() > 1 {
            self.inner.renewals.send_modify(|renewals| *renewals += 1);
        }
    }
}

/// A challenge whose `error` is `use_dpop_nonce`.
fn asks_for_nonce(challenge: Option<&str>) -> bool {
    challenge
        .is_some_and(|c| mcp_auth::Challenge::parse(c).error.as_deref() == Some("use_dpop_nonce"))
}

fn protocol_headers(
    accept: &'static str,
    custom_headers: HashMap<HeaderName, HeaderValue>,
    session_id: Option<&str>,
    last_event_id: Option<&str>,
    auth_header: Option<String>,
) -> Result<HeaderMap, InvalidHeader> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    for (name, value) in custom_headers {
        headers.insert(name, value);
    }
    if let Some(session_id) = session_id {
        headers.insert(
            HeaderName::from_static("mcp-session-id"),
            HeaderValue::try_from(session_id).map_err(|_| InvalidHeader(HEADER_SESSION_ID))?,
        );
    }
    if let Some(last_event_id) = last_event_id {
        headers.insert(
            HeaderName::from_static("last-event-id"),
            HeaderValue::try_from(last_event_id)
                .map_err(|_| InvalidHeader(HEADER_LAST_EVENT_ID))?,
        );
    }
    if let Some(token) = auth_header {
        let mut value = HeaderValue::try_from(format!("Bearer {token}"))
            .map_err(|_| InvalidHeader("Authorization"))?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(headers)
}

impl HttpClient {
    fn limits(&self) -> StreamableHttpResponseLimits {
        self.inner.default_limits
    }
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_)))
}

fn is_initialized(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Notification(n) if matches!(n.notification, ClientNotification::InitializedNotification(_)))
}

/// A request that may need the standalone GET stream open first: any but the handshake's.
fn waits_for_event_stream(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(_)) && !is_initialize(message)
}

fn awaits_no_response(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Notification(_) | JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)
    )
}

impl StreamableHttpClient for HttpClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            self.limits(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = self.limits();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        if waits_for_event_stream(&message) {
            self.inner.event_stream.wait(&self.inner.server).await;
        }
        let body = serde_json::to_vec(&message).map_err(|source| {
            self.client_error(HttpError::Encode {
                server: self.server_name(),
                source,
            })
        })?;
        let mut headers = protocol_headers(
            "application/json, text/event-stream",
            custom_headers,
            session_id.as_deref(),
            None,
            auth_header,
        )
        .map_err(|e| self.invalid_header(e))?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON_MIME_TYPE));
        self.inner.tool_headers.mirror(&message, &mut headers);
        crate::trace_headers::mirror(&message, &mut headers);
        if is_initialize(&message) {
            self.inner.initializations.fetch_add(1, Ordering::Relaxed);
        }
        let template = Template {
            method: Method::POST,
            uri,
            headers,
            body: Bytes::from(body),
        };
        let response = self.send(&template).await?;
        let status = response.status();
        let session_was_attached = session_id.is_some();
        if status.is_success() && is_initialized(&message) {
            self.handshake_completed(session_was_attached);
        }

        if status == StatusCode::FORBIDDEN
            && let Some(challenge) = header_text(response.headers(), &WWW_AUTHENTICATE)
        {
            return Err(self.insufficient_scope(&challenge));
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_was_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return self
                .failed_post(&message, session_was_attached, response, &limits)
                .await;
        }

        let new_session_id = header_text(
            response.headers(),
            &HeaderName::from_static("mcp-session-id"),
        );
        // Some servers answer a notification with an empty 200 instead of 202.
        if awaits_no_response(&message) && content_length(response.headers()) == Some(0) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if is_media_type(response.headers(), EVENT_STREAM_MIME_TYPE) {
            let request = match &message {
                JsonRpcMessage::Request(request) => Some(&request.id),
                _ => None,
            };
            let mut events = bounded_sse(
                response.into_body().into_data_stream(),
                limits.max_sse_event_size,
                self.inner.inbound.clone(),
                request,
            );
            if ToolHeaders::is_listing(&message) {
                let known = self.inner.tool_headers.clone();
                events = events
                    .inspect(move |event| {
                        if let Ok(event) = event {
                            known.record_event(event);
                        }
                    })
                    .boxed();
            }
            return Ok(StreamableHttpPostResponse::Sse(events, new_session_id));
        }
        if is_media_type(response.headers(), JSON_MIME_TYPE) {
            let body = self
                .read_bounded(response, limits.max_json_response_size)
                .await?;
            return match self.message(&body) {
                Ok(parsed) => {
                    if ToolHeaders::is_listing(&message) {
                        self.inner.tool_headers.record_message(&parsed);
                    }
                    Ok(StreamableHttpPostResponse::Json(parsed, new_session_id))
                }
                Err(_) if awaits_no_response(&message) => Ok(StreamableHttpPostResponse::Accepted),
                Err(error) => Err(error),
            };
        }
        if awaits_no_response(&message) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(self.unexpected_content_type(response.headers()))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let mut headers = protocol_headers(
            "application/json, text/event-stream",
            custom_headers,
            Some(&session_id),
            None,
            auth_header,
        )
        .map_err(|e| self.invalid_header(e))?;
        headers.remove(ACCEPT);
        let template = Template {
            method: Method::DELETE,
            uri,
            headers,
            body: Bytes::new(),
        };
        let response = self.send(&template).await?;
        match response.status() {
            StatusCode::METHOD_NOT_ALLOWED => {
                Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
            }
            // The server already forgot the session: nothing left to delete.
            StatusCode::NOT_FOUND => Ok(()),
            status if status.is_success() => Ok(()),
            status => Err(self.unexpected(format!("DELETE of the session answered HTTP {status}"))),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let max = self.limits().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        // The standalone stream's first open (a resumption has an event id): whatever ends
        // it — an answer, an error, the attempt dropped — ends the requests' wait.
        let _opening = last_event_id
            .is_none()
            .then(|| self.inner.event_stream.opening())
            .flatten();
        let headers = protocol_headers(
            EVENT_STREAM_MIME_TYPE,
            custom_headers,
            session_id.as_deref(),
            last_event_id.as_deref(),
            auth_header,
        )
        .map_err(|e| self.invalid_header(e))?;
        let template = Template {
            method: Method::GET,
            uri,
            headers,
            body: Bytes::new(),
        };
        let response = self.send(&template).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if status == StatusCode::FORBIDDEN
            && let Some(challenge) = header_text(response.headers(), &WWW_AUTHENTICATE)
        {
            return Err(self.insufficient_scope(&challenge));
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(self.unexpected(format!("GET of the event stream answered HTTP {status}")));
        }
        if !is_media_type(response.headers(), EVENT_STREAM_MIME_TYPE) {
            return Err(self.unexpected_content_type(response.headers()));
        }
        let mut events = bounded_sse(
            response.into_body().into_data_stream(),
            max_sse_event_size,
            self.inner.inbound.clone(),
            None,
        );
        if last_event_id.is_none() {
            return Ok(events);
        }
        // A resumption that ends before any event is a failed attempt, not a reconnection: a
        // server that holds none of the stream's events (another replica of a fleet, which
        // never saw them) would otherwise be asked again and again, the call waiting forever;
        // failed attempts are bounded by the reconnection policy, so the call ends in an error.
        match events.next().await {
            Some(first) => Ok(futures::stream::once(async move { first })
                .chain(events)
                .boxed()),
            None => Err(self.unexpected(
                "the resumed event stream ended before any event: the server holds none of its \
                 events"
                    .to_owned(),
            )),
        }
    }
}
