//! The front's routing: the endpoint's path passes on, the protected-resource metadata (RFC
//! 9728, with auth on) is answered here, any other path is `404`.

use http::{Method, Request, StatusCode};
use url::Url;

use super::answer::{Answer, json, plain};
use super::auth::BearerAuth;
use super::check::Check;

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
impl<B> Check<B> for Routes {
    type Kept = ();

    fn check(&self, request: &Request<B>) -> Result<(), Answer> {
        let path = request.uri().path();
        if let Some(auth) = &self.auth
            && self.metadata_paths.iter().any(|p| p == path)
        {
            if request.method() != Method::GET {
                return Err(plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"));
            }
            return Err(json(
                StatusCode::OK,
                &auth.metadata(&self.resource, &self.name),
            ));
        }
        if path != self.path {
            return Err(plain(StatusCode::NOT_FOUND, "Not Found"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::testing::through;
    use crate::http::check::CheckLayer;

    fn layer(auth: Option<BearerAuth>) -> CheckLayer<Routes> {
        let well_known = "/.well-known/oauth-protected-resource";
        CheckLayer::new(Routes {
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
