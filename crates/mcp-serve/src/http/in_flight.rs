//! Counting the exchanges in flight for a graceful shutdown: a POST that passed every check
//! counts until its answer is sent whole (or dropped).

use http::{Method, Request};

use super::answer::{Answer, holding};
use super::check::Check;
use crate::drain::{InFlight, InFlightGuard};

/// Counts each POST from when it reaches this check until its answer is sent; other methods
/// (event streams, session ends) are not counted.
impl<B> Check<B> for InFlight {
    type Kept = Option<InFlightGuard>;

    fn check(&self, request: &Request<B>) -> Result<Option<InFlightGuard>, Answer> {
        Ok((request.method() == Method::POST).then(|| self.enter()))
    }

    fn answer(kept: Option<InFlightGuard>, answer: Answer) -> Answer {
        match kept {
            Some(guard) => holding(answer, guard),
            None => answer,
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    use tower_layer::Layer;

    use super::*;
    use crate::http::answer::testing::Inner;
    use crate::http::check::CheckLayer;

    #[tokio::test]
    async fn a_post_counts_until_its_answer_is_sent() {
        let in_flight = InFlight::default();
        let layer = CheckLayer::new(in_flight.clone());
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
