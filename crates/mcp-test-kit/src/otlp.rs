//! An OTLP receiver on 127.0.0.1 for tests of exported traces (feature `otlp`): it takes
//! `POST /v1/traces` bodies of OTLP over HTTP/protobuf, decodes each
//! `ExportTraceServiceRequest` with the protocol's own prost types and keeps every span,
//! answering `200` with an empty `ExportTraceServiceResponse` (`400` for a body that does not
//! decode, `404` elsewhere). A test waits for the spans it expects with a deadline.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use mcp_test_kit::otlp::OtlpReceiver;
//!
//! let receiver = OtlpReceiver::start().await.unwrap();
//! // Point an exporter at it: OTEL_EXPORTER_OTLP_ENDPOINT=<receiver.endpoint()>.
//! let spans = receiver
//!     .wait_for(Duration::from_secs(10), |spans| spans.iter().any(|s| s.name == "mcp_call"))
//!     .await;
//! assert!(spans.is_some());
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::http::{HttpServer, accept_loop};

/// The largest export body read.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One span as received, its ids in lowercase hex (W3C's spelling).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceivedSpan {
    /// The span's name.
    pub name: String,
    /// The trace id, 32 hex digits.
    pub trace_id: String,
    /// The span id, 16 hex digits.
    pub span_id: String,
    /// The parent span id, 16 hex digits; empty for a root.
    pub parent_span_id: String,
    /// The resource's `service.name`.
    pub service_name: Option<String>,
    /// The span's string attributes, `(key, value)`.
    pub attributes: Vec<(String, String)>,
}

impl ReceivedSpan {
    /// The string attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    requests: usize,
}

/// The receiver. Dropping it stops it.
#[derive(Debug)]
pub struct OtlpReceiver {
    base: String,
    received: Arc<Mutex<Received>>,
    changed: watch::Receiver<usize>,
    _http: HttpServer,
}

impl OtlpReceiver {
    /// Starts one on an ephemeral port of 127.0.0.1.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Received::default()));
        let (tx, changed) = watch::channel(0usize);
        let tx = Arc::new(tx);
        let served = received.clone();
        let http = accept_loop(listener, CancellationToken::new(), move |stream| {
            let received = served.clone();
            let tx = tx.clone();
            let service = hyper::service::service_fn(move |request| {
                let received = received.clone();
                let tx = tx.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(request, &received, &tx).await) }
            });
            async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        })?;
        Ok(Self {
            base,
            received,
            changed,
            _http: http,
        })
    }

    /// The value for `OTEL_EXPORTER_OTLP_ENDPOINT`: `http://127.0.0.1:PORT` (the exporter
    /// appends `/v1/traces`).
    pub fn endpoint(&self) -> &str {
        &self.base
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        lock(&self.received).spans.clone()
    }

    /// How many export requests arrived (decoded or not).
    pub fn requests(&self) -> usize {
        lock(&self.received).requests
    }

    /// Waits until `done` holds for the spans received, at most `deadline`; the spans then,
    /// or `None` when the deadline passed first.
    pub async fn wait_for(
        &self,
        deadline: Duration,
        mut done: impl FnMut(&[ReceivedSpan]) -> bool,
    ) -> Option<Vec<ReceivedSpan>> {
        let mut changed = self.changed.clone();
        tokio::time::timeout(deadline, async {
            loop {
                {
                    let received = lock(&self.received);
                    if done(&received.spans) {
                        return received.spans.clone();
                    }
                }
                if changed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .ok()
    }
}

fn lock(received: &Mutex<Received>) -> std::sync::MutexGuard<'_, Received> {
    received.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn answer(
    request: Request<Incoming>,
    received: &Mutex<Received>,
    changed: &watch::Sender<usize>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    if parts.method != Method::POST || parts.uri.path() != "/v1/traces" {
        return status(StatusCode::NOT_FOUND, Bytes::new());
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return status(StatusCode::PAYLOAD_TOO_LARGE, Bytes::new()),
    };
    let decoded = ExportTraceServiceRequest::decode(body);
    let count = {
        let mut received = lock(received);
        received.requests += 1;
        if let Ok(request) = &decoded {
            received.spans.extend(spans_of(request));
        }
        received.requests
    };
    changed.send_replace(count);
    match decoded {
        Ok(_) => {
            let reply = ExportTraceServiceResponse::default().encode_to_vec();
            status(StatusCode::OK, Bytes::from(reply))
        }
        Err(_) => status(StatusCode::BAD_REQUEST, Bytes::new()),
    }
}

fn spans_of(request: &ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    for resource_spans in &request.resource_spans {
        let service_name = resource_spans.resource.as_ref().and_then(|resource| {
            resource
                .attributes
                .iter()
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| string_of(kv.value.as_ref()?.value.as_ref()?))
        });
        for scope in &resource_spans.scope_spans {
            for span in &scope.spans {
                spans.push(ReceivedSpan {
                    name: span.name.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    service_name: service_name.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .filter_map(|kv| {
                            let value = string_of(kv.value.as_ref()?.value.as_ref()?)?;
                            Some((kv.key.clone(), value))
                        })
                        .collect(),
                });
            }
        }
    }
    spans
}

fn string_of(value: &AnyValue) -> Option<String> {
    match value {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        AnyValue::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn status(code: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = code;
    response.headers_mut().insert(
        "content-type",
        "application/x-protobuf".parse().expect("a header value"),
    );
    response
}
