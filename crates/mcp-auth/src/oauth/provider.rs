//! [`ClientCredentials`]: the OAuth2 client-credentials hook of one session, on its
//! credential's shared cache.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use http::header::AUTHORIZATION;
use mcp_config::{Redactor, Secret, SecretSink};
use tokio::time::Instant;
use url::Url;

#[cfg(doc)]
use super::OAuthOptions;
use super::cache::Cache;
use super::failure::Failure;
use super::flight::{Shared, Token};
use super::lock;
use crate::{AuthError, AuthProvider, Challenge, Credentials, OnUnauthorized};

/// The OAuth2 client-credentials auth hook of one server (session), sharing its token cache
/// with every other hook of the same credential (see [`AuthRegistry`](super::AuthRegistry)).
///
/// - **Before a request**: the cached token while it is fresh (until its expiry minus
///   [`OAuthOptions::expiry_skew`]); otherwise one token request, shared by every caller
///   waiting at that moment (single-flight). Without a configured `token_url`, the first
///   request goes without a token, and the server's 401 starts discovery.
/// - **After a 401**: if the request carried an older token than the current one, another
///   request already renewed it: retry. Otherwise drop the token and obtain a new one (once,
///   for every request rejected with that token), then retry. The transport resends at most
///   once, so a server answering 401 forever costs one renewal per request, never a loop.
/// - **Errors** are [`AuthError`]s naming the server, with the endpoint's OAuth `error` and
///   `error_description` when it refused; never the secret or a token: every text a server
///   chose has the client secret, the spec's other secrets and the recent access (and
///   refresh) tokens of the credential replaced by `[REDACTED]`.
#[derive(Clone)]
pub struct ClientCredentials {
    server: String,
    shared: Arc<Shared>,
    cache: Arc<Cache>,
    /// The spec's static secrets (headers, bearer token), scrubbed from errors too.
    spec_secrets: Arc<[Secret]>,
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("server", &self.server)
            .field("client_id", &self.shared.config.client_id)
            .field("token_url", &self.token_url().map(String::from))
            .finish_non_exhaustive()
    }
}

impl ClientCredentials {
    pub(super) fn new(
        server: String,
        shared: Arc<Shared>,
        cache: Arc<Cache>,
        spec_secrets: Arc<[Secret]>,
    ) -> Self {
        Self {
            server,
            shared,
            cache,
            spec_secrets,
        }
    }

    /// The token endpoint: configured, or discovered (once discovery ran).
    pub fn token_url(&self) -> Option<Url> {
        lock(&self.shared.state)
            .endpoint
            .as_ref()
            .map(|e| e.token_url.clone())
    }

    /// How many token requests this credential has sent (every session of it included).
    pub fn token_requests(&self) -> u64 {
        lock(&self.shared.state).token_requests
    }

    /// `failure` as this server's error, without any secret or token it might echo. Locks the
    /// credential's state: never call it with that lock held.
    fn error(&self, failure: &Failure) -> AuthError {
        let scrubber = {
            let state = lock(&self.shared.state);
            Redactor::new().with_secrets(
                self.spec_secrets
                    .iter()
                    .chain(state.tokens.iter())
                    .chain([&self.shared.config.secret]),
            )
        };
        failure.to_error(&self.server, &scrubber)
    }
}

impl ClientCredentials {
    /// The token to send now: cached while fresh, else renewed; `None` before discovery
    /// can start (the server's 401 names its metadata).
    async fn token(&self) -> Result<Option<Token>, AuthError> {
        let now = Instant::now();
        self.cache.prune_if_due(now);
        let seen = {
            let state = lock(&self.shared.state);
            match &state.token {
                Some(token) if token.is_fresh(now) => return Ok(Some(token.clone())),
                Some(token)
                    if token.is_valid(now) && state.retry_after.is_some_and(|at| now < at) =>
                {
                    return Ok(Some(token.clone()));
                }
                _ => {}
            }
            if state.endpoint.is_none() && !state.challenged {
                // Nothing to discover from yet: the server's 401 names its metadata.
                return Ok(None);
            }
            state.generation
        };
        match self.shared.renew(seen).await {
            Ok(token) => Ok(Some(token)),
            Err(failure) => {
                // Rendered before the state is locked: rendering reads the tokens.
                let error = self.error(&failure);
                // A renewal ahead of expiry failed: the current token is still good.
                let state = lock(&self.shared.state);
                match &state.token {
                    Some(token) if token.is_valid(Instant::now()) => {
                        tracing::warn!(
                            server = %self.server,
                            %error,
                            "OAuth token renewal failed; using the current token until it expires"
                        );
                        Ok(Some(token.clone()))
                    }
                    _ => Err(error),
                }
            }
        }
    }
}

#[async_trait]
impl AuthProvider for ClientCredentials {
    fn report_secrets_to(&self, sink: &Arc<dyn SecretSink>) {
        self.shared.report_to(sink);
    }

    async fn credentials(&self) -> Result<Credentials, AuthError> {
        Ok(self
            .token()
            .await?
            .map(|t| t.credentials())
            .unwrap_or_default())
    }

    async fn credentials_for(
        &self,
        method: &http::Method,
        url: &str,
    ) -> Result<Credentials, AuthError> {
        match self.token().await? {
            Some(token) => token
                .credentials_for(method.as_str(), url, &self.shared.nonces)
                .map_err(|failure| self.error(&failure)),
            None => Ok(Credentials::none()),
        }
    }

    fn observe_response(&self, url: &str, headers: &http::HeaderMap) -> bool {
        self.shared.dpop_key.is_some() && self.shared.nonces.learn(url, headers)
    }

    async fn on_unauthorized(
        &self,
        rejected: &Credentials,
        www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        let challenge = www_authenticate.map(Challenge::parse).unwrap_or_default();
        let sent = rejected.get(AUTHORIZATION.as_str());
        let seen = {
            let mut state = lock(&self.shared.state);
            state.challenged = true;
            state.challenge = Some(challenge);
            match (&state.token, sent) {
                // Someone renewed the token since this request was sent.
                (Some(current), Some(sent)) if current.header != sent => {
                    return Ok(OnUnauthorized::Retry);
                }
                (Some(_), None) => return Ok(OnUnauthorized::Retry),
                // The current token was refused: it is of no use to anyone any more.
                (Some(_), Some(_)) => {
                    state.token = None;
                    state.retry_after = None;
                }
                (None, _) => {}
            }
            // A token the fleet shares may be this one: not to be taken again.
            state.rejected = sent.cloned();
            state.generation
        };
        tracing::debug!(server = %self.server, "HTTP 401: obtaining a new OAuth token");
        match self.shared.renew(seen).await {
            Ok(_) => Ok(OnUnauthorized::Retry),
            Err(failure) => Err(self.error(&failure)),
        }
    }
}
