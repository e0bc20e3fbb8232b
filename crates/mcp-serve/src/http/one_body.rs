//! Innermost, just above rmcp: a POSTed request whose event stream starts with its answer
//! gets that answer as one JSON body.
//!
//! rmcp answers every request of a 2025-11-25 session (its `initialize` too) with an event
//! stream: a priming event (an id and a retry interval, for a client to resume from), then
//! what the handler sends for the request, and it closes the stream once the request's answer
//! is in it. For a request whose first message is its answer, which is most of them, the
//! stream is only framing: more writes for the gateway, more for a balancer in front, more to
//! decode for the client. The layer holds the stream's head for up to [`STREAM_AFTER`]: when
//! the first message it carries is a response or an error to a request, that message is the
//! whole answer (`application/json`, the response's other headers kept, `Mcp-Session-Id`
//! included); when it is a notification or a request of the server's (progress, elicitation),
//! or when nothing came in time, the stream is sent as rmcp made it, the events held first.
//! A stream that ended without an answer (the handler closed it for the client to resume) is
//! sent as it was too. Either is what the specification lets a server answer a POST with.
//!
//! The hold is short so that a long call still gets its stream, primed, early: a client or a
//! proxy that waits for a first byte sees one within [`STREAM_AFTER`], and a client whose
//! connection drops after that can resume from the priming event's id. The price: a client
//! whose connection drops during the hold has no event id to resume from, so the answer of a
//! call cut then is lost to it (it was still run), as for a sessionless request.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};
use serde::Deserialize;
use serde::de::IgnoredAny;
use sse_stream::SseStream;
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering};

/// How long an event stream's head is held for its first message before it is sent as a
/// stream.
pub(crate) const STREAM_AFTER: Duration = Duration::from_secs(1);

/// Turns a POSTed request's event stream whose first message is its answer into that answer
/// as one JSON body (the module's doc).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OneBodyLayer;

impl<S> Layer<S> for OneBodyLayer {
    type Service = OneBody<S>;

    fn layer(&self, inner: S) -> OneBody<S> {
        OneBody { inner }
    }
}

/// The service of a [`OneBodyLayer`].
#[derive(Debug, Clone)]
pub(crate) struct OneBody<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for OneBody<S>
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

    fn call(&mut self, request: Request<B>) -> Answering {
        let post = request.method() == Method::POST;
        let answered = self.inner.call(request);
        if !post {
            return Box::pin(answered);
        }
        Box::pin(async move { Ok(settle(answered.await?, STREAM_AFTER).await) })
    }
}

/// `answer` as one JSON body when it is an event stream whose first message, within
/// `within`, is an answer; else `answer` as it was, the frames read from it sent first.
async fn settle(answer: Answer, within: Duration) -> Answer {
    if answer.status() != StatusCode::OK || !is_event_stream(&answer) {
        return answer;
    }
    let (mut parts, mut body) = answer.into_parts();
    let mut held: VecDeque<Frame<Bytes>> = VecDeque::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            break;
        };
        // The end of the stream (rmcp's bodies never fail).
        let Some(Ok(frame)) = frame else { break };
        let Some(data) = frame.data_ref() else {
            // Not data (trailers): sent as it came.
            held.push_back(frame);
            break;
        };
        match first_message(data) {
            Head::Priming => held.push_back(frame),
            Head::Answer(message) => {
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return Answer::from_parts(parts, Full::new(Bytes::from(message)).boxed());
            }
            Head::Other => {
                held.push_back(frame);
                break;
            }
        }
    }
    if held.is_empty() {
        return Answer::from_parts(parts, body);
    }
    Answer::from_parts(parts, Replay { held, rest: body }.boxed())
}

fn is_event_stream(answer: &Answer) -> bool {
    answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// What one frame of rmcp's event stream says about the stream.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// An event without a message: rmcp's priming event (an id and a retry interval).
    Priming,
    /// A message that answers a request: the stream's only message.
    Answer(String),
    /// Anything else: a notification or request first, or a frame that is not one whole event
    /// (a keep-alive comment among them).
    Other,
}

/// The members of a JSON-RPC message that tell an answer (an `id`, no `method`).
#[derive(Deserialize)]
struct Shape {
    #[serde(default)]
    id: Option<IgnoredAny>,
    #[serde(default)]
    method: Option<IgnoredAny>,
}

/// Reads one frame, which rmcp writes as one whole event: anything else is [`Head::Other`].
fn first_message(frame: &Bytes) -> Head {
    let mut events = SseStream::new(Full::new(frame.clone()));
    let Some(Some(Ok(event))) = events.next().now_or_never() else {
        return Head::Other;
    };
    // One whole event and nothing after it, or the frame is not read further.
    if !matches!(events.next().now_or_never(), Some(None)) {
        return Head::Other;
    }
    let data = event.data.unwrap_or_default();
    if data.is_empty() {
        return Head::Priming;
    }
    match serde_json::from_str::<Shape>(&data) {
        Ok(Shape {
            id: Some(_),
            method: None,
        }) => Head::Answer(data),
        _ => Head::Other,
    }
}

/// A body that sends the frames already read, then the rest.
struct Replay {
    held: VecDeque<Frame<Bytes>>,
    rest: BoxBody<Bytes, Infallible>,
}

impl Body for Replay {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(frame) = self.held.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let held: u64 = (self.held.iter())
            .filter_map(Frame::data_ref)
            .map(|b| b.len() as u64)
            .sum();
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + held);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + held);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(frames: Vec<&'static str>, then_pending: bool) -> Answer {
        let frames = futures::stream::iter(
            frames
                .into_iter()
                .map(|f| Ok::<_, Infallible>(Frame::data(Bytes::from_static(f.as_bytes())))),
        );
        let body: BoxBody<Bytes, Infallible> = if then_pending {
            BodyExt::boxed(http_body_util::StreamBody::new(
                frames.chain(futures::stream::pending()),
            ))
        } else {
            BodyExt::boxed(http_body_util::StreamBody::new(frames))
        };
        let mut answer = Answer::new(body);
        answer.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        answer
            .headers_mut()
            .insert("mcp-session-id", HeaderValue::from_static("abc"));
        answer
    }

    async fn text(answer: Answer) -> String {
        let bytes = answer.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    const PRIMING: &str = "id: 0\nretry: 3000\ndata: \n\n";
    const ANSWER: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nid: 1\n\n";
    const PROGRESS: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\nid: 1\n\n";

    #[tokio::test]
    async fn a_stream_that_starts_with_its_answer_is_one_json_body() {
        let answer = settle(stream(vec![PRIMING, ANSWER], true), STREAM_AFTER).await;
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(answer.headers()["mcp-session-id"], "abc");
        assert_eq!(
            text(answer).await,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
    }

    #[tokio::test]
    async fn a_stream_that_notifies_first_is_sent_whole_as_a_stream() {
        let answer = settle(stream(vec![PRIMING, PROGRESS, ANSWER], false), STREAM_AFTER).await;
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert_eq!(text(answer).await, [PRIMING, PROGRESS, ANSWER].concat());
    }

    #[tokio::test]
    async fn a_stream_closed_before_its_answer_keeps_its_priming_event() {
        let answer = settle(stream(vec![PRIMING], false), STREAM_AFTER).await;
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert_eq!(text(answer).await, PRIMING);
    }

    #[tokio::test]
    async fn a_slow_answer_is_streamed_once_the_hold_is_over() {
        // Nothing comes after the priming event: the hold ends, and the stream goes out as it
        // is, its priming event first.
        let answer = settle(stream(vec![PRIMING], true), Duration::from_millis(20)).await;
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
        let mut body = answer.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, PRIMING);
        assert!(
            body.frame().now_or_never().is_none(),
            "the rest is still to come"
        );
    }

    #[tokio::test]
    async fn what_is_no_event_stream_or_no_success_passes_as_it_is() {
        let mut refused = stream(vec![ANSWER], false);
        *refused.status_mut() = StatusCode::NOT_FOUND;
        let answer = settle(refused, STREAM_AFTER).await;
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert_eq!(text(answer).await, ANSWER);
        let mut json = stream(vec![r#"{"jsonrpc":"2.0","id":1,"result":{}}"#], false);
        json.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let answer = settle(json, STREAM_AFTER).await;
        assert_eq!(
            text(answer).await,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
    }

    #[tokio::test]
    async fn only_a_post_is_held() {
        let inner = tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(stream(vec![PRIMING, ANSWER], true))
        });
        let mut service = OneBodyLayer.layer(inner);
        let get = Request::get("/mcp").body(()).unwrap();
        let answer = service.call(get).await.unwrap();
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
        let post = Request::post("/mcp").body(()).unwrap();
        let answer = service.call(post).await.unwrap();
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "application/json");
    }

    #[test]
    fn only_a_message_with_an_id_and_no_method_is_an_answer() {
        let head = |s: &'static str| first_message(&Bytes::from_static(s.as_bytes()));
        assert_eq!(head(PRIMING), Head::Priming);
        // A frame that is no whole event is not read further: the stream goes out.
        assert_eq!(head(": keep-alive\n\n"), Head::Other);
        assert!(matches!(head(ANSWER), Head::Answer(_)));
        let error =
            "data: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":1,\"message\":\"m\"}}\n\n";
        assert!(matches!(head(error), Head::Answer(_)));
        assert_eq!(head(PROGRESS), Head::Other);
        let asks = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\"}\n\n";
        assert_eq!(head(asks), Head::Other);
        assert_eq!(head("data: {\"jsonrpc\":\"2.0\",\"id\":1,"), Head::Other);
        assert_eq!(head("data: not json\n\n"), Head::Other);
        let two = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\ndata: {}\n\n";
        assert_eq!(head(two), Head::Other, "a frame of two events");
    }
}
