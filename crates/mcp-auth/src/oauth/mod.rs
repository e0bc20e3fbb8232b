//! OAuth2 client credentials (RFC 6749 §4.4) with discovery, a shared token cache and
//! single-flight renewal.
//!
//! One room per job:
//!
//! - `registry.rs`: [`AuthRegistry`], one cache entry per credential.
//! - `cache.rs`: those entries, keyed by credential, pruned when unused.
//! - `provider.rs`: [`ClientCredentials`], the auth hook of one session on that entry.
//! - `flight.rs`: the entry itself: the token, its freshness, the one attempt in flight.
//! - `discovery.rs` and `metadata.rs`: where the token endpoint is (RFC 9728, RFC 8414 /
//!   OpenID Connect, the documents typed) and the refusals that keep the secret home.
//! - `token.rs` and `jwt.rs`: the token request and its answer; `private_key_jwt` signing.
//! - `dpop.rs`: DPoP (RFC 9449) keys, proofs, nonces, and a token request with its proof.
//! - `share.rs`: [`SharedTokens`], the store a fleet's replicas share tokens in, and the
//!   single flight across processes on it (a lease, a second look, bounded waits);
//!   `share_entry.rs` what an entry holds and how long it may be used when clocks disagree;
//!   `shared_cc.rs` client credentials through it (a login's refresh: `login/provider.rs`).
//! - `federated.rs`: the grants whose assertion comes from elsewhere, on the same cache and
//!   flight: enterprise-managed authorization (an identity provider's token exchange first)
//!   and workload identity (a token file read at each exchange).
//! - `failure.rs`: an attempt's failure, cloneable for every waiting caller, rendered as an
//!   [`AuthError`](crate::AuthError) naming each caller's server with its secrets scrubbed.

mod cache;
mod counted;
mod discovery;
mod dpop;
mod failure;
mod federated;
mod flight;
mod jwt;
pub(crate) mod login;
mod metadata;
mod provider;
mod registry;
mod share;
mod share_entry;
mod shared_cc;
mod token;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mcp_config::Secret;
use url::Url;

use self::jwt::SigningKey;
use self::token::ClientAuth;

pub use self::federated::MAX_TOKEN_FILE_BYTES;
pub use self::provider::ClientCredentials;
pub use self::share::{SharedEntry, SharedTokens};

/// The canonical URI of an MCP server, the RFC 8707 `resource` of its token requests when
/// neither the configuration nor the server's metadata names one: its URL without fragment.
pub(crate) fn canonical_resource(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.to_string()
}

/// Text a server chose, bounded for an error message.
pub(crate) fn shown_text(text: impl std::fmt::Display) -> String {
    failure::shown(text)
}
pub use self::registry::AuthRegistry;

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

/// One credential's settings.
pub(super) struct Config {
    /// The server whose spec made the credential first (its token requests are counted
    /// under it).
    pub(super) server: String,
    pub(super) client_id: String,
    pub(super) secret: Secret,
    /// The signing key, for `private_key_jwt`.
    pub(super) key: Option<Arc<SigningKey>>,
    pub(super) method: Option<ClientAuth>,
    pub(super) scope: Option<String>,
    pub(super) resource: Option<String>,
    pub(super) token_url: Option<Url>,
    pub(super) mcp_url: Url,
    /// Issuers discovery may use besides one on the MCP server's host.
    pub(super) allowed_issuers: Vec<Url>,
    /// The spec is SSRF-guarded: no discovered URL may name an internal address.
    pub(super) guarded: bool,
    /// Where the assertion of a JWT bearer grant comes from; `None`: client credentials.
    pub(super) assertion: Option<Arc<federated::Assertion>>,
    /// DPoP for client credentials (a login's key is its stored login's).
    pub(super) dpop: mcp_config::DpopMode,
}

/// The token endpoint and what the metadata says about it.
#[derive(Debug)]
pub(super) struct Endpoint {
    pub(super) token_url: Url,
    /// The authorization server's issuer, when metadata gave it (the audience of
    /// `private_key_jwt` assertions; else the token endpoint is).
    pub(super) issuer: Option<String>,
    /// `token_endpoint_auth_methods_supported`, when metadata gave it.
    pub(super) methods: Option<Vec<String>>,
    /// The protected resource's identifier, when its metadata gave it (the default RFC 8707
    /// `resource`).
    pub(super) resource: Option<String>,
}

/// Locks `mutex`, whether or not a panicking holder poisoned it (the state stays usable).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
