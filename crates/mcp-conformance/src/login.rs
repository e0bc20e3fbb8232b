//! The user of an authorization-code login, played without a browser: the suite's
//! authorization server approves at once and redirects, so the client fetches the
//! authorization URL itself and follows the redirect to its own loopback listener.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mcp_auth::{AuthError, CallbackListener, HttpFetch, Login, StoredLogin, UserAuthorization};
use url::Url;

/// The biggest answer read from the authorization endpoint or the listener.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// [`UserAuthorization`] without a user: `GET` the authorization URL (through the
/// transport's HTTP client), take the `Location` of its redirect, which must lead back to
/// the login's loopback redirect URI, and `GET` that from the [`CallbackListener`] waiting
/// on it, as a browser would. Each step is bounded by `timeout`.
#[derive(Debug, Clone)]
pub struct HeadlessBrowser {
    fetch: Arc<dyn HttpFetch>,
    timeout: Duration,
}

impl HeadlessBrowser {
    /// A browser fetching through `fetch`, each request bounded by `timeout`.
    pub fn new(fetch: Arc<dyn HttpFetch>, timeout: Duration) -> Self {
        Self { fetch, timeout }
    }

    async fn get(&self, server: &str, url: &Url) -> Result<http::Response<Bytes>, AuthError> {
        let request = http::Request::get(url.as_str())
            .body(Bytes::new())
            .map_err(|e| refuse(server, format!("cannot request {url}: {e}")))?;
        tokio::time::timeout(self.timeout, self.fetch.fetch(request, MAX_ANSWER_BYTES))
            .await
            .map_err(|_| {
                refuse(
                    server,
                    format!("no answer from {url} within {:?}", self.timeout),
                )
            })?
            .map_err(|e| refuse(server, format!("GET {url} failed: {e}")))
    }
}

fn refuse(server: &str, message: String) -> AuthError {
    AuthError::Login {
        server: server.to_owned(),
        message,
    }
}

#[async_trait::async_trait]
impl UserAuthorization for HeadlessBrowser {
    async fn authorize(&self, server: &str, login: Login) -> Result<StoredLogin, AuthError> {
        let listener = CallbackListener::bind(0)
            .await
            .map_err(|e| refuse(server, format!("cannot listen for the redirect: {e}")))?;
        let redirect_uri = listener.redirect_uri().clone();
        let pending = login
            .with_redirect_uri(redirect_uri.clone())
            .start()
            .await?;
        let authorization_url = pending.authorization_url().clone();
        let answer = self.get(server, &authorization_url).await?;
        let endpoint = {
            let mut url = authorization_url.clone();
            url.set_query(None);
            url
        };
        if !answer.status().is_redirection() {
            return Err(refuse(
                server,
                format!(
                    "the authorization endpoint {endpoint} answered HTTP {} instead of a redirect",
                    answer.status()
                ),
            ));
        }
        let location = answer
            .headers()
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| authorization_url.join(v).ok())
            .ok_or_else(|| {
                refuse(
                    server,
                    format!("the redirect of {endpoint} has no usable `Location`"),
                )
            })?;
        let back_home =
            location.origin() == redirect_uri.origin() && location.path() == redirect_uri.path();
        if !back_home {
            return Err(refuse(
                server,
                format!(
                    "the authorization endpoint {endpoint} redirected elsewhere than the redirect URI"
                ),
            ));
        }
        let wait = async {
            tokio::time::timeout(self.timeout, listener.wait())
                .await
                .map_err(|_| refuse(server, "the redirect never reached the listener".into()))?
                .map_err(|e| refuse(server, format!("the listener failed: {e}")))
        };
        let (callback, followed) = tokio::join!(wait, self.get(server, &location));
        followed?;
        pending.finish(callback?).await
    }
}
