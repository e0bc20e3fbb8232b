//! One shape for the front's checks: a [`Check`] looks at a request before it passes on
//! (refusing it, or keeping what it needs, such as a guard) and may shape the answer from below;
//! [`CheckLayer`] makes any check a tower layer. A check that must wait for something
//! (credentials checked, a count in a store) is a [`Gate`], made a layer by [`GateLayer`]; the
//! body's reading, which changes the request's type, is a layer of its own.
//!
//! tower-http's `ValidateRequestHeaderLayer` has the first half of this shape only: nothing of
//! the request is kept for the answer, which the guards and the front's rewritten refusals need.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering, given, take};

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

/// A check that must wait before a request passes on (perhaps with what it learnt in its
/// extensions) or is refused.
pub(crate) trait Gate: Send + Sync + 'static {
    /// `Ok` with the request to pass on, `Err` with the refusal; a refused request reaches
    /// nothing below.
    fn pass<B: Send + 'static>(
        self: Arc<Self>,
        request: Request<B>,
    ) -> impl Future<Output = Result<Request<B>, Answer>> + Send;
}

/// Runs its gate on every request.
#[derive(Debug)]
pub(crate) struct GateLayer<G>(Arc<G>);

impl<G> GateLayer<G> {
    pub(crate) fn new(gate: G) -> Self {
        Self(Arc::new(gate))
    }
}

impl<G> Clone for GateLayer<G> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<G, S> Layer<S> for GateLayer<G> {
    type Service = Gated<G, S>;

    fn layer(&self, inner: S) -> Gated<G, S> {
        Gated {
            gate: self.0.clone(),
            inner,
        }
    }
}

/// The service of a [`GateLayer`].
#[derive(Debug)]
pub(crate) struct Gated<G, S> {
    gate: Arc<G>,
    inner: S,
}

impl<G, S: Clone> Clone for Gated<G, S> {
    fn clone(&self) -> Self {
        Self {
            gate: self.gate.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<G, S, B> Service<Request<B>> for Gated<G, S>
where
    G: Gate,
    S: Service<Request<B>, Response = Answer, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Answering {
        let passing = self.gate.clone().pass(request);
        let mut inner = take(&mut self.inner);
        Box::pin(async move {
            match passing.await {
                Ok(request) => inner.call(request).await,
                Err(refused) => Ok(refused),
            }
        })
    }
}
