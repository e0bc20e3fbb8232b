//! Inbound JWT bearer tokens: the signature checked against the issuer's JWKS (with key
//! rotation), an algorithm allowlist of asymmetric algorithms only, `iss` exact, `aud`
//! including the configured audience, `exp`/`nbf` with a small leeway.
//!
//! Verified with `ring`, the provider rustls already uses here: `jsonwebtoken` would bring
//! aws-lc-rs or RustCrypto (`rsa`, `p256`, …), a second crypto stack, and the checks above
//! (allowlist, bounds on keys and token) would stay ours; `josekit` links OpenSSL.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_core::Principal;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;
use url::Url;

use super::dpop::DpopPolicy;
use super::jwks::{Curve, Fetcher, Jwk, KeyCache, Lookup, MAX_KID_BYTES, PublicKey};

/// A signature algorithm a token may use. Only asymmetric ones exist here: `none` and the
/// HMAC family (`HS256`…) are refused when parsed, so a public key can never serve as an
/// HMAC secret.
///
/// ```
/// use mcp_serve::JwtAlgorithm;
///
/// assert_eq!("ES256".parse::<JwtAlgorithm>(), Ok(JwtAlgorithm::Es256));
/// assert!("none".parse::<JwtAlgorithm>().is_err());
/// assert!("HS256".parse::<JwtAlgorithm>().unwrap_err().contains("HMAC"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JwtAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    Rs384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    Rs512,
    /// RSASSA-PSS with SHA-256.
    Ps256,
    /// RSASSA-PSS with SHA-384.
    Ps384,
    /// RSASSA-PSS with SHA-512.
    Ps512,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// ECDSA on P-384 with SHA-384.
    Es384,
}

impl JwtAlgorithm {
    /// Every algorithm, by its JOSE name.
    const ALL: [(&'static str, Self); 8] = [
        ("RS256", Self::Rs256),
        ("RS384", Self::Rs384),
        ("RS512", Self::Rs512),
        ("PS256", Self::Ps256),
        ("PS384", Self::Ps384),
        ("PS512", Self::Ps512),
        ("ES256", Self::Es256),
        ("ES384", Self::Es384),
    ];

    /// The JOSE name (`RS256`…).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, a)| *a == self)
            .map_or("", |(n, _)| n)
    }

    /// Whether `signature` over `message` is valid under `key` with this algorithm.
    fn verify(self, key: &PublicKey, message: &[u8], sig: &[u8]) -> bool {
        use ring::signature as s;
        match key {
            PublicKey::Rsa { n, e } => {
                let params: &s::RsaParameters = match self {
                    Self::Rs256 => &s::RSA_PKCS1_2048_8192_SHA256,
                    Self::Rs384 => &s::RSA_PKCS1_2048_8192_SHA384,
                    Self::Rs512 => &s::RSA_PKCS1_2048_8192_SHA512,
                    Self::Ps256 => &s::RSA_PSS_2048_8192_SHA256,
                    Self::Ps384 => &s::RSA_PSS_2048_8192_SHA384,
                    Self::Ps512 => &s::RSA_PSS_2048_8192_SHA512,
                    Self::Es256 | Self::Es384 => return false,
                };
                RsaPublicKeyComponents { n, e }
                    .verify(params, message, sig)
                    .is_ok()
            }
            PublicKey::Ec { curve, point } => {
                let alg: &s::EcdsaVerificationAlgorithm = match (self, curve) {
                    (Self::Es256, Curve::P256) => &s::ECDSA_P256_SHA256_FIXED,
                    (Self::Es384, Curve::P384) => &s::ECDSA_P384_SHA384_FIXED,
                    _ => return false,
                };
                UnparsedPublicKey::new(alg, point)
                    .verify(message, sig)
                    .is_ok()
            }
        }
    }
}

impl FromStr for JwtAlgorithm {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        if let Some((_, alg)) = Self::ALL.iter().find(|(n, _)| *n == name) {
            return Ok(*alg);
        }
        Err(if name.eq_ignore_ascii_case("none") {
            "`none` (unsigned tokens) is never accepted".into()
        } else if name.to_ascii_uppercase().starts_with("HS") {
            "HMAC algorithms are never accepted: a JWKS holds public keys".into()
        } else {
            format!(
                "unknown algorithm `{}`: use one of RS256, RS384, RS512, PS256, PS384, PS512, \
                 ES256, ES384",
                crate::cut(&name.escape_debug().to_string(), 32)
            )
        })
    }
}

impl fmt::Display for JwtAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Inbound JWT authentication: which issuer's tokens are accepted, for which audience, and
/// where the issuer's signing keys are published. Plain data with `with_<field>` setters;
/// hand it to [`BearerAuth::jwt`](crate::BearerAuth::jwt).
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::{JwtAlgorithm, JwtAuth};
///
/// let jwt = JwtAuth::new(
///     "https://auth.example.com/",
///     "https://auth.example.com/.well-known/jwks.json".parse().unwrap(),
/// )
/// .with_audience("https://gateway.example.com/mcp")
/// .with_algorithms([JwtAlgorithm::Es256])
/// .with_leeway(Duration::from_secs(10));
/// assert_eq!(jwt.refetch_interval, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JwtAuth {
    /// The exact `iss` a token must carry.
    pub issuer: String,
    /// What `aud` must include. Default: the endpoint's URL (its public URL when set).
    pub audience: Option<String>,
    /// Where the signing keys are published (`https`, or `http` on a loopback host).
    pub jwks_url: Url,
    /// The algorithms accepted. Default RS256 and ES256.
    pub algorithms: Vec<JwtAlgorithm>,
    /// Clock skew allowed on `exp` and `nbf`. Default 30 s, at most [`JwtAuth::MAX_LEEWAY`].
    pub leeway: Duration,
    /// A token naming an unknown key fetches the set again at most this often. Default 30 s.
    pub refetch_interval: Duration,
    /// Cached keys older than this are fetched again, in the background: tokens are checked
    /// against them meanwhile. Default 1 hour.
    pub max_key_age: Duration,
    /// Cached keys fetched longer ago than this are refused (with a warning logged): every
    /// refresh since failed, so the issuer may have revoked them. Default 24 hours; at least
    /// [`max_key_age`](Self::max_key_age).
    pub key_expiry: Duration,
    /// How long one JWKS fetch may take. Default 10 s.
    pub fetch_timeout: Duration,
    /// The largest JWKS body read. Default 256 KiB.
    pub max_jwks_bytes: usize,
    /// Claims kept with the token's principal (besides `sub` and the scopes of `scope` or
    /// `scp`), for `[policy]` rules that name them: each a string, a number, a boolean or an
    /// array of them. Default none.
    pub claims: Vec<String>,
    /// DPoP-bound tokens (`Authorization: DPoP`, RFC 9449): `None` (the default) takes bearer
    /// tokens only.
    pub dpop: Option<DpopPolicy>,
}

impl JwtAuth {
    /// The largest [`leeway`](Self::leeway): more would let expired tokens pass.
    pub const MAX_LEEWAY: Duration = Duration::from_secs(300);

    /// Tokens from `issuer`, signed by a key of the set at `jwks_url`.
    pub fn new(issuer: impl Into<String>, jwks_url: Url) -> Self {
        Self {
            issuer: issuer.into(),
            audience: None,
            jwks_url,
            algorithms: vec![JwtAlgorithm::Rs256, JwtAlgorithm::Es256],
            leeway: Duration::from_secs(30),
            refetch_interval: Duration::from_secs(30),
            max_key_age: Duration::from_secs(3600),
            key_expiry: Duration::from_secs(24 * 3600),
            fetch_timeout: Duration::from_secs(10),
            max_jwks_bytes: 256 * 1024,
            claims: Vec::new(),
            dpop: None,
        }
    }

    /// Sets [`dpop`](Self::dpop).
    #[must_use]
    pub fn with_dpop(mut self, policy: DpopPolicy) -> Self {
        self.dpop = Some(policy);
        self
    }

    /// Sets [`claims`](Self::claims).
    #[must_use]
    pub fn with_claims<S: Into<String>>(mut self, claims: impl IntoIterator<Item = S>) -> Self {
        self.claims = claims.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`audience`](Self::audience).
    #[must_use]
    pub fn with_audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Sets [`algorithms`](Self::algorithms).
    #[must_use]
    pub fn with_algorithms(mut self, algorithms: impl IntoIterator<Item = JwtAlgorithm>) -> Self {
        self.algorithms = algorithms.into_iter().collect();
        self
    }

    /// Sets [`leeway`](Self::leeway).
    #[must_use]
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Sets [`refetch_interval`](Self::refetch_interval).
    #[must_use]
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// Sets [`max_key_age`](Self::max_key_age).
    #[must_use]
    pub fn with_max_key_age(mut self, age: Duration) -> Self {
        self.max_key_age = age;
        self
    }

    /// Sets [`key_expiry`](Self::key_expiry).
    #[must_use]
    pub fn with_key_expiry(mut self, expiry: Duration) -> Self {
        self.key_expiry = expiry;
        self
    }

    /// Sets [`fetch_timeout`](Self::fetch_timeout).
    #[must_use]
    pub fn with_fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// What makes the settings unusable, in words.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.issuer.trim().is_empty() {
            return Some("the issuer is empty".into());
        }
        if self.algorithms.is_empty() {
            return Some("no algorithm is allowed".into());
        }
        if self
            .audience
            .as_deref()
            .is_some_and(|a| a.trim().is_empty())
        {
            return Some("the audience is empty".into());
        }
        if self.leeway > Self::MAX_LEEWAY {
            return Some(format!(
                "the leeway {:?} is over {:?}",
                self.leeway,
                Self::MAX_LEEWAY
            ));
        }
        for (name, value) in [
            ("refetch_interval", self.refetch_interval),
            ("max_key_age", self.max_key_age),
            ("fetch_timeout", self.fetch_timeout),
        ] {
            if value.is_zero() {
                return Some(format!("`{name}` is zero"));
            }
        }
        if self.max_jwks_bytes == 0 {
            return Some("`max_jwks_bytes` is zero".into());
        }
        if self.claims.len() > MAX_KEPT_CLAIMS {
            return Some(format!(
                "{} claims are kept, more than {MAX_KEPT_CLAIMS}",
                self.claims.len()
            ));
        }
        if let Some(bad) = self
            .claims
            .iter()
            .find(|c| c.trim().is_empty() || c.len() > 64)
        {
            return Some(format!("the claim name {bad:?} is empty or over 64 bytes"));
        }
        if self.key_expiry < self.max_key_age {
            return Some("`key_expiry` is shorter than `max_key_age`".into());
        }
        let loopback = match self.jwks_url.host() {
            Some(url::Host::Domain(d)) => d == "localhost",
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        match self.jwks_url.scheme() {
            "https" => None,
            "http" if loopback => None,
            _ => Some(format!(
                "the JWKS URL {} must be https (http only on a loopback host)",
                self.jwks_url
            )),
        }
    }
}

/// Why a token was refused. Only [`Rejection::Expired`] is told to the client apart from the
/// rest; the server logs the reason at debug level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    Malformed,
    Algorithm,
    UnknownKey,
    Signature,
    Expired,
    NotYetValid,
    Issuer,
    Audience,
    /// No key could be fetched at all.
    KeysUnavailable,
    /// A valid token whose principal is beyond the bounds (too many scopes or claim values,
    /// one too long or holding a control character): what.
    Oversized(&'static str),
}

/// The largest token looked at.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The longest `sub` claim taken as the session's principal; a longer one, or one holding a
/// control character, makes the token malformed.
pub(crate) const MAX_SUBJECT_BYTES: usize = 256;

/// The most scopes a principal is given; a token with more is refused.
pub(crate) const MAX_SCOPES: usize = 256;

/// The most values of one kept claim; a token with more is refused.
pub(crate) const MAX_CLAIM_VALUES: usize = 256;

/// The longest scope or claim value; a token with a longer one is refused.
pub(crate) const MAX_VALUE_BYTES: usize = 256;

/// The most claims [`JwtAuth::claims`] may name.
const MAX_KEPT_CLAIMS: usize = 16;

/// A token that passed.
#[derive(Debug)]
pub(crate) struct Verified {
    /// Who it acts for (`sub`, with scopes and kept claims), when it names someone.
    pub(crate) principal: Option<Principal>,
    /// `cnf.jkt`: the thumbprint of the DPoP key it is bound to.
    pub(crate) jkt: Option<String>,
}

/// Verifies tokens with [`JwtAuth`]'s settings and a key cache.
#[derive(Debug)]
pub(crate) struct Verifier {
    settings: JwtAuth,
    keys: KeyCache,
}

impl Verifier {
    pub(crate) fn new(settings: JwtAuth) -> Result<Arc<Self>, String> {
        if let Some(problem) = settings.problem() {
            return Err(problem);
        }
        let fetcher = Fetcher::new(
            settings.jwks_url.clone(),
            settings.fetch_timeout,
            settings.max_jwks_bytes,
        )?;
        let keys = KeyCache::new(
            fetcher,
            settings.refetch_interval,
            settings.max_key_age,
            settings.key_expiry,
        );
        Ok(Arc::new(Self { settings, keys }))
    }

    pub(crate) fn settings(&self) -> &JwtAuth {
        &self.settings
    }

    /// Checks `token` for `resource` (the audience when none is configured); a valid token's
    /// `sub` claim, if it has one, is who the request acts for, and its `cnf.jkt`, if it has
    /// one, the key it is bound to (DPoP).
    pub(crate) async fn verify(&self, token: &str, resource: &Url) -> Result<Verified, Rejection> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Rejection::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(head), Some(body), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Rejection::Malformed);
        };
        let header = decode_json(head)?;
        if header.get("crit").is_some() {
            return Err(Rejection::Malformed);
        }
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(|a| a.parse::<JwtAlgorithm>().ok())
            .filter(|a| self.settings.algorithms.contains(a))
            .ok_or(Rejection::Algorithm)?;
        let signature = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| Rejection::Malformed)?;
        let claims = decode_json(body)?;
        let kid = match header.get("kid") {
            None => None,
            // An over-long `kid` matches no key; refused here, it costs no refetch.
            Some(Value::String(kid)) if kid.len() <= MAX_KID_BYTES => Some(kid.as_str()),
            Some(_) => return Err(Rejection::Malformed),
        };
        let keys = match self.keys.lookup(kid).await {
            Lookup::Keys(keys) => keys,
            Lookup::Unknown => return Err(Rejection::UnknownKey),
            Lookup::Unavailable => return Err(Rejection::KeysUnavailable),
        };
        let message = &token.as_bytes()[..head.len() + 1 + body.len()];
        let signed = keys
            .iter()
            .filter(|k: &&Jwk| k.alg.as_deref().is_none_or(|a| a == alg.name()))
            .any(|k| alg.verify(&k.key, message, &signature));
        if !signed {
            return Err(Rejection::Signature);
        }
        self.check_claims(&claims, resource)?;
        let jkt = match claims.get("cnf").map(|cnf| cnf.get("jkt")) {
            None => None,
            Some(Some(Value::String(jkt))) if jkt.len() <= 128 => Some(jkt.clone()),
            Some(_) => return Err(Rejection::Malformed),
        };
        let Some(principal) = subject(&claims)? else {
            return Ok(Verified {
                principal: None,
                jkt,
            });
        };
        let mut principal = principal.with_scopes(scopes(&claims)?);
        for name in &self.settings.claims {
            principal = principal.with_claim(name.as_str(), claim_values(claims.get(name))?);
        }
        Ok(Verified {
            principal: Some(principal),
            jkt,
        })
    }

    fn check_claims(&self, claims: &Value, resource: &Url) -> Result<(), Rejection> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let leeway = self.settings.leeway.as_secs_f64();
        let exp = claims
            .get("exp")
            .and_then(Value::as_f64)
            .ok_or(Rejection::Malformed)?;
        if now > exp + leeway {
            return Err(Rejection::Expired);
        }
        match claims.get("nbf") {
            None => {}
            Some(nbf) => {
                let nbf = nbf.as_f64().ok_or(Rejection::Malformed)?;
                if now + leeway < nbf {
                    return Err(Rejection::NotYetValid);
                }
            }
        }
        if claims.get("iss").and_then(Value::as_str) != Some(self.settings.issuer.as_str()) {
            return Err(Rejection::Issuer);
        }
        let audience = self
            .settings
            .audience
            .as_deref()
            .unwrap_or(resource.as_str());
        let matches = match claims.get("aud") {
            Some(Value::String(aud)) => aud == audience,
            Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !matches {
            return Err(Rejection::Audience);
        }
        Ok(())
    }
}

/// The token's `sub`: absent, or a short text without control characters.
fn subject(claims: &Value) -> Result<Option<Principal>, Rejection> {
    match claims.get("sub") {
        None => Ok(None),
        Some(Value::String(sub))
            if !sub.is_empty()
                && sub.len() <= MAX_SUBJECT_BYTES
                && !sub.chars().any(char::is_control) =>
        {
            Ok(Some(Principal::new(sub.as_str())))
        }
        Some(_) => Err(Rejection::Malformed),
    }
}

/// The token's granted scopes: `scope` (space-separated, RFC 8693 §4.2) or `scp` (an array,
/// or a string), bounded.
fn scopes(claims: &Value) -> Result<Vec<String>, Rejection> {
    let scopes: Vec<&str> = match claims.get("scope").or_else(|| claims.get("scp")) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => text.split_ascii_whitespace().collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or(Rejection::Malformed))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(Rejection::Malformed),
    };
    if scopes.len() > MAX_SCOPES {
        return Err(Rejection::Oversized("more scopes than 256"));
    }
    scopes
        .into_iter()
        .map(|s| bounded(s, "a scope over 256 bytes"))
        .collect()
}

/// The values of a kept claim (none when absent), bounded.
fn claim_values(claim: Option<&Value>) -> Result<Vec<String>, Rejection> {
    let one = |v: &Value| match v {
        Value::String(s) => bounded(s, "a claim value over 256 bytes"),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(Rejection::Malformed),
    };
    match claim {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() > MAX_CLAIM_VALUES => {
            Err(Rejection::Oversized("a claim with more values than 256"))
        }
        Some(Value::Array(items)) => items.iter().map(one).collect(),
        Some(value) => Ok(vec![one(value)?]),
    }
}

/// `text` when it is at most [`MAX_VALUE_BYTES`] long (else `too_long`) and holds no
/// control character.
fn bounded(text: &str, too_long: &'static str) -> Result<String, Rejection> {
    if text.len() > MAX_VALUE_BYTES {
        return Err(Rejection::Oversized(too_long));
    }
    if text.chars().any(char::is_control) {
        return Err(Rejection::Malformed);
    }
    Ok(text.to_owned())
}

fn decode_json(part: &str) -> Result<Value, Rejection> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| Rejection::Malformed)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| Rejection::Malformed)?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(Rejection::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_round_trip_and_unsafe_ones_are_refused() {
        for (name, alg) in JwtAlgorithm::ALL {
            assert_eq!(name.parse::<JwtAlgorithm>(), Ok(alg));
            assert_eq!(alg.to_string(), name);
        }
        for bad in ["none", "None", "HS256", "hs512", "RS1", ""] {
            assert!(bad.parse::<JwtAlgorithm>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_plain_http_jwks_is_refused_off_loopback() {
        let jwt = |url: &str| JwtAuth::new("iss", url.parse().unwrap());
        assert!(jwt("http://auth.example.com/jwks").problem().is_some());
        assert!(jwt("http://127.0.0.1:9/jwks").problem().is_none());
        assert!(jwt("https://auth.example.com/jwks").problem().is_none());
        assert!(
            jwt("https://a.example/jwks")
                .with_algorithms([])
                .problem()
                .is_some()
        );
    }

    #[test]
    fn unsafe_durations_sizes_and_audiences_are_refused_by_name() {
        let ok = || JwtAuth::new("iss", "https://a.example/jwks".parse().unwrap());
        let problem = |jwt: JwtAuth| jwt.problem().unwrap_or_default();
        assert!(ok().with_leeway(JwtAuth::MAX_LEEWAY).problem().is_none());
        let big = ok().with_leeway(JwtAuth::MAX_LEEWAY + Duration::from_secs(1));
        assert!(problem(big).contains("leeway"));
        let zero = Duration::ZERO;
        assert!(problem(ok().with_refetch_interval(zero)).contains("refetch_interval"));
        assert!(problem(ok().with_fetch_timeout(zero)).contains("fetch_timeout"));
        assert!(problem(ok().with_max_key_age(zero)).contains("max_key_age"));
        let mut bytes = ok();
        bytes.max_jwks_bytes = 0;
        assert!(problem(bytes).contains("max_jwks_bytes"));
        assert!(problem(ok().with_audience(" ")).contains("audience"));
        let short = ok().with_key_expiry(Duration::from_secs(60));
        assert!(problem(short).contains("key_expiry"));
    }
}
