//! The JSON Web Key Set of inbound JWT authentication: fetched over hyper-util + rustls
//! (bounded in size and time, no redirects), parsed into the public keys a token may be
//! signed with, and cached with rotation (a token whose `kid` is unknown triggers one
//! refetch, at most once per interval). A fetch runs in a task of its own: requests wait
//! for it without holding a lock and cannot cancel it; cached keys are served meanwhile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::watch;
use url::Url;

/// Why the JWKS could not be fetched or read. Each names the URL; none holds a token.
///
/// ```
/// use mcp_serve::JwksError;
///
/// let err = JwksError::Status {
///     url: "https://auth.example.com/jwks".parse().unwrap(),
///     status: 503,
/// };
/// assert_eq!(
///     err.to_string(),
///     "the JWKS at https://auth.example.com/jwks answered HTTP 503"
/// );
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum JwksError {
    /// No connection, or the exchange broke.
    #[error("the JWKS at {url} could not be fetched: {reason}")]
    Unreachable {
        /// The JWKS URL.
        url: Url,
        /// The cause, in words.
        reason: String,
    },
    /// No whole answer within the fetch timeout.
    #[error("the JWKS at {url} did not answer within {after:?}")]
    Timeout {
        /// The JWKS URL.
        url: Url,
        /// The timeout.
        after: Duration,
    },
    /// An answer other than `200` (redirects are not followed).
    #[error("the JWKS at {url} answered HTTP {status}")]
    Status {
        /// The JWKS URL.
        url: Url,
        /// The HTTP status.
        status: u16,
    },
    /// A body over the size bound.
    #[error("the JWKS at {url} is larger than {limit} bytes")]
    TooLarge {
        /// The JWKS URL.
        url: Url,
        /// The bound.
        limit: usize,
    },
    /// Not a key set, or no key this server can use.
    #[error("the JWKS at {url} is not usable: {reason}")]
    Invalid {
        /// The JWKS URL.
        url: Url,
        /// What is wrong, in words.
        reason: &'static str,
    },
}

/// A public key from the set.
#[derive(Debug, Clone)]
pub(crate) enum PublicKey {
    /// RSA modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed EC point (`04 || x || y`) on P-256 or P-384.
    Ec { curve: Curve, point: Vec<u8> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Curve {
    P256,
    P384,
}

/// One usable key: its `kid`, its `alg` when the set names one, and the key.
#[derive(Debug, Clone)]
pub(crate) struct Jwk {
    pub(crate) kid: Option<String>,
    pub(crate) alg: Option<String>,
    pub(crate) key: PublicKey,
}

/// At most this many keys are kept from one set, so a token without a `kid` (checked against
/// every key) costs at most this many signature checks.
const MAX_KEYS: usize = 64;

/// The longest `kid` accepted, in a token or a key; a token naming a longer one is refused
/// before any lookup (so it cannot trigger a refetch).
pub(crate) const MAX_KID_BYTES: usize = 256;

/// The usable keys of a JWKS document: `kty` RSA or EC (P-256, P-384), `use` absent or
/// `sig`, `key_ops` absent or including `verify`; anything else is skipped, as is a key whose
/// `kid`, `use` or `alg` is not a string or whose `kid` is over [`MAX_KID_BYTES`].
pub(crate) fn parse_jwks(body: &[u8], url: &Url) -> Result<Vec<Jwk>, JwksError> {
    let invalid = |reason| JwksError::Invalid {
        url: url.clone(),
        reason,
    };
    let doc: Value = serde_json::from_slice(body).map_err(|_| invalid("the body is not JSON"))?;
    let keys = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("it has no `keys` array"))?;
    let usable: Vec<Jwk> = keys.iter().filter_map(jwk).take(MAX_KEYS).collect();
    if usable.is_empty() {
        return Err(invalid("it holds no RSA or EC signing key"));
    }
    Ok(usable)
}

fn jwk(value: &Value) -> Option<Jwk> {
    // A member that is present must be a string (`None`: a malformed key); absent is
    // `Some(None)`.
    let optional = |k: &str| match value.get(k) {
        None => Some(None),
        Some(v) => v.as_str().map(Some),
    };
    let text = |k: &str| value.get(k).and_then(Value::as_str);
    let bytes = |k: &str| text(k).and_then(|s| URL_SAFE_NO_PAD.decode(s).ok());
    let (kid, usage, alg) = (optional("kid")?, optional("use")?, optional("alg")?);
    if usage.is_some_and(|u| u != "sig") || kid.is_some_and(|k| k.len() > MAX_KID_BYTES) {
        return None;
    }
    if let Some(ops) = value.get("key_ops") {
        let verify = ops
            .as_array()?
            .iter()
            .any(|op| op.as_str() == Some("verify"));
        if !verify {
            return None;
        }
    }
    let key = match text("kty")? {
        "RSA" => {
            // Some issuers publish the two's-complement form, with a leading zero byte,
            // which ring refuses: the unsigned big-endian integer has none.
            let unsigned = |b: Vec<u8>| -> Vec<u8> {
                let zeros = b.iter().take_while(|x| **x == 0).count();
                b[zeros..].to_vec()
            };
            let (n, e) = (unsigned(bytes("n")?), unsigned(bytes("e")?));
            if n.is_empty() || e.is_empty() {
                return None;
            }
            PublicKey::Rsa { n, e }
        }
        "EC" => {
            let (curve, len) = match text("crv")? {
                "P-256" => (Curve::P256, 32),
                "P-384" => (Curve::P384, 48),
                _ => return None,
            };
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != len || y.len() != len {
                return None;
            }
            let mut point = Vec::with_capacity(1 + 2 * len);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            PublicKey::Ec { curve, point }
        }
        _ => return None,
    };
    Some(Jwk {
        kid: kid.map(str::to_owned),
        alg: alg.map(|a| crate::cut(a, 16)),
        key,
    })
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Fetches the JWKS: a GET, no redirects, at most `max_bytes` within `timeout`.
pub(crate) struct Fetcher {
    client: HttpsClient,
    pub(crate) url: Url,
    pub(crate) timeout: Duration,
    pub(crate) max_bytes: usize,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    pub(crate) fn new(url: Url, timeout: Duration, max_bytes: usize) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Self {
            client,
            url,
            timeout,
            max_bytes,
        })
    }

    pub(crate) async fn fetch(&self) -> Result<Vec<Jwk>, JwksError> {
        let url = &self.url;
        let exchange = async {
            let request = http::Request::get(url.as_str())
                .header(http::header::ACCEPT, "application/json")
                .body(Empty::new())
                .map_err(|e| JwksError::Unreachable {
                    url: url.clone(),
                    reason: e.to_string(),
                })?;
            let response =
                self.client
                    .request(request)
                    .await
                    .map_err(|e| JwksError::Unreachable {
                        url: url.clone(),
                        reason: cause(&e),
                    })?;
            if response.status() != http::StatusCode::OK {
                return Err(JwksError::Status {
                    url: url.clone(),
                    status: response.status().as_u16(),
                });
            }
            let body = Limited::new(response.into_body(), self.max_bytes)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        JwksError::TooLarge {
                            url: url.clone(),
                            limit: self.max_bytes,
                        }
                    } else {
                        JwksError::Unreachable {
                            url: url.clone(),
                            reason: crate::cut(&e.to_string(), 200),
                        }
                    }
                })?
                .to_bytes();
            parse_jwks(&body, url)
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(JwksError::Timeout {
                    url: url.clone(),
                    after: self.timeout,
                })
            })
    }
}

/// The innermost cause of a client error, in words (the wrappers add only type names).
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = error;
    while let Some(next) = inner.source() {
        inner = next;
    }
    crate::cut(&inner.to_string(), 200)
}

/// The cache's time source: `Instant::now`, shifted in tests.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The cached keys and when they were fetched.
#[derive(Debug, Default)]
struct Cached {
    keys: Vec<Jwk>,
    /// When the keys were last fetched successfully.
    fetched: Option<Instant>,
    /// Whether any fetch was tried.
    tried: bool,
    /// When the last fetch after the first one started (they are rate-limited).
    refetched: Option<Instant>,
    /// Whether a fetch is running now.
    fetching: bool,
}

/// What a key lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The keys a token with this `kid` may be signed with (all keys for a token without one).
    Keys(Vec<Jwk>),
    /// No key has that `kid`, and no refetch is allowed now.
    Unknown,
    /// No key at all: the set was never fetched successfully, or its keys expired.
    Unavailable,
}

/// The key cache with rotation.
///
/// A fetch runs in a task of its own that writes the cache: a request waits for its result
/// (at most the fetch timeout) without holding any lock, and a request that goes away (a
/// client resetting its stream) cancels nothing. A request whose `kid` is cached is answered
/// from the cache at once, while stale keys are refreshed in the background.
pub(crate) struct KeyCache {
    inner: Arc<Inner>,
}

struct Inner {
    fetcher: Fetcher,
    /// Fetches after the first start at most this often.
    refetch_interval: Duration,
    /// Keys older than this are refreshed in the background (and still used meanwhile).
    max_age: Duration,
    /// Keys older than this are refused: the refreshes kept failing.
    expiry: Duration,
    cached: std::sync::Mutex<Cached>,
    /// Bumped whenever a fetch ends.
    done: watch::Sender<u64>,
    clock: Clock,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCache")
            .field("fetcher", &self.inner.fetcher)
            .field("refetch_interval", &self.inner.refetch_interval)
            .field("max_age", &self.inner.max_age)
            .field("expiry", &self.inner.expiry)
            .finish_non_exhaustive()
    }
}

impl KeyCache {
    /// A cache of the keys `fetcher` fetches; see [`JwtAuth`](super::jwt::JwtAuth) for the
    /// three durations.
    pub(crate) fn new(
        fetcher: Fetcher,
        refetch_interval: Duration,
        max_age: Duration,
        expiry: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                fetcher,
                refetch_interval,
                max_age,
                expiry,
                cached: std::sync::Mutex::new(Cached::default()),
                done: watch::Sender::new(0),
                clock: Arc::new(Instant::now),
            }),
        }
    }

    /// The same cache reading the time from `clock`.
    #[cfg(test)]
    fn with_clock(self, clock: Clock) -> Self {
        let inner = Arc::into_inner(self.inner).expect("no fetch started yet");
        Self {
            inner: Arc::new(Inner { clock, ..inner }),
        }
    }

    /// The keys for `kid`. A cached `kid` is answered at once (stale keys are refreshed in
    /// the background); a miss waits for one fetch (the one running, or a new one: the first
    /// is free, later ones at most once per interval), at most the fetch timeout.
    pub(crate) async fn lookup(&self, kid: Option<&str>) -> Lookup {
        let inner = &self.inner;
        // Subscribed before the state is read, so the end of a fetch seen running is not missed.
        let mut done = inner.done.subscribe();
        let wait = {
            let mut cached = inner.lock();
            let now = (inner.clock)();
            inner.expire(&mut cached, now);
            let found = matching(&cached.keys, kid);
            if !found.is_empty() {
                let stale = cached
                    .fetched
                    .is_some_and(|at| now.saturating_duration_since(at) >= inner.max_age);
                if stale {
                    self.start(&mut cached, now);
                }
                return Lookup::Keys(found);
            }
            cached.fetching || self.start(&mut cached, now)
        };
        if wait {
            // Bounded by the fetch's own timeout; dropping this future leaves the fetch running.
            let _ = tokio::time::timeout(inner.fetcher.timeout, done.changed()).await;
        }
        let mut cached = inner.lock();
        inner.expire(&mut cached, (inner.clock)());
        let found = matching(&cached.keys, kid);
        if !found.is_empty() {
            Lookup::Keys(found)
        } else if cached.keys.is_empty() {
            Lookup::Unavailable
        } else {
            Lookup::Unknown
        }
    }

    /// Starts a fetch in its own task unless one runs or the rate limit forbids it; whether
    /// one runs now.
    fn start(&self, cached: &mut Cached, now: Instant) -> bool {
        if cached.fetching {
            return true;
        }
        // A token naming random `kid`s, or a JWKS that is down, is not hammered.
        let allowed = !cached.tried
            || cached
                .refetched
                .is_none_or(|at| now.saturating_duration_since(at) >= self.inner.refetch_interval);
        if !allowed {
            return false;
        }
        if cached.tried {
            cached.refetched = Some(now);
        }
        cached.tried = true;
        cached.fetching = true;
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            // Marks the fetch ended and wakes the waiters even if this task is dropped.
            let ended = Ended(&inner);
            let result = inner.fetcher.fetch().await;
            let mut cached = inner.lock();
            match result {
                Ok(keys) => {
                    cached.keys = keys;
                    cached.fetched = Some((inner.clock)());
                }
                Err(error) => {
                    tracing::warn!(
                        target: "mcp_serve::jwt",
                        error = %error,
                        "cannot fetch the JWKS to verify inbound tokens"
                    );
                }
            }
            drop(cached);
            drop(ended);
        });
        true
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        // The state stays consistent at every point a panic could happen.
        self.cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops keys fetched longer than `expiry` ago: the refreshes failed all that time.
    fn expire(&self, cached: &mut Cached, now: Instant) {
        if let Some(at) = cached.fetched
            && now.saturating_duration_since(at) >= self.expiry
        {
            tracing::warn!(
                target: "mcp_serve::jwt",
                jwks_url = %self.fetcher.url,
                expiry = ?self.expiry,
                "the cached JWKS keys expired and no refresh succeeded: inbound tokens are refused until one does"
            );
            cached.keys.clear();
            cached.fetched = None;
        }
    }
}

/// Ends a fetch when dropped: clears the running flag and wakes the waiters.
struct Ended<'a>(&'a Inner);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.lock().fetching = false;
        self.0.done.send_modify(|n| *n = n.wrapping_add(1));
    }
}

fn matching(keys: &[Jwk], kid: Option<&str>) -> Vec<Jwk> {
    keys.iter()
        .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
