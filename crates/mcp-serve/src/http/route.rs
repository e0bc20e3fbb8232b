//! The front's routing: the endpoint's path passes on, the protected-resource metadata (RFC
//! 9728, with auth on) is answered here, any other path is `404`.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, StatusCode};
use tower_layer::Layer;
use tower_service::Service;
use url::Url;

use super::answer::{Answer, Answering, given, json, plain};
use super::auth::BearerAuth;

/// What the routing knows of the endpoint.
#[derive(Debug)]
pub(crate) struct Routes {
    /// The endpoint's path: the only one that passes on.
    pub(crate) path: String,
    /// Where the metadata is served (path-aware first), with auth on.
    pub(crate) metadata_paths: [String; 2],
    /// The endpoint's URL, the metadata's resource.
    pub(crate) resource: Url,
    /// The server's name in the metadata.
    pub(crate) name: String,
    /// The authentication whose metadata is served; none: no metadata.
    pub(crate) auth: Option<BearerAuth>,
}

/// Routes requests by path: the endpoint's passes on, the metadata's is answered (`GET`
/// only, else `405`), any other is `404 Not Found`.
#[derive(Debug, Clone)]
pub(crate) struct RouteLayer(Arc<Routes>);

impl RouteLayer {
    pub(crate) fn new(routes: Routes) -> Self {
        Self(Arc::new(routes))
    }
}

impl<S> Layer<S> for RouteLayer {
    type Service = Routed<S>;

    fn layer(&self, inner: S) -> Routed<S> {
        Routed {
            routes: self.0.clone(),
            inner,
        }
    }
}

/// The service of [`RouteLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Routed<S> {
    routes: Arc<Routes>,
    inner: S,
}

impl Routes {
    /// The answer to `request` when it is not for the endpoint.
    fn answer<B>(&self, request: &Request<B>) -> Option<Answer> {
        let path = request.uri().path();
        if let Some(auth) = &self.auth
            && self.metadata_paths.iter().any(|p| p == path)
        {
            if request.method() != Method::GET {
                return Some(plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"));
            }
            return Some(json(
                StatusCode::OK,
                &auth.metadata(&self.resource, &self.name),
            ));
        }
        (path != self.path).then(|| plain(StatusCode::NOT_FOUND, "Not Found"))
    }
}

impl<S, B> Service<Request<B>> for Routed<S>
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
        match self.routes.answer(&request) {
            Some(answer) => given(answer),
            None => Box::pin(self.inner.call(request)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::testing::through;

    fn layer(auth: Option<BearerAuth>) -> RouteLayer {
        let well_known = "/.well-known/oauth-protected-resource";
        RouteLayer::new(Routes {
            path: "/mcp".into(),
            metadata_paths: [format!("{well_known}/mcp"), well_known.into()],
            resource: "http://127.0.0.1:1/mcp".parse().unwrap(),
            name: "demo".into(),
            auth,
        })
    }

    fn request(method: &str, path: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
    }

    #[tokio::test]
    async fn only_the_endpoint_passes_and_the_metadata_is_answered_here() {
        let with_auth = layer(Some(BearerAuth::new("t").with_scopes(["tools"])));
        let (answer, reached) = through(&with_auth, request("POST", "/mcp")).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 1));
        let (answer, reached) = through(&with_auth, request("POST", "/other")).await;
        assert_eq!((answer.status.as_u16(), reached), (404, 0));
        assert_eq!(answer.body, "Not Found");
        let metadata = "/.well-known/oauth-protected-resource/mcp";
        let (answer, reached) = through(&with_auth, request("GET", metadata)).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 0));
        assert_eq!(answer.json()["resource"], "http://127.0.0.1:1/mcp");
        assert_eq!(answer.json()["scopes_supported"][0], "tools");
        let (answer, reached) = through(&with_auth, request("POST", metadata)).await;
        assert_eq!((answer.status.as_u16(), reached), (405, 0));
        // Without auth there is no metadata.
        let (answer, reached) = through(&layer(None), request("GET", metadata)).await;
        assert_eq!((answer.status.as_u16(), reached), (404, 0));
    }
}
