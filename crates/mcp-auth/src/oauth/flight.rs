//! Single-flight renewal: one credential's token, its state, and the one attempt in flight.
//!
//! A token is fresh until its expiry minus a skew. A caller that finds it stale (or a 401 with
//! the current token) takes the one `flight` lock; a generation counter lets everyone who
//! waited take that attempt's outcome (token or error) instead of starting another. An attempt
//! is discovery (once per credential, see `discovery.rs`) then a token request, bounded as a
//! whole by the spec's connect timeout and per exchange by
//! [`OAuthOptions::request_timeout`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use mcp_config::{Secret, SecretSink};
use tokio::time::Instant;

use super::counted;
use super::discovery::Discovery;
use super::dpop::{self, DpopKey, Nonces, TokenDpop};
use super::failure::Failure;
use super::share::ShareHandle;
use super::token::{self, ClientAuth, Grant, TokenRequest, choose_auth};
use super::{Config, Endpoint, OAuthOptions, lock};
use crate::fetch::HttpFetch;
use crate::{Challenge, Credentials};

/// Tokens issued to a credential that are still scrubbed from what servers say: the most
/// recent ones.
const REMEMBERED_TOKENS: usize = 8;

/// A token in the cache.
#[derive(Clone)]
pub(super) struct Token {
    pub(super) header: HeaderValue,
    /// From then on, renew before use.
    pub(super) refresh_at: Instant,
    /// From then on, never use.
    pub(super) expires_at: Instant,
    /// The lifetime it was issued with.
    pub(super) lifetime: Duration,
    /// The key a DPoP-bound token is bound to (its `header` is then `DPoP <token>`).
    pub(super) dpop: Option<Arc<DpopKey>>,
}

impl Token {
    pub(super) fn is_fresh(&self, now: Instant) -> bool {
        now < self.refresh_at
    }

    pub(super) fn is_valid(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    pub(super) fn credentials(&self) -> Credentials {
        Credentials::none().with_header(AUTHORIZATION, self.header.clone())
    }

    /// The credentials of a request `method` to `url`: with a DPoP-bound token, a fresh
    /// proof (`ath` of the token, the origin's latest nonce) in the `DPoP` header.
    pub(super) fn credentials_for(
        &self,
        method: &str,
        url: &str,
        nonces: &Nonces,
    ) -> Result<Credentials, Failure> {
        let credentials = self.credentials();
        let Some(key) = &self.dpop else {
            return Ok(credentials);
        };
        let token = self
            .header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("DPoP "))
            .unwrap_or_default();
        let proof = key
            .proof_header(method, url, Some(token), nonces.get(url).as_deref())
            .map_err(Failure::Dpop)?;
        Ok(credentials.with_header(HeaderName::from_static(dpop::DPOP), proof))
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) token: Option<Token>,
    /// Completed attempts: a caller that saw generation `g` and finds `g + 1` takes that
    /// attempt's outcome instead of starting another.
    pub(super) generation: u64,
    /// The outcome of the latest attempt, when it failed.
    pub(super) failure: Option<Failure>,
    /// No renewal ahead of expiry before then (after a failed one).
    pub(super) retry_after: Option<Instant>,
    pub(super) endpoint: Option<Arc<Endpoint>>,
    /// A 401 was seen (discovery may start).
    pub(super) challenged: bool,
    /// The latest 401 challenge.
    pub(super) challenge: Option<Challenge>,
    pub(super) token_requests: u64,
    /// The latest tokens issued (access and refresh), most recent last, for scrubbing.
    pub(super) tokens: VecDeque<Secret>,
    /// The `Authorization` value a server refused last: a shared entry holding it is of no
    /// use.
    pub(super) rejected: Option<HeaderValue>,
}

/// The cache of one credential, shared by its providers.
pub(super) struct Shared {
    pub(super) config: Config,
    pub(super) http: Arc<dyn HttpFetch>,
    pub(super) options: OAuthOptions,
    /// Bound on one attempt (discovery + token request).
    pub(super) deadline: Duration,
    pub(super) state: Mutex<State>,
    /// Held by the one attempt in flight.
    pub(super) flight: tokio::sync::Mutex<()>,
    /// The fleet's store of tokens and this credential's entry name in it, when shared.
    pub(super) share: Option<(Arc<ShareHandle>, String)>,
    /// The runs (their redactors) told of every token: weak, so a run that ended is dropped.
    sinks: Mutex<Vec<Weak<dyn SecretSink>>>,
    /// The client-credentials DPoP key (`dpop` set), generated for this credential.
    pub(super) dpop_key: Option<Arc<DpopKey>>,
    /// The latest DPoP nonces of the authorization and resource servers.
    pub(super) nonces: Nonces,
}

impl Shared {
    pub(super) fn new(
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
        // No randomness is the one way generation fails: the token request says so.
        let dpop_key = (!config.dpop.is_off())
            .then(|| DpopKey::generate().ok().map(Arc::new))
            .flatten();
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
            share: None,
            sinks: Mutex::default(),
            dpop_key,
            nonces: Nonces::default(),
        }
    }

    /// Shares this credential's token with the fleet through `share`, under `name`.
    pub(super) fn with_share(mut self, share: Option<Arc<ShareHandle>>, name: String) -> Self {
        self.share = share.map(|share| (share, name));
        self
    }

    /// Reports the tokens remembered now, and every one issued or loaded later, to `sink`.
    pub(super) fn report_to(&self, sink: &Arc<dyn SecretSink>) {
        {
            let mut sinks = lock(&self.sinks);
            sinks.retain(|s| s.strong_count() > 0);
            if !sinks
                .iter()
                .any(|s| std::ptr::addr_eq(s.as_ptr(), Arc::as_ptr(sink)))
            {
                sinks.push(Arc::downgrade(sink));
            }
        }
        let tokens: Vec<Secret> = lock(&self.state).tokens.iter().cloned().collect();
        for token in &tokens {
            sink.learn(token);
        }
    }

    pub(super) fn has_valid_token(&self, now: Instant) -> bool {
        lock(&self.state)
            .token
            .as_ref()
            .is_some_and(|t| t.is_valid(now))
    }

    /// Obtains a new token unless an attempt completed since the caller looked at generation
    /// `seen`, in which case that attempt's outcome is the answer. One attempt at a time.
    pub(super) async fn renew(&self, seen: u64) -> Result<Token, Failure> {
        self.renew_with(seen, || self.obtain()).await
    }

    /// [`renew`](Self::renew) with another attempt than discovery + client credentials (a
    /// login's refresh): the same single flight, generation and failure sharing.
    pub(super) async fn renew_with<F, Fut>(&self, seen: u64, attempt: F) -> Result<Token, Failure>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Token, Failure>>,
    {
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
        let outcome = match tokio::time::timeout(self.deadline, attempt()).await {
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
        match &self.share {
            Some((share, name)) => self.obtain_shared(share, name, &endpoint, &challenge).await,
            None => self.request_token(&endpoint, &challenge).await,
        }
    }

    pub(super) async fn request_token(
        &self,
        endpoint: &Endpoint,
        challenge: &Challenge,
    ) -> Result<Token, Failure> {
        let config = &self.config;
        let auth = match config.method {
            Some(method) => method,
            None => choose_auth(endpoint.methods.as_deref()).map_err(Failure::Discovery)?,
        };
        // RFC 8707: the resource the configuration or the server's metadata names, else, with
        // an endpoint discovered from the server, the server's own URL (what the MCP
        // authorization spec asks for). A configured `token_url` without either sends none:
        // some authorization servers refuse the parameter (Entra ID's v2.0 endpoint).
        let resource = config
            .resource
            .clone()
            .or_else(|| endpoint.resource.clone())
            .or_else(|| {
                config
                    .token_url
                    .is_none()
                    .then(|| super::canonical_resource(&config.mcp_url))
            });
        let resource = resource.as_deref();
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
        // A federated grant's assertion: read (and exchanged) anew for each token.
        let grant_assertion = match &config.assertion {
            Some(source) => Some(self.assertion(source, endpoint, resource, scope).await?),
            None => None,
        };
        let request = TokenRequest {
            grant: match &grant_assertion {
                Some(assertion) => Grant::JwtBearer { assertion },
                None => Grant::ClientCredentials,
            },
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
            grant = if grant_assertion.is_some() { "jwt-bearer" } else { "client_credentials" },
            "requesting an OAuth token"
        );
        lock(&self.state).token_requests += 1;
        let started = Instant::now();
        let key = match (config.dpop.is_off(), &self.dpop_key) {
            (true, _) => None,
            (false, Some(key)) => Some(key.clone()),
            (false, None) => return Err(Failure::Dpop("no randomness for a DPoP key".to_owned())),
        };
        let issued = match self.token_exchange(&what, request, key.as_deref()).await {
            Ok(response) => token::parse_answer(
                &what,
                response.status().as_u16(),
                response.body(),
                &config.secret,
                key.is_some(),
            )
            .and_then(|issued| {
                token::require_binding(config.dpop, &what, &issued)?;
                Ok(issued)
            }),
            Err(failure) => Err(failure),
        };
        counted::token_request(&config.server, &issued);
        let issued = issued?;
        self.remember(&issued.secrets);
        let lifetime = issued
            .expires_in
            .unwrap_or(self.options.default_token_lifetime);
        let (refresh_at, expires_at) = self.times(started, lifetime);
        tracing::debug!(
            token_url = %endpoint.token_url,
            expires_in = ?issued.expires_in,
            "obtained an OAuth token"
        );
        Ok(Token {
            header: issued.header,
            refresh_at,
            expires_at,
            lifetime,
            dpop: key.filter(|_| issued.dpop_bound),
        })
    }

    /// Keeps `secrets` (tokens just issued or loaded) among those scrubbed from what servers
    /// say: in this credential's own errors, and by every run reported to
    /// ([`report_to`](Self::report_to)).
    pub(super) fn remember(&self, secrets: &[Secret]) {
        let mut new = Vec::new();
        {
            let mut state = lock(&self.state);
            for secret in secrets {
                if !state.tokens.contains(secret) {
                    state.tokens.push_back(secret.clone());
                    new.push(secret);
                }
            }
            while state.tokens.len() > REMEMBERED_TOKENS {
                state.tokens.pop_front();
            }
        }
        if new.is_empty() {
            return;
        }
        let sinks: Vec<Arc<dyn SecretSink>> =
            lock(&self.sinks).iter().filter_map(Weak::upgrade).collect();
        for sink in sinks {
            for secret in &new {
                sink.learn(secret);
            }
        }
    }

    /// When a token obtained at `started` for `lifetime` is to be renewed, and when it
    /// expires: renewal [`OAuthOptions::expiry_skew`] (at most half the lifetime) early.
    pub(super) fn times(&self, started: Instant, lifetime: Duration) -> (Instant, Instant) {
        let skew = self.options.expiry_skew.min(lifetime / 2);
        (started + lifetime.saturating_sub(skew), started + lifetime)
    }

    /// One bounded token request, with a DPoP proof (and the `use_dpop_nonce` retry) when
    /// `key` is given.
    pub(super) async fn token_exchange(
        &self,
        what: &str,
        request: http::Request<Bytes>,
        key: Option<&DpopKey>,
    ) -> Result<http::Response<Bytes>, Failure> {
        let limit = self.options.request_timeout.min(self.deadline);
        dpop::token_exchange(
            self.http.as_ref(),
            limit,
            self.options.max_response_bytes,
            what,
            request,
            key.map(|key| TokenDpop {
                key,
                nonces: &self.nonces,
            }),
        )
        .await
    }
}

impl Shared {
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
    pub(super) async fn discover(&self, challenge: &Challenge) -> Result<Endpoint, Failure> {
        let found = Discovery {
            http: self.http.as_ref(),
            timeout: self.options.request_timeout.min(self.deadline),
            max_response_bytes: self.options.max_response_bytes,
            mcp_url: &self.config.mcp_url,
            allowed_issuers: &self.config.allowed_issuers,
            guarded: self.config.guarded,
            confine: true,
            plain_http_refusal: (self.config.method != Some(ClientAuth::PrivateKeyJwt)).then_some(
                "anyone on the network could choose where the client secret goes; \
                 refused (use https, set `token_url`, or use private_key_jwt)",
            ),
            grant: match self.config.assertion {
                Some(_) => token::JWT_BEARER_GRANT,
                None => "client_credentials",
            },
        }
        .run(challenge)
        .await?;
        Ok(Endpoint {
            token_url: found.token_url,
            issuer: Some(found.issuer),
            methods: found.metadata.token_endpoint_auth_methods_supported,
            resource: found.resource,
        })
    }
}
