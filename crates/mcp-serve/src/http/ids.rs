//! Request ids in flight per session. rmcp routes a session's answers to their HTTP streams by
//! request id: a second request under an id still in flight takes over the route, and the
//! first would never be answered. Such a request is refused here, before rmcp sees it
//! (docs/upstream.md#rmcp-duplicate-request-id).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::RequestId;

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
}
