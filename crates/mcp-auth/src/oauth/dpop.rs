//! DPoP (RFC 9449): a client's proof-of-possession key and its proofs.
//!
//! A [`DpopKey`] is an ES256 key generated with `ring` (kept in memory for client credentials;
//! a login keeps it, PKCS#8, beside its tokens in the token store). Each request (to the
//! token endpoint or to the MCP server) carries a fresh proof: a JWT of type `dpop+jwt` whose
//! header holds the public key (`jwk`) and whose claims name the method (`htm`), the URL
//! without query or fragment (`htu`), the time (`iat`), a random id (`jti`), the access
//! token's hash on resource requests (`ath`) and the server's nonce when it gave one.
//! [`Nonces`] remembers the latest nonce of each origin; [`token_exchange`] is a token
//! request with its proof and the `use_dpop_nonce` retry (once: a server that asks again is
//! an error).

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::header::HeaderValue;
use mcp_config::Secret;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

use super::failure::Failure;
use super::lock;
use super::{discovery, jwt};
use crate::fetch::HttpFetch;

/// The request header carrying a proof.
pub(crate) const DPOP: &str = "dpop";
/// The response header carrying a server's nonce.
pub(crate) const DPOP_NONCE: &str = "dpop-nonce";
/// Origins whose nonce is remembered (a client talks to a few servers).
const MAX_ORIGINS: usize = 16;
/// Longest nonce kept; a longer one is ignored.
const MAX_NONCE: usize = 512;

/// A client's DPoP key (ES256), parsed once. `Debug` shows only the thumbprint.
pub(crate) struct DpopKey {
    pair: EcdsaKeyPair,
    /// The PKCS#8 document, base64url: what a token store keeps.
    pkcs8: Secret,
    jwk: Value,
    thumbprint: String,
    rng: SystemRandom,
}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpopKey")
            .field("jkt", &self.thumbprint)
            .finish_non_exhaustive()
    }
}

impl DpopKey {
    /// A new key from the system's CSPRNG.
    pub(crate) fn generate() -> Result<Self, String> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "no randomness for a DPoP key".to_owned())?;
        Self::from_pkcs8(pkcs8.as_ref(), rng)
    }

    /// The key a token store kept ([`stored`](Self::stored)).
    pub(crate) fn from_stored(stored: &Secret) -> Result<Self, String> {
        let der = URL_SAFE_NO_PAD
            .decode(stored.expose())
            .map_err(|_| "the stored DPoP key is not base64url".to_owned())?;
        Self::from_pkcs8(&der, SystemRandom::new())
    }

    fn from_pkcs8(der: &[u8], rng: SystemRandom) -> Result<Self, String> {
        let pair = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|_| "the DPoP key is not an EC P-256 PKCS#8 key".to_owned())?;
        let point = pair.public_key().as_ref();
        // Uncompressed: 0x04 ‖ x ‖ y.
        let (x, y) = (
            URL_SAFE_NO_PAD.encode(&point[1..33]),
            URL_SAFE_NO_PAD.encode(&point[33..65]),
        );
        let thumbprint = jwk_thumbprint(&x, &y);
        Ok(Self {
            pair,
            pkcs8: Secret::new(URL_SAFE_NO_PAD.encode(der)),
            jwk: json!({"kty": "EC", "crv": "P-256", "x": x, "y": y}),
            thumbprint,
            rng,
        })
    }

    /// The PKCS#8 document, base64url, for a token store.
    pub(crate) fn stored(&self) -> &Secret {
        &self.pkcs8
    }

    /// The RFC 7638 SHA-256 thumbprint of the public key (a bound token's `cnf.jkt`).
    #[cfg(test)]
    pub(crate) fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// A proof for `method` to `url` (its query and fragment dropped), with the hash of
    /// `access_token` (`ath`) on a resource request and the server's `nonce` when known.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, String> {
        let (iat, jti) = jwt::issued_now(&self.rng, "a DPoP proof id")?;
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk});
        let mut claims = json!({
            "jti": jti,
            "htm": method,
            "htu": htu(url),
            "iat": iat,
        });
        if let Some(token) = access_token {
            claims["ath"] = Value::String(ath(token));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = Value::String(nonce.to_owned());
        }
        let input = jwt::signing_input(&header, &claims);
        let signature = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| "signing a DPoP proof failed".to_owned())?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// [`proof`](Self::proof) as a header value.
    pub(crate) fn proof_header(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<HeaderValue, String> {
        let proof = self.proof(method, url, access_token, nonce)?;
        HeaderValue::try_from(proof).map_err(|_| "a DPoP proof is not a header value".to_owned())
    }
}

/// RFC 7638: base64url(SHA-256) of the required members in lexicographic order.
pub(crate) fn jwk_thumbprint(x: &str, y: &str) -> String {
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_bytes(),
    ))
}

/// `ath`: base64url(SHA-256(access token)).
pub(crate) fn ath(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        token.as_bytes(),
    ))
}

/// `url` without its query and fragment (RFC 9449 §4.2).
pub(crate) fn htu(url: &str) -> &str {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    &url[..end]
}

/// `scheme://authority` of `url`: the key a nonce is remembered under.
pub(crate) fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

/// The latest DPoP nonce of each origin (authorization and resource servers), bounded.
#[derive(Debug, Default)]
pub(crate) struct Nonces {
    by_origin: Mutex<HashMap<String, String>>,
}

impl Nonces {
    /// The nonce `url`'s origin gave last.
    pub(crate) fn get(&self, url: &str) -> Option<String> {
        lock(&self.by_origin).get(origin(url)).cloned()
    }

    /// Remembers the `DPoP-Nonce` of `headers`, if any, for `url`'s origin; true when it is
    /// new. A nonce that is not visible ASCII, or too long, is ignored.
    pub(crate) fn learn(&self, url: &str, headers: &http::HeaderMap) -> bool {
        let Some(nonce) = headers
            .get(DPOP_NONCE)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|n| {
                !n.is_empty() && n.len() <= MAX_NONCE && n.bytes().all(|b| b.is_ascii_graphic())
            })
        else {
            return false;
        };
        let mut map = lock(&self.by_origin);
        let key = origin(url);
        if map.get(key).is_some_and(|n| n == nonce) {
            return false;
        }
        if map.len() >= MAX_ORIGINS && !map.contains_key(key) {
            map.clear();
        }
        map.insert(key.to_owned(), nonce.to_owned());
        true
    }
}

/// A token request's DPoP: the key and the nonces.
pub(crate) struct TokenDpop<'a> {
    pub(crate) key: &'a DpopKey,
    pub(crate) nonces: &'a Nonces,
}

/// One token request with its proof when `dpop` is given: a `400 use_dpop_nonce` answer
/// carrying a new `DPoP-Nonce` is retried once with it; asked again, the request fails
/// ([`Failure::Dpop`]).
pub(crate) async fn token_exchange(
    http: &dyn HttpFetch,
    limit: Duration,
    max_body: usize,
    what: &str,
    request: http::Request<Bytes>,
    dpop: Option<TokenDpop<'_>>,
) -> Result<http::Response<Bytes>, Failure> {
    let Some(dpop) = dpop else {
        return discovery::exchange(http, limit, max_body, what, request).await;
    };
    let (parts, body) = request.into_parts();
    let url = parts.uri.to_string();
    for attempt in 0..2 {
        let mut request = http::Request::new(body.clone());
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = parts.uri.clone();
        *request.headers_mut() = parts.headers.clone();
        let proof = dpop
            .key
            .proof_header(
                parts.method.as_str(),
                &url,
                None,
                dpop.nonces.get(&url).as_deref(),
            )
            .map_err(Failure::Dpop)?;
        request.headers_mut().insert(DPOP, proof);
        let response = discovery::exchange(http, limit, max_body, what, request).await?;
        let fresh = dpop.nonces.learn(&url, response.headers());
        if !asks_for_nonce(&response) {
            return Ok(response);
        }
        if attempt == 1 || !fresh {
            break;
        }
        tracing::debug!(token_url = %url, "use_dpop_nonce: retrying the token request with the server's nonce");
    }
    Err(Failure::Dpop(format!(
        "{what}: the authorization server asked for a new DPoP nonce again (`use_dpop_nonce`) after a retry with its nonce; stopped"
    )))
}

/// A `400` whose OAuth error is `use_dpop_nonce`.
fn asks_for_nonce(response: &http::Response<Bytes>) -> bool {
    response.status() == http::StatusCode::BAD_REQUEST
        && serde_json::from_slice::<Value>(response.body())
            .ok()
            .and_then(|v| {
                v.get("error")
                    .and_then(Value::as_str)
                    .map(|e| e == "use_dpop_nonce")
            })
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(token: &str, i: usize) -> Value {
        let part = token.split('.').nth(i).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn a_proof_is_signed_by_the_key_it_names_and_carries_its_claims() {
        let key = DpopKey::generate().unwrap();
        let proof = key
            .proof(
                "POST",
                "https://mcp.example/mcp?x=1#f",
                Some("tok"),
                Some("n-1"),
            )
            .unwrap();
        let header = part(&proof, 0);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none());
        let claims = part(&proof, 1);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example/mcp");
        assert_eq!(claims["nonce"], "n-1");
        assert_eq!(claims["ath"], ath("tok"));
        let (input, sig) = proof.rsplit_once('.').unwrap();
        let point = key.pair.public_key().as_ref().to_vec();
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
            .verify(input.as_bytes(), &URL_SAFE_NO_PAD.decode(sig).unwrap())
            .unwrap();
        let x = header["jwk"]["x"].as_str().unwrap();
        let y = header["jwk"]["y"].as_str().unwrap();
        assert_eq!(jwk_thumbprint(x, y), key.thumbprint());
        // Two proofs never share a jti.
        let again = key
            .proof("POST", "https://mcp.example/mcp", None, None)
            .unwrap();
        assert_ne!(part(&again, 1)["jti"], claims["jti"]);
        assert!(part(&again, 1).get("ath").is_none());
        // The stored form gives the same key back.
        let back = DpopKey::from_stored(key.stored()).unwrap();
        assert_eq!(back.thumbprint(), key.thumbprint());
    }

    #[test]
    fn the_thumbprint_matches_rfc_7638s_example_form() {
        // RFC 7638 §3.1 is RSA; this checks the EC member order against a fixed digest.
        let t = jwk_thumbprint("a", "b");
        let expected = URL_SAFE_NO_PAD.encode(ring::digest::digest(
            &ring::digest::SHA256,
            br#"{"crv":"P-256","kty":"EC","x":"a","y":"b"}"#,
        ));
        assert_eq!(t, expected);
    }

    #[test]
    fn nonces_are_kept_per_origin_and_bounded() {
        let nonces = Nonces::default();
        let mut headers = http::HeaderMap::new();
        headers.insert(DPOP_NONCE, HeaderValue::from_static("n1"));
        assert!(nonces.learn("https://a.example:8443/token", &headers));
        assert!(!nonces.learn("https://a.example:8443/other", &headers));
        assert_eq!(
            nonces.get("https://a.example:8443/mcp?q").as_deref(),
            Some("n1")
        );
        assert_eq!(nonces.get("https://b.example/mcp"), None);
        headers.insert(DPOP_NONCE, HeaderValue::from_static("bad nonce"));
        assert!(!nonces.learn("https://b.example/", &headers));
        for i in 0..40 {
            headers.insert(DPOP_NONCE, HeaderValue::from_static("n"));
            nonces.learn(&format!("https://h{i}.example/"), &headers);
        }
        assert!(lock(&nonces.by_origin).len() <= MAX_ORIGINS);
    }
}
