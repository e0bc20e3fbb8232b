//! The front's bearer authentication: a request without valid credentials is answered `401`
//! with the challenge naming the protected-resource metadata; an address whose requests failed
//! it too often is answered `429` instead, before its credentials are checked. A request refused
//! only because its token cannot be verified now (the keys or the fleet's store unreachable)
//! does not count as a failure.

use std::sync::Arc;

use agent_core::Principal;
use http::{HeaderValue, Request, StatusCode, header};
use url::Url;

use super::answer::{Answer, ClientAddr, plain, too_many};
use super::auth::{BearerAuth, Verdict};
use super::check::{Gate, GateLayer};
use super::limit::{Limiter, RateLimit};

/// The gate of authentication, with what it checks against.
#[derive(Debug)]
pub(crate) struct Authentication {
    auth: BearerAuth,
    /// The endpoint's URL (a JWT's default audience).
    resource: Url,
    /// Named in the challenge.
    metadata_url: Url,
    /// Requests failing authentication, per client address.
    failures: Option<Limiter>,
}

/// Lets only requests with valid credentials ([`BearerAuth`]) pass, with who they act for (a
/// [`Principal`]) in their extensions.
pub(crate) type AuthLayer = GateLayer<Authentication>;

impl Authentication {
    /// Checks `auth` for the endpoint `resource`, naming `metadata_url` in challenges; with
    /// `failure_limit`, an address out of that budget of failed requests is refused `429`.
    pub(crate) fn layer(
        auth: BearerAuth,
        resource: Url,
        metadata_url: Url,
        failure_limit: Option<RateLimit>,
    ) -> AuthLayer {
        GateLayer::new(Self {
            auth,
            resource,
            metadata_url,
            failures: failure_limit.map(Limiter::new),
        })
    }
}

impl Authentication {
    /// The refusal of a request from `client` with `headers`, or who it acts for when it
    /// passes.
    async fn refusal(
        &self,
        headers: &http::HeaderMap,
        method: &http::Method,
        client: std::net::IpAddr,
    ) -> Result<Option<Principal>, Answer> {
        if let Some(failures) = &self.failures
            && let Err(wait) = failures.available(client)
        {
            return Err(too_many(
                wait,
                "Too Many Requests: too many failed authentications from this address",
            ));
        }
        let verdict = match self.auth.check(headers, method, &self.resource).await {
            Verdict::Allowed(principal) => return Ok(principal),
            refused => refused,
        };
        // A token the gateway cannot check now (its keys or the fleet's store unreachable) is
        // not the client's failure: counting it would lock out every client of an outage.
        if let Some(failures) = &self.failures
            && !matches!(verdict, Verdict::Unavailable)
        {
            let _ = failures.take(client);
        }
        let mut response = plain(StatusCode::UNAUTHORIZED, "Unauthorized");
        let challenge = self.auth.challenge(&self.metadata_url, verdict);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        Err(response)
    }
}

impl Gate for Authentication {
    async fn pass<B: Send + 'static>(
        self: Arc<Self>,
        mut request: Request<B>,
    ) -> Result<Request<B>, Answer> {
        let client = ClientAddr::of(&request);
        let principal = self
            .refusal(request.headers(), request.method(), client)
            .await?;
        // The session handler binds the session to it.
        if let Some(principal) = principal {
            request.extensions_mut().insert(principal);
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::testing::through;

    fn request(authorization: Option<&str>) -> Request<()> {
        let mut request = Request::new(());
        request
            .extensions_mut()
            .insert(ClientAddr("10.0.0.1".parse().unwrap()));
        if let Some(value) = authorization {
            request
                .headers_mut()
                .insert(header::AUTHORIZATION, value.parse().unwrap());
        }
        request
    }

    #[tokio::test]
    async fn only_the_token_passes_and_failures_are_limited_per_address() {
        let metadata: Url = "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp"
            .parse()
            .unwrap();
        let layer = Authentication::layer(
            BearerAuth::new("tok"),
            "http://127.0.0.1:1/mcp".parse().unwrap(),
            metadata.clone(),
            Some(RateLimit::new(0.01, 2)),
        );
        let (answer, reached) = through(&layer, request(Some("Bearer tok"))).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 1));
        for wrong in [None, Some("Bearer nope")] {
            let (answer, reached) = through(&layer, request(wrong)).await;
            assert_eq!((answer.status.as_u16(), reached), (401, 0), "{wrong:?}");
            let www = answer.headers["www-authenticate"].to_str().unwrap();
            assert!(
                www.starts_with(&format!("Bearer resource_metadata=\"{metadata}\"")),
                "{www}"
            );
        }
        // The budget of failures is spent: even the right token is refused, unchecked.
        let (answer, reached) = through(&layer, request(Some("Bearer tok"))).await;
        assert_eq!((answer.status.as_u16(), reached), (429, 0));
        assert!(answer.headers.contains_key("retry-after"));
        assert!(
            answer.body.contains("failed authentications"),
            "{}",
            answer.body
        );
    }
}
