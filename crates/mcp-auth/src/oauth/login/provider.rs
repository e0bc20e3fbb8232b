//! [`LoginTokens`]: the auth hook of a server the user logged in to. Gives the stored access
//! token, refreshes it before it expires (one refresh in flight per login, through the same
//! single-flight machinery as client credentials), and says to log in again when nothing
//! usable is left.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use http::header::{AUTHORIZATION, HeaderValue};
use mcp_config::{OAuthLogin, Redactor, Secret, SecretSink};
use tokio::time::Instant;
use url::Url;

use super::super::counted;
use super::super::discovery::{Discovery, same_issuer};
use super::super::dpop::DpopKey;
use super::super::failure::{Failure, shown};
use super::super::flight::{Shared, Token};
use super::super::lock;
use super::super::token::{self, ClientAuth, Grant, TokenRequest};
use super::store::{StoredLogin, TokenStore, unix_now};
use crate::{AuthError, AuthProvider, Challenge, Credentials, OnUnauthorized};

/// How long a stored access token without a known expiry is used before it is refreshed
/// (when there is a refresh token; otherwise until the server refuses it).
const UNKNOWN_LIFETIME: Duration = Duration::from_secs(3600);

/// One login's state, shared by every session of the server (so two sessions never spend
/// the same refresh token twice).
pub(in crate::oauth) struct LoginState {
    pub(in crate::oauth) shared: Shared,
    pub(in crate::oauth) store: Arc<dyn TokenStore>,
    pub(in crate::oauth) settings: OAuthLogin,
    /// The configured client secret (a pre-registered confidential client).
    pub(in crate::oauth) secret: Option<Secret>,
    pub(in crate::oauth) mcp_url: Url,
    /// The login in use, once loaded from the store.
    pub(in crate::oauth) current: Mutex<Option<StoredLogin>>,
}

/// The auth hook of a server with an `oauth` table: the tokens of the user's login
/// (`mcp-agent auth login <server>`), from the [`TokenStore`].
///
/// - **Before a request**: the stored access token while it is fresh; shortly before it
///   expires, a refresh with the refresh token (one in flight per login, shared by every
///   session and request); the new tokens are stored. A token stored by another process
///   meanwhile is taken instead of refreshing.
/// - **After a 401**: a request sent with an older token than the current one is retried;
///   otherwise the authorization server is discovered again (a server that moved to another
///   issuer needs a new login), and the token is refreshed once, then retried.
/// - **When nothing usable is left** (no stored login, an expired token without a refresh
///   token, a refused refresh token, another issuer, a request for more scope):
///   [`AuthError::LoginRequired`], whose message says to run `mcp-agent auth login <server>`.
#[derive(Clone)]
pub struct LoginTokens {
    pub(super) server: String,
    pub(super) state: Arc<LoginState>,
    spec_secrets: Arc<[Secret]>,
}

impl fmt::Debug for LoginTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginTokens")
            .field("server", &self.server)
            .field("server_url", &self.state.mcp_url.as_str())
            .finish_non_exhaustive()
    }
}

impl LoginTokens {
    pub(in crate::oauth) fn new(
        server: String,
        state: Arc<LoginState>,
        spec_secrets: Arc<[Secret]>,
    ) -> Self {
        Self {
            server,
            state,
            spec_secrets,
        }
    }

    /// How many refreshes this login has sent (every session of it included).
    pub fn refreshes(&self) -> u64 {
        lock(&self.state.shared.state).token_requests
    }

    /// The server's latest `WWW-Authenticate` challenge to this login (any session): give it
    /// to the next [`Login`](crate::Login) ([`with_challenge`](crate::Login::with_challenge))
    /// so it asks for the scope the server wants.
    pub fn last_challenge(&self) -> Option<Challenge> {
        lock(&self.state.shared.state).challenge.clone()
    }

    /// True once a stored login is in use.
    pub(in crate::oauth) fn has_login(&self) -> bool {
        lock(&self.state.current).is_some()
    }

    /// Uses `login` (just stored by a new login) from the next request on: the token in
    /// use is dropped, so the next request loads the new one.
    pub(in crate::oauth) fn use_login(&self, login: StoredLogin) {
        *lock(&self.state.current) = Some(login);
        let mut state = lock(&self.state.shared.state);
        state.token = None;
        state.retry_after = None;
    }

    fn error(&self, failure: &Failure) -> AuthError {
        let scrubber = {
            let state = lock(&self.state.shared.state);
            Redactor::new().with_secrets(
                self.spec_secrets
                    .iter()
                    .chain(state.tokens.iter())
                    .chain(self.state.secret.iter()),
            )
        };
        failure.to_error(&self.server, &scrubber)
    }

    /// A usable token: the one in the store (if it is not `rejected` and not stale), else a
    /// refreshed one; through the fleet's shared store when there is one.
    async fn attempt(&self, rejected: Option<HeaderValue>) -> Result<Token, Failure> {
        if let Some((share, name)) = &self.state.shared.share {
            return self.attempt_shared(share, name, rejected).await;
        }
        self.attempt_alone(rejected).await
    }

    /// [`attempt`](Self::attempt) with this replica's token store alone.
    pub(super) async fn attempt_alone(
        &self,
        rejected: Option<HeaderValue>,
    ) -> Result<Token, Failure> {
        let login = self.load().await?;
        self.remember_login(&login);
        let (header, dpop) = login_header(&login)?;
        if let Some(timing) = Timing::of_stored(&login, self.state.shared.options.expiry_skew)
            && rejected.as_ref() != Some(&header)
        {
            return Ok(timing.token(header, dpop));
        }
        let Some(refresh_token) = login.refresh_token.clone() else {
            return Err(no_refresh_token(rejected.is_some()));
        };
        let (token, renewed) = self.refresh(&login, &refresh_token).await?;
        self.state
            .store
            .save(&renewed)
            .await
            .map_err(Failure::Store)?;
        *lock(&self.state.current) = Some(renewed);
        Ok(token)
    }

    /// Scrubs `login`'s tokens (and dynamic client secret) from whatever a server says from
    /// now on.
    pub(super) fn remember_login(&self, login: &StoredLogin) {
        let known: Vec<Secret> = [Some(&login.access_token), login.refresh_token.as_ref()]
            .into_iter()
            .chain([login.client_secret.as_ref()])
            .flatten()
            .cloned()
            .collect();
        self.state.shared.remember(&known);
    }

    /// The login in use, or the newest stored one for this server (and the configured
    /// client); a newer one stored by another process replaces the one in use.
    async fn load(&self) -> Result<StoredLogin, Failure> {
        self.load_stored().await?.ok_or_else(|| {
            Failure::LoginRequired(format!("no stored OAuth login for {}", self.state.mcp_url))
        })
    }

    /// [`load`](Self::load), `None` when nothing is stored.
    pub(super) async fn load_stored(&self) -> Result<Option<StoredLogin>, Failure> {
        let stored = self
            .state
            .store
            .find(self.state.mcp_url.as_str())
            .await
            .map_err(Failure::Store)?;
        let wanted = self.state.settings.client_id.as_deref();
        let newest = stored
            .into_iter()
            .find(|l| wanted.is_none_or(|id| l.client_id == id));
        let mut current = lock(&self.state.current);
        match (newest, current.as_ref()) {
            (Some(newest), Some(cur)) if newest.obtained_at >= cur.obtained_at => {
                *current = Some(newest);
            }
            (Some(newest), None) => *current = Some(newest),
            _ => {}
        }
        Ok(current.clone())
    }

    /// RFC 6749 §6: new tokens for the refresh token, and the login holding them (for the
    /// caller to store before they are used).
    pub(super) async fn refresh(
        &self,
        login: &StoredLogin,
        refresh_token: &Secret,
    ) -> Result<(Token, StoredLogin), Failure> {
        let shared = &self.state.shared;
        let token_url = Url::parse(&login.token_endpoint).map_err(|_| {
            Failure::LoginRequired("the stored token endpoint is not a URL".to_owned())
        })?;
        let auth = match login.token_endpoint_auth_method.as_str() {
            "client_secret_basic" => ClientAuth::Basic,
            "client_secret_post" => ClientAuth::Post,
            _ => ClientAuth::None,
        };
        let secret = login
            .client_secret
            .clone()
            .or_else(|| self.state.secret.clone())
            .unwrap_or_else(|| Secret::new(""));
        let what = format!("token refresh at {token_url}");
        let request = TokenRequest {
            grant: Grant::Refresh {
                token: refresh_token,
            },
            client_id: &login.client_id,
            secret: &secret,
            auth,
            scope: None,
            resource: Some(&login.resource),
            assertion: None,
        }
        .build(&token_url)
        .map_err(|_| {
            Failure::invalid(
                &what,
                "the client id or secret cannot be sent in an HTTP header",
            )
        })?;
        tracing::debug!(server = %self.server, token_url = %token_url, "refreshing the OAuth login's access token");
        lock(&shared.state).token_requests += 1;
        let started = Instant::now();
        // A DPoP-bound login refreshes with its key (RFC 9449 §5: a public client's refresh
        // token is bound to it too).
        let key = login_header(login)?.1;
        let mode = self.state.settings.dpop;
        let issued = match shared.token_exchange(&what, request, key.as_deref()).await {
            Ok(response) => token::parse_answer(
                &what,
                response.status().as_u16(),
                response.body(),
                &secret,
                key.is_some(),
            )
            .and_then(|issued| {
                if key.is_some() {
                    token::require_binding(mode, &what, &issued)?;
                }
                Ok(issued)
            }),
            Err(failure) => Err(failure),
        };
        counted::token_request(&self.server, &issued);
        let issued = issued
            .map_err(|failure| match failure {
                Failure::Rejected { error, description, .. } if error == "invalid_grant" => {
                    Failure::LoginRequired(format!(
                        "the authorization server refused the refresh token (invalid_grant{}): it was revoked or has expired",
                        description.map(|d| format!(": {d}")).unwrap_or_default()
                    ))
                }
                other => other,
            })?;
        shared.remember(&issued.secrets);
        let now = unix_now();
        let mut renewed = login.clone();
        renewed.access_token = issued.access_token.clone();
        if let Some(rotated) = issued.refresh_token.clone() {
            renewed.refresh_token = Some(rotated);
        }
        if issued.scope.is_some() {
            renewed.scope = issued.scope.clone();
        }
        renewed.expires_at = issued.expires_in.map(|d| now + d.as_secs());
        renewed.obtained_at = now;
        if !issued.dpop_bound {
            renewed.dpop_key = None;
        }
        let lifetime = issued.expires_in.unwrap_or(UNKNOWN_LIFETIME);
        let (refresh_at, expires_at) = shared.times(started, lifetime);
        tracing::debug!(server = %self.server, expires_in = ?issued.expires_in, "refreshed the OAuth login's access token");
        let token = Token {
            header: issued.header,
            refresh_at,
            expires_at,
            lifetime,
            dpop: key.filter(|_| issued.dpop_bound),
        };
        Ok((token, renewed))
    }

    /// After a 401 with the current token: has the server moved to another authorization
    /// server? Then the stored login is of no use.
    async fn check_issuer(&self, challenge: &Challenge) -> Result<(), Failure> {
        let Some(login) = lock(&self.state.current).clone() else {
            return Ok(());
        };
        let shared = &self.state.shared;
        let discovery = Discovery {
            http: shared.http.as_ref(),
            timeout: shared.options.request_timeout.min(shared.deadline),
            max_response_bytes: shared.options.max_response_bytes,
            mcp_url: &self.state.mcp_url,
            allowed_issuers: &self.state.settings.allowed_issuers,
            guarded: shared.config.guarded,
            confine: self.state.secret.is_some(),
            plain_http_refusal: None,
            grant: "authorization_code",
        };
        match discovery.run(challenge).await {
            Ok(found) if !same_issuer(&login.issuer, &found.issuer) => {
                Err(Failure::LoginRequired(format!(
                    "the server now uses the authorization server `{}` instead of `{}`",
                    shown(&found.issuer),
                    shown(&login.issuer)
                )))
            }
            Ok(_) => Ok(()),
            Err(failure) => {
                tracing::debug!(server = %self.server, error = %self.error(&failure), "OAuth discovery after a 401 failed; refreshing anyway");
                Ok(())
            }
        }
    }
}

/// How long a login's access token is still fresh: the time left, the renewal skew, the
/// lifetime it was issued with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    pub(super) remaining: Duration,
    pub(super) skew: Duration,
    pub(super) lifetime: Duration,
}

impl Timing {
    /// The timing of a stored login's access token now (this replica's clock), if it is fresh:
    /// without a known expiry it is used for [`UNKNOWN_LIFETIME`] at a time when it has a
    /// refresh token, else until a server refuses it.
    pub(super) fn of_stored(login: &StoredLogin, expiry_skew: Duration) -> Option<Self> {
        match login.expires_at {
            None => {
                let lifetime = if login.refresh_token.is_some() {
                    UNKNOWN_LIFETIME
                } else {
                    Duration::from_secs(365 * 86_400)
                };
                Some(Self {
                    remaining: lifetime,
                    skew: Duration::ZERO,
                    lifetime,
                })
            }
            Some(at) => {
                let lifetime = Duration::from_secs(at.saturating_sub(login.obtained_at));
                let remaining = Duration::from_secs(at.saturating_sub(unix_now()));
                Self::fresh(remaining, lifetime, expiry_skew)
            }
        }
    }

    /// `remaining` of `lifetime`, if that is more than the renewal skew.
    pub(super) fn fresh(
        remaining: Duration,
        lifetime: Duration,
        expiry_skew: Duration,
    ) -> Option<Self> {
        let skew = expiry_skew.min(lifetime / 2);
        (remaining > skew).then_some(Self {
            remaining,
            skew,
            lifetime,
        })
    }

    /// The in-process token of `header` (bound to `dpop`, if given) with this timing, from
    /// now.
    pub(super) fn token(self, header: HeaderValue, dpop: Option<Arc<DpopKey>>) -> Token {
        let now = Instant::now();
        Token {
            header,
            refresh_at: now + self.remaining.saturating_sub(self.skew),
            expires_at: now + self.remaining,
            lifetime: self.lifetime,
            dpop,
        }
    }
}

/// Why a login that needs a refresh cannot have one.
pub(super) fn no_refresh_token(rejected: bool) -> Failure {
    Failure::LoginRequired(
        if rejected {
            "the server refused the stored access token and the login has no refresh token"
        } else {
            "the stored access token expired and the login has no refresh token"
        }
        .to_owned(),
    )
}

/// The `Authorization` value of `login`'s access token (`DPoP <token>` for a DPoP-bound
/// login, else `Bearer <token>`), and its DPoP key.
pub(super) fn login_header(
    login: &StoredLogin,
) -> Result<(HeaderValue, Option<Arc<DpopKey>>), Failure> {
    let Some(stored) = &login.dpop_key else {
        return Ok((authorization("Bearer", &login.access_token)?, None));
    };
    let key = DpopKey::from_stored(stored)
        .map_err(|reason| Failure::Dpop(format!("{reason}; log in again")))?;
    Ok((
        authorization("DPoP", &login.access_token)?,
        Some(Arc::new(key)),
    ))
}

/// `<scheme> <token>`, marked sensitive.
fn authorization(scheme: &str, token: &Secret) -> Result<HeaderValue, Failure> {
    let mut value =
        HeaderValue::try_from(format!("{scheme} {}", token.expose())).map_err(|_| {
            Failure::LoginRequired(
                "the stored access token cannot be sent in an HTTP header".to_owned(),
            )
        })?;
    value.set_sensitive(true);
    Ok(value)
}

impl LoginTokens {
    /// The token to send now: the current one while fresh, else loaded or refreshed.
    async fn token(&self) -> Result<Token, AuthError> {
        let now = Instant::now();
        let seen = {
            let state = lock(&self.state.shared.state);
            if let Some(token) = &state.token
                && token.is_fresh(now)
            {
                return Ok(token.clone());
            }
            state.generation
        };
        match self
            .state
            .shared
            .renew_with(seen, || self.attempt(None))
            .await
        {
            Ok(token) => Ok(token),
            Err(failure) => {
                let error = self.error(&failure);
                let state = lock(&self.state.shared.state);
                match &state.token {
                    Some(token) if token.is_valid(Instant::now()) && !error.is_login_required() => {
                        tracing::warn!(server = %self.server, %error, "OAuth refresh failed; using the current token until it expires");
                        Ok(token.clone())
                    }
                    _ => Err(error),
                }
            }
        }
    }
}

#[async_trait]
impl AuthProvider for LoginTokens {
    fn report_secrets_to(&self, sink: &Arc<dyn SecretSink>) {
        self.state.shared.report_to(sink);
    }

    async fn credentials(&self) -> Result<Credentials, AuthError> {
        Ok(self.token().await?.credentials())
    }

    async fn credentials_for(
        &self,
        method: &http::Method,
        url: &str,
    ) -> Result<Credentials, AuthError> {
        self.token()
            .await?
            .credentials_for(method.as_str(), url, &self.state.shared.nonces)
            .map_err(|failure| self.error(&failure))
    }

    fn observe_response(&self, url: &str, headers: &http::HeaderMap) -> bool {
        let bound = lock(&self.state.shared.state)
            .token
            .as_ref()
            .is_some_and(|t| t.dpop.is_some());
        bound && self.state.shared.nonces.learn(url, headers)
    }

    async fn on_unauthorized(
        &self,
        rejected: &Credentials,
        www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        let challenge = www_authenticate.map(Challenge::parse).unwrap_or_default();
        lock(&self.state.shared.state).challenge = Some(challenge.clone());
        if challenge.error.as_deref() == Some("insufficient_scope") {
            return Err(self.error(&Failure::LoginRequired(format!(
                "the server asks for more scope{}",
                challenge
                    .scope
                    .as_deref()
                    .map(|s| format!(" (`{}`)", shown(s)))
                    .unwrap_or_default()
            ))));
        }
        let sent = rejected.get(AUTHORIZATION.as_str()).cloned();
        let seen = {
            let mut state = lock(&self.state.shared.state);
            match (&state.token, &sent) {
                (Some(current), Some(sent)) if current.header != sent => {
                    return Ok(OnUnauthorized::Retry);
                }
                (Some(_), None) => return Ok(OnUnauthorized::Retry),
                (Some(_), Some(_)) => {
                    state.token = None;
                    state.retry_after = None;
                }
                (None, _) => {}
            }
            state.generation
        };
        if sent.is_none() {
            // Sent without a token: nothing stored (or it failed to load).
            return match self
                .state
                .shared
                .renew_with(seen, || self.attempt(None))
                .await
            {
                Ok(_) => Ok(OnUnauthorized::Retry),
                Err(failure) => Err(self.error(&failure)),
            };
        }
        tracing::debug!(server = %self.server, "HTTP 401 with the login's token: checking the authorization server, then refreshing");
        let outcome = self
            .state
            .shared
            .renew_with(seen, || async {
                self.check_issuer(&challenge).await?;
                self.attempt(sent.clone()).await
            })
            .await;
        match outcome {
            Ok(_) => Ok(OnUnauthorized::Retry),
            Err(failure) => Err(self.error(&failure)),
        }
    }
}
