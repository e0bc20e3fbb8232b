//! Inbound bearer authentication and the RFC 9728 protected-resource metadata.

use std::sync::Arc;

use agent_core::Principal;
use http::HeaderMap;
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};
use url::Url;

use super::dpop::{DpopPolicy, InProcessReplay, PROOF_WINDOW, ProofReplay, check_proof};
use super::jwt::{JwtAuth, Rejection, Verified, Verifier};
use crate::ServeError;

/// The bearer token downstream clients must send (`Authorization: Bearer <token>`), compared
/// in constant time. A request without it, or with another, is answered `401` with a
/// `WWW-Authenticate` challenge naming the RFC 9728 protected-resource metadata, which the
/// server publishes, and reaches nothing else.
///
/// The token never appears in `Debug`, an error or a log line. With [`BearerAuth::jwt`] the
/// token is a JWT instead, verified against the issuer's published keys.
///
/// ```
/// use mcp_serve::BearerAuth;
///
/// let auth = BearerAuth::new("s3cret-token")
///     .with_authorization_servers(["https://auth.example.com".parse().unwrap()])
///     .with_scopes(["tools"]);
/// assert!(!format!("{auth:?}").contains("s3cret"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct BearerAuth {
    /// What a token must be.
    expected: Expected,
    /// Authorization servers named in the metadata (where a client may obtain a token).
    pub authorization_servers: Vec<Url>,
    /// Scopes named in the metadata and the challenge.
    pub scopes: Vec<String>,
    /// The DPoP proofs already used ([`JwtAuth::dpop`]): in memory unless
    /// [`with_proof_replay`](Self::with_proof_replay) names a store the fleet shares.
    replay: Arc<dyn ProofReplay>,
}

/// The one token, or a JWT verifier.
#[derive(Clone)]
enum Expected {
    /// SHA-256 of the token: compared digest to digest, so neither the token's length nor
    /// its bytes show in timing.
    Token([u8; 32]),
    Jwt(Arc<Verifier>),
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("BearerAuth");
        match &self.expected {
            Expected::Token(_) => out.field("token", &"[REDACTED]"),
            Expected::Jwt(verifier) => out.field("jwt", verifier.settings()),
        };
        out.field("authorization_servers", &self.authorization_servers)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl BearerAuth {
    /// Requires `token`.
    pub fn new(token: impl AsRef<str>) -> Self {
        Self {
            expected: Expected::Token(sha256(token.as_ref().as_bytes())),
            authorization_servers: Vec::new(),
            scopes: Vec::new(),
            replay: Arc::new(InProcessReplay::default()),
        }
    }

    /// Requires a JWT from `settings.issuer`, signed by a key of its JWKS with an allowed
    /// algorithm, current (`exp`, `nbf`) and for the audience (the endpoint's URL unless
    /// set). The metadata names the issuer as the authorization server when it is a URL,
    /// spelled exactly as configured (the `iss` clients compare it with). The keys are
    /// fetched on the first request, and again when a token names an unknown key (at most
    /// once per [`JwtAuth::refetch_interval`]) or the keys are older than
    /// [`JwtAuth::max_key_age`] (in the background; keys older than [`JwtAuth::key_expiry`]
    /// are refused). A fetch is never cancelled by a client going away. A token without a
    /// `kid` is checked against every key of the set (at most 64); one whose `kid` is over
    /// 256 bytes is refused without a lookup.
    ///
    /// ```
    /// use mcp_serve::{BearerAuth, JwtAuth};
    ///
    /// let jwt = JwtAuth::new(
    ///     "https://auth.example.com",
    ///     "https://auth.example.com/jwks".parse().unwrap(),
    /// );
    /// let auth = BearerAuth::jwt(jwt).unwrap();
    /// assert_eq!(auth.authorization_servers[0].as_str(), "https://auth.example.com/");
    /// ```
    ///
    /// # Errors
    ///
    /// [`ServeError::InvalidOption`] (`auth.jwt`) for an empty issuer or algorithm list, or a
    /// JWKS URL that is not `https` (plain `http` is allowed on a loopback host only).
    pub fn jwt(settings: JwtAuth) -> Result<Self, ServeError> {
        let issuer = Url::parse(&settings.issuer).ok();
        let verifier = Verifier::new(settings).map_err(|reason| ServeError::InvalidOption {
            option: "auth.jwt",
            reason,
        })?;
        Ok(Self {
            expected: Expected::Jwt(verifier),
            authorization_servers: issuer.into_iter().collect(),
            scopes: Vec::new(),
            replay: Arc::new(InProcessReplay::default()),
        })
    }

    /// Remembers used DPoP proofs in `store` (say, the fleet's Redis) instead of this
    /// process's memory, so a proof replayed at another replica is refused too.
    #[must_use]
    pub fn with_proof_replay(mut self, store: Arc<dyn ProofReplay>) -> Self {
        self.replay = store;
        self
    }

    /// The DPoP policy, for a JWT with [`JwtAuth::dpop`].
    fn dpop(&self) -> Option<DpopPolicy> {
        match &self.expected {
            Expected::Jwt(verifier) => verifier.settings().dpop,
            Expected::Token(_) => None,
        }
    }

    /// Names authorization servers in the metadata document.
    #[must_use]
    pub fn with_authorization_servers(mut self, servers: impl IntoIterator<Item = Url>) -> Self {
        self.authorization_servers = servers.into_iter().collect();
        self
    }

    /// Names scopes in the metadata document and the challenge.
    #[must_use]
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the request's `Authorization` header (and, for a DPoP-bound token, its `DPoP`
    /// proof); `method` is the request's, `resource` the endpoint's URL (a JWT's default
    /// audience, a proof's `htu`).
    pub(crate) async fn check(
        &self,
        headers: &HeaderMap,
        method: &http::Method,
        resource: &Url,
    ) -> Verdict {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return if headers.contains_key(http::header::AUTHORIZATION) {
                Verdict::Invalid
            } else {
                Verdict::Missing
            };
        };
        let Some((scheme, token)) = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .map(|(scheme, token)| (scheme, token.trim()))
        else {
            return Verdict::Invalid;
        };
        let dpop = self.dpop();
        let bound = match scheme {
            s if s.eq_ignore_ascii_case("bearer") => false,
            s if s.eq_ignore_ascii_case("dpop") && dpop.is_some() => true,
            _ => return Verdict::Invalid,
        };
        let verifier = match &self.expected {
            Expected::Token(expected) if same(&sha256(token.as_bytes()), expected) => {
                return Verdict::Allowed(None);
            }
            Expected::Token(_) => return Verdict::Invalid,
            Expected::Jwt(verifier) => verifier,
        };
        let verified = match verifier.verify(token, resource).await {
            Ok(verified) => verified,
            Err(Rejection::Oversized(what)) => {
                // A token its issuer signed: the operator should hear of it.
                tracing::warn!(target: "mcp_serve::jwt", "inbound token refused: {what}");
                return Verdict::Invalid;
            }
            Err(rejection) => {
                tracing::debug!(target: "mcp_serve::jwt", ?rejection, "inbound token refused");
                return match rejection {
                    Rejection::Expired => Verdict::Expired,
                    Rejection::KeysUnavailable => Verdict::Unavailable,
                    _ => Verdict::Invalid,
                };
            }
        };
        match (bound, dpop, &verified.jkt) {
            // RFC 9449 §7.2: a bound token is never taken as a bearer token, whether or not
            // this gateway takes DPoP (without it, such a token cannot be presented at all).
            (false, _, Some(_)) => Verdict::Invalid,
            (false, Some(DpopPolicy::Required), None) => Verdict::Invalid,
            (false, _, _) => Verdict::Allowed(verified.principal),
            (true, _, None) => Verdict::Invalid,
            (true, _, Some(_)) => {
                self.check_proof(headers, method, resource, token, verified)
                    .await
            }
        }
    }

    /// The `DPoP` proof of a request whose token `verified` is bound to a key.
    async fn check_proof(
        &self,
        headers: &HeaderMap,
        method: &http::Method,
        resource: &Url,
        token: &str,
        verified: Verified,
    ) -> Verdict {
        let mut proofs = headers.get_all("dpop").iter();
        let (Some(proof), None) = (proofs.next(), proofs.next()) else {
            tracing::debug!(target: "mcp_serve::jwt", "DPoP proof refused: none, or more than one");
            return Verdict::InvalidProof;
        };
        let checked = proof
            .to_str()
            .map_err(|_| "the proof is not text")
            .and_then(|proof| check_proof(proof, method.as_str(), resource, token))
            .and_then(|proof| {
                (Some(&proof.jkt) == verified.jkt.as_ref())
                    .then_some(proof)
                    .ok_or("the proof's key is not the one the token is bound to (`cnf.jkt`)")
            });
        let proof = match checked {
            Ok(proof) => proof,
            Err(reason) => {
                tracing::debug!(target: "mcp_serve::jwt", reason, "DPoP proof refused");
                return Verdict::InvalidProof;
            }
        };
        match self
            .replay
            .first_use_by(&proof.jkt, &proof.replay_key(), PROOF_WINDOW * 2)
            .await
        {
            Ok(true) => Verdict::Allowed(verified.principal),
            Ok(false) => {
                tracing::debug!(target: "mcp_serve::jwt", "DPoP proof refused: replayed (`jti` seen)");
                Verdict::InvalidProof
            }
            Err(error) => {
                tracing::warn!(target: "mcp_serve::jwt", %error, "DPoP proof refused: its `jti` cannot be checked");
                Verdict::Unavailable
            }
        }
    }

    /// The `WWW-Authenticate` value of a 401 (RFC 6750 §3, RFC 9728 §5.1).
    /// With [`JwtAuth::dpop`], a `DPoP` challenge (RFC 9449 §7.1) comes first, after it the
    /// `Bearer` one unless DPoP is required; a refused proof is `invalid_dpop_proof`.
    pub(crate) fn challenge(&self, metadata_url: &Url, verdict: Verdict) -> String {
        let dpop = self.dpop();
        let scheme = if dpop.is_some() { "DPoP" } else { "Bearer" };
        let mut challenge = format!("{scheme} resource_metadata=\"{metadata_url}\"");
        if dpop.is_some() {
            challenge.push_str(", algs=\"ES256 RS256\"");
        }
        if !self.scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", self.scopes.join(" ")));
        }
        let (error, description) = match verdict {
            Verdict::Invalid => ("invalid_token", "the access token is not valid"),
            Verdict::Expired => ("invalid_token", "the access token expired"),
            Verdict::Unavailable => ("invalid_token", "the access token cannot be verified now"),
            Verdict::InvalidProof => ("invalid_dpop_proof", "the DPoP proof is not valid"),
            Verdict::Allowed(_) | Verdict::Missing => ("", ""),
        };
        if !error.is_empty() {
            challenge.push_str(&format!(
                ", error=\"{error}\", error_description=\"{description}\""
            ));
        }
        if dpop == Some(DpopPolicy::Allowed) {
            challenge.push_str(&format!(", Bearer resource_metadata=\"{metadata_url}\""));
            if !self.scopes.is_empty() {
                challenge.push_str(&format!(", scope=\"{}\"", self.scopes.join(" ")));
            }
        }
        challenge
    }

    /// The protected-resource metadata document of `resource` (RFC 9728 §2).
    pub(crate) fn metadata(&self, resource: &Url, name: &str) -> Value {
        let mut doc = json!({
            "resource": resource.as_str(),
            "bearer_methods_supported": ["header"],
            "resource_name": name,
        });
        if !self.authorization_servers.is_empty() {
            // The issuer as configured: URL parsing would add a `/` to a bare origin, and
            // clients compare it with the `iss` of the authorization server's metadata.
            let issuer = match &self.expected {
                Expected::Jwt(verifier) => Some(verifier.settings().issuer.as_str()),
                Expected::Token(_) => None,
            };
            let servers: Vec<&str> = self
                .authorization_servers
                .iter()
                .map(|server| match issuer {
                    Some(issuer) if Url::parse(issuer).as_ref() == Ok(server) => issuer,
                    _ => server.as_str(),
                })
                .collect();
            doc["authorization_servers"] = json!(servers);
        }
        if !self.scopes.is_empty() {
            doc["scopes_supported"] = json!(self.scopes);
        }
        doc
    }
}

/// What a request's credentials are worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Let through, acting for the token's subject when it names one (a JWT's `sub`).
    Allowed(Option<Principal>),
    Missing,
    Invalid,
    /// A JWT past its `exp`.
    Expired,
    /// A JWT that cannot be checked: the issuer's keys could not be fetched (or the store of
    /// used DPoP proofs failed).
    Unavailable,
    /// A DPoP-bound token whose proof is missing, wrong or replayed.
    InvalidProof,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// Equality of two digests that looks at every byte, whatever differs.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(http::header::AUTHORIZATION, v.parse().unwrap());
        }
        map
    }

    fn check(auth: &BearerAuth, headers: &HeaderMap) -> Verdict {
        let resource: Url = "http://127.0.0.1:1/mcp".parse().unwrap();
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(auth.check(headers, &http::Method::POST, &resource))
    }

    #[test]
    fn only_the_one_token_passes() {
        let auth = BearerAuth::new("tok");
        assert_eq!(
            check(&auth, &headers(&["Bearer tok"])),
            Verdict::Allowed(None)
        );
        assert_eq!(
            check(&auth, &headers(&["bearer tok"])),
            Verdict::Allowed(None)
        );
        assert_eq!(check(&auth, &headers(&[])), Verdict::Missing);
        for bad in [
            &["Bearer tok2"][..],
            &["Basic tok"],
            &["tok"],
            &["Bearer tok", "Bearer tok"],
        ] {
            assert_eq!(check(&auth, &headers(bad)), Verdict::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn the_challenge_names_the_metadata() {
        let auth = BearerAuth::new("t").with_scopes(["a", "b"]);
        let url: Url = "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp"
            .parse()
            .unwrap();
        assert_eq!(
            auth.challenge(&url, Verdict::Missing),
            format!("Bearer resource_metadata=\"{url}\", scope=\"a b\"")
        );
        assert!(
            auth.challenge(&url, Verdict::Invalid)
                .contains("invalid_token")
        );
    }
}
