//! The front's reading of a request's body: whole, at most `max` bytes within a time, before
//! anything below it looks at the message; what it passes on is a [`Whole`] body.
//!
//! tower-http's `RequestBodyLimitLayer` and body timeout are not used: its `413` has a body
//! and headers of its own (no `Connection: close`), it leaves the rest of an oversized upload
//! to the server (a client still sending may see a reset connection instead of the answer,
//! which the front avoids by reading and dropping the rest for a while), and its timeout
//! surfaces as a body error, not as this front's `408` that closes the connection.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering, plain, take};

/// A request body read whole: the checks below the body layer read its bytes, rmcp reads it
/// as a body of one frame.
#[derive(Debug, Default)]
pub(crate) struct Whole(Bytes);

impl Whole {
    /// The body's bytes (empty once sent on as a body).
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.0
    }
}

impl From<Bytes> for Whole {
    fn from(bytes: Bytes) -> Self {
        Self(bytes)
    }
}

impl Body for Whole {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let bytes = std::mem::take(&mut self.get_mut().0);
        Poll::Ready((!bytes.is_empty()).then(|| Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.len() as u64)
    }
}

/// How much of an oversized upload is read and dropped after the `413`, and for how long.
const LINGER_BYTES: usize = 64 * 1024 * 1024;
const LINGER_TIME: Duration = Duration::from_secs(5);

/// Reads a POST's body whole, at most `max` bytes within `timeout`, and passes it on as a
/// [`Whole`]; other methods pass on with an empty body, theirs unread. Beyond the size, `413`
/// — before reading when the length is declared — and the rest of the upload is read and
/// dropped in the background (at most [`LINGER_BYTES`] for [`LINGER_TIME`]), so a client
/// still sending gets to read the answer instead of a reset connection. Beyond the time,
/// `408` and the connection is closed. A body that fails to arrive is `400`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLayer {
    pub(crate) max: usize,
    pub(crate) timeout: Duration,
}

impl<S> Layer<S> for BodyLayer {
    type Service = BodyRead<S>;

    fn layer(&self, inner: S) -> BodyRead<S> {
        BodyRead {
            limits: *self,
            inner,
        }
    }
}

/// The service of [`BodyLayer`].
#[derive(Debug, Clone)]
pub(crate) struct BodyRead<S> {
    limits: BodyLayer,
    inner: S,
}

impl<S, B> Service<Request<B>> for BodyRead<S>
where
    S: Service<Request<Whole>, Response = Answer, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Answering {
        let (parts, body) = request.into_parts();
        let limits = self.limits;
        let mut inner = take(&mut self.inner);
        Box::pin(async move {
            let body = if parts.method == Method::POST {
                match limits.read(&parts.headers, body).await {
                    Ok(bytes) => Whole(bytes),
                    Err(refused) => return Ok(refused),
                }
            } else {
                Whole::default()
            };
            inner.call(Request::from_parts(parts, body)).await
        })
    }
}

impl BodyLayer {
    async fn read<B>(self, headers: &http::HeaderMap, body: B) -> Result<Bytes, Answer>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
    {
        match tokio::time::timeout(self.timeout, self.read_untimed(headers, body)).await {
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

    async fn read_untimed<B>(self, headers: &http::HeaderMap, mut body: B) -> Result<Bytes, Answer>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
    {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max as u64) {
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
                if data.len() > self.max - collected.len() {
                    return Err(too_large(body));
                }
                collected.extend_from_slice(&data);
            }
        }
        Ok(collected.freeze())
    }
}

/// `413 Payload Too Large`, closing the connection once the rest of `body` was dropped.
fn too_large<B>(mut body: B) -> Answer
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
{
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http_body_util::{Full, StreamBody};

    use super::*;
    use crate::http::answer::testing::through;

    const LIMITS: BodyLayer = BodyLayer {
        max: 8,
        timeout: Duration::from_secs(5),
    };

    fn post(body: &'static str, declared: bool) -> Request<Full<Bytes>> {
        let mut request = Request::post("/mcp")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap();
        if declared {
            request
                .headers_mut()
                .insert(header::CONTENT_LENGTH, body.len().into());
        }
        request
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_passed_on_whole() {
        let seen = Arc::new(Mutex::new(None));
        let inner = {
            let seen = seen.clone();
            tower::service_fn(move |request: Request<Whole>| {
                *seen.lock().unwrap() = Some(request.body().bytes().clone());
                std::future::ready(Ok::<_, Infallible>(plain(StatusCode::OK, "inner")))
            })
        };
        let mut service = LIMITS.layer(inner);
        let answer = Service::call(&mut service, post("12345678", true))
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(seen.lock().unwrap().as_deref(), Some(&b"12345678"[..]));
        let get = Request::get("/mcp")
            .body(Full::new(Bytes::from_static(b"x")))
            .unwrap();
        Service::call(&mut service, get).await.unwrap();
        assert_eq!(
            seen.lock().unwrap().as_deref(),
            Some(&b""[..]),
            "only a POST's body is read"
        );
    }

    #[tokio::test]
    async fn an_oversized_body_is_refused_declared_or_not() {
        for declared in [true, false] {
            let (answer, reached) = through(&LIMITS, post("123456789", declared)).await;
            assert_eq!((answer.status.as_u16(), reached), (413, 0), "{declared}");
            assert_eq!(answer.body, "Payload Too Large");
            assert_eq!(answer.headers["connection"], "close");
        }
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_in_time_is_refused() {
        // A body that never comes: the short timeout is the only way out.
        let never = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
        let request = Request::post("/mcp").body(StreamBody::new(never)).unwrap();
        let limits = BodyLayer {
            max: 8,
            timeout: Duration::from_millis(20),
        };
        let (answer, reached) = through(&limits, request).await;
        assert_eq!((answer.status.as_u16(), reached), (408, 0));
        assert_eq!(
            answer.body,
            "Request Timeout: the body did not arrive in time"
        );
        assert_eq!(answer.headers["connection"], "close");
    }
}
