//! The front's answer to a body that is no JSON-RPC message a client may send: such a body is
//! refused by rmcp's own reading of it, before any session sees it, and answered here in
//! JSON-RPC instead (rmcp's own answer is a plain-text 415:
//! docs/upstream.md#rmcp-http-body-refusal). The body is parsed here only when refused below.

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use rmcp::model::JsonRpcError;

use super::answer::{Answer, jsonrpc};
use super::body::Whole;
use super::check::Check;

/// How a refusal from below this layer stands against a body that is no message. A refusal
/// without it yields when it is a client error (`4xx`): rmcp's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A body that is no message is answered as such instead (the session bound, the
    /// `Mcp-Param-*` check).
    Yields,
    /// The refusal stands (a request id already in flight).
    Stands,
}

/// Answers a POST refused below it whose body is no message with the JSON-RPC error saying
/// why ([`check_message`]), whatever else was wrong: rmcp reads the body as one client message
/// before anything else acts on it, and refuses it (415) when it is none; its checks that come
/// before that read (`Accept`, `Content-Type`, `Host`: all 4xx) give way to this answer too,
/// so a message is read once (docs/upstream.md#rmcp-http-body-refusal).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MessageCheck;

impl Check<Whole> for MessageCheck {
    /// A POST's body.
    type Kept = Option<Bytes>;

    fn check(&self, request: &Request<Whole>) -> Result<Option<Bytes>, Answer> {
        Ok((request.method() == Method::POST).then(|| request.body().bytes().clone()))
    }

    fn answer(body: Option<Bytes>, answer: Answer) -> Answer {
        let Some(body) = body else {
            return answer;
        };
        let yields = match answer.extensions().get::<Refusal>() {
            Some(refusal) => *refusal == Refusal::Yields,
            None => answer.status().is_client_error(),
        };
        match yields.then(|| check_message(&body)).flatten() {
            Some(refused) => refused,
            None => answer,
        }
    }
}

/// The body must be one JSON-RPC message: not JSON → a parse error (-32700); a request of a
/// known method whose params do not fit it → invalid params (-32602); any other JSON that is
/// no message a client may send → an invalid request (-32600); with the request's id when it
/// has a readable one (see [`crate::message::refusal`]). `None` when the body is a message.
fn check_message(body: &[u8]) -> Option<Answer> {
    let (id, error) = crate::message::refusal(body, false)?;
    Some(jsonrpc(
        StatusCode::BAD_REQUEST,
        JsonRpcError::new(id, error),
    ))
}

#[cfg(test)]
mod tests {
    use tower_layer::Layer;
    use tower_service::Service;

    use super::*;
    use crate::http::answer::testing::through;
    use crate::http::answer::{given, plain};
    use crate::http::check::CheckLayer;

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

    fn post(body: &'static str) -> Request<Whole> {
        Request::post("/mcp")
            .body(Whole::from(Bytes::from_static(body.as_bytes())))
            .unwrap()
    }

    #[tokio::test]
    async fn a_refusal_below_gives_way_to_a_body_that_is_no_message() {
        // Over the trivial inner service (200): nothing to answer.
        let (answer, reached) = through(&CheckLayer::new(MessageCheck), post("{not json")).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 1));

        let refusing = |status: StatusCode, refusal: Option<Refusal>| {
            CheckLayer::new(MessageCheck).layer(tower::service_fn(move |_: Request<Whole>| {
                let mut answer = plain(status, "below");
                if let Some(refusal) = refusal {
                    answer.extensions_mut().insert(refusal);
                }
                given(answer)
            }))
        };
        let cases = [
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, None, "{not json", 400),
            (
                StatusCode::NOT_ACCEPTABLE,
                None,
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                406,
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Some(Refusal::Yields),
                "[]",
                400,
            ),
            (StatusCode::BAD_REQUEST, Some(Refusal::Stands), "[]", 400),
        ];
        for (status, refusal, body, expected) in cases {
            let mut service = refusing(status, refusal);
            let answer = Service::call(&mut service, post(body)).await.unwrap();
            let answer = crate::http::answer::testing::Answered::read(answer).await;
            assert_eq!(answer.status.as_u16(), expected, "{status} {refusal:?}");
            let rewritten = answer.body != "below";
            assert_eq!(
                rewritten,
                refusal != Some(Refusal::Stands) && expected == 400
            );
            if rewritten {
                assert_eq!(answer.json()["jsonrpc"], "2.0");
            }
        }
    }
}
