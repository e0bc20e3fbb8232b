//! Counting the exchanges in flight for a graceful shutdown: a POST that passed every check
//! counts until its answer is sent whole (or dropped).

use std::convert::Infallible;
use std::task::{Context, Poll};

use http::{Method, Request};
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering, holding};
use crate::drain::InFlight;

/// Counts each POST in `0` from when it reaches this layer until its answer is sent; other
/// methods (event streams, session ends) are not counted.
#[derive(Debug, Clone)]
pub(crate) struct InFlightLayer(pub(crate) InFlight);

impl<S> Layer<S> for InFlightLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            in_flight: self.0.clone(),
            inner,
        }
    }
}

/// The service of [`InFlightLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Counted<S> {
    in_flight: InFlight,
    inner: S,
}

impl<S, B> Service<Request<B>> for Counted<S>
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
        if request.method() != Method::POST {
            return Box::pin(self.inner.call(request));
        }
        let guard = self.in_flight.enter();
        let answered = self.inner.call(request);
        Box::pin(async move { Ok(holding(answered.await?, guard)) })
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;
    use crate::http::answer::testing::Inner;

    #[tokio::test]
    async fn a_post_counts_until_its_answer_is_sent() {
        let in_flight = InFlight::default();
        let layer = InFlightLayer(in_flight.clone());
        let inner = Inner::default();
        let answer = layer
            .layer(inner.clone())
            .oneshot(Request::post("/mcp").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!((in_flight.count(), inner.reached()), (1, 1));
        answer.into_body().collect().await.unwrap();
        assert_eq!(in_flight.count(), 0);
        let answer = layer
            .layer(inner.clone())
            .oneshot(Request::get("/mcp").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(
            (in_flight.count(), inner.reached()),
            (0, 2),
            "a GET is not counted"
        );
        drop(answer);
    }
}
