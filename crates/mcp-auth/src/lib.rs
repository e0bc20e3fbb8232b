//! Authentication for MCP HTTP transports: the per-request auth hook and its static
//! implementations.
//!
//! An HTTP transport asks an [`AuthProvider`] for [`Credentials`] (a few headers, values
//! marked sensitive) before **every** request, so a provider can rotate or refresh them. When
//! the server answers `401 Unauthorized`, the transport calls
//! [`AuthProvider::on_unauthorized`] with the credentials it sent and the `WWW-Authenticate`
//! challenge; on [`OnUnauthorized::Retry`] it asks for credentials again and resends the
//! request **once**. A second 401 is an error: the hook is never asked twice for one request,
//! so a misbehaving server or provider cannot make the transport loop. A hook that signs
//! requests (DPoP, RFC 9449) is asked with [`AuthProvider::credentials_for`] (method and URL)
//! and sees every response's headers ([`AuthProvider::observe_response`]): a 401
//! `use_dpop_nonce` with a new `DPoP-Nonce` is resent once more with it.
//!
//! Static providers: [`StaticHeaders`] (configured headers), [`BearerToken`]
//! (`bearer_token` or `bearer_token_env`) and [`Chain`] (several providers in order);
//! [`from_spec`] builds the static provider an [`AuthSpec`] asks for.
//!
//! OAuth2 client credentials: [`ClientCredentials`], built by an [`AuthRegistry`], which keeps
//! one token cache per credential shared by every session. The token endpoint is configured
//! (`token_url`) or discovered from the server's 401 ([`Challenge`] `resource_metadata`,
//! RFC 9728 protected-resource metadata, then RFC 8414 / OpenID authorization-server metadata
//! with path-aware issuers and an issuer check); the client authenticates with
//! `client_secret_basic`, `client_secret_post` or `private_key_jwt` (RFC 7523, ES256 / RS256,
//! the PEM key given where the secret goes); `scope` and the RFC 8707 `resource` are sent.
//! Tokens are reused until their expiry minus a skew (a token without `expires_in` lives
//! [`OAuthOptions::default_token_lifetime`]), one renewal is in flight per credential, and
//! every exchange is bounded (time, body size). The requests go through [`HttpFetch`], which
//! the transport implements: this crate has no HTTP client.
//!
//! A user's OAuth login (the `oauth` table): the authorization code grant with PKCE S256.
//! [`Login`] discovers the authorization server, picks the client (pre-registered, a client
//! ID metadata document, or RFC 7591 registration) and builds the authorization URL
//! ([`PendingLogin`]); the redirect ([`Callback`], from a [`CallbackListener`] on
//! `127.0.0.1:<port>/callback` or pasted) is checked (`state`, RFC 9207 `iss`) and its code
//! exchanged; the tokens go to a [`TokenStore`] ([`FileTokenStore`] for the command line,
//! [`MemoryTokenStore`] for services). Sessions then use [`LoginTokens`], which refreshes the
//! token before it expires and, when nothing usable is left, fails with
//! [`AuthError::LoginRequired`] naming `mcp-agent auth login <server>`.
//!
//! A fleet's replicas (gateways behind one load balancer, an agent service's instances) share
//! their tokens through a [`SharedTokens`] store ([`AuthRegistry::use_shared_tokens`]; the
//! facade's `redis` feature has one on Redis): one token request, or one refresh, in the whole
//! fleet at a time, under a lease with a second look; a refresh token is never sent twice.
//!
//! # Where a client secret may go
//!
//! - With `token_url`: there, and nowhere else.
//! - Discovered: only to an authorization server (issuer) on the MCP server's own host (ports
//!   may differ) or listed in the spec's `allowed_issuers`, and only to a token endpoint on
//!   that issuer's host; never over an https → http downgrade; with a client secret, never
//!   when the MCP URL is plain `http` to a host other than loopback (`private_key_jwt` may:
//!   its assertion is short-lived and bound to the issuer, and the key never leaves).
//! - For an SSRF-guarded (caller-supplied) spec: never to an internal address — literals are
//!   refused here, resolved names by the client set with
//!   [`AuthRegistry::with_guarded_fetch`].
//!
//! # How a refreshing provider answers a 401
//!
//! [`ClientCredentials`] keeps its current token behind a lock. In `on_unauthorized` it
//! compares the rejected `Authorization` value with its current one: if they differ, another
//! request already renewed it, so it answers [`OnUnauthorized::Retry`] without a new request;
//! otherwise it drops the token and renews it once (one renewal in flight per credential, its
//! outcome shared by every waiting caller), then answers `Retry`, or returns the error.
//!
//! # Errors
//!
//! [`AuthError`] is the crate's error: every provider returns it, it names the server once
//! (``server `<name>`: `` then [`AuthError::reason`]), and its messages hold no Rust type path.
//! [`FetchError`] is a second type only because it belongs to another seam: the transport
//! implementing [`HttpFetch`] returns it without knowing the server; the provider wraps it
//! in [`AuthError::OAuthRequest`] (typed, as its `cause`). Inside, an OAuth attempt's failure
//! is kept cloneable (one attempt answers every waiting caller) and becomes an [`AuthError`]
//! per caller.
//!
//! Causes stay typed (a custom provider's cause is [`AuthError::Provider`]'s `source()`),
//! except text that may echo a secret: whatever an OAuth server chose (an error description,
//! an issuer, a parser's complaint about its metadata) and the text of a failed OAuth request.
//! Those are kept as text, scrubbed of the client secret, the spec's secrets and the
//! credential's recent tokens, and bounded; no message repeats its `source()`.
//! [`BoxError`](mcp_config::BoxError) is `mcp-config`'s.
//!
//! ```
//! use std::sync::Arc;
//!
//! use mcp_auth::{AuthProvider, BearerToken, Chain, StaticHeaders};
//! use mcp_config::Secret;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), mcp_auth::AuthError> {
//! let headers = [("X-Tenant".to_owned(), Secret::from("acme"))].into_iter().collect();
//! let auth = Chain::new(vec![
//!     Arc::new(StaticHeaders::new("docs", &headers)?) as Arc<dyn AuthProvider>,
//!     Arc::new(BearerToken::new("docs", &Secret::from("tok-123"))?),
//! ]);
//! let credentials = auth.credentials().await?;
//! assert_eq!(credentials.get("authorization").unwrap(), "Bearer tok-123");
//! // Debug output names the headers, never their values.
//! assert!(!format!("{credentials:?}").contains("tok-123"));
//! # Ok(())
//! # }
//! ```
//!
//! # Architecture invariant
//!
//! No HTTP client here (no reqwest, no hyper): providers speak in header names and values
//! (the `http` crate's types) and the transport sends them; OAuth requests go through the
//! [`HttpFetch`] seam the transport implements. No Redis either: shared tokens go through the
//! [`SharedTokens`] seam.

mod challenge;
mod error;
mod fetch;
#[cfg(feature = "oauth")]
mod oauth;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use mcp_config::{AuthSpec, Secret, SecretSource};

pub use challenge::Challenge;
pub use error::{AuthError, FetchError, ShareError, StoreError};
pub use fetch::HttpFetch;
#[cfg(feature = "oauth")]
pub use oauth::login::{
    Callback, CallbackListener, FileTokenStore, Login, LoginKey, LoginLock, LoginOnDemand,
    LoginTokens, MemoryTokenStore, OFFLINE_ACCESS, PendingLogin, Pkce, StepUp, StoredLogin,
    TokenStore, UserAuthorization, loopback_redirect_uri, select_scope,
};
#[cfg(feature = "oauth")]
pub use oauth::{
    AuthRegistry, ClientCredentials, MAX_TOKEN_FILE_BYTES, OAuthOptions, SharedEntry, SharedTokens,
};

/// Headers that authenticate one request. Values are marked sensitive, and `Debug` prints
/// only the header names.
#[derive(Clone, Default)]
pub struct Credentials {
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Credentials {
    /// No headers.
    pub fn none() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a header; the value is marked sensitive.
    pub fn with_header(mut self, name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value));
        self
    }

    /// An `Authorization: Bearer <token>` credential.
    pub fn bearer(server: &str, token: &Secret) -> Result<Self, AuthError> {
        let value = HeaderValue::try_from(format!("Bearer {}", token.expose())).map_err(|_| {
            AuthError::InvalidHeaderValue {
                server: server.to_owned(),
                name: AUTHORIZATION.as_str().to_owned(),
            }
        })?;
        Ok(Self::none().with_header(AUTHORIZATION, value))
    }

    /// The value of header `name` (case-insensitive), if set.
    pub fn get(&self, name: &str) -> Option<&HeaderValue> {
        self.headers
            .iter()
            .find(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The headers, in the order they were added.
    pub fn headers(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.headers.iter().map(|(n, v)| (n, v))
    }

    /// True when there is no header.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// Sets every header on `map`, replacing values of the same name.
    pub fn apply_to(&self, map: &mut http::HeaderMap) {
        for (name, value) in &self.headers {
            map.insert(name.clone(), value.clone());
        }
    }

    /// `other`'s headers added after these; a name present in both is an error.
    fn merge_strict(mut self, server: &str, other: Credentials) -> Result<Self, AuthError> {
        for (name, value) in other.headers {
            if self.get(name.as_str()).is_some() {
                return Err(AuthError::DuplicateHeader {
                    server: server.to_owned(),
                    name: name.as_str().to_owned(),
                });
            }
            self.headers.push((name, value));
        }
        Ok(self)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// What the transport should do after a `401 Unauthorized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnUnauthorized {
    /// Credentials changed: ask for them again and resend the request once.
    Retry,
    /// Nothing to do: the request fails with the 401.
    Fail,
}

/// The per-request auth hook of HTTP transports.
///
/// Implementations must be cheap to call on every request (cache what they fetch) and must
/// never put a secret into an error or a `Debug` output.
#[async_trait]
pub trait AuthProvider: Send + Sync + fmt::Debug {
    /// The credentials for the next request.
    async fn credentials(&self) -> Result<Credentials, AuthError>;

    /// The credentials for the next request, a `method` to `url`: what a hook needs to sign
    /// a request (a DPoP proof names both). The HTTP transport calls this one.
    ///
    /// The default is [`credentials`](Self::credentials).
    async fn credentials_for(
        &self,
        method: &http::Method,
        url: &str,
    ) -> Result<Credentials, AuthError> {
        let _ = (method, url);
        self.credentials().await
    }

    /// The headers of a response from `url` (any status), seen before anything else is
    /// done with it: a DPoP hook learns the server's `DPoP-Nonce`. True when the hook learned
    /// something that makes resending a refused request worth it (a new nonce); the
    /// transport resends at most once for it.
    ///
    /// The default learns nothing.
    fn observe_response(&self, url: &str, headers: &http::HeaderMap) -> bool {
        let _ = (url, headers);
        false
    }

    /// The server answered 401 to a request sent with `rejected`; `www_authenticate` is the
    /// challenge, if the server sent one. Called at most once per request.
    ///
    /// The default answers [`OnUnauthorized::Fail`]: static credentials do not get better by
    /// resending them.
    async fn on_unauthorized(
        &self,
        rejected: &Credentials,
        www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        let _ = (rejected, www_authenticate);
        Ok(OnUnauthorized::Fail)
    }

    /// The server answered 403 with a `WWW-Authenticate` challenge saying
    /// `insufficient_scope` to a request sent with `rejected`: the token is good but its scope
    /// too narrow. Called at most once per request; on [`OnUnauthorized::Retry`] the
    /// transport asks for credentials again and resends once.
    ///
    /// The default answers [`OnUnauthorized::Fail`] (the request fails with the 403): only a
    /// hook that can log in again for more scope ([`LoginOnDemand`]) does better.
    async fn on_insufficient_scope(
        &self,
        rejected: &Credentials,
        www_authenticate: &str,
    ) -> Result<OnUnauthorized, AuthError> {
        let _ = (rejected, www_authenticate);
        Ok(OnUnauthorized::Fail)
    }

    /// Reports every secret this hook obtains at run time (OAuth tokens issued or loaded from
    /// a token store), those it holds now and those to come, to `sink`: the redactor of a run
    /// that uses it. A hook shared by several runs reports to each; it keeps only a weak
    /// reference. The default does nothing: static credentials are in the spec's
    /// [`secret_values`](mcp_config::ServerSpec::secret_values), which every run knows.
    fn report_secrets_to(&self, sink: &Arc<dyn mcp_config::SecretSink>) {
        let _ = sink;
    }
}

/// No credentials at all.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoAuth;

#[async_trait]
impl AuthProvider for NoAuth {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        Ok(Credentials::none())
    }
}

/// Fixed headers from the configuration (values are secrets).
#[derive(Debug, Clone)]
pub struct StaticHeaders {
    credentials: Credentials,
}

impl StaticHeaders {
    /// Validates `headers` for `server`: every name must be an HTTP header name and every
    /// value an HTTP header value. Errors name the header, never the value.
    pub fn new(server: &str, headers: &BTreeMap<String, Secret>) -> Result<Self, AuthError> {
        let mut credentials = Credentials::none();
        for (name, value) in headers {
            let header_name =
                HeaderName::try_from(name.as_str()).map_err(|_| AuthError::InvalidHeaderName {
                    server: server.to_owned(),
                    name: name.clone(),
                })?;
            let header_value = HeaderValue::try_from(value.expose()).map_err(|_| {
                AuthError::InvalidHeaderValue {
                    server: server.to_owned(),
                    name: name.clone(),
                }
            })?;
            credentials = credentials.merge_strict(
                server,
                Credentials::none().with_header(header_name, header_value),
            )?;
        }
        Ok(Self { credentials })
    }

    /// The header names, for checks against reserved names.
    pub fn names(&self) -> impl Iterator<Item = &HeaderName> {
        self.credentials.headers.iter().map(|(n, _)| n)
    }
}

#[async_trait]
impl AuthProvider for StaticHeaders {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        Ok(self.credentials.clone())
    }
}

/// A static bearer token: `Authorization: Bearer <token>`.
#[derive(Debug, Clone)]
pub struct BearerToken {
    credentials: Credentials,
}

impl BearerToken {
    /// The token given in the configuration (`bearer_token`). An empty or whitespace-only
    /// token is [`AuthError::EmptySecret`]: never an empty `Authorization` header.
    ///
    /// ```
    /// use mcp_auth::{AuthError, BearerToken};
    /// use mcp_config::Secret;
    ///
    /// let err = BearerToken::new("docs", &Secret::from("  ")).unwrap_err();
    /// assert!(matches!(err, AuthError::EmptySecret { .. }));
    /// ```
    pub fn new(server: &str, token: &Secret) -> Result<Self, AuthError> {
        let token = non_empty(server, "bearer_token", None, Some(token.clone()))?;
        Ok(Self {
            credentials: Credentials::bearer(server, &token)?,
        })
    }

    /// The token read from environment variable `variable` now (`bearer_token_env`; call it
    /// when the session opens). An unset variable is [`AuthError::MissingEnv`], one set to
    /// the empty string (or only whitespace) [`AuthError::EmptySecret`], both naming the
    /// server and the variable.
    pub fn from_env(server: &str, variable: &str) -> Result<Self, AuthError> {
        let token = resolve_secret(
            server,
            &SecretSource::Env(variable.to_owned()),
            "bearer_token",
        )?;
        Self::new(server, &token)
    }

    /// The token from either source.
    pub fn from_source(server: &str, source: &SecretSource) -> Result<Self, AuthError> {
        let token = resolve_secret(server, source, "bearer_token")?;
        Self::new(server, &token)
    }
}

/// The value of secret `source`, given by setting `setting` (`bearer_token`,
/// `client_secret`; `_env` is added for a variable) of `server`: an unset variable is
/// [`AuthError::MissingEnv`], an empty or whitespace-only value [`AuthError::EmptySecret`].
pub(crate) fn resolve_secret(
    server: &str,
    source: &SecretSource,
    setting: &'static str,
) -> Result<Secret, AuthError> {
    match source {
        SecretSource::Env(variable) => {
            let setting = env_setting(setting);
            let value = source.resolve().ok_or_else(|| AuthError::MissingEnv {
                server: server.to_owned(),
                variable: variable.clone(),
                setting,
            })?;
            non_empty(server, setting, Some(variable), Some(value))
        }
        other => non_empty(server, setting, None, other.resolve()),
    }
}

/// The `_env` form of a setting's name.
fn env_setting(setting: &'static str) -> &'static str {
    match setting {
        "bearer_token" => "bearer_token_env",
        "client_secret" => "client_secret_env",
        other => other,
    }
}

/// `value`, unless it is missing, empty or only whitespace ([`AuthError::EmptySecret`]
/// naming `setting` and, when it came from one, the variable).
fn non_empty(
    server: &str,
    setting: &'static str,
    variable: Option<&str>,
    value: Option<Secret>,
) -> Result<Secret, AuthError> {
    value
        .filter(|value| !value.expose().trim().is_empty())
        .ok_or_else(|| AuthError::EmptySecret {
            server: server.to_owned(),
            setting,
            variable: variable.map(str::to_owned),
        })
}

#[async_trait]
impl AuthProvider for BearerToken {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        Ok(self.credentials.clone())
    }
}

/// Several providers, asked in order; a later provider's header replaces an earlier one of the
/// same name.
///
/// `on_unauthorized` and `on_insufficient_scope` ask every provider (each at most once) and
/// retry when any of them answers [`OnUnauthorized::Retry`].
#[derive(Debug, Clone, Default)]
pub struct Chain {
    providers: Vec<Arc<dyn AuthProvider>>,
}

impl Chain {
    /// A chain of `providers`.
    pub fn new(providers: Vec<Arc<dyn AuthProvider>>) -> Self {
        Self { providers }
    }
}

#[async_trait]
impl AuthProvider for Chain {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        let mut all = Credentials::none();
        for provider in &self.providers {
            for (name, value) in provider.credentials().await?.headers {
                all = all.with_header(name, value);
            }
        }
        Ok(all)
    }

    async fn credentials_for(
        &self,
        method: &http::Method,
        url: &str,
    ) -> Result<Credentials, AuthError> {
        let mut all = Credentials::none();
        for provider in &self.providers {
            for (name, value) in provider.credentials_for(method, url).await?.headers {
                all = all.with_header(name, value);
            }
        }
        Ok(all)
    }

    fn observe_response(&self, url: &str, headers: &http::HeaderMap) -> bool {
        let mut learned = false;
        for provider in &self.providers {
            learned |= provider.observe_response(url, headers);
        }
        learned
    }

    async fn on_unauthorized(
        &self,
        rejected: &Credentials,
        www_authenticate: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        let mut decision = OnUnauthorized::Fail;
        for provider in &self.providers {
            if provider.on_unauthorized(rejected, www_authenticate).await? == OnUnauthorized::Retry
            {
                decision = OnUnauthorized::Retry;
            }
        }
        Ok(decision)
    }

    async fn on_insufficient_scope(
        &self,
        rejected: &Credentials,
        www_authenticate: &str,
    ) -> Result<OnUnauthorized, AuthError> {
        let mut decision = OnUnauthorized::Fail;
        for provider in &self.providers {
            if provider
                .on_insufficient_scope(rejected, www_authenticate)
                .await?
                == OnUnauthorized::Retry
            {
                decision = OnUnauthorized::Retry;
            }
        }
        Ok(decision)
    }

    fn report_secrets_to(&self, sink: &Arc<dyn mcp_config::SecretSink>) {
        for provider in &self.providers {
            provider.report_secrets_to(sink);
        }
    }
}

/// The static provider `auth` asks for, for server `server`: its `headers` and its bearer
/// token (`bearer_token_env` is read now). A header set twice (say `Authorization` in
/// `headers` and a bearer token) is [`AuthError::DuplicateHeader`].
///
/// OAuth2 client credentials need an HTTP client and a token cache shared across sessions:
/// build them with [`AuthRegistry::provider`] (the HTTP transport does). Here they are
/// [`AuthError::Unsupported`].
///
/// ```
/// use mcp_auth::{AuthError, from_spec};
/// use mcp_config::{AuthSpec, SecretSource};
///
/// let mut spec = AuthSpec::default();
/// spec.bearer = Some(SecretSource::Env("MCP_AUTH_DOC_UNSET_TOKEN".into()));
/// let err = from_spec("docs", &spec).unwrap_err();
/// assert!(matches!(err, AuthError::MissingEnv { .. }));
/// assert!(err.to_string().contains("MCP_AUTH_DOC_UNSET_TOKEN"));
/// assert!(err.to_string().contains("docs"));
/// ```
pub fn from_spec(server: &str, auth: &AuthSpec) -> Result<Arc<dyn AuthProvider>, AuthError> {
    #[cfg(feature = "oauth")]
    let (client_credentials, login) = (
        "OAuth2 client credentials without an HTTP client (an auth registry builds them)",
        "an OAuth login without an HTTP client and a token store (an auth registry builds it)",
    );
    #[cfg(not(feature = "oauth"))]
    let (client_credentials, login) = (
        "OAuth2 client credentials (built without the `oauth` feature)",
        "an OAuth login (built without the `oauth` feature)",
    );
    if auth.oauth_client_credentials.is_some() {
        return Err(AuthError::Unsupported {
            server: server.to_owned(),
            method: client_credentials,
        });
    }
    if auth.oauth.is_some() {
        return Err(AuthError::Unsupported {
            server: server.to_owned(),
            method: login,
        });
    }
    if auth.enterprise.is_some() || auth.workload_identity.is_some() {
        return Err(AuthError::Unsupported {
            server: server.to_owned(),
            method: "a federated grant (`enterprise`, `workload_identity`) without an auth registry",
        });
    }
    let mut credentials = StaticHeaders::new(server, &auth.headers)?.credentials;
    if let Some(source) = &auth.bearer {
        credentials = credentials.merge_strict(
            server,
            BearerToken::from_source(server, source)?.credentials,
        )?;
    }
    if credentials.is_empty() {
        return Ok(Arc::new(NoAuth));
    }
    Ok(Arc::new(StaticHeaders { credentials }))
}

#[cfg(test)]
mod tests;
