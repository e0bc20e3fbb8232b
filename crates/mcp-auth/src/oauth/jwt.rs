//! `private_key_jwt` client authentication (RFC 7523 §2.2): a short-lived JWT signed with the
//! client's private key (ES256 for an EC P-256 key, RS256 for an RSA key). Signed with `ring`,
//! rustls's provider, rather than a JOSE crate with a crypto stack of its own (see
//! `mcp-serve`'s `http/jwt.rs`).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use mcp_config::Secret;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};
use serde_json::json;

/// How long an assertion is valid.
const LIFETIME_SECS: u64 = 60;

/// A client's signing key, parsed once.
pub(crate) struct SigningKey {
    key: Key,
    rng: SystemRandom,
}

enum Key {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.alg())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Parses a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`, EC P-256 or RSA) or PKCS#1
    /// (`BEGIN RSA PRIVATE KEY`). The error says what is wrong, never the key.
    pub(crate) fn from_pem(pem: &Secret) -> Result<Self, String> {
        let text = pem.expose().trim();
        let (label, der) = pem_body(text)?;
        let rng = SystemRandom::new();
        let key = match label.as_str() {
            "PRIVATE KEY" => {
                if let Ok(ec) = EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    &der,
                    &rng,
                ) {
                    Key::Es256(ec)
                } else if let Ok(rsa) = RsaKeyPair::from_pkcs8(&der) {
                    Key::Rs256(rsa)
                } else {
                    return Err(
                        "the PKCS#8 private key is neither an EC P-256 key nor a usable RSA key"
                            .to_owned(),
                    );
                }
            }
            "RSA PRIVATE KEY" => Key::Rs256(
                RsaKeyPair::from_der(&der)
                    .map_err(|_| "the PKCS#1 RSA private key is not usable".to_owned())?,
            ),
            other => {
                return Err(format!(
                    "a `{other}` PEM block is not supported: use a PKCS#8 `PRIVATE KEY` (EC P-256 or RSA) or a PKCS#1 `RSA PRIVATE KEY`"
                ));
            }
        };
        Ok(Self { key, rng })
    }

    /// `ES256` or `RS256`.
    pub(crate) fn alg(&self) -> &'static str {
        match self.key {
            Key::Es256(_) => "ES256",
            Key::Rs256(_) => "RS256",
        }
    }

    /// The public key, for tests (uncompressed EC point or RSA DER).
    #[cfg(test)]
    pub(crate) fn public_key(&self) -> Vec<u8> {
        use ring::signature::KeyPair as _;

        match &self.key {
            Key::Es256(k) => k.public_key().as_ref().to_vec(),
            Key::Rs256(k) => k.public_key().as_ref().to_vec(),
        }
    }

    /// A client assertion: `iss` = `sub` = `client_id`, `aud` = `audience`, a fresh `jti`,
    /// valid for 60 s.
    pub(crate) fn assertion(&self, client_id: &str, audience: &str) -> Result<String, String> {
        let (now, jti) = issued_now(&self.rng, "the assertion id")?;
        let header = json!({"alg": self.alg(), "typ": "JWT"});
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME_SECS,
            "jti": jti,
        });
        let signing_input = signing_input(&header, &claims);
        let signature = match &self.key {
            Key::Es256(key) => key
                .sign(&self.rng, signing_input.as_bytes())
                .map_err(|_| "signing the assertion failed".to_owned())?
                .as_ref()
                .to_vec(),
            Key::Rs256(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &self.rng,
                    signing_input.as_bytes(),
                    &mut signature,
                )
                .map_err(|_| "signing the assertion failed".to_owned())?;
                signature
            }
        };
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

/// The label and DER bytes of the first PEM block of `text`.
/// Seconds since the epoch and a fresh 128-bit `jti` (base64url, `what` names it in the error):
/// what every JWT this crate signs starts from.
pub(super) fn issued_now(rng: &SystemRandom, what: &str) -> Result<(u64, String), String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| "the system clock is before 1970".to_owned())?
        .as_secs();
    let mut jti = [0u8; 16];
    rng.fill(&mut jti)
        .map_err(|_| format!("no randomness for {what}"))?;
    Ok((now, URL_SAFE_NO_PAD.encode(jti)))
}

/// `base64url(header).base64url(claims)`: the input a JWS signature covers.
pub(super) fn signing_input(header: &serde_json::Value, claims: &serde_json::Value) -> String {
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

fn pem_body(text: &str) -> Result<(String, Vec<u8>), String> {
    let not_pem = || "the private key is not PEM (`-----BEGIN … KEY-----`)".to_owned();
    let begin = text.find("-----BEGIN ").ok_or_else(not_pem)?;
    let rest = &text[begin + "-----BEGIN ".len()..];
    let label_end = rest.find("-----").ok_or_else(not_pem)?;
    let label = rest[..label_end].to_owned();
    let body_start = &rest[label_end + "-----".len()..];
    let end_marker = format!("-----END {label}-----");
    let body_end = body_start.find(&end_marker).ok_or_else(not_pem)?;
    let body: String = body_start[..body_end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = STANDARD
        .decode(body)
        .map_err(|_| "the PEM body is not base64".to_owned())?;
    Ok((label, der))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test-only RSA key (2048 bits, PKCS#8), generated for these tests.
    const RSA_PKCS8: &str = include_str!("testdata/rsa2048.pem");

    fn pem(der: &[u8], label: &str) -> Secret {
        let body = STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        Secret::new(format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        ))
    }

    fn parts(jwt: &str) -> (serde_json::Value, serde_json::Value, Vec<u8>, String) {
        let mut it = jwt.split('.');
        let header = URL_SAFE_NO_PAD.decode(it.next().unwrap()).unwrap();
        let claims = URL_SAFE_NO_PAD.decode(it.next().unwrap()).unwrap();
        let signature = URL_SAFE_NO_PAD.decode(it.next().unwrap()).unwrap();
        let input = jwt.rsplit_once('.').unwrap().0.to_owned();
        (
            serde_json::from_slice(&header).unwrap(),
            serde_json::from_slice(&claims).unwrap(),
            signature,
            input,
        )
    }

    #[test]
    fn es256_assertions_verify_with_the_public_key() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        let key = SigningKey::from_pem(&pem(pkcs8.as_ref(), "PRIVATE KEY")).unwrap();
        assert_eq!(key.alg(), "ES256");
        let jwt = key.assertion("client-1", "https://as.example").unwrap();
        let (header, claims, sig, input) = parts(&jwt);
        assert_eq!(header, json!({"alg": "ES256", "typ": "JWT"}));
        assert_eq!(claims["iss"], "client-1");
        assert_eq!(claims["sub"], "client-1");
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(
            claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
            60
        );
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, key.public_key())
            .verify(input.as_bytes(), &sig)
            .expect("a valid ES256 signature");
        let again = key.assertion("client-1", "https://as.example").unwrap();
        assert_ne!(parts(&again).1["jti"], claims["jti"]);
        assert!(!format!("{key:?}").contains("BEGIN"));
    }

    #[test]
    fn rs256_assertions_verify_with_the_public_key() {
        let key = SigningKey::from_pem(&Secret::from(RSA_PKCS8)).unwrap();
        assert_eq!(key.alg(), "RS256");
        let jwt = key.assertion("client-2", "https://as.example/t").unwrap();
        let (header, _, sig, input) = parts(&jwt);
        assert_eq!(header["alg"], "RS256");
        signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, key.public_key())
            .verify(input.as_bytes(), &sig)
            .expect("a valid RS256 signature");
    }

    #[test]
    fn unusable_keys_are_refused_without_showing_them() {
        for (text, expected) in [
            (
                "not a key",
                "the private key is not PEM (`-----BEGIN … KEY-----`)",
            ),
            (
                "-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----",
                "the PEM body is not base64",
            ),
            (
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
                "the PKCS#8 private key is neither an EC P-256 key nor a usable RSA key",
            ),
            (
                "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----",
                "a `EC PRIVATE KEY` PEM block is not supported: use a PKCS#8 `PRIVATE KEY` (EC P-256 or RSA) or a PKCS#1 `RSA PRIVATE KEY`",
            ),
        ] {
            let err = SigningKey::from_pem(&Secret::from(text)).unwrap_err();
            assert_eq!(err, expected);
        }
    }
}
