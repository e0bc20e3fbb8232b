//! The `Origin` check (DNS-rebinding protection): a request from a browser page of an origin
//! not allowed is refused `403`; requests without `Origin` (not from a browser) pass.

use http::{Request, StatusCode, header};
use url::Url;

use super::answer::{Answer, plain};
use super::check::Check;

/// The allowed origins: a request whose one `Origin` is not among them (normalized, see
/// [`normalize_origin`]) is refused `403`; several `Origin` headers are refused too.
#[derive(Debug)]
pub(crate) struct Origins(pub(crate) Vec<String>);

impl<B> Check<B> for Origins {
    type Kept = ();

    fn check(&self, request: &Request<B>) -> Result<(), Answer> {
        let mut values = request.headers().get_all(header::ORIGIN).iter();
        let Some(value) = values.next() else {
            return Ok(());
        };
        let allowed = values.next().is_none()
            && value
                .to_str()
                .ok()
                .and_then(normalize_origin)
                .is_some_and(|origin| self.0.contains(&origin));
        if !allowed {
            return Err(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Origin is not allowed",
            ));
        }
        Ok(())
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
    use crate::http::check::CheckLayer;

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
        let layer = CheckLayer::new(Origins(vec!["https://app.example".into()]));
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
