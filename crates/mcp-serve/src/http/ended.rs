//! A session ended by `DELETE` is answered `204 No Content`: rmcp says `202`, which clients
//! such as the Python SDK report as a failed termination (docs/upstream.md#rmcp-delete-202).

use std::convert::Infallible;
use std::task::{Context, Poll};

use http::{Method, Request, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering};

/// Turns the `202 Accepted` answering a `DELETE` into `204 No Content`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionEndLayer;

impl<S> Layer<S> for SessionEndLayer {
    type Service = SessionEnd<S>;

    fn layer(&self, inner: S) -> SessionEnd<S> {
        SessionEnd { inner }
    }
}

/// The service of [`SessionEndLayer`].
#[derive(Debug, Clone)]
pub(crate) struct SessionEnd<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for SessionEnd<S>
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
        let ends_session = request.method() == Method::DELETE;
        let answered = self.inner.call(request);
        Box::pin(async move {
            let mut answer = answered.await?;
            if ends_session && answer.status() == StatusCode::ACCEPTED {
                *answer.status_mut() = StatusCode::NO_CONTENT;
            }
            Ok(answer)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::{given, plain};

    #[tokio::test]
    async fn a_delete_accepted_is_no_content() {
        let mut service = SessionEndLayer.layer(tower::service_fn(|_: Request<()>| {
            given(plain(StatusCode::ACCEPTED, ""))
        }));
        for (method, status) in [("DELETE", 204), ("POST", 202)] {
            let request = Request::builder().method(method).body(()).unwrap();
            let answer = Service::call(&mut service, request).await.unwrap();
            assert_eq!(answer.status().as_u16(), status, "{method}");
        }
    }
}
