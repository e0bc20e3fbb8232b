//! PKCE (RFC 7636) with the S256 method, and the random `state` of an authorization request.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_config::Secret;
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};

/// A PKCE pair: the verifier (a secret the token request proves possession of) and its S256
/// challenge (sent in the authorization URL). `Debug` shows the challenge only.
///
/// ```
/// use mcp_auth::Pkce;
///
/// // RFC 7636, appendix B.
/// let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
/// assert_eq!(pkce.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
/// assert_eq!(Pkce::METHOD, "S256");
/// ```
#[derive(Clone)]
pub struct Pkce {
    verifier: Secret,
    challenge: String,
}

impl Pkce {
    /// The only method this client uses (`plain` is never offered).
    pub const METHOD: &'static str = "S256";

    /// A new pair: 32 bytes from the system's CSPRNG, base64url without padding (43
    /// characters, RFC 7636 §4.1's recommendation).
    pub fn generate() -> Result<Self, String> {
        Ok(Self::from_verifier(random_token()?.into()))
    }

    /// The pair of a given verifier.
    pub fn from_verifier(verifier: Secret) -> Self {
        let hash = digest(&SHA256, verifier.expose().as_bytes());
        Self {
            challenge: URL_SAFE_NO_PAD.encode(hash.as_ref()),
            verifier,
        }
    }

    /// `code_challenge`: `BASE64URL(SHA256(verifier))`.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }

    /// `code_verifier`, for the token request.
    pub fn verifier(&self) -> &Secret {
        &self.verifier
    }
}

impl fmt::Debug for Pkce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

/// 32 random bytes from the system's CSPRNG, base64url without padding.
pub(crate) fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random number generator failed".to_owned())?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7636_appendix_b() {
        let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        assert_eq!(
            pkce.challenge(),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert!(!format!("{pkce:?}").contains("dBjft"));
    }

    #[test]
    fn generated_verifiers_are_long_random_and_unreserved() {
        let a = Pkce::generate().unwrap();
        let b = Pkce::generate().unwrap();
        assert_ne!(a.verifier(), b.verifier());
        let v = a.verifier().expose();
        assert_eq!(v.len(), 43);
        assert!(
            v.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-._~".contains(&c))
        );
        assert_eq!(
            Pkce::from_verifier(a.verifier().clone()).challenge(),
            a.challenge()
        );
    }
}
