//! Sealing values with ChaCha20-Poly1305 (`ring::aead`), bound to the Redis key they are
//! stored under.
//!
//! A sealed value is `[FORMAT, key id, nonce (12 bytes), ciphertext, tag (16 bytes)]`. The
//! nonce is random per value; the key id is the first byte of the key's SHA-256, so that a
//! value sealed with another key is told apart without trying it (and a keyring can later pick
//! by id). The associated data is `[FORMAT, key id]` followed by the full Redis key: a value
//! copied to another key does not open.

use std::fmt;

use base64::Engine as _;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::config::StateConfig;
use crate::error::StateError;

/// The first byte of every sealed value: this layout with ChaCha20-Poly1305.
const FORMAT: u8 = 1;

/// The header: format and key id.
const HEADER: usize = 2;

/// The Poly1305 tag's length.
const TAG: usize = 16;

/// What the key that blinds names is derived with (HMAC-SHA-256 of this under the seal key).
const BLIND_LABEL: &[u8] = b"mcp-state: blinded names, v1";

/// The bytes of a blinded name kept (128 bits, written as 32 hex digits).
const BLIND_BYTES: usize = 16;

/// Why a stored value did not open. The value itself is never kept or shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// Too short to hold a header, a nonce and a tag.
    Truncated,
    /// An unknown format byte.
    Format,
    /// Sealed with another key.
    OtherKey,
    /// The tag does not match: altered bytes, or sealed for another Redis key.
    Forged,
}

impl Rejected {
    /// A short word for logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Format => "unknown format",
            Self::OtherKey => "sealed with another key",
            Self::Forged => "altered or moved from another key",
        }
    }
}

/// A 256-bit ChaCha20-Poly1305 key that seals the values of a
/// [`SealedStore`](crate::SealedStore). Its `Debug` shows only its id.
///
/// ```
/// use mcp_state::SealKey;
///
/// let key = SealKey::from_bytes(&[7; 32]);
/// assert_eq!(format!("{key:?}"), format!("SealKey {{ id: {} }}", key.id()));
/// ```
pub struct SealKey {
    id: u8,
    key: LessSafeKey,
    /// Derived from the key: blinds names ([`blind`](Self::blind)).
    blinding: hmac::Key,
    random: SystemRandom,
}

impl SealKey {
    /// The key made of these 32 bytes.
    ///
    /// ```
    /// let a = mcp_state::SealKey::from_bytes(&[1; 32]);
    /// let b = mcp_state::SealKey::from_bytes(&[1; 32]);
    /// assert_eq!(a.id(), b.id());
    /// ```
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, bytes).expect("a 32-byte key");
        let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, bytes), BLIND_LABEL);
        Self {
            id: digest.as_ref()[0],
            key: LessSafeKey::new(unbound),
            blinding: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
            random: SystemRandom::new(),
        }
    }

    /// A fresh random key (for tests and for generating one to configure).
    ///
    /// ```
    /// let key = mcp_state::SealKey::generate();
    /// let _id: u8 = key.id();
    /// ```
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system's random source");
        Self::from_bytes(&bytes)
    }

    /// The key in the environment variable `var`: 32 bytes in standard base64. Errors name
    /// `var`, never its value.
    ///
    /// ```
    /// use mcp_state::{SealKey, StateError};
    ///
    /// let missing = SealKey::from_env("MCP_STATE_DOC_UNSET_KEY").unwrap_err();
    /// assert!(matches!(missing, StateError::SealKey { .. }));
    /// ```
    pub fn from_env(var: &str) -> Result<Self, StateError> {
        let value = std::env::var(var).map_err(|_| key_error(var, "not set"))?;
        Self::from_base64(var, &value)
    }

    /// The key of [`StateConfig::seal_key_env`].
    ///
    /// ```
    /// use mcp_state::{SealKey, StateConfig, StateError};
    ///
    /// // No variable configured: a typed error, not a key made up on the spot.
    /// let e = SealKey::from_config(&StateConfig::new("redis://127.0.0.1")).unwrap_err();
    /// assert!(matches!(e, StateError::SealKey { .. }));
    /// ```
    pub fn from_config(config: &StateConfig) -> Result<Self, StateError> {
        match &config.seal_key_env {
            Some(var) => Self::from_env(var),
            None => Err(key_error("seal_key_env", "no variable is configured")),
        }
    }

    /// `value` as 32 bytes of standard base64; errors name `var`, never the value.
    fn from_base64(var: &str, value: &str) -> Result<Self, StateError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|_| key_error(var, "not standard base64"))?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| key_error(var, &format!("{} bytes, not 32", b.len())))?;
        Ok(Self::from_bytes(&bytes))
    }

    /// The key's one-byte id (the first byte of its SHA-256), written in each sealed value.
    ///
    /// ```
    /// let key = mcp_state::SealKey::from_bytes(&[0; 32]);
    /// assert_eq!(key.id(), 0x66); // SHA-256 of 32 zero bytes starts 66 68 7a ad
    /// ```
    pub fn id(&self) -> u8 {
        self.id
    }

    /// `name` blinded with this key: 32 hex digits of an HMAC-SHA-256 under a key derived from
    /// this one. The same name gives the same text under the same key, another under any other
    /// key; nothing of `name` can be learnt from it without the key. For Redis key names that
    /// would otherwise reveal what they stand for (a digest of a low-entropy credential can be
    /// searched), and so that stores sealed with different keys never meet on one Redis key.
    ///
    /// ```
    /// use mcp_state::SealKey;
    ///
    /// let key = SealKey::from_bytes(&[1; 32]);
    /// let name = key.blind("client:alice");
    /// assert_eq!(name.len(), 32);
    /// assert_eq!(name, SealKey::from_bytes(&[1; 32]).blind("client:alice"));
    /// assert_ne!(name, SealKey::from_bytes(&[2; 32]).blind("client:alice"));
    /// assert_ne!(name, key.blind("client:bob"));
    /// ```
    pub fn blind(&self, name: &str) -> String {
        let tag = hmac::sign(&self.blinding, name.as_bytes());
        data_encoding::HEXLOWER.encode(&tag.as_ref()[..BLIND_BYTES])
    }

    /// `value` sealed for the Redis key `bound_to`.
    pub(crate) fn seal(&self, bound_to: &str, value: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source");
        let header = [FORMAT, self.id];
        let mut body = value.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(header, bound_to)),
                &mut body,
            )
            .expect("a value within ChaCha20-Poly1305's size limit");
        let mut out = Vec::with_capacity(HEADER + NONCE_LEN + body.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        out
    }

    /// The value that `sealed` holds, if it was sealed with this key for `bound_to` and is
    /// unaltered.
    pub(crate) fn open(&self, bound_to: &str, sealed: &[u8]) -> Result<Vec<u8>, Rejected> {
        if sealed.len() < HEADER + NONCE_LEN + TAG {
            return Err(Rejected::Truncated);
        }
        let (header, rest) = sealed.split_at(HEADER);
        if header[0] != FORMAT {
            return Err(Rejected::Format);
        }
        if header[1] != self.id {
            return Err(Rejected::OtherKey);
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Rejected::Truncated)?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(
                nonce,
                Aad::from(aad([header[0], header[1]], bound_to)),
                &mut body,
            )
            .map_err(|_| Rejected::Forged)?;
        Ok(plain.to_vec())
    }
}

fn key_error(var: &str, reason: &str) -> StateError {
    StateError::SealKey {
        var: var.to_owned(),
        reason: reason.to_owned(),
    }
}

fn aad(header: [u8; HEADER], bound_to: &str) -> Vec<u8> {
    let mut aad = header.to_vec();
    aad.extend_from_slice(bound_to.as_bytes());
    aad
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealKey").field("id", &self.id).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_what_it_sealed_for_the_same_key_only() {
        let key = SealKey::from_bytes(&[3; 32]);
        let sealed = key.seal("p:a", b"secret");
        assert_eq!(sealed.len(), HEADER + NONCE_LEN + 6 + TAG);
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(key.open("p:a", &sealed).unwrap(), b"secret");
        assert_eq!(key.open("p:b", &sealed), Err(Rejected::Forged));
    }

    #[test]
    fn every_seal_has_its_own_nonce() {
        let key = SealKey::from_bytes(&[3; 32]);
        assert_ne!(key.seal("k", b"v"), key.seal("k", b"v"));
    }

    #[test]
    fn rejects_other_keys_formats_short_and_altered_values() {
        let key = SealKey::from_bytes(&[3; 32]);
        let other = SealKey::from_bytes(&[4; 32]);
        let sealed = key.seal("k", b"value");
        assert_eq!(other.open("k", &sealed), Err(Rejected::OtherKey));
        let mut format = sealed.clone();
        format[0] = 9;
        assert_eq!(key.open("k", &format), Err(Rejected::Format));
        assert_eq!(key.open("k", &sealed[..20]), Err(Rejected::Truncated));
        for at in HEADER..sealed.len() {
            let mut altered = sealed.clone();
            altered[at] ^= 0x01;
            assert_eq!(key.open("k", &altered), Err(Rejected::Forged), "byte {at}");
        }
    }

    #[test]
    fn keys_from_text_are_32_bytes_of_base64_and_errors_hide_the_text() {
        let good = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        let key = SealKey::from_base64("K", &format!(" {good}\n")).unwrap();
        assert_eq!(key.id(), SealKey::from_bytes(&[9; 32]).id());
        let short = base64::engine::general_purpose::STANDARD.encode([9u8; 16]);
        for (text, why) in [
            (short.as_str(), "16 bytes, not 32"),
            ("zz!secret!zz", "not standard base64"),
        ] {
            let e = SealKey::from_base64("K", text).unwrap_err();
            assert_eq!(e, key_error("K", why));
            assert!(!e.to_string().contains(text), "{e}");
        }
    }

    #[test]
    fn a_forged_key_id_does_not_open() {
        // Same key bytes behind a rewritten id byte: the id is in the associated data.
        let key = SealKey::from_bytes(&[3; 32]);
        let mut sealed = key.seal("k", b"value");
        sealed[1] = sealed[1].wrapping_add(1);
        let mut relabelled = SealKey::from_bytes(&[3; 32]);
        relabelled.id = sealed[1];
        assert_eq!(relabelled.open("k", &sealed), Err(Rejected::Forged));
    }
}
