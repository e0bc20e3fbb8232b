//! Reading a request's SSE stream to its end before handing its response over.
//!
//! A streamable HTTP server answers a POST with an SSE stream and closes it right after the
//! response. rmcp delivers the response to the caller as soon as it is parsed and only then
//! reads the stream's end (docs/upstream.md#rmcp-response-before-stream-end); by the time
//! the caller sends its next request, the connection
//! may still be busy with that end, and the pool dials a new one (a TCP handshake per call,
//! and a socket left in `TIME_WAIT`). [`ending_with_response`] holds the response to the
//! stream's request until the next event or the stream's end arrives, for at most
//! [`DRAIN`]: the end is then read, the connection is back in the pool, and the answer
//! follows at once. A server that keeps its stream open after the response delays the
//! answer by at most [`DRAIN`]; every other bound of the stream is unchanged.

use std::time::Duration;

use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt};
use rmcp::model::RequestId;
use serde::de::IgnoredAny;
use sse_stream::{Error as SseError, Sse};

/// How long the response waits for its stream's end (or the next event).
pub(crate) const DRAIN: Duration = Duration::from_millis(10);

/// The head of a JSON-RPC message: enough to tell a response to `id` from anything else.
#[derive(serde::Deserialize)]
struct Head {
    id: Option<RequestId>,
    method: Option<IgnoredAny>,
}

/// Whether `event` carries the response (or error) to `request`.
fn answers(event: &Sse, request: &RequestId) -> bool {
    let Some(data) = &event.data else {
        return false;
    };
    match serde_json::from_str::<Head>(data) {
        Ok(head) => head.method.is_none() && head.id.as_ref() == Some(request),
        Err(_) => false,
    }
}

/// `events` (the response stream of `request`), each response to `request` held until the
/// next event or the stream's end arrives, for at most [`DRAIN`].
pub(crate) fn ending_with_response<S>(
    events: S,
    request: Option<RequestId>,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Sse, SseError>> + Send + 'static,
{
    let Some(request) = request else {
        return events.boxed();
    };
    struct State<S> {
        events: std::pin::Pin<Box<S>>,
        request: RequestId,
        next: Option<Result<Sse, SseError>>,
        ended: bool,
    }
    let state = State {
        events: Box::pin(events),
        request,
        next: None,
        ended: false,
    };
    stream::unfold(state, |mut state| async move {
        if let Some(item) = state.next.take() {
            return Some((item, state));
        }
        if state.ended {
            return None;
        }
        let item = state.events.next().await?;
        if matches!(&item, Ok(event) if answers(event, &state.request)) {
            match tokio::time::timeout(DRAIN, state.events.next()).await {
                Ok(None) => state.ended = true,
                Ok(Some(next)) => state.next = Some(next),
                Err(_elapsed) => {}
            }
        }
        Some((item, state))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> Result<Sse, SseError> {
        Ok(Sse::default().data(data))
    }

    #[tokio::test]
    async fn a_response_waits_for_the_end_of_its_stream() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut events = ending_with_response(rx, Some(RequestId::Number(7)));
        tx.unbounded_send(event(
            r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
        ))
        .unwrap();
        assert!(events.next().await.is_some());
        tx.unbounded_send(event(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#))
            .unwrap();
        // The response is held while its stream is open and the next item is not there...
        let mut next = events.next();
        assert!(futures::poll!(&mut next).is_pending());
        // ...and handed over as soon as the stream ends.
        drop(tx);
        assert!(next.await.is_some());
        assert!(events.next().await.is_none());
    }
}
