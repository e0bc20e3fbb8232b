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

    /// [`first_use`](Self::first_use) of a proof made with the key whose thumbprint is `jkt`,
    /// which a store may use to bound what one key holds ([`InProcessReplay`] does). By
    /// default, `first_use`.
    async fn first_use_by(&self, jkt: &str, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let _ = jkt;
        self.first_use(key, ttl).await
    }
}

/// The proofs used, in this process's memory: a gateway running alone. Holds at most
/// [`InProcessReplay::MAX_ENTRIES`], and at most [`InProcessReplay::MAX_PER_KEY`] of one key's
/// ([`first_use_by`](ProofReplay::first_use_by)), so that one client cannot fill it for every
/// other; past either, proofs are refused until some expire (expired ones are swept at most
/// once a second). A fleet's Redis has no such bound.
#[derive(Debug, Default)]
pub struct InProcessReplay {
    seen: Mutex<Seen>,
}

/// What [`InProcessReplay`] holds.
#[derive(Debug, Default)]
struct Seen {
    /// Each proof's name, until when it is kept, and its key's thumbprint (when given).
    until: HashMap<String, (Instant, Option<String>)>,
    /// How many live entries each key has.
    per_key: HashMap<String, usize>,
    /// When the expired entries were last swept.
    swept: Option<Instant>,
}

impl Seen {
    /// Drops the expired entries, at most once a second.
    fn sweep(&mut self, now: Instant) {
        if self
            .swept
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            return;
        }
        self.swept = Some(now);
        let per_key = &mut self.per_key;
        self.until.retain(|_, (until, jkt)| {
            let live = *until > now;
            if !live && let Some(jkt) = jkt {
                Self::forget(per_key, jkt);
            }
            live
        });
    }

    fn forget(per_key: &mut HashMap<String, usize>, jkt: &str) {
        if let Some(count) = per_key.get_mut(jkt) {
            *count -= 1;
            if *count == 0 {
                per_key.remove(jkt);
            }
        }
    }

    fn record(&mut self, jkt: Option<&str>, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        if let Some((until, _)) = self.until.get(key)
            && *until > now
        {
            return Ok(false);
        }
        let key_full = |seen: &Self| {
            jkt.is_some_and(|jkt| {
                seen.per_key.get(jkt).copied().unwrap_or(0) >= InProcessReplay::MAX_PER_KEY
            })
        };
        if self.until.len() >= InProcessReplay::MAX_ENTRIES || key_full(self) {
            self.sweep(now);
        }
        if self.until.len() >= InProcessReplay::MAX_ENTRIES {
            return Err(StoreError::new(
                "in-process",
                format!(
                    "{} DPoP proofs remembered, the most it holds",
                    InProcessReplay::MAX_ENTRIES
                ),
            ));
        }
        if key_full(self) {
            return Err(StoreError::new(
                "in-process",
                format!(
                    "{} DPoP proofs of one key remembered, the most one key may have",
                    InProcessReplay::MAX_PER_KEY
                ),
            ));
        }
        let old = self
            .until
            .insert(key.to_owned(), (now + ttl, jkt.map(str::to_owned)));
        // An expired entry of the same name, replaced: its key no longer counts it.
        if let Some((_, Some(old_jkt))) = old {
            Self::forget(&mut self.per_key, &old_jkt);
        }
        if let Some(jkt) = jkt {
            *self.per_key.entry(jkt.to_owned()).or_default() += 1;
        }
        Ok(true)
    }
}

impl InProcessReplay {
    /// The most proofs remembered at once.
    pub const MAX_ENTRIES: usize = 100_000;
    /// The most proofs of one key remembered at once: 10,000 in the 120 s a proof is kept,
    /// about 83 requests a second.
    pub const MAX_PER_KEY: usize = 10_000;

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl ProofReplay for InProcessReplay {
    async fn first_use(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.seen().record(None, key, ttl)
    }

    async fn first_use_by(&self, jkt: &str, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.seen().record(Some(jkt), key, ttl)
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

    #[tokio::test]
    async fn one_key_cannot_fill_the_store_for_every_other() {
        let seen = InProcessReplay::default();
        let ttl = Duration::from_secs(120);
        for i in 0..InProcessReplay::MAX_PER_KEY {
            assert!(
                seen.first_use_by("key-a", &format!("a{i}"), ttl)
                    .await
                    .unwrap()
            );
        }
        let refused = seen.first_use_by("key-a", "a-more", ttl).await.unwrap_err();
        assert!(refused.to_string().contains("of one key"), "{refused}");
        // Another key is taken, and a replay of key a's is still told apart.
        assert!(seen.first_use_by("key-b", "b0", ttl).await.unwrap());
        assert!(!seen.first_use_by("key-a", "a0", ttl).await.unwrap());
        // Once key a's proofs expire, it may prove again.
        let short = InProcessReplay::default();
        for i in 0..InProcessReplay::MAX_PER_KEY {
            assert!(
                short
                    .first_use_by("key-a", &format!("a{i}"), Duration::ZERO)
                    .await
                    .unwrap()
            );
        }
        assert!(short.first_use_by("key-a", "a-more", ttl).await.unwrap());
        assert_eq!(short.seen().per_key["key-a"], 1);
    }
}
