//! DPoP-bound access tokens at the front (RFC 9449 §7): `Authorization: DPoP <jwt>` with a
//! `DPoP` proof signed by the key the token is bound to (`cnf.jkt`). The proof is checked
//! whole — its type, an ES256 or RS256 signature by the `jwk` it carries, the request's method
//! (`htm`) and URL (`htu`, the endpoint's public URL), its time (`iat` within
//! [`PROOF_WINDOW`]), the token's hash (`ath`), the key's RFC 7638 thumbprint against
//! `cnf.jkt` — and its `jti` is used once: a [`ProofReplay`] store remembers it for twice the
//! window ([`InProcessReplay`] in memory, bounded; the gateway wires one on the fleet's Redis).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::digest::{SHA256, digest};
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;
use url::Url;

use super::limit_store::StoreError;

/// Whether the gateway takes DPoP-bound tokens (`[serve] auth.jwt.dpop`). Without it, only
/// bearer tokens pass (a `DPoP` authorization is refused).
///
/// ```
/// use mcp_serve::DpopPolicy;
///
/// assert_eq!("required".parse::<DpopPolicy>(), Ok(DpopPolicy::Required));
/// assert!("maybe".parse::<DpopPolicy>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DpopPolicy {
    /// Only DPoP-bound tokens with a valid proof pass; a bearer token is refused.
    Required,
    /// DPoP-bound tokens with a valid proof, and bearer tokens not bound to a key.
    Allowed,
}

impl std::str::FromStr for DpopPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "required" => Ok(Self::Required),
            "allowed" => Ok(Self::Allowed),
            _ => Err("`dpop` is \"required\" or \"allowed\"".to_owned()),
        }
    }
}

/// How far a proof's `iat` may be from the gateway's clock, either way.
pub const PROOF_WINDOW: Duration = Duration::from_secs(60);

/// The largest proof looked at.
const MAX_PROOF_BYTES: usize = 8 * 1024;

/// The longest `jti` taken.
const MAX_JTI_BYTES: usize = 256;

/// Where the proofs already used are remembered, shared by a fleet's replicas: a proof is
/// accepted once.
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::{InProcessReplay, ProofReplay};
///
/// # async fn demo() -> Result<(), mcp_serve::StoreError> {
/// let seen = InProcessReplay::default();
/// assert!(seen.first_use("jkt:jti", Duration::from_secs(120)).await?);
/// assert!(!seen.first_use("jkt:jti", Duration::from_secs(120)).await?);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait ProofReplay: Send + Sync + 'static {
    /// Records `key` for `ttl`: true when it was not recorded yet (the proof's first use).
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, StoreError>;
}

/// The proofs used, in this process's memory: a gateway running alone. Holds at most
/// [`InProcessReplay::MAX_ENTRIES`]; when full of live entries, proofs are refused until some
/// expire (a fleet's Redis has no such bound).
#[derive(Debug, Default)]
pub struct InProcessReplay {
    seen: Mutex<HashMap<String, Instant>>,
}

impl InProcessReplay {
    /// The most proofs remembered at once.
    pub const MAX_ENTRIES: usize = 100_000;
}

#[async_trait]
impl ProofReplay for InProcessReplay {
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.get(key).is_some_and(|until| *until > now) {
            return Ok(false);
        }
        if seen.len() >= Self::MAX_ENTRIES {
            seen.retain(|_, until| *until > now);
            if seen.len() >= Self::MAX_ENTRIES {
                return Err(StoreError::new(
                    "in-process",
                    format!(
                        "{} DPoP proofs remembered, the most it holds",
                        Self::MAX_ENTRIES
                    ),
                ));
            }
        }
        seen.insert(key.to_owned(), now + ttl);
        Ok(true)
    }
}

/// A proof that passed every check but the replay one.
#[derive(Debug)]
pub(crate) struct Proof {
    /// The key's thumbprint.
    pub(crate) jkt: String,
    pub(crate) jti: String,
}

impl Proof {
    /// The name it is remembered under in a [`ProofReplay`] store: a digest of the key and
    /// `jti` (fixed length, nothing the client chose verbatim).
    pub(crate) fn replay_key(&self) -> String {
        let name = format!("{}\n{}", self.jkt, self.jti);
        format!(
            "dpop-jti:{}",
            URL_SAFE_NO_PAD.encode(digest(&SHA256, name.as_bytes()))
        )
    }
}

/// Checks `proof` for a request `method` to `resource` carrying `token`. The reason of a
/// refusal is for the log (the client hears `invalid_dpop_proof`).
pub(crate) fn check_proof(
    proof: &str,
    method: &str,
    resource: &Url,
    token: &str,
) -> Result<Proof, &'static str> {
    if proof.len() > MAX_PROOF_BYTES {
        return Err("the proof is too long");
    }
    let mut parts = proof.split('.');
    let (Some(head), Some(body), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the proof is not a JWS");
    };
    let header = decode(head).ok_or("the proof's header is not JSON")?;
    if header.get("typ").and_then(Value::as_str) != Some("dpop+jwt") {
        return Err("the proof's `typ` is not dpop+jwt");
    }
    let jwk = header.get("jwk").ok_or("the proof has no `jwk`")?;
    if jwk.get("d").is_some() {
        return Err("the proof's `jwk` holds a private key");
    }
    let signature = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| "the proof's signature is not base64url")?;
    let message = &proof.as_bytes()[..head.len() + 1 + body.len()];
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    let bytes = |name: &str| text(name).and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
    let (signed, canonical) = match header.get("alg").and_then(Value::as_str) {
        Some("ES256") if text("kty") == Some("EC") && text("crv") == Some("P-256") => {
            let (x, y) = (bytes("x"), bytes("y"));
            let (Some(xb), Some(yb)) = (x, y) else {
                return Err("the proof's EC key is malformed");
            };
            if xb.len() != 32 || yb.len() != 32 {
                return Err("the proof's EC key is malformed");
            }
            let mut point = vec![4u8];
            point.extend_from_slice(&xb);
            point.extend_from_slice(&yb);
            let ok = UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(message, &signature)
                .is_ok();
            let canonical = format!(
                r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
                text("x").unwrap_or_default(),
                text("y").unwrap_or_default()
            );
            (ok, canonical)
        }
        Some("RS256") if text("kty") == Some("RSA") => {
            let (Some(n), Some(e)) = (bytes("n"), bytes("e")) else {
                return Err("the proof's RSA key is malformed");
            };
            let ok = RsaPublicKeyComponents { n: &n, e: &e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, &signature)
                .is_ok();
            let canonical = format!(
                r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
                text("e").unwrap_or_default(),
                text("n").unwrap_or_default()
            );
            (ok, canonical)
        }
        _ => return Err("the proof's `alg` and `jwk` are not ES256 (P-256) or RS256 (RSA)"),
    };
    if !signed {
        return Err("the proof's signature does not verify with its `jwk`");
    }
    let claims = decode(body).ok_or("the proof's claims are not JSON")?;
    if claims.get("htm").and_then(Value::as_str) != Some(method) {
        return Err("the proof's `htm` is not the request's method");
    }
    let htu = claims
        .get("htu")
        .and_then(Value::as_str)
        .ok_or("the proof has no `htu`")?;
    if htu.contains(['?', '#']) || !same_url(htu, resource) {
        return Err("the proof's `htu` is not the endpoint's URL");
    }
    let iat = claims
        .get("iat")
        .and_then(Value::as_f64)
        .ok_or("the proof has no numeric `iat`")?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    if (now - iat).abs() > PROOF_WINDOW.as_secs_f64() {
        return Err("the proof's `iat` is outside the accepted window");
    }
    let jti = claims
        .get("jti")
        .and_then(Value::as_str)
        .filter(|j| !j.is_empty() && j.len() <= MAX_JTI_BYTES)
        .ok_or("the proof's `jti` is missing or too long")?;
    let ath = URL_SAFE_NO_PAD.encode(digest(&SHA256, token.as_bytes()));
    if claims.get("ath").and_then(Value::as_str) != Some(ath.as_str()) {
        return Err("the proof's `ath` is not the access token's hash");
    }
    Ok(Proof {
        jkt: URL_SAFE_NO_PAD.encode(digest(&SHA256, canonical.as_bytes())),
        jti: jti.to_owned(),
    })
}

/// `htu` names `resource` (RFC 3986 normalisation through URL parsing; no query, fragment).
fn same_url(htu: &str, resource: &Url) -> bool {
    let Ok(htu) = Url::parse(htu) else {
        return false;
    };
    let mut resource = resource.clone();
    resource.set_query(None);
    resource.set_fragment(None);
    htu == resource
}

fn decode(part: &str) -> Option<Value> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(Value::is_object)
}

#[cfg(test)]
mod tests {
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use serde_json::json;

    use super::*;

    fn key() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
    }

    fn proof(key: &EcdsaKeyPair, claims: Value) -> String {
        let point = key.public_key().as_ref();
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": {
            "kty": "EC", "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn each_claim_is_checked() {
        let key = key();
        let resource: Url = "https://gw.example/mcp".parse().unwrap();
        let ath = URL_SAFE_NO_PAD.encode(digest(&SHA256, b"tok"));
        let good = json!({"htm": "POST", "htu": "https://GW.example:443/mcp", "iat": now(), "jti": "j1", "ath": ath});
        let proof_ok = check_proof(&proof(&key, good.clone()), "POST", &resource, "tok").unwrap();
        assert_eq!(proof_ok.jti, "j1");
        let cases = [
            ("htm", json!("GET"), "htm"),
            ("htu", json!("https://gw.example/other"), "htu"),
            ("htu", json!("https://gw.example/mcp?x=1"), "htu"),
            ("iat", json!(now() - 600), "iat"),
            ("iat", json!(now() + 600), "iat"),
            ("ath", json!("wrong"), "ath"),
            ("jti", json!(""), "jti"),
        ];
        for (name, value, expected) in cases {
            let mut claims = good.clone();
            claims[name] = value;
            let err = check_proof(&proof(&key, claims), "POST", &resource, "tok").unwrap_err();
            assert!(err.contains(expected), "{name}: {err}");
        }
        // Signed by another key than the one it names.
        let forged = proof(&key, good.clone());
        let other = proof(&self::key(), good);
        let (head, _) = forged.split_once('.').unwrap();
        let (_, rest) = other.split_once('.').unwrap();
        let err = check_proof(&format!("{head}.{rest}"), "POST", &resource, "tok").unwrap_err();
        assert!(err.contains("signature"), "{err}");
    }

    #[tokio::test]
    async fn a_proof_is_used_once_until_its_entry_expires() {
        let seen = InProcessReplay::default();
        assert!(seen.first_use("a", Duration::from_secs(60)).await.unwrap());
        assert!(!seen.first_use("a", Duration::from_secs(60)).await.unwrap());
        assert!(seen.first_use("b", Duration::ZERO).await.unwrap());
        assert!(
            seen.first_use("b", Duration::from_secs(60)).await.unwrap(),
            "an expired entry is gone"
        );
    }
}
