//! The `Origin` check (DNS-rebinding protection): a request from a browser page of an origin
//! not allowed is refused `403`; requests without `Origin` (not from a browser) pass.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, StatusCode, header};
use tower_layer::Layer;
use tower_service::Service;
use url::Url;

use super::answer::{Answer, Answering, given, plain};

/// Refuses a request whose one `Origin` is not among the allowed (normalized, see
/// [`normalize_origin`]) with `403`; several `Origin` headers are refused too.
#[derive(Debug, Clone)]
pub(crate) struct OriginLayer(Arc<[String]>);

impl OriginLayer {
    /// Allows `origins`, each already normalized.
    pub(crate) fn new(origins: Vec<String>) -> Self {
        Self(origins.into())
    }
}

impl<S> Layer<S> for OriginLayer {
    type Service = OriginChecked<S>;

    fn layer(&self, inner: S) -> OriginChecked<S> {
        OriginChecked {
            allowed: self.0.clone(),
            inner,
        }
    }
}

/// The service of [`OriginLayer`].
#[derive(Debug, Clone)]
pub(crate) struct OriginChecked<S> {
    allowed: Arc<[String]>,
    inner: S,
}

impl<S> OriginChecked<S> {
    fn allows(&self, headers: &http::HeaderMap) -> bool {
        let mut values = headers.get_all(header::ORIGIN).iter();
        let Some(value) = values.next() else {
            return true;
        };
        values.next().is_none()
            && value
                .to_str()
                .ok()
                .and_then(normalize_origin)
                .is_some_and(|origin| self.allowed.contains(&origin))
    }
}

impl<S, B> Service<Request<B>> for OriginChecked<S>
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
        if !self.allows(request.headers()) {
            return given(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Origin is not allowed",
            ));
        }
        Box::pin(self.inner.call(request))
    }
}

/// An origin as `scheme://host[:port]`, the port left out when it is the scheme's default.
pub(crate) fn normalize_origin(origin: &str) -> Option<String> {
    if origin.eq_ignore_ascii_case("null") {
        return Some("null".into());
    }
    let url = Url::parse(origin).ok()?;
    let serialized = url.origin().ascii_serialization();
    (serialized != "null").then_some(serialized)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::testing::through;

    #[test]
    fn origins_are_compared_normalized() {
        assert_eq!(
            normalize_origin("HTTP://LocalHost:80").as_deref(),
            Some("http://localhost")
        );
        assert_eq!(
            normalize_origin("https://a.example:8443/").as_deref(),
            Some("https://a.example:8443")
        );
        assert_eq!(normalize_origin("null").as_deref(), Some("null"));
        assert_eq!(normalize_origin("not a url"), None);
    }

    #[tokio::test]
    async fn a_foreign_origin_is_forbidden_and_reaches_nothing() {
        let layer = OriginLayer::new(vec!["https://app.example".into()]);
        let with = |origins: &[&str]| {
            let mut request = Request::new(());
            for origin in origins {
                request
                    .headers_mut()
                    .append(header::ORIGIN, origin.parse().unwrap());
            }
            request
        };
        for allowed in [&[][..], &["https://app.example:443"]] {
            let (answer, reached) = through(&layer, with(allowed)).await;
            assert_eq!((answer.status.as_u16(), reached), (200, 1), "{allowed:?}");
        }
        for refused in [
            &["http://evil.example"][..],
            &["null"],
            &["https://app.example", "https://app.example"],
        ] {
            let (answer, reached) = through(&layer, with(refused)).await;
            assert_eq!((answer.status.as_u16(), reached), (403, 0), "{refused:?}");
            assert_eq!(answer.body, "Forbidden: Origin is not allowed");
        }
    }
}
