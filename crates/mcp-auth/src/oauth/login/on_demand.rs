//! [`LoginOnDemand`]: the auth hook of a server whose login happens when the server asks for
//! it. It gives the stored tokens ([`LoginTokens`]) and, when the server answers 401 and
//! nothing stored helps (no login yet, a refused refresh, an authorization server that
//! moved), runs a new login through the embedding runtime's [`UserAuthorization`] — the
//! step where the user opens the authorization URL — then has the request retried. A 403
//! `insufficient_scope` goes to [`LoginOnDemand::step_up`]: a new login for the union of the
//! granted and the asked scope, bounded by [`StepUp`], then one retry.

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use http::header::AUTHORIZATION;

use super::flow::Login;
use super::provider::LoginTokens;
use super::scope::StepUp;
use super::store::StoredLogin;
use crate::oauth::lock;
use crate::{AuthError, AuthProvider, Challenge, Credentials, OnUnauthorized};

/// The user's part of a login: where the browser comes back, and the authorization itself.
///
/// A command line prints the authorization URL and waits on a loopback listener; a headless
/// client (a test, a conformance client) fetches the URL and follows its redirect itself.
///
/// ```
/// use mcp_auth::{AuthError, CallbackListener, Login, StoredLogin, UserAuthorization};
///
/// /// Prints the URL; the user's browser comes back to a loopback listener.
/// #[derive(Debug)]
/// struct Terminal;
///
/// #[async_trait::async_trait]
/// impl UserAuthorization for Terminal {
///     async fn authorize(&self, server: &str, login: Login) -> Result<StoredLogin, AuthError> {
///         let io = |e: std::io::Error| AuthError::Login { server: server.into(), message: e.to_string() };
///         let listener = CallbackListener::bind(0).await.map_err(io)?;
///         let pending = login.with_redirect_uri(listener.redirect_uri().clone()).start().await?;
///         println!("{}", pending.authorization_url());
///         let callback = listener.wait_for(&pending).await.map_err(io)?;
///         pending.finish(callback).await
///     }
/// }
/// ```
#[async_trait]
pub trait UserAuthorization: Send + Sync + fmt::Debug {
    /// Runs `login` (its challenge and scope already set) to its end: sets the redirect URI,
    /// [`start`](Login::start)s it, has the user authorize, and
    /// [`finish`](crate::PendingLogin::finish)es it with the redirect. `server` is the
    /// configured server's name, for messages.
    async fn authorize(&self, server: &str, login: Login) -> Result<StoredLogin, AuthError>;
}

/// Builds a fresh [`Login`] for each attempt (the registry's HTTP client, options and store).
pub(in crate::oauth) type LoginFactory = Arc<dyn Fn() -> Result<Login, AuthError> + Send + Sync>;

/// The auth hook of a server with an `oauth` table whose login is run when the server asks
/// for one (built by [`AuthRegistry::login_on_demand`](crate::AuthRegistry::login_on_demand)):
///
/// - **Before a request**: the stored token ([`LoginTokens`]), or none yet.
/// - **After a 401**: what [`LoginTokens`] can do (a newer token, a refresh); when it says a
///   login is required, a login through the [`UserAuthorization`] with the server's
///   challenge (its `resource_metadata` and `scope`), then one retry. At most
///   `max_logins` logins in the hook's life, so a server that refuses every token cannot
///   loop.
/// - **After a 403 `insufficient_scope`** ([`AuthProvider::on_insufficient_scope`], which
///   the HTTP transport asks before it reports the 403): [`step_up`](Self::step_up), then one
///   retry. A caller whose transport does not ask can call `step_up` itself and resend.
pub struct LoginOnDemand {
    server: String,
    tokens: LoginTokens,
    new_login: LoginFactory,
    user: Arc<dyn UserAuthorization>,
    state: Mutex<State>,
    /// One login at a time; a caller that waited takes the login that ran meanwhile.
    flight: tokio::sync::Mutex<()>,
}

struct State {
    logins: u32,
    max_logins: u32,
    step_up: StepUp,
    /// The scope of the latest login.
    granted: Option<String>,
}

impl fmt::Debug for LoginOnDemand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("LoginOnDemand")
            .field("server", &self.server)
            .field("user", &self.user)
            .field("logins", &state.logins)
            .field("step_ups", &state.step_up.attempts())
            .finish_non_exhaustive()
    }
}

impl LoginOnDemand {
    pub(in crate::oauth) fn new(
        server: String,
        tokens: LoginTokens,
        new_login: LoginFactory,
        user: Arc<dyn UserAuthorization>,
        max_logins: u32,
        max_step_ups: u32,
    ) -> Self {
        Self {
            server,
            tokens,
            new_login,
            user,
            state: Mutex::new(State {
                logins: 0,
                max_logins,
                step_up: StepUp::new(max_step_ups),
                granted: None,
            }),
            flight: tokio::sync::Mutex::new(()),
        }
    }

    /// How many logins this hook has run.
    pub fn logins(&self) -> u32 {
        lock(&self.state).logins
    }

    /// The stored-token hook underneath.
    pub fn tokens(&self) -> &LoginTokens {
        &self.tokens
    }

    /// After a 403 whose `WWW-Authenticate` says `insufficient_scope`: a new login asking for
    /// the granted scope plus the challenged one ([`StepUp::next_scope`]); the next request
    /// carries its token. An error ([`AuthError::Login`]) when the challenge asks for nothing
    /// new, repeats a scope already tried, or the step-ups ran out: resending would only be
    /// refused again.
    pub async fn step_up(&self, www_authenticate: &str) -> Result<(), AuthError> {
        let challenge = Challenge::parse(www_authenticate);
        let _flight = self.flight.lock().await;
        let scope = {
            let mut state = lock(&self.state);
            let granted = state.granted.clone();
            state
                .step_up
                .next_scope(&self.server, granted.as_deref(), &challenge)?
        };
        tracing::debug!(server = %self.server, scope = %scope, "HTTP 403 insufficient_scope: logging in again for more scope");
        self.login(challenge, Some(scope)).await
    }

    /// One login through the user's hook; its token replaces the one in use.
    async fn login(&self, challenge: Challenge, scope: Option<String>) -> Result<(), AuthError> {
        {
            let mut state = lock(&self.state);
            if state.logins >= state.max_logins {
                return Err(AuthError::Login {
                    server: self.server.clone(),
                    message: format!(
                        "the server still refuses after {} logins; stopped",
                        state.logins
                    ),
                });
            }
            state.logins += 1;
        }
        let mut login = (self.new_login)()?.with_challenge(challenge);
        if let Some(scope) = scope {
            login = login.with_scope(scope);
        }
        let stored = self.user.authorize(&self.server, login).await?;
        lock(&self.state).granted = stored.scope.clone();
        self.tokens.use_login(stored);
        Ok(())
    }
}

#[async_trait]
impl AuthProvider for LoginOnDemand {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        match self.tokens.credentials().await {
            Err(error) if error.is_login_required() => Ok(Credentials::none()),
            other => other,
        }
    }

    async fn credentials_for(
        &self,
        method: &http::Method,
        url: &str,
    ) -> Result<Credentials, AuthError> {
        match self.tokens.credentials_for(method, url).await {
            Err(error) if error.is_login_required() => Ok(Credentials::none()),
            other => other,
        }
    }

    fn observe_response(&self, url: &str, headers: &http::HeaderMap) -> bool {
        self.tokens.observe_response(url, headers)
    }

    async fn on_unauthorized(
        &self,
        rejected: &Credentials,
        www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        let challenge = www_authenticate.map(Challenge::parse).unwrap_or_default();
        if challenge.error.as_deref() == Some("insufficient_scope") {
            self.step_up(www_authenticate.unwrap_or_default()).await?;
            return Ok(OnUnauthorized::Retry);
        }
        let logins = self.logins();
        let _flight = self.flight.lock().await;
        if self.logins() != logins {
            // Another request's login ran while this one waited.
            return Ok(OnUnauthorized::Retry);
        }
        let sent_token = rejected.get(AUTHORIZATION.as_str()).is_some();
        if sent_token || self.tokens.has_login() {
            match self
                .tokens
                .on_unauthorized(rejected, www_authenticate)
                .await
            {
                Err(error) if error.is_login_required() => {
                    tracing::debug!(server = %self.server, %error, "HTTP 401: logging in again");
                }
                other => return other,
            }
        }
        self.login(challenge, None).await?;
        Ok(OnUnauthorized::Retry)
    }

    async fn on_insufficient_scope(
        &self,
        _rejected: &Credentials,
        www_authenticate: &str,
    ) -> Result<OnUnauthorized, AuthError> {
        self.step_up(www_authenticate).await?;
        Ok(OnUnauthorized::Retry)
    }

    fn report_secrets_to(&self, sink: &Arc<dyn mcp_config::SecretSink>) {
        self.tokens.report_secrets_to(sink);
    }
}
