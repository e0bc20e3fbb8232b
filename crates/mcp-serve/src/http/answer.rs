//! What every layer of the HTTP front shares: the answer type (rmcp's response), the refusals
//! it builds, the client's address a request carries, and a response body that holds a guard
//! until it is sent.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};
use rmcp::model::JsonRpcError;
use serde_json::Value;

/// An answer: rmcp's response type, which every layer of the front answers with too.
pub(crate) type Answer = Response<BoxBody<Bytes, Infallible>>;

/// The future of a layer's answer.
pub(crate) type Answering = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

/// The TCP peer's address, put in a request's extensions by the connection serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientAddr(pub(crate) IpAddr);

impl ClientAddr {
    /// The address the per-address limits count `request` under (unspecified when no
    /// connection named one): an IPv4 client's own, an IPv6 client's /64 (what one host is
    /// usually given, so that it cannot take a fresh budget from each of its addresses).
    pub(crate) fn of<B>(request: &http::Request<B>) -> IpAddr {
        match request
            .extensions()
            .get::<Self>()
            .map(|c| c.0.to_canonical())
        {
            Some(IpAddr::V6(v6)) => {
                IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX)))
            }
            Some(v4) => v4,
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

/// `answer`, already given.
pub(crate) fn given(answer: Answer) -> Answering {
    Box::pin(std::future::ready(Ok(answer)))
}

/// The service polled ready, leaving a clone in its place: tower's way to call an inner
/// service from a future that outlives `&mut self`.
pub(crate) fn take<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// `status` with `text` as a plain-text body.
pub(crate) fn plain(status: StatusCode, text: &'static str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `status` with `body` as JSON.
pub(crate) fn json(status: StatusCode, body: &Value) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `status` with the JSON-RPC error `error`.
pub(crate) fn jsonrpc(status: StatusCode, error: JsonRpcError) -> Answer {
    json(status, &serde_json::to_value(error).unwrap_or(Value::Null))
}

/// `429 Too Many Requests` saying `text`, with `Retry-After` (whole seconds, at least 1).
pub(crate) fn too_many(wait: std::time::Duration, text: &'static str) -> Answer {
    let mut response = plain(StatusCode::TOO_MANY_REQUESTS, text);
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// `answer` with `guard` held until its body is sent whole (or dropped).
pub(crate) fn holding<G: Send + Sync + 'static>(answer: Answer, guard: G) -> Answer {
    answer.map(|inner| {
        Holding {
            inner,
            _guard: guard,
        }
        .boxed()
    })
}

/// A response body holding a guard.
struct Holding<G> {
    inner: BoxBody<Bytes, Infallible>,
    _guard: G,
}

// The guard is never pinned: only the body is polled.
impl<G> Unpin for Holding<G> {}

impl<G> Body for Holding<G> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A trivial inner service for the layers' tests: answers `200 inner`, counting its calls.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt;
    use tower::ServiceExt;
    use tower_layer::Layer;
    use tower_service::Service;

    use super::{Answer, Answering, StatusCode, plain};

    /// Counts the requests that reached it.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Inner(pub(crate) Arc<AtomicUsize>);

    impl Inner {
        pub(crate) fn reached(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    impl<B: Send + 'static> Service<http::Request<B>> for Inner {
        type Response = Answer;
        type Error = std::convert::Infallible;
        type Future = Answering;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<B>) -> Answering {
            self.0.fetch_add(1, Ordering::SeqCst);
            super::given(plain(StatusCode::OK, "inner"))
        }
    }

    /// Sends `request` through `layer` stacked over a fresh [`Inner`]: the answer's status,
    /// headers and body text, and how many requests reached the inner service.
    pub(crate) async fn through<L, B>(layer: &L, request: http::Request<B>) -> (Answered, usize)
    where
        L: Layer<Inner>,
        L::Service: Service<http::Request<B>, Response = Answer, Error = std::convert::Infallible>,
    {
        let inner = Inner::default();
        let answer = layer
            .layer(inner.clone())
            .oneshot(request)
            .await
            .unwrap_or_else(|never| match never {});
        (Answered::read(answer).await, inner.reached())
    }

    /// An answer read whole.
    #[derive(Debug)]
    pub(crate) struct Answered {
        pub(crate) status: StatusCode,
        pub(crate) headers: http::HeaderMap,
        pub(crate) body: String,
    }

    impl Answered {
        pub(crate) async fn read(answer: Answer) -> Self {
            let (parts, body) = answer.into_parts();
            let bytes = body.collect().await.unwrap_or_else(|never| match never {});
            Self {
                status: parts.status,
                headers: parts.headers,
                body: String::from_utf8_lossy(&bytes.to_bytes()).into_owned(),
            }
        }

        pub(crate) fn json(&self) -> serde_json::Value {
            serde_json::from_str(&self.body).expect("a JSON body")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted_as(addr: Option<&str>) -> IpAddr {
        let mut request = http::Request::new(());
        if let Some(addr) = addr {
            request
                .extensions_mut()
                .insert(ClientAddr(addr.parse().unwrap()));
        }
        ClientAddr::of(&request)
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64_and_a_mapped_one_as_ipv4() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert_eq!(counted_as(Some("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(
            counted_as(Some("2001:db8:1:2:aaaa::1")),
            counted_as(Some("2001:db8:1:2:ffff::9"))
        );
        assert_eq!(
            counted_as(Some("2001:db8:1:2:aaaa::1")),
            ip("2001:db8:1:2::")
        );
        assert_ne!(
            counted_as(Some("2001:db8:1:2::1")),
            counted_as(Some("2001:db8:1:3::1"))
        );
        assert_eq!(counted_as(Some("::ffff:10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(counted_as(None), ip("0.0.0.0"));
    }
}
