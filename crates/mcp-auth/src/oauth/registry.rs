//! The registry of OAuth2 credentials: one cache entry per credential, shared by every
//! provider (session) of it, pruned once nobody holds it and its token expired.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use mcp_config::{
    OAuthClientCredentials, Secret, ServerSpec, TokenEndpointAuthMethod, TransportSpec,
};
use url::Url;

use super::cache::{Cache, CredentialKey};
use super::flight::Shared;
use super::jwt::SigningKey;
use super::login::{
    FileTokenStore, Login, LoginFactory, LoginOnDemand, LoginState, LoginTokens, TokenStore,
    UserAuthorization,
};
use super::provider::ClientCredentials;
use super::share::{ShareHandle, SharedTokens, entry_name};
use super::token::ClientAuth;
use super::{Config, OAuthOptions, lock};
use crate::fetch::HttpFetch;
use crate::{AuthError, AuthProvider, StoreError};

/// Builds the auth hook of each server spec, and keeps one token cache per OAuth2 credential
/// so every session and every concurrent request of the same credential shares one token and
/// one refresh.
///
/// A credential is the token endpoint (or, when it is discovered, the MCP URL it is
/// discovered from, with the allowed issuers), the client id and secret, the scope, the
/// resource, the client authentication method and whether the spec is SSRF-guarded. Two
/// sessions with the same credential share a cache; anything else gets its own. Entries no
/// session uses are dropped once their token has expired (checked whenever a provider is
/// built, and at most every 30 s while tokens are used); a token without `expires_in` expires
/// after [`OAuthOptions::default_token_lifetime`].
///
/// Requests for [SSRF-guarded](mcp_config::ServerSpec::ssrf_guarded) specs (caller-supplied
/// ones) go through the [`with_guarded_fetch`](Self::with_guarded_fetch) client, which must
/// refuse internal addresses after DNS resolution; the HTTP transport sets it. Without one
/// they use the main client, and only literal addresses (and `localhost`) are refused.
///
/// The HTTP transport holds one registry per connector (`HttpConnector::auth_registry`); a
/// custom transport builds one on its own [`HttpFetch`]:
///
/// ```
/// use std::sync::Arc;
/// use async_trait::async_trait;
/// use bytes::Bytes;
/// use mcp_auth::{AuthRegistry, FetchError, HttpFetch};
/// use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
///
/// #[derive(Debug)]
/// struct Offline;
///
/// #[async_trait]
/// impl HttpFetch for Offline {
///     async fn fetch(&self, _: http::Request<Bytes>, _: usize)
///         -> Result<http::Response<Bytes>, FetchError> {
///         Err(FetchError::Request("offline".into()))
///     }
/// }
///
/// let registry = AuthRegistry::new(Arc::new(Offline));
/// let url = "https://mcp.example.com/mcp".parse().unwrap();
/// let mut spec = ServerSpec::new("docs", TransportSpec::StreamableHttp(HttpSpec::new(url)));
/// spec.auth.bearer = Some(mcp_config::SecretSource::Inline("tok".into()));
/// let provider = registry.provider(&spec).unwrap(); // static forms need no request
/// # drop(provider);
/// ```
pub struct AuthRegistry {
    http: Arc<dyn HttpFetch>,
    guarded_http: Option<Arc<dyn HttpFetch>>,
    options: OAuthOptions,
    pub(super) cache: Arc<Cache>,
    /// Where logins are kept; `None` until set or first needed (then the file store).
    token_store: Mutex<Option<Arc<dyn TokenStore>>>,
    /// One state per login (server URL and client), shared by its sessions.
    logins: Mutex<HashMap<String, Arc<LoginState>>>,
    /// The store the fleet's replicas share tokens in, when set.
    share: Mutex<Option<Arc<ShareHandle>>>,
}

impl fmt::Debug for AuthRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthRegistry")
            .field("options", &self.options)
            .field("guarded_fetch", &self.guarded_http.is_some())
            .field("credentials", &self.cache.len())
            .field("shared_tokens", &lock(&self.share).is_some())
            .finish_non_exhaustive()
    }
}

impl AuthRegistry {
    /// A registry sending its token and metadata requests through `http`, with default
    /// [`OAuthOptions`].
    pub fn new(http: Arc<dyn HttpFetch>) -> Self {
        Self {
            http,
            guarded_http: None,
            options: OAuthOptions::default(),
            cache: Arc::default(),
            token_store: Mutex::new(None),
            logins: Mutex::default(),
            share: Mutex::new(None),
        }
    }

    /// Shares OAuth tokens with the other replicas of a fleet through `tokens`: see
    /// [`use_shared_tokens`](Self::use_shared_tokens).
    pub fn with_shared_tokens(self, tokens: Arc<dyn SharedTokens>) -> Self {
        self.use_shared_tokens(tokens);
        self
    }

    /// Shares OAuth tokens with the other replicas of a fleet (gateways, an agent service's
    /// instances) through `tokens`, for credentials and logins built from now on (on a shared
    /// registry, the HTTP transport's `HttpConnector::auth_registry`).
    ///
    /// - **Client credentials**: before a token request, the token another replica stored
    ///   for the same credential (same endpoint, client id and secret, scope, resource,
    ///   method); one token request in the fleet at a time, the others waiting for its token.
    /// - **A user's login**: the login's latest tokens, so that the replica that refreshes
    ///   (one at a time in the fleet) spends the refresh token and the others take the rotated
    ///   one from the store: a refresh token is never sent twice. A login newer than the
    ///   fleet's in this replica's [`TokenStore`] (a new `mcp-agent auth login`) wins; the
    ///   fleet's tokens are saved into the token store too.
    /// - **The store failing** is logged once, and each replica goes on alone: client
    ///   credentials request their own token; a login's refresh waits for the store unless it
    ///   says otherwise ([`SharedTokens::refresh_alone_on_error`]). Waiting for another replica
    ///   is bounded by half of the spec's connect timeout (the attempt's bound).
    ///
    /// Entries carry their absolute expiry and the lifetime they were issued with; how
    /// replicas whose clocks disagree read them is in `SharedTokens`'s implementation notes
    /// (`share_entry.rs`): a skewed replica never uses an expired token and renews at most
    /// once more per token.
    pub fn use_shared_tokens(&self, tokens: Arc<dyn SharedTokens>) {
        *lock(&self.share) = Some(Arc::new(ShareHandle::new(tokens)));
        lock(&self.logins).clear();
        self.cache.clear();
    }

    /// The fleet's share handle, when tokens are shared.
    pub(super) fn share_handle(&self) -> Option<Arc<ShareHandle>> {
        lock(&self.share).clone()
    }

    /// The store tokens are shared in, when one is set.
    pub fn shared_tokens(&self) -> Option<Arc<dyn SharedTokens>> {
        lock(&self.share).as_ref().map(|share| share.tokens.clone())
    }

    /// Keeps users' logins (the `oauth` table) in `store`. Without one, the first login or
    /// session that needs it uses [`FileTokenStore::default_location`].
    pub fn with_token_store(self, store: Arc<dyn TokenStore>) -> Self {
        self.use_token_store(store);
        self
    }

    /// [`with_token_store`](Self::with_token_store) on a shared registry (the HTTP
    /// transport's `HttpConnector::auth_registry`): sessions opened from now on use `store`.
    pub fn use_token_store(&self, store: Arc<dyn TokenStore>) {
        *lock(&self.token_store) = Some(store);
        lock(&self.logins).clear();
    }

    /// The token store: the one set, else the file store under the user's state directory.
    pub fn token_store(&self) -> Result<Arc<dyn TokenStore>, StoreError> {
        let mut slot = lock(&self.token_store);
        if let Some(store) = &*slot {
            return Ok(store.clone());
        }
        let store: Arc<dyn TokenStore> = Arc::new(FileTokenStore::default_location()?);
        *slot = Some(store.clone());
        Ok(store)
    }

    /// A user's login to `spec`'s server (see [`Login`]), through this registry's HTTP
    /// client (the guarded one for an SSRF-guarded spec), options and token store.
    pub fn login(&self, spec: &ServerSpec) -> Result<Login, AuthError> {
        let store = self.token_store().map_err(|error| AuthError::TokenStore {
            server: spec.name.clone(),
            error,
        })?;
        Ok(Login::new(spec, self.fetch_for(spec), store)?.with_options(self.options.clone()))
    }

    /// The HTTP client this registry uses for `spec`'s OAuth requests: the guarded one for an
    /// SSRF-guarded spec (when set), else the main one. A headless login (a test, a
    /// conformance client) can follow the authorization URL's redirect through it.
    pub fn fetch_for(&self, spec: &ServerSpec) -> Arc<dyn HttpFetch> {
        match (&self.guarded_http, spec.ssrf_guarded()) {
            (Some(guarded), true) => guarded.clone(),
            _ => self.http.clone(),
        }
    }

    /// The auth hook of `spec`'s `oauth` table: the stored tokens of the user's login,
    /// shared with every other session of the same server and client.
    pub fn login_tokens(&self, spec: &ServerSpec) -> Result<LoginTokens, AuthError> {
        let server = spec.name.clone();
        let TransportSpec::StreamableHttp(mcp_spec) = &spec.transport else {
            return Err(AuthError::Unsupported {
                server,
                method: "an OAuth login over a transport other than HTTP",
            });
        };
        let settings = spec.auth.oauth.clone().unwrap_or_default();
        let secret = settings
            .client_secret
            .as_ref()
            .map(|source| crate::resolve_secret(&server, source, "client_secret"))
            .transpose()?;
        let store = self.token_store().map_err(|error| AuthError::TokenStore {
            server: server.clone(),
            error,
        })?;
        let key = format!(
            "{}\n{}",
            mcp_spec.url,
            settings.client_id.as_deref().unwrap_or_default()
        );
        let share = lock(&self.share).clone();
        let share_name = entry_name("login", &[key.as_bytes()]);
        let deadline = spec
            .connect_timeout
            .unwrap_or(self.options.default_deadline);
        let mut logins = lock(&self.logins);
        logins.retain(|_, state| Arc::strong_count(state) > 1);
        let state = logins
            .entry(key)
            .or_insert_with(|| {
                Arc::new(LoginState {
                    shared: Shared::new(
                        Config {
                            server: server.clone(),
                            client_id: settings.client_id.clone().unwrap_or_default(),
                            secret: secret.clone().unwrap_or_else(|| Secret::new("")),
                            key: None,
                            method: None,
                            scope: None,
                            resource: settings.resource.clone(),
                            token_url: None,
                            mcp_url: mcp_spec.url.clone(),
                            allowed_issuers: settings.allowed_issuers.clone(),
                            guarded: spec.ssrf_guarded(),
                            assertion: None,
                            dpop: mcp_config::DpopMode::Off,
                        },
                        self.fetch_for(spec),
                        self.options.clone(),
                        deadline,
                    )
                    .with_share(share, share_name),
                    store,
                    settings: settings.clone(),
                    secret,
                    mcp_url: mcp_spec.url.clone(),
                    current: Mutex::new(None),
                })
            })
            .clone();
        Ok(LoginTokens::new(server, state, spec.secret_values().into()))
    }

    /// The auth hook of `spec`'s `oauth` table that also logs in when the server asks for it:
    /// the stored tokens ([`login_tokens`](Self::login_tokens)), and on a 401 that they
    /// cannot answer a new [`login`](Self::login) run through `user` (at most `max_logins`
    /// in the hook's life), on a 403 `insufficient_scope` a step-up (at most
    /// `max_step_ups`). See [`LoginOnDemand`].
    pub fn login_on_demand(
        &self,
        spec: &ServerSpec,
        user: Arc<dyn UserAuthorization>,
        max_logins: u32,
        max_step_ups: u32,
    ) -> Result<LoginOnDemand, AuthError> {
        let tokens = self.login_tokens(spec)?;
        let store = self.token_store().map_err(|error| AuthError::TokenStore {
            server: spec.name.clone(),
            error,
        })?;
        let (spec_copy, fetch, options) =
            (spec.clone(), self.fetch_for(spec), self.options.clone());
        let new_login: LoginFactory = Arc::new(move || {
            Ok(Login::new(&spec_copy, fetch.clone(), store.clone())?.with_options(options.clone()))
        });
        Ok(LoginOnDemand::new(
            spec.name.clone(),
            tokens,
            new_login,
            user,
            max_logins,
            max_step_ups,
        ))
    }

    /// Sends the requests of [SSRF-guarded](mcp_config::ServerSpec::ssrf_guarded) specs
    /// (caller-supplied ones, unless the operator turned the guard off) through `http`, which
    /// must refuse to connect to internal addresses (see [`mcp_config::is_internal_ip`]) after
    /// resolving host names. Applies to credentials built from now on.
    pub fn with_guarded_fetch(mut self, http: Arc<dyn HttpFetch>) -> Self {
        self.guarded_http = Some(http);
        self
    }

    /// Replaces the options (for credentials built from now on).
    pub fn with_options(mut self, options: OAuthOptions) -> Self {
        self.options = options;
        self
    }

    /// The options.
    pub fn options(&self) -> &OAuthOptions {
        &self.options
    }

    /// The auth hook of `spec`: its headers, its bearer token (`bearer_token_env` is read
    /// now) and its OAuth2 client credentials (`client_secret_env` is read now; no request is
    /// sent until the first MCP request needs a token), user login or federated grant
    /// ([`federated`](Self::federated)). See [`crate::from_spec`] for the
    /// static forms and their errors.
    pub fn provider(&self, spec: &ServerSpec) -> Result<Arc<dyn AuthProvider>, AuthError> {
        if spec.auth.oauth.is_some() {
            let mut static_auth = spec.auth.clone();
            static_auth.oauth = None;
            let tokens = Arc::new(self.login_tokens(spec)?) as Arc<dyn AuthProvider>;
            if static_auth.is_empty() {
                return Ok(tokens);
            }
            let headers = crate::from_spec(&spec.name, &static_auth)?;
            return Ok(Arc::new(crate::Chain::new(vec![headers, tokens])));
        }
        if spec.auth.enterprise.is_some() || spec.auth.workload_identity.is_some() {
            let mut static_auth = spec.auth.clone();
            static_auth.enterprise = None;
            static_auth.workload_identity = None;
            let client = Arc::new(self.federated(spec)?) as Arc<dyn AuthProvider>;
            if static_auth.is_empty() {
                return Ok(client);
            }
            let headers = crate::from_spec(&spec.name, &static_auth)?;
            return Ok(Arc::new(crate::Chain::new(vec![headers, client])));
        }
        let Some(oauth) = &spec.auth.oauth_client_credentials else {
            return crate::from_spec(&spec.name, &spec.auth);
        };
        let mut static_auth = spec.auth.clone();
        static_auth.oauth_client_credentials = None;
        let client = Arc::new(self.client_credentials(spec, oauth)?) as Arc<dyn AuthProvider>;
        if static_auth.is_empty() {
            return Ok(client);
        }
        let headers = crate::from_spec(&spec.name, &static_auth)?;
        Ok(Arc::new(crate::Chain::new(vec![headers, client])))
    }

    /// The OAuth2 client-credentials provider of `spec` (whose `auth` must hold `oauth`),
    /// sharing its cache with every other provider of the same credential.
    pub fn client_credentials(
        &self,
        spec: &ServerSpec,
        oauth: &OAuthClientCredentials,
    ) -> Result<ClientCredentials, AuthError> {
        let server = spec.name.clone();
        let TransportSpec::StreamableHttp(mcp_spec) = &spec.transport else {
            return Err(AuthError::Unsupported {
                server,
                method: "OAuth2 client credentials over a transport other than HTTP",
            });
        };
        let secret = crate::resolve_secret(&server, &oauth.client_secret, "client_secret")?;
        let method = match oauth.token_endpoint_auth_method {
            None => None,
            Some(TokenEndpointAuthMethod::ClientSecretBasic) => Some(ClientAuth::Basic),
            Some(TokenEndpointAuthMethod::ClientSecretPost) => Some(ClientAuth::Post),
            Some(TokenEndpointAuthMethod::PrivateKeyJwt) => Some(ClientAuth::PrivateKeyJwt),
            Some(_) => {
                return Err(AuthError::Unsupported {
                    server,
                    method: "this token endpoint auth method",
                });
            }
        };
        // With private_key_jwt the client's credential is its private key, given where the
        // secret goes (`client_secret` / `client_secret_env`, PEM).
        let signing_key = match method {
            Some(ClientAuth::PrivateKeyJwt) => Some(Arc::new(
                SigningKey::from_pem(&secret).map_err(|message| AuthError::Provider {
                    server: server.clone(),
                    message: format!(
                        "private_key_jwt: {message} (the client secret setting holds the PEM private key)"
                    ),
                    source: None,
                })?,
            )),
            _ => None,
        };
        let key = CredentialKey {
            endpoint: oauth
                .token_url
                .as_ref()
                .map_or_else(|| format!("discover:{}", mcp_spec.url), |u| u.to_string()),
            client_id: oauth.client_id.clone(),
            secret: secret.clone(),
            scope: oauth.scope.clone(),
            // Without one configured, the entry is the server's own: never one server's token
            // for another's, even when they share a token endpoint and a client.
            resource: Some(
                oauth
                    .resource
                    .clone()
                    .unwrap_or_else(|| super::canonical_resource(&mcp_spec.url)),
            ),
            method: method.map(ClientAuth::name),
            allowed_issuers: oauth.allowed_issuers.iter().map(Url::to_string).collect(),
            guarded: spec.ssrf_guarded(),
            dpop: oauth.dpop,
        };
        let share_name = key.share_name();
        // A DPoP-bound token is of no use to a replica without this process's key.
        let share = lock(&self.share).clone().filter(|_| oauth.dpop.is_off());
        let mcp_url = &mcp_spec.url;
        let deadline = spec
            .connect_timeout
            .unwrap_or(self.options.default_deadline);
        let http = match (&self.guarded_http, spec.ssrf_guarded()) {
            (Some(guarded), true) => guarded.clone(),
            _ => self.http.clone(),
        };
        let shared = self.cache.entry(key, || {
            Arc::new(
                Shared::new(
                    Config {
                        server: server.clone(),
                        client_id: oauth.client_id.clone(),
                        secret,
                        key: signing_key,
                        method,
                        scope: oauth.scope.clone(),
                        resource: oauth.resource.clone(),
                        token_url: oauth.token_url.clone(),
                        mcp_url: mcp_url.clone(),
                        allowed_issuers: oauth.allowed_issuers.clone(),
                        guarded: spec.ssrf_guarded(),
                        assertion: None,
                        dpop: oauth.dpop,
                    },
                    http,
                    self.options.clone(),
                    deadline,
                )
                .with_share(share, share_name),
            )
        });
        Ok(ClientCredentials::new(
            server,
            shared,
            self.cache.clone(),
            spec.secret_values().into(),
        ))
    }
}
