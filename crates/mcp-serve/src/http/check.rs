//! One shape for the front's checks: a [`Check`] looks at a request before it passes on
//! (refusing it, or keeping what it needs, such as a guard) and may shape the answer from below;
//! [`CheckLayer`] makes any check a tower layer. The checks that must wait for something
//! (credentials, the body) are layers of their own.
//!
//! tower-http's `ValidateRequestHeaderLayer` has the first half of this shape only: nothing of
//! the request is kept for the answer, which the guards and the front's rewritten refusals need.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering, given};

/// A check of requests with bodies `B`.
pub(crate) trait Check<B>: Send + Sync + 'static {
    /// What is kept of a request that passes, for its answer.
    type Kept: Send + 'static;

    /// `Ok` with what is kept when `request` passes on, `Err` with the refusal when it does
    /// not; a refused request reaches nothing below.
    #[expect(
        clippy::result_large_err,
        reason = "the refusal is the answer itself, moved once to the client"
    )]
    fn check(&self, request: &Request<B>) -> Result<Self::Kept, Answer>;

    /// The answer to a request that passed, from the answer below and what was kept.
    fn answer(kept: Self::Kept, answer: Answer) -> Answer {
        let _ = kept;
        answer
    }
}

/// Runs its check on every request.
#[derive(Debug)]
pub(crate) struct CheckLayer<C>(Arc<C>);

impl<C> CheckLayer<C> {
    pub(crate) fn new(check: C) -> Self {
        Self(Arc::new(check))
    }
}

impl<C> Clone for CheckLayer<C> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<C, S> Layer<S> for CheckLayer<C> {
    type Service = Checked<C, S>;

    fn layer(&self, inner: S) -> Checked<C, S> {
        Checked {
            check: self.0.clone(),
            inner,
        }
    }
}

/// The service of a [`CheckLayer`].
#[derive(Debug)]
pub(crate) struct Checked<C, S> {
    check: Arc<C>,
    inner: S,
}

impl<C, S: Clone> Clone for Checked<C, S> {
    fn clone(&self) -> Self {
        Self {
            check: self.check.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<C, S, B> Service<Request<B>> for Checked<C, S>
where
    C: Check<B>,
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
        match self.check.check(&request) {
            Err(refused) => given(refused),
            Ok(kept) => {
                let answered = self.inner.call(request);
                Box::pin(async move { Ok(C::answer(kept, answered.await?)) })
            }
        }
    }
}
