//! OAuth2 client credentials (RFC 6749 §4.4) with discovery, a shared token cache and
//! single-flight refresh.

mod discovery;
mod failure;
mod jwt;
mod token;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use mcp_config::{
    OAuthClientCredentials, Scrubber, Secret, ServerSpec, TokenEndpointAuthMethod, TransportSpec,
    is_internal_host, is_loopback_host,
};
use serde_json::Value;
use tokio::time::Instant;
use url::Url;

use self::discovery::{
    authorization_server_urls, protected_resource_urls, resource_covers, same_issuer,
};
use self::failure::{Failure, shown};
use self::jwt::SigningKey;
use self::token::{ClientAuth, TokenRequest};
use crate::fetch::HttpFetch;
use crate::{AuthError, AuthProvider, Challenge, Credentials, OnUnauthorized};

/// How often (at most) the registry drops cache entries nobody uses whose token expired,
/// besides whenever a provider is built.
const PRUNE_INTERVAL: Duration = Duration::from_secs(30);

/// Tokens issued to a credential that are still scrubbed from what servers say: the most
/// recent ones.
const REMEMBERED_TOKENS: usize = 8;

/// Tunables of OAuth2 client credentials, shared by every credential of an [`AuthRegistry`].
///
/// ```
/// use std::time::Duration;
/// use mcp_auth::OAuthOptions;
///
/// let options = OAuthOptions::default().with_expiry_skew(Duration::from_secs(10));
/// assert_eq!(options.expiry_skew, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OAuthOptions {
    /// A token is renewed this long before it expires (at most half its lifetime earlier).
    /// Default 30 s.
    pub expiry_skew: Duration,
    /// Longest wait for one token or metadata answer. Default 10 s.
    pub request_timeout: Duration,
    /// Bound on obtaining one token (discovery included) when the spec sets no connect
    /// timeout; otherwise the spec's connect timeout bounds it. Default
    /// [`mcp_config::DEFAULT_CONNECT_TIMEOUT`].
    pub default_deadline: Duration,
    /// Largest token or metadata answer read. Default 64 KiB.
    pub max_response_bytes: usize,
    /// After a failed renewal, how long a still-valid token is used before the next attempt.
    /// Default 5 s.
    pub retry_delay: Duration,
    /// The lifetime assumed for a token whose answer has no `expires_in` (RFC 6749 makes it
    /// optional). Such a token is renewed like any other, [`expiry_skew`](Self::expiry_skew)
    /// (at most half its lifetime) before this runs out; no token is used forever. Default
    /// 5 min.
    pub default_token_lifetime: Duration,
}

impl Default for OAuthOptions {
    fn default() -> Self {
        Self {
            expiry_skew: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
            default_deadline: mcp_config::DEFAULT_CONNECT_TIMEOUT,
            max_response_bytes: 64 * 1024,
            retry_delay: Duration::from_secs(5),
            default_token_lifetime: Duration::from_secs(5 * 60),
        }
    }
}

impl OAuthOptions {
    /// Sets [`expiry_skew`](Self::expiry_skew).
    pub fn with_expiry_skew(mut self, skew: Duration) -> Self {
        self.expiry_skew = skew;
        self
    }

    /// Sets [`request_timeout`](Self::request_timeout).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`default_deadline`](Self::default_deadline).
    pub fn with_default_deadline(mut self, deadline: Duration) -> Self {
        self.default_deadline = deadline;
        self
    }

    /// Sets [`max_response_bytes`](Self::max_response_bytes).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Sets [`default_token_lifetime`](Self::default_token_lifetime).
    pub fn with_default_token_lifetime(mut self, lifetime: Duration) -> Self {
        self.default_token_lifetime = lifetime;
        self
    }
}

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
    cache: Arc<Cache>,
}

impl fmt::Debug for AuthRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthRegistry")
            .field("options", &self.options)
            .field("guarded_fetch", &self.guarded_http.is_some())
            .field("credentials", &self.cache.len())
            .finish_non_exhaustive()
    }
}

/// Every credential's cache entry, shared by the registry and its providers (which prune it).
#[derive(Default)]
struct Cache {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<CredentialKey, Arc<Shared>>,
    /// No access-time pruning before then.
    next_prune: Option<Instant>,
}

impl Cache {
    fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }

    /// Drops the entries no provider holds whose token has expired (or that never got one).
    fn prune(entries: &mut Entries, now: Instant) {
        entries
            .map
            .retain(|_, shared| Arc::strong_count(shared) > 1 || shared.has_valid_token(now));
        entries.next_prune = Some(now + PRUNE_INTERVAL);
    }

    /// [`prune`](Self::prune), at most every [`PRUNE_INTERVAL`].
    fn prune_if_due(&self, now: Instant) {
        let mut entries = lock(&self.entries);
        if entries.next_prune.is_none_or(|at| now >= at) {
            Self::prune(&mut entries, now);
        }
    }
}

/// What identifies one credential's cache. The secret is part of it (compared, never shown),
/// so a wrong secret never reuses a token obtained with the right one.
#[derive(Clone, PartialEq, Eq, Hash)]
struct CredentialKey {
    endpoint: String,
    client_id: String,
    secret: Secret,
    scope: Option<String>,
    resource: Option<String>,
    method: Option<&'static str>,
    allowed_issuers: Vec<String>,
    guarded: bool,
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
        }
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
    /// sent until the first MCP request needs a token). See [`crate::from_spec`] for the
    /// static forms and their errors.
    pub fn provider(&self, spec: &ServerSpec) -> Result<Arc<dyn AuthProvider>, AuthError> {
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
            resource: oauth.resource.clone(),
            method: method.map(ClientAuth::name),
            allowed_issuers: oauth.allowed_issuers.iter().map(Url::to_string).collect(),
            guarded: spec.ssrf_guarded(),
        };
        let mcp_url = &mcp_spec.url;
        let deadline = spec
            .connect_timeout
            .unwrap_or(self.options.default_deadline);
        let http = match (&self.guarded_http, spec.ssrf_guarded()) {
            (Some(guarded), true) => guarded.clone(),
            _ => self.http.clone(),
        };
        let mut entries = lock(&self.cache.entries);
        Cache::prune(&mut entries, Instant::now());
        let shared = entries
            .map
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Shared::new(
                    Config {
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
                    },
                    http,
                    self.options.clone(),
                    deadline,
                ))
            })
            .clone();
        Ok(ClientCredentials {
            server,
            shared,
            cache: self.cache.clone(),
            spec_secrets: spec.secret_values().into(),
        })
    }
}

/// The OAuth2 client-credentials auth hook of one server (session), sharing its token cache
/// with every other hook of the same credential (see [`AuthRegistry`]).
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
            Scrubber::new(
                self.spec_secrets
                    .iter()
                    .chain(state.tokens.iter())
                    .chain([&self.shared.config.secret])
                    .cloned(),
            )
        };
        failure.to_error(&self.server, &scrubber)
    }
}

#[async_trait]
impl AuthProvider for ClientCredentials {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        let now = Instant::now();
        self.cache.prune_if_due(now);
        let seen = {
            let state = lock(&self.shared.state);
            match &state.token {
                Some(token) if token.is_fresh(now) => return Ok(token.credentials()),
                Some(token)
                    if token.is_valid(now) && state.retry_after.is_some_and(|at| now < at) =>
                {
                    return Ok(token.credentials());
                }
                _ => {}
            }
            if state.endpoint.is_none() && !state.challenged {
                // Nothing to discover from yet: the server's 401 names its metadata.
                return Ok(Credentials::none());
            }
            state.generation
        };
        match self.shared.renew(seen).await {
            Ok(token) => Ok(token.credentials()),
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
                        Ok(token.credentials())
                    }
                    _ => Err(error),
                }
            }
        }
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
            state.generation
        };
        tracing::debug!(server = %self.server, "HTTP 401: obtaining a new OAuth token");
        match self.shared.renew(seen).await {
            Ok(_) => Ok(OnUnauthorized::Retry),
            Err(failure) => Err(self.error(&failure)),
        }
    }
}

/// One credential's settings.
struct Config {
    client_id: String,
    secret: Secret,
    /// The signing key, for `private_key_jwt`.
    key: Option<Arc<SigningKey>>,
    method: Option<ClientAuth>,
    scope: Option<String>,
    resource: Option<String>,
    token_url: Option<Url>,
    mcp_url: Url,
    /// Issuers discovery may use besides one on the MCP server's host.
    allowed_issuers: Vec<Url>,
    /// The spec is SSRF-guarded: no discovered URL may name an internal address.
    guarded: bool,
}

/// The token endpoint and what the metadata says about it.
#[derive(Debug)]
struct Endpoint {
    token_url: Url,
    /// The authorization server's issuer, when metadata gave it (the audience of
    /// `private_key_jwt` assertions; else the token endpoint is).
    issuer: Option<String>,
    /// `token_endpoint_auth_methods_supported`, when metadata gave it.
    methods: Option<Vec<String>>,
    /// The protected resource's identifier, when its metadata gave it (the default RFC 8707
    /// `resource`).
    resource: Option<String>,
}

/// A token in the cache.
#[derive(Clone)]
struct Token {
    header: HeaderValue,
    /// From then on, renew before use.
    refresh_at: Instant,
    /// From then on, never use.
    expires_at: Instant,
}

impl Token {
    fn is_fresh(&self, now: Instant) -> bool {
        now < self.refresh_at
    }

    fn is_valid(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    fn credentials(&self) -> Credentials {
        Credentials::none().with_header(AUTHORIZATION, self.header.clone())
    }
}

#[derive(Default)]
struct State {
    token: Option<Token>,
    /// Completed attempts: a caller that saw generation `g` and finds `g + 1` takes that
    /// attempt's outcome instead of starting another.
    generation: u64,
    /// The outcome of the latest attempt, when it failed.
    failure: Option<Failure>,
    /// No renewal ahead of expiry before then (after a failed one).
    retry_after: Option<Instant>,
    endpoint: Option<Arc<Endpoint>>,
    /// A 401 was seen (discovery may start).
    challenged: bool,
    /// The latest 401 challenge.
    challenge: Option<Challenge>,
    token_requests: u64,
    /// The latest tokens issued (access and refresh), most recent last, for scrubbing.
    tokens: VecDeque<Secret>,
}

/// The cache of one credential, shared by its providers.
struct Shared {
    config: Config,
    http: Arc<dyn HttpFetch>,
    options: OAuthOptions,
    /// Bound on one attempt (discovery + token request).
    deadline: Duration,
    state: Mutex<State>,
    /// Held by the one attempt in flight.
    flight: tokio::sync::Mutex<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn new(
        config: Config,
        http: Arc<dyn HttpFetch>,
        options: OAuthOptions,
        deadline: Duration,
    ) -> Self {
        let endpoint = config.token_url.clone().map(|token_url| {
            Arc::new(Endpoint {
                token_url,
                issuer: None,
                methods: None,
                resource: None,
            })
        });
        Self {
            config,
            http,
            options,
            deadline,
            state: Mutex::new(State {
                endpoint,
                ..State::default()
            }),
            flight: tokio::sync::Mutex::new(()),
        }
    }

    fn has_valid_token(&self, now: Instant) -> bool {
        lock(&self.state)
            .token
            .as_ref()
            .is_some_and(|t| t.is_valid(now))
    }

    /// Obtains a new token unless an attempt completed since the caller looked at generation
    /// `seen`, in which case that attempt's outcome is the answer. One attempt at a time.
    async fn renew(&self, seen: u64) -> Result<Token, Failure> {
        let _flight = self.flight.lock().await;
        {
            let state = lock(&self.state);
            if state.generation != seen {
                if let Some(failure) = &state.failure {
                    return Err(failure.clone());
                }
                if let Some(token) = &state.token {
                    return Ok(token.clone());
                }
            }
        }
        let outcome = match tokio::time::timeout(self.deadline, self.obtain()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::timeout(
                "obtaining an OAuth token".to_owned(),
                self.deadline,
            )),
        };
        let mut state = lock(&self.state);
        state.generation += 1;
        match &outcome {
            Ok(token) => {
                state.token = Some(token.clone());
                state.failure = None;
                state.retry_after = None;
            }
            Err(failure) => {
                state.failure = Some(failure.clone());
                state.retry_after = Some(Instant::now() + self.options.retry_delay);
            }
        }
        outcome
    }

    /// Discovery (once per credential), then a token request.
    async fn obtain(&self) -> Result<Token, Failure> {
        let (endpoint, challenge) = {
            let state = lock(&self.state);
            (state.endpoint.clone(), state.challenge.clone())
        };
        let challenge = challenge.unwrap_or_default();
        let endpoint = match endpoint {
            Some(endpoint) => endpoint,
            None => {
                let endpoint = Arc::new(self.discover(&challenge).await?);
                lock(&self.state).endpoint = Some(endpoint.clone());
                endpoint
            }
        };
        self.request_token(&endpoint, &challenge).await
    }

    async fn request_token(
        &self,
        endpoint: &Endpoint,
        challenge: &Challenge,
    ) -> Result<Token, Failure> {
        let config = &self.config;
        let auth = match config.method {
            Some(method) => method,
            None => choose_auth(endpoint.methods.as_deref()).map_err(Failure::Discovery)?,
        };
        let resource = config.resource.as_deref().or(endpoint.resource.as_deref());
        let scope = config.scope.as_deref().or(challenge.scope.as_deref());
        let what = format!("token request to {}", endpoint.token_url);
        let assertion = match (auth, &config.key) {
            (ClientAuth::PrivateKeyJwt, Some(key)) => {
                let audience = endpoint
                    .issuer
                    .clone()
                    .unwrap_or_else(|| endpoint.token_url.to_string());
                Some(
                    key.assertion(&config.client_id, &audience)
                        .map_err(|message| Failure::invalid(&what, message))?,
                )
            }
            _ => None,
        };
        let request = TokenRequest {
            client_id: &config.client_id,
            secret: &config.secret,
            auth,
            scope,
            resource,
            assertion: assertion.as_deref(),
        }
        .build(&endpoint.token_url)
        .map_err(|_| {
            Failure::invalid(
                &what,
                "the client id or secret cannot be sent in an HTTP header",
            )
        })?;
        tracing::debug!(
            token_url = %endpoint.token_url,
            client_id = %config.client_id,
            auth = auth.name(),
            "requesting an OAuth token (client credentials)"
        );
        lock(&self.state).token_requests += 1;
        let started = Instant::now();
        let response = self.exchange(&what, request).await?;
        let issued = token::parse_answer(
            &what,
            response.status().as_u16(),
            response.body(),
            &config.secret,
        )?;
        {
            let mut state = lock(&self.state);
            for secret in &issued.secrets {
                if !state.tokens.contains(secret) {
                    state.tokens.push_back(secret.clone());
                }
            }
            while state.tokens.len() > REMEMBERED_TOKENS {
                state.tokens.pop_front();
            }
        }
        let lifetime = issued
            .expires_in
            .unwrap_or(self.options.default_token_lifetime);
        let skew = self.options.expiry_skew.min(lifetime / 2);
        let (refresh_at, expires_at) =
            (started + lifetime.saturating_sub(skew), started + lifetime);
        tracing::debug!(
            token_url = %endpoint.token_url,
            expires_in = ?issued.expires_in,
            "obtained an OAuth token"
        );
        Ok(Token {
            header: issued.header,
            refresh_at,
            expires_at,
        })
    }

    /// RFC 9728 protected-resource metadata (from the challenge, else the well-known URLs of
    /// the MCP URL), then the authorization server's RFC 8414 / OpenID metadata.
    ///
    /// What the server names decides where the client credential goes, so discovery accepts
    /// only an authorization server (issuer) on the MCP server's own host (ports may differ)
    /// or listed in `allowed_issuers`, and only a token endpoint on that issuer's host. With a
    /// client secret (`client_secret_basic` / `client_secret_post`, or no method configured)
    /// it refuses a plain `http` MCP URL unless its host is loopback: anyone on the network
    /// could answer the first request with a 401 of their choosing. `private_key_jwt` may
    /// discover over plain `http`: its signed assertion lives 60 s and names the issuer as its
    /// audience, and the key itself is never sent.
    async fn discover(&self, challenge: &Challenge) -> Result<Endpoint, Failure> {
        let mcp_url = &self.config.mcp_url;
        let loopback = mcp_url.host().is_some_and(|h| is_loopback_host(&h));
        if mcp_url.scheme() == "http"
            && !loopback
            && self.config.method != Some(ClientAuth::PrivateKeyJwt)
        {
            return Err(Failure::Discovery(format!(
                "the server URL {mcp_url} is plain http, so anyone on the network could choose where the client secret goes; \
                 refused (use https, set `token_url`, or use private_key_jwt)"
            )));
        }
        let mut candidates = Vec::new();
        if let Some(hint) = &challenge.resource_metadata {
            let url = Url::parse(hint).map_err(|_| {
                Failure::Discovery(format!(
                    "the server's WWW-Authenticate names `resource_metadata` `{}`, which is not a URL",
                    shown(hint)
                ))
            })?;
            candidates.push(url);
        }
        for url in protected_resource_urls(mcp_url) {
            if !candidates.contains(&url) {
                candidates.push(url);
            }
        }
        let mut tried = Vec::new();
        let mut resource_metadata = None;
        for url in candidates {
            self.check_url(&url, "protected resource metadata")?;
            match self.get_json(&url, "protected resource metadata").await? {
                Ok(doc) => {
                    resource_metadata = Some((url, doc));
                    break;
                }
                Err(status) => tried.push(format!("{} (HTTP {status})", shown(&url))),
            }
        }
        let (issuer, resource) = match resource_metadata {
            Some((url, doc)) => {
                let resource = doc.get("resource").and_then(Value::as_str).ok_or_else(|| {
                    Failure::Discovery(format!(
                        "the protected resource metadata at {url} has no `resource`"
                    ))
                })?;
                if !resource_covers(resource, mcp_url) {
                    return Err(Failure::Discovery(format!(
                        "the protected resource metadata at {} is for resource `{}`, not for {mcp_url}; refused (RFC 9728 §3.3)",
                        shown(&url),
                        shown(resource)
                    )));
                }
                let issuer = doc
                    .get("authorization_servers")
                    .and_then(Value::as_array)
                    .and_then(|list| list.iter().find_map(Value::as_str))
                    .ok_or_else(|| {
                        Failure::Discovery(format!(
                            "the protected resource metadata at {} lists no `authorization_servers`",
                            shown(&url)
                        ))
                    })?;
                (issuer.to_owned(), Some(resource.to_owned()))
            }
            None => {
                // No protected-resource metadata: the MCP server's origin is the
                // authorization server (the 2025-03-26 MCP authorization spec).
                tracing::debug!(
                    tried = %tried.join(", "),
                    "no protected resource metadata; trying the MCP server's origin as the authorization server"
                );
                (mcp_url.origin().ascii_serialization(), None)
            }
        };
        let issuer_url = Url::parse(&issuer)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                Failure::Discovery(format!(
                    "the authorization server `{}` is not an http(s) URL",
                    shown(&issuer)
                ))
            })?;
        self.check_issuer(&issuer_url)?;
        for url in authorization_server_urls(&issuer_url) {
            self.check_url(&url, "authorization server metadata")?;
            let doc = match self.get_json(&url, "authorization server metadata").await? {
                Ok(doc) => doc,
                Err(status) => {
                    tried.push(format!("{} (HTTP {status})", shown(&url)));
                    continue;
                }
            };
            let found = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
            if !same_issuer(&issuer, found) {
                return Err(Failure::IssuerMismatch {
                    metadata_url: shown(&url),
                    expected: shown(&issuer),
                    found: shown(found),
                });
            }
            if let Some(grants) = doc.get("grant_types_supported").and_then(Value::as_array)
                && !grants.iter().any(|g| g == "client_credentials")
            {
                return Err(Failure::Discovery(format!(
                    "the authorization server `{}` does not offer the client_credentials grant (grant_types_supported at {})",
                    shown(&issuer),
                    shown(&url)
                )));
            }
            let token_url = doc
                .get("token_endpoint")
                .and_then(Value::as_str)
                .and_then(|t| Url::parse(t).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .ok_or_else(|| {
                    Failure::Discovery(format!(
                        "the authorization server metadata at {} has no http(s) `token_endpoint`",
                        shown(&url)
                    ))
                })?;
            self.check_url(&token_url, "token endpoint")?;
            if token_url.host() != issuer_url.host() {
                return Err(Failure::Discovery(format!(
                    "the token endpoint {} is not on the host of the authorization server `{}`; \
                     refused (set `token_url` to use it)",
                    shown(&token_url),
                    shown(&issuer)
                )));
            }
            let methods = doc
                .get("token_endpoint_auth_methods_supported")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                });
            tracing::debug!(
                server_url = %mcp_url,
                issuer = %issuer,
                token_url = %token_url,
                "discovered the OAuth token endpoint"
            );
            return Ok(Endpoint {
                token_url,
                issuer: Some(found.to_owned()),
                methods,
                resource,
            });
        }
        Err(Failure::Discovery(format!(
            "no authorization server metadata found for `{}` (tried {})",
            shown(&issuer),
            tried.join(", ")
        )))
    }

    /// The client credential goes only to an authorization server on the MCP server's own
    /// host (ports may differ) or one the configuration lists in `allowed_issuers`.
    fn check_issuer(&self, issuer: &Url) -> Result<(), Failure> {
        let mcp_url = &self.config.mcp_url;
        let same_host = issuer.host().is_some() && issuer.host() == mcp_url.host();
        let listed = self
            .config
            .allowed_issuers
            .iter()
            .any(|allowed| same_issuer(allowed.as_str(), issuer.as_str()));
        if same_host || listed {
            return Ok(());
        }
        Err(Failure::Discovery(format!(
            "the server names the authorization server `{}`, which is neither on its own host `{}` nor in `allowed_issuers`; \
             refused (list it in `allowed_issuers`, or set `token_url`)",
            shown(issuer),
            mcp_url.host_str().unwrap_or_default()
        )))
    }

    /// A discovered URL must not lower the transport's security (https → http), and an
    /// SSRF-guarded (caller-supplied) spec must not lead to an internal address literal (names
    /// resolving to one are refused by the guarded HTTP client).
    fn check_url(&self, url: &Url, what: &str) -> Result<(), Failure> {
        let mcp_url = &self.config.mcp_url;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Failure::Discovery(format!(
                "the {what} URL {} is not http(s)",
                shown(url)
            )));
        }
        if mcp_url.scheme() == "https" && url.scheme() != "https" {
            return Err(Failure::Discovery(format!(
                "the {what} URL {} is not https while the server is; refused",
                shown(url)
            )));
        }
        if self.config.guarded && url.host().is_some_and(|h| is_internal_host(&h)) {
            return Err(Failure::Discovery(format!(
                "the {what} URL {} targets an internal address, which a caller-supplied server may not lead to (SSRF guard)",
                shown(url)
            )));
        }
        Ok(())
    }

    /// GETs a JSON metadata document: `Ok(Ok(doc))` for a 200 JSON object, `Ok(Err(status))`
    /// for another status (the next candidate is tried).
    async fn get_json(&self, url: &Url, what: &str) -> Result<Result<Value, u16>, Failure> {
        let what = format!("{what} request to {url}");
        let request = http::Request::get(url.as_str())
            .header(ACCEPT, "application/json")
            .body(Bytes::new())
            .map_err(|_| Failure::invalid(&what, "the URL cannot be requested"))?;
        let response = self.exchange(&what, request).await?;
        if response.status() != http::StatusCode::OK {
            return Ok(Err(response.status().as_u16()));
        }
        match serde_json::from_slice::<Value>(response.body()) {
            Ok(doc) if doc.is_object() => Ok(Ok(doc)),
            _ => Err(Failure::invalid(what, "the answer is not a JSON object")),
        }
    }

    /// One bounded exchange.
    async fn exchange(
        &self,
        what: &str,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, Failure> {
        let limit = self.options.request_timeout.min(self.deadline);
        match tokio::time::timeout(
            limit,
            self.http.fetch(request, self.options.max_response_bytes),
        )
        .await
        {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => Err(Failure::fetch(what.to_owned(), error)),
            Err(_) => Err(Failure::timeout(what.to_owned(), limit)),
        }
    }
}

/// The client authentication to use when none is configured: `client_secret_basic` if the
/// metadata lists it (or lists nothing: it is RFC 8414's default), else `client_secret_post`
/// if listed. A server that lists neither cannot take the secret: an error naming what it
/// supports (at most a few of its entries, shortened).
fn choose_auth(supported: Option<&[String]>) -> Result<ClientAuth, String> {
    let Some(supported) = supported else {
        return Ok(ClientAuth::Basic);
    };
    let listed = |name: &str| supported.iter().any(|m| m == name);
    if listed(ClientAuth::Basic.name()) {
        return Ok(ClientAuth::Basic);
    }
    if listed(ClientAuth::Post.name()) {
        return Ok(ClientAuth::Post);
    }
    const SHOWN: usize = 8;
    let mut names: Vec<String> = supported
        .iter()
        .take(SHOWN)
        .map(|m| format!("`{}`", shown(m)))
        .collect();
    if supported.len() > SHOWN {
        names.push(format!("and {} more", supported.len() - SHOWN));
    }
    let names = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    Err(format!(
        "the token endpoint supports neither client_secret_basic nor client_secret_post \
         (token_endpoint_auth_methods_supported: {names}); set `token_endpoint_auth_method` \
         to one it supports (private_key_jwt takes the PEM private key where the secret goes)"
    ))
}

#[cfg(test)]
mod tests;
