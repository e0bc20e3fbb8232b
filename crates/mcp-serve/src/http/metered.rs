//! Counting what the front answers, through the `metrics` facade (see
//! `agent_core::telemetry`): [`Metered`], outermost, counts every request by method and status
//! once its answer's head is ready, and every `429` a rate limit gave; [`NameMethod`], below the
//! body's reading, names the JSON-RPC method of a POSTed message for it. The method label is
//! one of a fixed set, so no client can grow the series.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use agent_core::telemetry::{GATEWAY_REQUESTS, RATE_LIMITED};
use http::{Method, Request, StatusCode};
use metrics::SharedString;
use serde::Deserialize;
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering};
use super::body::Whole;
use super::check::Check;

/// The MCP methods a client sends, counted under their own name; any other is `other`.
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

/// Where [`NameMethod`] tells [`Metered`] the JSON-RPC method of a request (in its extensions).
#[derive(Debug, Clone, Default)]
struct MethodSlot(Arc<OnceLock<&'static str>>);

/// Counts every request in [`GATEWAY_REQUESTS`] by `method` (the JSON-RPC method of a POSTed
/// message, `response` for a client's answer, else the HTTP method: `GET`, `POST` refused
/// before its body was read, `DELETE`, …) and `status`, and each `429` in [`RATE_LIMITED`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct MeteredLayer;

impl<S> Layer<S> for MeteredLayer {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Metered<S> {
        Metered { inner }
    }
}

/// The service of a [`MeteredLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Metered<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for Metered<S>
where
    S: Service<Request<B>, Response = Answer, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Answering {
        let slot = MethodSlot::default();
        request.extensions_mut().insert(slot.clone());
        let http_method = http_method(request.method());
        let answered = self.inner.call(request);
        Box::pin(async move {
            let answer = answered.await?;
            let method = slot.0.get().copied().unwrap_or(http_method);
            let status = answer.status();
            metrics::counter!(
                GATEWAY_REQUESTS,
                "method" => method,
                "status" => status_label(status),
            )
            .increment(1);
            if status == StatusCode::TOO_MANY_REQUESTS {
                metrics::counter!(RATE_LIMITED).increment(1);
            }
            Ok(answer)
        })
    }
}

/// Names the JSON-RPC method of a POSTed message in the request's [`MethodSlot`]: one of
/// [`METHODS`], `other`, or `response` for a message without one. A body that is no JSON
/// object names nothing (the request is counted under its HTTP method).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NameMethod;

/// The one member of a message read for its label; the others are skipped unread.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
}

impl Check<Whole> for NameMethod {
    type Kept = ();

    fn check(&self, request: &Request<Whole>) -> Result<(), Answer> {
        let Some(slot) = request.extensions().get::<MethodSlot>() else {
            return Ok(());
        };
        if request.method() != Method::POST {
            return Ok(());
        }
        if let Ok(head) = serde_json::from_slice::<Head<'_>>(request.body().bytes()) {
            let label = match head.method.as_deref() {
                None => "response",
                Some(method) => METHODS
                    .iter()
                    .find(|known| **known == method)
                    .copied()
                    .unwrap_or("other"),
            };
            let _ = slot.0.set(label);
        }
        Ok(())
    }
}

/// The label of an HTTP method: its name for the ones MCP uses, else `other`.
fn http_method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// The label of a status: its three digits.
fn status_label(status: StatusCode) -> SharedString {
    SharedString::from(status.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use metrics_exporter_prometheus::PrometheusBuilder;
    use tower::ServiceExt;

    use super::*;
    use crate::http::answer::testing::Inner;
    use crate::http::check::CheckLayer;

    #[tokio::test]
    async fn requests_are_counted_by_json_rpc_or_http_method_and_status() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let _local = metrics::set_default_local_recorder(&recorder);
        let post = |body: &'static str| {
            Request::post("/mcp")
                .body(Whole::from(Bytes::from_static(body.as_bytes())))
                .unwrap()
        };
        let requests = [
            post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#),
            post(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#),
            post(r#"{"jsonrpc":"2.0","id":3,"method":"made/up\"} 1"}"#),
            post(r#"{"jsonrpc":"2.0","id":4,"result":{}}"#),
            post("not json"),
            Request::get("/mcp").body(Whole::default()).unwrap(),
            Request::delete("/mcp").body(Whole::default()).unwrap(),
        ];
        for request in requests {
            let service = MeteredLayer.layer(CheckLayer::new(NameMethod).layer(Inner::default()));
            service.oneshot(request).await.unwrap();
        }
        let text = recorder.handle().render();
        for line in [
            r#"mcp_gateway_requests_total{method="tools/call",status="200"} 2"#,
            r#"mcp_gateway_requests_total{method="other",status="200"} 1"#,
            r#"mcp_gateway_requests_total{method="response",status="200"} 1"#,
            r#"mcp_gateway_requests_total{method="POST",status="200"} 1"#,
            r#"mcp_gateway_requests_total{method="GET",status="200"} 1"#,
            r#"mcp_gateway_requests_total{method="DELETE",status="200"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        assert!(!text.contains(RATE_LIMITED), "nothing was limited:\n{text}");
    }
}
