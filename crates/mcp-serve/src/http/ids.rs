//! Request ids in flight per session. rmcp routes a session's answers to their HTTP streams by
//! request id: a second request under an id still in flight takes over the route, and the
//! first would never be answered. Such a request is refused here, before rmcp sees it
//! (docs/upstream.md#rmcp-duplicate-request-id).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use http::{Request, StatusCode};
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, RequestId};

use super::answer::{Answer, holding, jsonrpc};
use super::body::Whole;
use super::check::Check;
use super::message_check::Refusal;

/// What is read of a body to find a request's id: the rest is skipped, not built.
#[derive(serde::Deserialize)]
struct Probe {
    id: Option<RequestId>,
    method: Option<serde::de::IgnoredAny>,
}

type Key = (String, RequestId);

/// The ids of the requests in flight, per session.
#[derive(Debug, Default)]
pub(crate) struct Ids(Arc<Mutex<HashSet<Key>>>);

/// One request in flight; dropping it (its answer sent or dropped) frees its id.
#[derive(Debug)]
pub(crate) struct IdGuard {
    ids: Arc<Mutex<HashSet<Key>>>,
    key: Key,
}

impl Drop for IdGuard {
    fn drop(&mut self) {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

impl Ids {
    /// Counts the request in `body` of the session named by `headers` as in flight: `Ok`
    /// with its guard (none for what is no request of a session), `Err` with the id when a
    /// request of that session under that id is in flight already.
    pub(crate) fn enter(
        &self,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<Option<IdGuard>, RequestId> {
        let Some(session) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        let Ok(Probe {
            id: Some(id),
            method: Some(_),
        }) = serde_json::from_slice::<Probe>(body)
        else {
            return Ok(None);
        };
        let key = (session.to_owned(), id);
        let mut ids = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !ids.insert(key.clone()) {
            return Err(key.1);
        }
        Ok(Some(IdGuard {
            ids: self.0.clone(),
            key,
        }))
    }
}

/// Refuses a request of a session under an id in flight in it with `400` and a JSON-RPC
/// error; that refusal stands even for a body that is no message ([`Refusal::Stands`]). A
/// request passed on keeps its id until its answer is sent.
impl Check<Whole> for Ids {
    type Kept = Option<IdGuard>;

    fn check(&self, request: &Request<Whole>) -> Result<Option<IdGuard>, Answer> {
        self.enter(request.headers(), request.body().bytes())
            .map_err(|id| {
                let message = format!(
                    "Invalid Request: a request with id {id} is already in flight in this \
                     session; use a new id for each request"
                );
                let error = JsonRpcError::new(
                    Some(id),
                    ErrorData::new(ErrorCode::INVALID_REQUEST, message, None),
                );
                let mut refused = jsonrpc(StatusCode::BAD_REQUEST, error);
                refused.extensions_mut().insert(Refusal::Stands);
                refused
            })
    }

    fn answer(kept: Option<IdGuard>, answer: Answer) -> Answer {
        match kept {
            Some(guard) => holding(answer, guard),
            None => answer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_request_per_id_and_session_at_once() {
        let ids = Ids::default();
        let mut a = http::HeaderMap::new();
        a.insert("mcp-session-id", "a".parse().unwrap());
        let mut b = http::HeaderMap::new();
        b.insert("mcp-session-id", "b".parse().unwrap());
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#;
        let first = ids
            .enter(&a, call)
            .unwrap()
            .expect("a request of a session");
        assert!(
            ids.enter(&a, call).is_err(),
            "the same id in the same session"
        );
        assert!(ids.enter(&b, call).unwrap().is_some(), "another session");
        let response = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(
            ids.enter(&a, response).unwrap().is_none(),
            "a response is no request"
        );
        assert!(ids.enter(&http::HeaderMap::new(), call).unwrap().is_none());
        drop(first);
        assert!(
            ids.enter(&a, call).unwrap().is_some(),
            "the id is free again"
        );
    }

    #[tokio::test]
    async fn a_second_request_under_an_id_in_flight_is_refused_until_the_first_is_answered() {
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        use tower_layer::Layer;

        use crate::http::answer::testing::{Inner, through};
        use crate::http::check::CheckLayer;

        let layer = CheckLayer::new(Ids::default());
        let call = || {
            Request::post("/mcp")
                .header("mcp-session-id", "a")
                .body(Whole::from(bytes::Bytes::from_static(
                    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
                )))
                .unwrap()
        };
        let inner = Inner::default();
        let first = layer.layer(inner.clone()).oneshot(call()).await.unwrap();
        assert_eq!(inner.reached(), 1);
        let (answer, reached) = through(&layer, call()).await;
        assert_eq!((answer.status.as_u16(), reached), (400, 0));
        let error = answer.json();
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (1.into(), (-32600).into())
        );
        // The first answer sent whole frees its id.
        first.into_body().collect().await.unwrap();
        let (answer, reached) = through(&layer, call()).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 1));
    }
}
