//! The login itself: [`Login`] discovers the authorization server, picks the client and
//! builds the authorization URL ([`PendingLogin`]); the browser's redirect ([`Callback`]) is
//! checked (`state`, RFC 9207 `iss`) and its code exchanged for tokens, which are stored.

use std::fmt;
use std::sync::Arc;

use mcp_config::{OAuthLogin, Redactor, Secret, ServerSpec, TransportSpec};
use url::Url;

use super::super::OAuthOptions;
use super::super::counted;
use super::super::discovery::{Discovered, Discovery};
use super::super::dpop::{self, DpopKey, Nonces, TokenDpop};
use super::super::failure::{Failure, shown};
use super::super::token::{self, Grant, TokenRequest};
use super::client::{self, Client};
use super::pkce::{Pkce, random_token};
use super::scope::select_scope;
use super::store::{LoginLock, StoredLogin, TokenStore, unix_now};
use crate::fetch::HttpFetch;
use crate::{AuthError, Challenge};

/// `http://127.0.0.1:<port>/callback`: the loopback redirect URI of a login (RFC 8252 §7.3).
///
/// ```
/// assert_eq!(mcp_auth::loopback_redirect_uri(8765).as_str(), "http://127.0.0.1:8765/callback");
/// ```
pub fn loopback_redirect_uri(port: u16) -> Url {
    Url::parse(&format!("http://127.0.0.1:{port}/callback")).expect("a valid URL")
}

/// A user's OAuth login to one server (authorization code with PKCE S256), as a command line
/// runs it:
///
/// 1. [`Login::new`] with the server's spec (its `auth.oauth` table, or defaults), the
///    [`HttpFetch`] the transport provides and the [`TokenStore`];
///    [`with_redirect_uri`](Self::with_redirect_uri) where the browser comes back (a loopback
///    listener's [`loopback_redirect_uri`]).
/// 2. [`start`](Self::start) takes the store's login lock for the server (a second login at
///    the same time fails with [`StoreError::LoginInProgress`](crate::StoreError)), discovers
///    the authorization server (RFC 9728, RFC 8414 / OpenID, issuer checked), refuses one
///    without PKCE S256, picks the client (configured `client_id`, a client ID metadata
///    document, or dynamic registration), and builds the authorization URL.
/// 3. Show [`PendingLogin::authorization_url`]; wait for the redirect (or a pasted URL or
///    code) and give it to [`PendingLogin::finish`], which checks `state` and `iss` (nothing
///    is sent when they are wrong), exchanges the code with the verifier and the RFC 8707
///    resource, and stores the tokens. Logins of the same server under another issuer or
///    client are removed (the server moved to another authorization server).
///
/// Nothing here logs or shows a code, verifier, state or token.
pub struct Login {
    server: String,
    mcp_url: Url,
    settings: OAuthLogin,
    secret: Option<Secret>,
    guarded: bool,
    http: Arc<dyn HttpFetch>,
    store: Arc<dyn TokenStore>,
    options: OAuthOptions,
    redirect_uri: Option<Url>,
    challenge: Option<Challenge>,
    scope: Option<String>,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("server", &self.server)
            .field("mcp_url", &self.mcp_url.as_str())
            .field("redirect_uri", &self.redirect_uri.as_ref().map(Url::as_str))
            .finish_non_exhaustive()
    }
}

impl Login {
    /// A login to `spec`'s server (HTTP only), with its `auth.oauth` settings (defaults when
    /// it has none). A pre-registered client's `client_secret_env` is read now.
    pub fn new(
        spec: &ServerSpec,
        http: Arc<dyn HttpFetch>,
        store: Arc<dyn TokenStore>,
    ) -> Result<Self, AuthError> {
        let server = spec.name.clone();
        let TransportSpec::StreamableHttp(mcp) = &spec.transport else {
            return Err(AuthError::Unsupported {
                server,
                method: "an OAuth login to a server that is not reached over HTTP",
            });
        };
        let settings = spec.auth.oauth.clone().unwrap_or_default();
        let secret = settings
            .client_secret
            .as_ref()
            .map(|source| crate::resolve_secret(&server, source, "client_secret"))
            .transpose()?;
        Ok(Self {
            redirect_uri: settings.redirect_uri.clone(),
            server,
            mcp_url: mcp.url.clone(),
            settings,
            secret,
            guarded: spec.ssrf_guarded(),
            http,
            store,
            options: OAuthOptions::default(),
            challenge: None,
            scope: None,
        })
    }

    /// Sets the bounds of each exchange ([`OAuthOptions::request_timeout`],
    /// [`max_response_bytes`](OAuthOptions::max_response_bytes)).
    pub fn with_options(mut self, options: OAuthOptions) -> Self {
        self.options = options;
        self
    }

    /// Where the browser is sent back (overrides the configured `redirect_uri`).
    pub fn with_redirect_uri(mut self, redirect_uri: Url) -> Self {
        self.redirect_uri = Some(redirect_uri);
        self
    }

    /// The server's `WWW-Authenticate` challenge (of a 401 or 403): where its metadata is
    /// and the scope it asks for.
    pub fn with_challenge(mut self, challenge: Challenge) -> Self {
        self.challenge = Some(challenge);
        self
    }

    /// Asks for exactly `scope` (space-separated), e.g. [`StepUp::next_scope`]'s answer.
    ///
    /// [`StepUp::next_scope`]: crate::StepUp::next_scope
    pub fn with_scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    fn fail(&self, failure: &Failure) -> AuthError {
        failure.to_error(
            &self.server,
            &Redactor::new().with_secrets(self.secret.clone()),
        )
    }

    fn refuse(&self, message: impl Into<String>) -> AuthError {
        AuthError::Login {
            server: self.server.clone(),
            message: message.into(),
        }
    }

    /// Takes the login lock, discovers, picks the client and builds the authorization URL.
    pub async fn start(self) -> Result<PendingLogin, AuthError> {
        let Some(redirect_uri) = self.redirect_uri.clone() else {
            return Err(self.refuse(
                "no redirect URI: listen on a loopback port (`loopback_redirect_uri`) or set `redirect_uri`",
            ));
        };
        let lock = self
            .store
            .lock_login(self.mcp_url.as_str())
            .map_err(|error| AuthError::TokenStore {
                server: self.server.clone(),
                error,
            })?;
        let discovery = Discovery {
            http: self.http.as_ref(),
            timeout: self.options.request_timeout,
            max_response_bytes: self.options.max_response_bytes,
            mcp_url: &self.mcp_url,
            allowed_issuers: &self.settings.allowed_issuers,
            guarded: self.guarded,
            confine: self.secret.is_some(),
            plain_http_refusal: Some(
                "the login's code and tokens would cross the network in the clear; refused (use https)",
            ),
            grant: "authorization_code",
        };
        let challenge = self.challenge.clone().unwrap_or_default();
        let found = discovery.run(&challenge).await.map_err(|f| self.fail(&f))?;
        let methods = found.metadata.code_challenge_methods_supported.as_deref();
        if !methods.is_some_and(|m| m.iter().any(|m| m == Pkce::METHOD)) {
            return Err(self.refuse(format!(
                "the authorization server `{}` does not list S256 in `code_challenge_methods_supported`, \
                 so it may ignore PKCE; refused (MCP authorization requires it)",
                shown(&found.issuer)
            )));
        }
        let authorization_endpoint = discovery
            .endpoint(
                found.metadata.authorization_endpoint.as_deref(),
                "authorization_endpoint",
                &found.metadata_url,
            )
            .map_err(|f| self.fail(&f))?;
        let scope = self.scope.clone().or_else(|| {
            select_scope(
                self.settings.scopes.as_deref(),
                self.challenge.as_ref(),
                found.resource_scopes.as_deref(),
                found.metadata.scopes_supported.as_deref(),
            )
        });
        let client = client::choose(
            &discovery,
            &found,
            &self.settings,
            self.secret.as_ref(),
            &redirect_uri,
            scope.as_deref(),
        )
        .await
        .map_err(|f| self.fail(&f))?;
        let resource = self
            .settings
            .resource
            .clone()
            .or_else(|| found.resource.clone())
            .unwrap_or_else(|| crate::oauth::canonical_resource(&self.mcp_url));
        let pkce = Pkce::generate().map_err(|m| self.refuse(m))?;
        let state = Secret::new(random_token().map_err(|m| self.refuse(m))?);
        let mut url = authorization_endpoint;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", redirect_uri.as_str())
                .append_pair("code_challenge", pkce.challenge())
                .append_pair("code_challenge_method", Pkce::METHOD)
                .append_pair("state", state.expose());
            if let Some(scope) = &scope {
                query.append_pair("scope", scope);
            }
            query.append_pair("resource", &resource);
        }
        tracing::debug!(
            server = %self.server,
            issuer = %found.issuer,
            client = client::describe(&client, &self.settings),
            scope = scope.as_deref().unwrap_or(""),
            "OAuth login: authorization URL ready"
        );
        Ok(PendingLogin {
            login: self,
            _lock: lock,
            found,
            client,
            pkce,
            state,
            redirect_uri,
            scope,
            resource,
            authorization_url: url,
        })
    }
}

/// A started login: the authorization URL to show, and what checks the redirect. Holds the
/// login lock until finished or dropped. `Debug` shows no state or verifier.
pub struct PendingLogin {
    login: Login,
    _lock: LoginLock,
    found: Discovered,
    client: Client,
    pkce: Pkce,
    state: Secret,
    redirect_uri: Url,
    scope: Option<String>,
    resource: String,
    authorization_url: Url,
}

impl fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingLogin")
            .field("server", &self.login.server)
            .field("issuer", &self.found.issuer)
            .field("client_id", &self.client.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl PendingLogin {
    /// The URL the user opens: it carries the client id, the redirect URI, the PKCE S256
    /// challenge, the `state`, the scope (when there is one) and the RFC 8707 resource.
    pub fn authorization_url(&self) -> &Url {
        &self.authorization_url
    }

    /// Where the browser is sent back.
    pub fn redirect_uri(&self) -> &Url {
        &self.redirect_uri
    }

    /// The authorization server's issuer.
    pub fn issuer(&self) -> &str {
        &self.found.issuer
    }

    /// The client id used.
    pub fn client_id(&self) -> &str {
        &self.client.client_id
    }

    /// The scope asked for, if any.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// The RFC 8707 resource asked for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// True when the authorization server puts `iss` in its redirects (RFC 9207), which
    /// [`finish`](Self::finish) then requires.
    pub fn expects_iss(&self) -> bool {
        self.found
            .metadata
            .authorization_response_iss_parameter_supported
            == Some(true)
    }

    /// True when `callback` carries the `state` this login sent (compared in constant time):
    /// a redirect of this login, not one forged or of another.
    pub(crate) fn is_for(&self, callback: &Callback) -> bool {
        callback.carries_state(&self.state)
    }

    /// Checks the redirect and exchanges its code for tokens, which are stored and returned.
    ///
    /// Refused before anything is sent ([`AuthError::Login`]): an `error` in the redirect
    /// (the user declined, …), a `state` other than the one sent, an `iss` other than the
    /// issuer, or none when the server advertises it. A code the user pasted alone
    /// ([`Callback::pasted_code`]) has no `state` or `iss` to check.
    pub async fn finish(self, callback: Callback) -> Result<StoredLogin, AuthError> {
        let login = &self.login;
        if !callback.pasted && !self.is_for(&callback) {
            return Err(login.refuse(if callback.state.is_none() {
                "the redirect carries no `state`; refused (it may be forged or from another login)"
            } else {
                "the redirect's `state` is not the one sent; refused (it may be forged or from another login)"
            }));
        }
        if let Some(error) = &callback.error {
            let description = callback
                .error_description
                .as_deref()
                .map(|d| format!(": {}", shown(d)))
                .unwrap_or_default();
            return Err(login.refuse(format!(
                "the authorization server answered `{}`{description}",
                shown(error)
            )));
        }
        match &callback.iss {
            // RFC 9207 §2.4: simple string comparison, no URL normalisation.
            Some(iss) if iss != &self.found.issuer => {
                return Err(login.refuse(format!(
                    "the redirect's `iss` is `{}`, not the issuer `{}`; refused (RFC 9207: a mix-up attack)",
                    shown(iss),
                    shown(&self.found.issuer)
                )));
            }
            None if self.expects_iss() && !callback.pasted => {
                return Err(login.refuse(format!(
                    "the redirect carries no `iss` although `{}` advertises it; refused (RFC 9207)",
                    shown(&self.found.issuer)
                )));
            }
            _ => {}
        }
        let Some(code) = callback.code.clone() else {
            return Err(login.refuse("the redirect carries no `code`"));
        };
        let token_url = &self.found.token_url;
        let what = format!("token request to {token_url}");
        let empty = Secret::new("");
        let request = TokenRequest {
            grant: Grant::AuthorizationCode {
                code: &code,
                redirect_uri: self.redirect_uri.as_str(),
                verifier: self.pkce.verifier(),
            },
            client_id: &self.client.client_id,
            secret: self.client.secret.as_ref().unwrap_or(&empty),
            auth: self.client.auth,
            scope: None,
            resource: Some(&self.resource),
            assertion: None,
        }
        .build(token_url)
        .map_err(|_| {
            login.fail(&Failure::invalid(
                &what,
                "the client id or secret cannot be sent in an HTTP header",
            ))
        })?;
        let scrubber = Redactor::new().with_secrets(
            [
                code.clone(),
                self.pkce.verifier().clone(),
                self.state.clone(),
            ]
            .into_iter()
            .chain(self.client.secret.clone())
            .chain(login.secret.clone()),
        );
        // `dpop` set: a key of this login's, kept with its tokens when they are bound to it.
        let key = match login.settings.dpop.is_off() {
            true => None,
            false => {
                Some(DpopKey::generate().map_err(|reason| login.fail(&Failure::Dpop(reason)))?)
            }
        };
        let nonces = Nonces::default();
        let answer = dpop::token_exchange(
            login.http.as_ref(),
            login.options.request_timeout,
            login.options.max_response_bytes,
            &what,
            request,
            key.as_ref().map(|key| TokenDpop {
                key,
                nonces: &nonces,
            }),
        )
        .await;
        let issued = answer.and_then(|response| {
            let issued = token::parse_answer(
                &what,
                response.status().as_u16(),
                response.body(),
                self.client.secret.as_ref().unwrap_or(&empty),
                key.is_some(),
            )?;
            token::require_binding(login.settings.dpop, &what, &issued)?;
            Ok(issued)
        });
        counted::token_request(&login.server, &issued);
        let issued = issued.map_err(|failure| match failure {
            Failure::Rejected {
                status,
                error,
                description,
            } => login.refuse(format!(
                "the token endpoint refused the authorization code (HTTP {status}): {}{}",
                scrubber.scrub(&error),
                description
                    .map(|d| format!(": {}", scrubber.scrub(&d)))
                    .unwrap_or_default()
            )),
            other => other.to_error(&login.server, &scrubber),
        })?;
        let now = unix_now();
        let stored = StoredLogin {
            server: login.server.clone(),
            server_url: login.mcp_url.to_string(),
            issuer: self.found.issuer.clone(),
            client_id: self.client.client_id.clone(),
            client_secret: self
                .client
                .secret
                .clone()
                .filter(|_| self.client.registered),
            token_endpoint_auth_method: self.client.auth.name().to_owned(),
            token_endpoint: token_url.to_string(),
            resource: self.resource.clone(),
            scope: issued.scope.clone().or_else(|| self.scope.clone()),
            access_token: issued.access_token.clone(),
            refresh_token: issued.refresh_token.clone(),
            expires_at: issued.expires_in.map(|d| now + d.as_secs()),
            obtained_at: now,
            dpop_key: key
                .filter(|_| issued.dpop_bound)
                .map(|key| key.stored().clone()),
        };
        let store_error = |error| AuthError::TokenStore {
            server: login.server.clone(),
            error,
        };
        login.store.save(&stored).await.map_err(store_error)?;
        for old in login
            .store
            .find(&stored.server_url)
            .await
            .map_err(store_error)?
        {
            if old.key() != stored.key() {
                tracing::info!(
                    server = %login.server,
                    old_issuer = %old.issuer,
                    issuer = %stored.issuer,
                    "OAuth login: replacing an older login to this server"
                );
                login.store.remove(&old.key()).await.map_err(store_error)?;
            }
        }
        tracing::info!(
            server = %login.server,
            issuer = %stored.issuer,
            refresh_token = stored.refresh_token.is_some(),
            "OAuth login complete"
        );
        Ok(stored)
    }
}

/// Compares two strings in time independent of where they differ.
fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// What came back from the authorization server: the redirect's query (`code`, `state`,
/// `iss`, or `error` and `error_description`), or a code the user pasted. `Debug` shows
/// neither code nor state.
#[derive(Clone, Default)]
pub struct Callback {
    code: Option<Secret>,
    state: Option<Secret>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    pasted: bool,
}

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("code", &self.code.is_some())
            .field("state", &self.state.is_some())
            .field("iss", &self.iss)
            .field("error", &self.error)
            .field("pasted", &self.pasted)
            .finish()
    }
}

impl Callback {
    /// True when the redirect's `state` is `expected` (compared in constant time).
    pub(crate) fn carries_state(&self, expected: &Secret) -> bool {
        self.state
            .as_ref()
            .is_some_and(|s| constant_time_eq(s.expose(), expected.expose()))
    }

    /// The redirect's query string (`code=…&state=…`, with or without `?`) or the whole
    /// redirect URL.
    pub fn from_redirect(text: &str) -> Self {
        let text = text.trim();
        let query = match Url::parse(text) {
            Ok(url) => url.query().unwrap_or_default().to_owned(),
            Err(_) => text.trim_start_matches('?').to_owned(),
        };
        let mut callback = Self::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let value = value.into_owned();
            match name.as_ref() {
                "code" if callback.code.is_none() => callback.code = Some(Secret::new(value)),
                "state" if callback.state.is_none() => callback.state = Some(Secret::new(value)),
                "iss" if callback.iss.is_none() => callback.iss = Some(value),
                "error" if callback.error.is_none() => callback.error = Some(value),
                "error_description" if callback.error_description.is_none() => {
                    callback.error_description = Some(value);
                }
                _ => {}
            }
        }
        callback
    }

    /// A code the user copied by hand: there is no `state` or `iss` to check.
    pub fn pasted_code(code: impl Into<Secret>) -> Self {
        Self {
            code: Some(code.into()),
            pasted: true,
            ..Self::default()
        }
    }

    /// What a user pasted: a redirect URL or query (it has a `=`) is read as one, anything
    /// else is a bare code.
    ///
    /// ```
    /// use mcp_auth::Callback;
    ///
    /// assert!(Callback::parse("http://127.0.0.1:1/callback?code=c&state=s").has_code());
    /// assert!(Callback::parse("c0de").has_code());
    /// ```
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if text.contains('=') {
            Self::from_redirect(text)
        } else {
            Self::pasted_code(Secret::new(text))
        }
    }

    /// True when it carries a code.
    pub fn has_code(&self) -> bool {
        self.code.as_ref().is_some_and(|c| !c.expose().is_empty())
    }

    /// The `error` the authorization server sent instead of a code, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}
