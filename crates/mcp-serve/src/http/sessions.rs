//! The bound on sessions: an `initialize` beyond `max` initialised sessions is refused `503`
//! with a JSON-RPC error saying why (and `Retry-After`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::{HeaderValue, Request, StatusCode, header};
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, RequestId};
use serde_json::Value;

use super::answer::{Answer, jsonrpc};
use super::body::Whole;
use super::check::Check;
use super::message_check::Refusal;

/// The bound on sessions: an `initialize` without `Mcp-Session-Id` while `live` sessions are
/// at `max` is refused. The refusal gives way to a body that is no message
/// ([`Refusal::Yields`]).
#[derive(Debug)]
pub(crate) struct SessionCap {
    /// Initialised sessions not yet ended.
    pub(crate) live: Arc<AtomicUsize>,
    pub(crate) max: usize,
}

impl Check<Whole> for SessionCap {
    type Kept = ();

    fn check(&self, request: &Request<Whole>) -> Result<(), Answer> {
        let max = self.max;
        if request.headers().contains_key("mcp-session-id")
            || self.live.load(Ordering::Acquire) < max
        {
            return Ok(());
        }
        let Ok(value) = serde_json::from_slice::<Value>(request.body().bytes()) else {
            return Ok(());
        };
        if value.get("method").and_then(Value::as_str) != Some("initialize") {
            return Ok(());
        }
        let id = value
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
        let message =
            format!("too many sessions: this server allows {max} at once; close one and retry");
        let error = JsonRpcError::new(id, ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None));
        let mut response = jsonrpc(StatusCode::SERVICE_UNAVAILABLE, error);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response.extensions_mut().insert(Refusal::Yields);
        Err(response)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::http::answer::testing::through;
    use crate::http::check::CheckLayer;

    fn post(body: &'static str, session: Option<&str>) -> Request<Whole> {
        let mut request = Request::post("/mcp")
            .body(Whole::from(Bytes::from_static(body.as_bytes())))
            .unwrap();
        if let Some(session) = session {
            request
                .headers_mut()
                .insert("mcp-session-id", session.parse().unwrap());
        }
        request
    }

    #[tokio::test]
    async fn an_initialize_beyond_the_bound_is_refused() {
        let live = Arc::new(AtomicUsize::new(0));
        let layer = CheckLayer::new(SessionCap {
            live: live.clone(),
            max: 1,
        });
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        let (answer, reached) = through(&layer, post(initialize, None)).await;
        assert_eq!(
            (answer.status.as_u16(), reached),
            (200, 1),
            "below the bound"
        );
        live.store(1, Ordering::Release);
        let (answer, reached) = through(&layer, post(initialize, None)).await;
        assert_eq!((answer.status.as_u16(), reached), (503, 0));
        assert_eq!(answer.headers["retry-after"], "1");
        let error = answer.json();
        assert_eq!(error["id"], 1);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("allows 1"), "{message}");
        // What is no new session passes.
        let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
        for request in [post(ping, None), post(initialize, Some("s"))] {
            let (answer, reached) = through(&layer, request).await;
            assert_eq!((answer.status.as_u16(), reached), (200, 1));
        }
    }
}
