//! What every HTTP request passes before rmcp sees it: the path, the `Origin`, the bearer
//! token, the body's size. Each refusal is answered here, so a hostile request never reaches a
//! session or the dispatcher. A body that is no JSON-RPC message a client may send is refused
//! by rmcp's own reading of it, before any session sees it, and answered here in JSON-RPC
//! ([`check_message`]; rmcp's own answer is a plain-text 415:
//! docs/upstream.md#rmcp-http-body-refusal): the front parses the body itself only when
//! refused, for a 2026-07-28 request (its `Mcp-Param-*` check reads the call's arguments) or
//! at the session limit.

use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, RequestId};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;
use url::Url;

use super::auth::{BearerAuth, Verdict};
use super::ids::{IdGuard, Ids};
use super::limit::Limiter;
use crate::drain::{InFlight, InFlightGuard};
use crate::handler::Session;
use crate::param_headers::ParamHeaderCheck;

/// The rmcp service behind the checks.
pub(crate) type Mcp = StreamableHttpService<Session, LocalSessionManager>;

/// The checks of one endpoint, and the rmcp service behind them.
pub(crate) struct Front {
    pub(crate) mcp: Mcp,
    pub(crate) path: String,
    pub(crate) metadata_paths: [String; 2],
    pub(crate) resource: Url,
    pub(crate) metadata_url: Url,
    pub(crate) name: String,
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) auth: Option<BearerAuth>,
    pub(crate) max_body: usize,
    /// How long a request's body may take to arrive, whole.
    pub(crate) body_timeout: std::time::Duration,
    /// POST exchanges whose answer is not yet sent whole.
    pub(crate) in_flight: InFlight,
    /// Request ids in flight per session.
    pub(crate) ids: Ids,
    /// Initialised sessions not yet ended, and their bound.
    pub(crate) live: Arc<AtomicUsize>,
    pub(crate) max_sessions: Option<usize>,
    pub(crate) limiter: Option<Limiter>,
    /// Requests failing authentication, per client address (only with auth).
    pub(crate) auth_failures: Option<Limiter>,
    /// The check of `Mcp-Param-*` headers against a call's arguments, with the tools it knows.
    pub(crate) params: ParamHeaderCheck,
}

/// A response body that keeps its exchange counted as in flight until it is sent (or
/// dropped).
pub(crate) struct Counted {
    inner: BoxBody<Bytes, Infallible>,
    _guard: Option<(InFlightGuard, Option<IdGuard>)>,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Counted> {
    let mut response = Response::new(Counted {
        inner: Full::new(Bytes::from_static(text.as_bytes())).boxed(),
        _guard: None,
    });
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn json(status: StatusCode, body: &Value) -> Response<Counted> {
    let mut response = Response::new(Counted {
        inner: Full::new(Bytes::from(body.to_string())).boxed(),
        _guard: None,
    });
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

impl Front {
    pub(crate) async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        client: IpAddr,
    ) -> Response<Counted> {
        if let Some(limiter) = &self.limiter
            && let Err(wait) = limiter.take(client)
        {
            return too_many(wait, "Too Many Requests");
        }
        let path = request.uri().path();
        if self.metadata_paths.iter().any(|p| p == path) && self.auth.is_some() {
            return self.metadata(request.method());
        }
        if path != self.path {
            return plain(StatusCode::NOT_FOUND, "Not Found");
        }
        if let Some(refused) = self.check_origin(request.headers()) {
            return refused;
        }
        if let Some(refused) = self.check_auth(request.headers(), client).await {
            return refused;
        }
        let (parts, body) = request.into_parts();
        if parts.method != Method::POST {
            let ends_session = parts.method == Method::DELETE;
            let request = Request::from_parts(parts, Full::new(Bytes::new()));
            let mut response = self.forward(request, None).await;
            // A session ended by DELETE is answered `204 No Content` (rmcp says `202`, which
            // clients such as the Python SDK report as a failed termination:
            // docs/upstream.md#rmcp-delete-202).
            if ends_session && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            return response;
        }
        let body = match self.read_body(&parts.headers, body).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        if let Some(refused) = self
            .check_sessions(&parts.headers, &body)
            .or_else(|| self.check_params(&parts.headers, &body))
        {
            // A body that is no message is answered as such first, whatever else is wrong.
            return check_message(&body).unwrap_or(refused);
        }
        let id = match self.ids.enter(&parts.headers, &body) {
            Ok(id) => id,
            Err(id) => {
                let message = format!(
                    "Invalid Request: a request with id {id} is already in flight in this \
                     session; use a new id for each request"
                );
                let error = JsonRpcError::new(
                    Some(id),
                    ErrorData::new(ErrorCode::INVALID_REQUEST, message, None),
                );
                return json(
                    StatusCode::BAD_REQUEST,
                    &serde_json::to_value(error).unwrap_or(Value::Null),
                );
            }
        };
        let guard = (self.in_flight.enter(), id);
        let request = Request::from_parts(parts, Full::new(body.clone()));
        let response = self.forward(request, Some(guard)).await;
        // rmcp reads the body as one client message before anything else acts on it, and
        // refuses it (415) when it is none: only a refused body is read again here, to answer
        // in JSON-RPC why. Its checks that come before that read (`Accept`, `Content-Type`,
        // `Host`: all 4xx) give way to this answer too, so a body that is no message gets it
        // whatever else is wrong, and a message is read once
        // (docs/upstream.md#rmcp-http-body-refusal).
        if response.status().is_client_error()
            && let Some(refused) = check_message(&body)
        {
            return refused;
        }
        response
    }

    async fn forward(
        &self,
        request: Request<Full<Bytes>>,
        guard: Option<(InFlightGuard, Option<IdGuard>)>,
    ) -> Response<Counted> {
        self.mcp.handle(request).await.map(|inner| Counted {
            inner,
            _guard: guard,
        })
    }

    /// An `initialize` beyond `max_sessions` initialised sessions is refused with `503` and a
    /// JSON-RPC error saying why.
    fn check_sessions(&self, headers: &http::HeaderMap, body: &[u8]) -> Option<Response<Counted>> {
        let max = self.max_sessions?;
        if headers.contains_key("mcp-session-id") || self.live.load(Ordering::Acquire) < max {
            return None;
        }
        let value: Value = serde_json::from_slice(body).ok()?;
        if value.get("method").and_then(Value::as_str) != Some("initialize") {
            return None;
        }
        let id = value
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
        let message =
            format!("too many sessions: this server allows {max} at once; close one and retry");
        let error = JsonRpcError::new(id, ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None));
        let mut response = json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::to_value(error).unwrap_or(Value::Null),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        Some(response)
    }

    /// A `tools/call` from a 2026-07-28 client whose `Mcp-Param-*` headers disagree with its
    /// arguments is refused with `400` and the error of the front's [`ParamHeaderCheck`].
    fn check_params(&self, headers: &http::HeaderMap, body: &[u8]) -> Option<Response<Counted>> {
        let error = self.params.refusal(headers, body)?;
        Some(json(
            StatusCode::BAD_REQUEST,
            &serde_json::to_value(error).unwrap_or(Value::Null),
        ))
    }

    fn metadata(&self, method: &Method) -> Response<Counted> {
        if method != Method::GET {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
        }
        let Some(auth) = &self.auth else {
            return plain(StatusCode::NOT_FOUND, "Not Found");
        };
        json(StatusCode::OK, &auth.metadata(&self.resource, &self.name))
    }

    /// A request from a browser page of another origin is refused (DNS-rebinding
    /// protection); requests without `Origin` (not from a browser) pass.
    fn check_origin(&self, headers: &http::HeaderMap) -> Option<Response<Counted>> {
        let mut values = headers.get_all(header::ORIGIN).iter();
        let value = values.next()?;
        let allowed = values.next().is_none()
            && value
                .to_str()
                .ok()
                .and_then(normalize_origin)
                .is_some_and(|origin| self.allowed_origins.contains(&origin));
        (!allowed).then(|| plain(StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed"))
    }

    /// A request without valid credentials is answered `401`. An address whose requests
    /// failed it too often is answered `429` instead, before its credentials are checked.
    async fn check_auth(
        &self,
        headers: &http::HeaderMap,
        client: IpAddr,
    ) -> Option<Response<Counted>> {
        let auth = self.auth.as_ref()?;
        if let Some(failures) = &self.auth_failures
            && let Err(wait) = failures.available(client)
        {
            return Some(too_many(
                wait,
                "Too Many Requests: too many failed authentications from this address",
            ));
        }
        let verdict = auth.check(headers, &self.resource).await;
        if verdict == Verdict::Allowed {
            return None;
        }
        if let Some(failures) = &self.auth_failures {
            let _ = failures.take(client);
        }
        let mut response = plain(StatusCode::UNAUTHORIZED, "Unauthorized");
        if let Ok(value) = HeaderValue::from_str(&auth.challenge(&self.metadata_url, verdict)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        Some(response)
    }

    /// The whole body, at most `max_body` bytes within `body_timeout`. Beyond the size,
    /// `413` — before reading when the length is declared — and the rest of the upload is
    /// read and dropped in the background (at most [`LINGER_BYTES`] for [`LINGER_TIME`]), so
    /// a client still sending gets to read the answer instead of a reset connection. Beyond
    /// the time, `408` and the connection is closed.
    async fn read_body(
        &self,
        headers: &http::HeaderMap,
        body: Incoming,
    ) -> Result<Bytes, Response<Counted>> {
        match tokio::time::timeout(self.body_timeout, self.read_body_untimed(headers, body)).await {
            Ok(read) => read,
            Err(_) => {
                let mut response = plain(
                    StatusCode::REQUEST_TIMEOUT,
                    "Request Timeout: the body did not arrive in time",
                );
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                Err(response)
            }
        }
    }

    async fn read_body_untimed(
        &self,
        headers: &http::HeaderMap,
        mut body: Incoming,
    ) -> Result<Bytes, Response<Counted>> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(too_large(body));
        }
        let mut collected = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(plain(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the body could not be read",
                ));
            };
            if let Ok(data) = frame.into_data() {
                if data.len() > self.max_body - collected.len() {
                    return Err(too_large(body));
                }
                collected.extend_from_slice(&data);
            }
        }
        Ok(collected.freeze())
    }
}

/// `429 Too Many Requests` saying `text`, with `Retry-After` (whole seconds, at least 1).
fn too_many(wait: std::time::Duration, text: &'static str) -> Response<Counted> {
    let mut response = plain(StatusCode::TOO_MANY_REQUESTS, text);
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// How much of an oversized upload is read and dropped after the `413`, and for how long.
const LINGER_BYTES: usize = 64 * 1024 * 1024;
const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// `413 Payload Too Large`, closing the connection once the rest of `body` was dropped.
fn too_large(mut body: Incoming) -> Response<Counted> {
    tokio::spawn(async move {
        let drain = async {
            let mut dropped = 0usize;
            while let Some(Ok(frame)) = body.frame().await {
                dropped += frame.data_ref().map_or(0, Bytes::len);
                if dropped > LINGER_BYTES {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(LINGER_TIME, drain).await;
    });
    let mut response = plain(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large");
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The body must be one JSON-RPC message: not JSON → a parse error (-32700); a request of a
/// known method whose params do not fit it → invalid params (-32602); any other JSON that is
/// no message a client may send → an invalid request (-32600); with the request's id when it
/// has a readable one (see [`crate::message::refusal`]). `None` when the body is a message.
fn check_message(body: &[u8]) -> Option<Response<Counted>> {
    let (id, error) = crate::message::refusal(body, false)?;
    let error = JsonRpcError::new(id, error);
    Some(json(
        StatusCode::BAD_REQUEST,
        &serde_json::to_value(error).unwrap_or(Value::Null),
    ))
}

/// An origin as `scheme://host[:port]`, the port left out when it is the scheme's default.
pub(crate) fn normalize_origin(origin: &str) -> Option<String> {
    if origin.eq_ignore_ascii_case("null") {
        return Some("null".into());
    }
    let url = Url::parse(origin).ok()?;
    let serialized = url.origin().ascii_serialization();
    (serialized != "null").then_some(serialized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_normalized() {
        assert_eq!(
            normalize_origin("HTTP://LocalHost:80").as_deref(),
            Some("http://localhost")
        );
        assert_eq!(
            normalize_origin("https://a.example:8443/").as_deref(),
            Some("https://a.example:8443")
        );
        assert_eq!(normalize_origin("null").as_deref(), Some("null"));
        assert_eq!(normalize_origin("not a url"), None);
    }

    #[test]
    fn bodies_that_are_no_message_are_refused() {
        assert!(check_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        for bad in [&b"{"[..], b"[]", b"42", br#"{"jsonrpc":"2.0","id":1}"#] {
            assert_eq!(
                check_message(bad).unwrap().status(),
                StatusCode::BAD_REQUEST
            );
        }
    }
}
