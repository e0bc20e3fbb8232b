//! A string that never shows itself.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a redacted value is replaced with, and what a [`Secret`] prints instead of its value.
pub const REDACTED: &str = "[REDACTED]";

/// A secret string: a token, a password, a header value that grants access.
///
/// `Debug`, `Display` and `Serialize` print [`REDACTED`]; only [`Secret::expose`] gives the
/// value, so every place that reads a secret is easy to find.
///
/// ```
/// use agent_core::Secret;
///
/// let token = Secret::new("tok-123");
/// assert_eq!(format!("{token:?}"), "Secret([REDACTED])");
/// assert_eq!(token.to_string(), "[REDACTED]");
/// assert_eq!(serde_json::to_string(&token).unwrap(), r#""[REDACTED]""#);
/// assert_eq!(token.expose(), "tok-123");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Self(value.into())
    }

    /// The value. Call only where the secret is sent to the party it belongs to.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::new)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<&String> for Secret {
    fn from(value: &String) -> Self {
        Self::new(value.as_str())
    }
}

impl From<&Secret> for Secret {
    fn from(value: &Secret) -> Self {
        value.clone()
    }
}
