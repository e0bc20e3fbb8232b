//! The JSON Web Key Set of inbound JWT authentication: fetched over hyper-util + rustls
//! (bounded in size and time, no redirects), parsed into the public keys a token may be
//! signed with, and cached with rotation (a token whose `kid` is unknown triggers one
//! refetch, at most once per interval).

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
use tokio::sync::Mutex;
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

/// At most this many keys are kept from one set.
const MAX_KEYS: usize = 64;

/// The usable keys of a JWKS document: `kty` RSA or EC (P-256, P-384), `use` absent or
/// `sig`; anything else is skipped.
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
    let text = |k: &str| value.get(k).and_then(Value::as_str);
    let bytes = |k: &str| text(k).and_then(|s| URL_SAFE_NO_PAD.decode(s).ok());
    if text("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let key = match text("kty")? {
        "RSA" => {
            let (n, e) = (bytes("n")?, bytes("e")?);
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
        kid: text("kid").map(|k| crate::cut(k, 256)),
        alg: text("alg").map(|a| crate::cut(a, 16)),
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

/// The cached keys and when they were fetched.
#[derive(Debug, Default)]
struct Cached {
    keys: Vec<Jwk>,
    /// When the keys were last fetched successfully.
    fetched: Option<Instant>,
    /// Whether any fetch was tried.
    tried: bool,
    /// When a fetch was last tried because a token named an unknown key.
    refetched: Option<Instant>,
}

/// What a key lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The keys a token with this `kid` may be signed with (all keys for a token without one).
    Keys(Vec<Jwk>),
    /// No key has that `kid`, and no refetch is allowed now.
    Unknown,
    /// No key at all: the set was never fetched successfully.
    Unavailable,
}

/// The key cache with rotation.
#[derive(Debug)]
pub(crate) struct KeyCache {
    fetcher: Fetcher,
    /// Unknown `kid`s trigger a refetch at most this often.
    pub(crate) refetch_interval: Duration,
    /// Keys older than this are fetched again before use.
    pub(crate) max_age: Duration,
    cached: Mutex<Cached>,
}

impl KeyCache {
    pub(crate) fn new(fetcher: Fetcher, refetch_interval: Duration, max_age: Duration) -> Self {
        Self {
            fetcher,
            refetch_interval,
            max_age,
            cached: Mutex::new(Cached::default()),
        }
    }

    /// The keys for `kid`: from the cache; on a miss (or stale keys) one fetch, rate-limited.
    /// Holding the lock across the fetch makes concurrent misses wait for one fetch.
    pub(crate) async fn lookup(&self, kid: Option<&str>) -> Lookup {
        let mut cached = self.cached.lock().await;
        let stale = cached
            .fetched
            .is_some_and(|at| at.elapsed() >= self.max_age);
        let found = matching(&cached.keys, kid);
        if !found.is_empty() && !stale {
            return Lookup::Keys(found);
        }
        // The first fetch is free; every later one (a miss, stale keys, a retry after a
        // failure) at most once per interval, so a token naming random `kid`s or a JWKS that
        // is down is not hammered.
        let allowed = !cached.tried
            || cached
                .refetched
                .is_none_or(|at| at.elapsed() >= self.refetch_interval);
        if allowed {
            if cached.tried {
                cached.refetched = Some(Instant::now());
            }
            cached.tried = true;
            match self.fetcher.fetch().await {
                Ok(keys) => {
                    cached.keys = keys;
                    cached.fetched = Some(Instant::now());
                }
                Err(error) => {
                    tracing::warn!(
                        target: "mcp_serve::jwt",
                        error = %error,
                        "cannot fetch the JWKS to verify inbound tokens"
                    );
                }
            }
        }
        let found = matching(&cached.keys, kid);
        if !found.is_empty() {
            Lookup::Keys(found)
        } else if cached.keys.is_empty() {
            Lookup::Unavailable
        } else {
            Lookup::Unknown
        }
    }
}

fn matching(keys: &[Jwk], kid: Option<&str>) -> Vec<Jwk> {
    keys.iter()
        .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signing_keys_of_known_types_are_kept() {
        let url: Url = "https://a.example/jwks".parse().unwrap();
        let x = URL_SAFE_NO_PAD.encode([1u8; 32]);
        let body = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "h"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "use": "enc", "kid": "enc"},
            {"kty": "EC", "crv": "P-256", "x": x, "y": x, "kid": "ec"},
            {"kty": "EC", "crv": "P-256", "x": "AA", "y": x, "kid": "short"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa", "alg": "RS256"},
        ]});
        let keys = parse_jwks(body.to_string().as_bytes(), &url).unwrap();
        let kids: Vec<_> = keys.iter().filter_map(|k| k.kid.as_deref()).collect();
        assert_eq!(kids, ["ec", "rsa"]);
        let err = parse_jwks(br#"{"keys": []}"#, &url).unwrap_err();
        assert!(err.to_string().contains("https://a.example/jwks"), "{err}");
        assert!(parse_jwks(b"<html>", &url).is_err());
    }

    /// A server on 127.0.0.1 answering every connection with `answer` (none: never answers).
    async fn answering(answer: Option<String>) -> Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let answer = answer.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    match answer {
                        Some(a) => {
                            let _ = stream.write_all(a.as_bytes()).await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                });
            }
        });
        url.parse().unwrap()
    }

    #[tokio::test]
    async fn fetch_failures_are_typed_and_name_the_url() {
        let fetch = |url: Url| async move {
            Fetcher::new(url, Duration::from_millis(300), 1024)
                .unwrap()
                .fetch()
                .await
                .unwrap_err()
        };
        let url = answering(Some(
            "HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n".into(),
        ))
        .await;
        let err = fetch(url.clone()).await;
        assert!(
            matches!(err, JwksError::Status { status: 302, .. }),
            "{err}"
        );
        assert!(err.to_string().contains(url.as_str()), "{err}");

        let big = "x".repeat(4096);
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{big}",
            big.len()
        );
        let err = fetch(answering(Some(answer)).await).await;
        assert!(
            matches!(err, JwksError::TooLarge { limit: 1024, .. }),
            "{err}"
        );

        let err = fetch(answering(None).await).await;
        assert!(matches!(err, JwksError::Timeout { .. }), "{err}");

        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let url: Url = format!("http://{closed}/jwks").parse().unwrap();
        let err = fetch(url.clone()).await;
        assert!(matches!(err, JwksError::Unreachable { .. }), "{err}");
        assert!(err.to_string().contains(url.as_str()), "{err}");
    }
}
