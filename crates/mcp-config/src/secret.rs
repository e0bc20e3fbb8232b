//! A string that never shows itself.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a [`Secret`] prints instead of its value.
pub const REDACTED: &str = "[REDACTED]";

/// A secret string: a token, a password, a header value that grants access.
///
/// `Debug`, `Display` and `Serialize` print [`REDACTED`]; only [`Secret::expose`] gives the
/// value, so every place that reads a secret is easy to find.
///
/// ```
/// use mcp_config::Secret;
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

/// Secret values shorter than this are not scrubbed: replacing every `a` or `42` in a text
/// would destroy it and protect nothing (a credential that short is guessable anyway).
pub const MIN_SCRUBBED_LEN: usize = 6;

/// How many secret values learned at run time ([`learn_secret`]) are kept: the oldest are
/// forgotten first (a token that old has long expired).
pub const MAX_LEARNED_SECRETS: usize = 256;

/// Secret values obtained at run time, known to every [`Scrubber`] of the process.
static LEARNED: RwLock<VecDeque<Secret>> = RwLock::new(VecDeque::new());

/// Teaches every [`Scrubber`] of this process — and so every run's redaction of errors,
/// events, history and results — a secret value obtained at run time: an OAuth access or
/// refresh token when it is issued or loaded from a token store, a client secret a server
/// issued. Static secrets of a spec are in [`ServerSpec::secret_values`](crate::ServerSpec::secret_values)
/// instead. Values shorter than [`MIN_SCRUBBED_LEN`] are ignored; at most
/// [`MAX_LEARNED_SECRETS`] are kept.
///
/// ```
/// use mcp_config::{Scrubber, Secret, learn_secret};
///
/// learn_secret(&Secret::new("at-issued-at-run-time-1234"));
/// // Any scrubber, even one made before and knowing nothing else.
/// let scrubber = Scrubber::default();
/// assert_eq!(
///     scrubber.scrub("token at-issued-at-run-time-1234 refused"),
///     "token [REDACTED] refused"
/// );
/// ```
pub fn learn_secret(secret: &Secret) {
    if secret.expose().chars().count() < MIN_SCRUBBED_LEN {
        return;
    }
    let mut learned = LEARNED.write().unwrap_or_else(PoisonError::into_inner);
    if learned.contains(secret) {
        return;
    }
    if learned.len() == MAX_LEARNED_SECRETS {
        learned.pop_front();
    }
    learned.push_back(secret.clone());
}

/// `text` with every secret value learned at run time ([`learn_secret`]) replaced by
/// [`REDACTED`]; borrowed when none occurs. [`Scrubber::scrub`] does this too; this is for
/// redaction that has no scrubber (a run's `agent_core::Redactor` takes it as a hook).
///
/// ```
/// use mcp_config::{Secret, learn_secret, scrub_learned};
///
/// learn_secret(&Secret::new("rt-refresh-token-5678"));
/// assert_eq!(scrub_learned("rt-refresh-token-5678"), "[REDACTED]");
/// assert_eq!(scrub_learned("nothing"), "nothing");
/// ```
pub fn scrub_learned(text: &str) -> std::borrow::Cow<'_, str> {
    let learned = LEARNED.read().unwrap_or_else(PoisonError::into_inner);
    let mut out = std::borrow::Cow::Borrowed(text);
    // Longest first, so that a secret containing another is replaced whole.
    let mut values: Vec<&Secret> = learned
        .iter()
        .filter(|s| out.contains(s.expose()))
        .collect();
    values.sort_by_key(|s| std::cmp::Reverse(s.expose().len()));
    for secret in values {
        if out.contains(secret.expose()) {
            out = std::borrow::Cow::Owned(out.replace(secret.expose(), REDACTED));
        }
    }
    out
}

/// True when some secret value was learned at run time.
fn any_learned() -> bool {
    !LEARNED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .is_empty()
}

/// Removes known secret values from text a server chose before it is shown to anyone.
///
/// A server may echo what it was sent — `"denied for Bearer tok-…"` in a JSON-RPC error, the
/// request headers in a 500 page, its own environment in a tool result. Everything that shows
/// server-chosen text (errors, events, history, the CLI, results for the model) passes it
/// through the scrubber of the run that knows the secrets; each occurrence becomes
/// [`REDACTED`]. Values shorter than [`MIN_SCRUBBED_LEN`] are ignored. Every scrubber also
/// replaces the secret values learned at run time ([`learn_secret`]: OAuth tokens).
///
/// Cheap to clone (the values are shared) and `Debug` prints only how many values it holds.
///
/// ```
/// use mcp_config::{Scrubber, Secret};
///
/// let scrubber = Scrubber::new([Secret::new("tok-123456")]);
/// assert_eq!(scrubber.scrub("denied for Bearer tok-123456"), "denied for Bearer [REDACTED]");
/// assert_eq!(scrubber.scrub("nothing to hide"), "nothing to hide");
///
/// let mut value = serde_json::json!({"echo": ["tok-123456"]});
/// scrubber.scrub_json(&mut value);
/// assert_eq!(value, serde_json::json!({"echo": ["[REDACTED]"]}));
/// ```
#[derive(Clone, Default)]
pub struct Scrubber {
    /// Longest first, so a secret containing another is replaced whole.
    values: Arc<[Secret]>,
}

impl Scrubber {
    /// A scrubber for `secrets` (duplicates and values shorter than [`MIN_SCRUBBED_LEN`]
    /// dropped).
    pub fn new(secrets: impl IntoIterator<Item = Secret>) -> Self {
        Self::default().with(secrets)
    }

    /// This scrubber plus `secrets`.
    #[must_use]
    pub fn with(&self, secrets: impl IntoIterator<Item = Secret>) -> Self {
        let mut values: Vec<Secret> = self.values.iter().cloned().collect();
        values.extend(
            secrets
                .into_iter()
                .filter(|s| s.expose().chars().count() >= MIN_SCRUBBED_LEN),
        );
        values.sort_by(|a, b| {
            b.expose()
                .len()
                .cmp(&a.expose().len())
                .then_with(|| a.expose().cmp(b.expose()))
        });
        values.dedup();
        Self {
            values: values.into(),
        }
    }

    /// True when there is nothing to scrub: no value of its own, none learned at run time.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && !any_learned()
    }

    /// `text` with every known secret — its own, then those learned at run time — replaced by
    /// [`REDACTED`]; borrowed when nothing matched.
    pub fn scrub<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let mut out = std::borrow::Cow::Borrowed(text);
        for secret in self.values.iter() {
            if out.contains(secret.expose()) {
                out = std::borrow::Cow::Owned(out.replace(secret.expose(), REDACTED));
            }
        }
        match scrub_learned(&out) {
            std::borrow::Cow::Borrowed(_) => out,
            std::borrow::Cow::Owned(clean) => std::borrow::Cow::Owned(clean),
        }
    }

    /// Scrubs `text` in place; true when something was replaced.
    pub fn scrub_string(&self, text: &mut String) -> bool {
        match self.scrub(text) {
            std::borrow::Cow::Borrowed(_) => false,
            std::borrow::Cow::Owned(clean) => {
                *text = clean;
                true
            }
        }
    }

    /// Scrubs every string (and object key) of a JSON value in place.
    pub fn scrub_json(&self, value: &mut serde_json::Value) {
        if self.is_empty() {
            return;
        }
        match value {
            serde_json::Value::String(s) => {
                self.scrub_string(s);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_json(v)),
            serde_json::Value::Object(map) => {
                let dirty = map.keys().any(|k| self.scrub(k) != k.as_str());
                if dirty {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, v)| (self.scrub(&k).into_owned(), v))
                        .collect();
                }
                map.values_mut().for_each(|v| self.scrub_json(v));
            }
            _ => {}
        }
    }
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scrubber")
            .field("values", &self.values.len())
            .finish()
    }
}

/// Server-chosen `text` as it may appear in an error message: control characters replaced by
/// spaces, cut to `max` characters (with `…` when cut).
///
/// ```
/// assert_eq!(mcp_config::bounded_text("a\u{1b}[2Jb", 64), "a [2Jb");
/// assert_eq!(mcp_config::bounded_text("abcdef", 3), "abc…");
/// ```
pub fn bounded_text(text: &str, max: usize) -> String {
    let mut kept: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if text.chars().nth(max).is_some() {
        kept.push('…');
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_secret_is_replaced_first_and_short_values_are_ignored() {
        let scrubber = Scrubber::new([
            Secret::new("abcdef"),
            Secret::new("abcdef-ghijkl"),
            Secret::new("abc"),
        ]);
        assert_eq!(
            scrubber.scrub("x abcdef-ghijkl y abcdef z abc"),
            "x [REDACTED] y [REDACTED] z abc"
        );
        assert_eq!(format!("{scrubber:?}"), "Scrubber { values: 2 }");
    }

    #[test]
    fn json_keys_and_nested_strings_are_scrubbed() {
        let scrubber = Scrubber::new([Secret::new("sk-999999")]);
        let mut value = serde_json::json!({"sk-999999": {"a": ["x sk-999999 y", 1, null]}});
        scrubber.scrub_json(&mut value);
        assert_eq!(
            value,
            serde_json::json!({"[REDACTED]": {"a": ["x [REDACTED] y", 1, null]}})
        );
    }
}
