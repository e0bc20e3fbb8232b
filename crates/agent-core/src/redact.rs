//! Redaction of secrets in text and JSON before anything is shown to a human or written down
//! (approval prompts, events, history).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Secret values shorter than this many characters are not searched for: they would redact
/// ordinary words. Values of sensitive keys are redacted whatever their length.
pub const MIN_SECRET_LEN: usize = 4;

/// Key and header names whose values are always redacted (compared case-insensitively, `_`
/// and `-` alike).
const DEFAULT_SENSITIVE_KEYS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "apikey",
    "x-auth-token",
    "auth-token",
    "access-token",
    "refresh-token",
    "id-token",
    "client-secret",
    "private-key",
    "password",
    "passwd",
    "secret",
    "token",
];

/// A caller's own redaction step, run after the built-in ones.
type Hook = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Replaces secrets with [`REDACTED`]: known secret values (the run's credentials), the values
/// of sensitive keys and headers (`Authorization`, `Cookie`, API keys, passwords, tokens…) in
/// JSON objects and in `Name: value` / `name=value` text, bearer tokens, and whatever a
/// caller-provided hook removes. Cheap to clone; `Debug` shows counts, never values.
///
/// ```
/// use agent_core::Redactor;
/// use serde_json::json;
///
/// let redactor = Redactor::new().with_secrets(["s3cr3t-token"]);
/// assert_eq!(
///     redactor.redact_text("login failed for s3cr3t-token"),
///     "login failed for [REDACTED]"
/// );
/// assert_eq!(
///     redactor.redact_text("sent Authorization: Bearer abc.def"),
///     "sent Authorization: Bearer [REDACTED]"
/// );
/// let args = json!({"url": "https://x", "headers": {"Cookie": "sid=1"}, "q": "s3cr3t-token"});
/// assert_eq!(
///     redactor.redact_json(&args),
///     json!({"url": "https://x", "headers": {"Cookie": "[REDACTED]"}, "q": "[REDACTED]"})
/// );
/// ```
#[derive(Clone)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    secrets: Arc<[String]>,
    /// Normalised: lower case, `-` for `_`.
    keys: Arc<[String]>,
    hook: Option<Hook>,
}

impl Default for Redactor {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .field("keys", &self.keys.len())
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

fn normalize_key(key: &str) -> String {
    key.to_ascii_lowercase().replace('_', "-")
}

impl Redactor {
    /// A redactor with the default sensitive keys and no known secret values.
    pub fn new() -> Self {
        Self {
            secrets: Arc::from(Vec::new()),
            keys: DEFAULT_SENSITIVE_KEYS
                .iter()
                .map(|k| (*k).to_owned())
                .collect(),
            hook: None,
        }
    }

    /// Adds secret values to replace wherever they appear (values shorter than
    /// [`MIN_SECRET_LEN`] characters are ignored).
    ///
    /// ```
    /// let r = agent_core::Redactor::new().with_secrets(["hunter22", "abc"]);
    /// assert_eq!(r.redact_text("hunter22 abc"), "[REDACTED] abc");
    /// ```
    #[must_use]
    pub fn with_secrets<S: Into<String>>(mut self, secrets: impl IntoIterator<Item = S>) -> Self {
        let mut all: Vec<String> = self.secrets.iter().cloned().collect();
        all.extend(
            secrets
                .into_iter()
                .map(Into::into)
                .filter(|s| s.chars().count() >= MIN_SECRET_LEN),
        );
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        self.secrets = all.into();
        self
    }

    /// Adds key or header names whose values are redacted.
    ///
    /// ```
    /// use serde_json::json;
    /// let r = agent_core::Redactor::new().with_sensitive_keys(["X-Tenant"]);
    /// assert_eq!(r.redact_json(&json!({"x_tenant": "acme"})), json!({"x_tenant": "[REDACTED]"}));
    /// ```
    #[must_use]
    pub fn with_sensitive_keys<S: AsRef<str>>(mut self, keys: impl IntoIterator<Item = S>) -> Self {
        let mut all: Vec<String> = self.keys.iter().cloned().collect();
        all.extend(keys.into_iter().map(|k| normalize_key(k.as_ref())));
        all.sort();
        all.dedup();
        self.keys = all.into();
        self
    }

    /// Adds a redaction step of the caller's, run on every text after the built-in ones (for
    /// example a scrubber that knows more secrets).
    ///
    /// ```
    /// let r = agent_core::Redactor::new().with_hook(|text| text.replace("acme", "[TENANT]"));
    /// assert_eq!(r.redact_text("acme failed"), "[TENANT] failed");
    /// ```
    #[must_use]
    pub fn with_hook(mut self, hook: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.hook = Some(match self.hook.take() {
            Some(first) => Arc::new(move |text: &str| hook(&first(text))),
            None => Arc::new(hook),
        });
        self
    }

    /// True when values under `key` are always redacted.
    pub fn is_sensitive_key(&self, key: &str) -> bool {
        let key = normalize_key(key);
        self.keys.contains(&key)
    }

    /// `text` with every secret replaced.
    pub fn redact_text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in self.secrets.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        let out = self.redact_labelled_values(&out);
        match &self.hook {
            Some(hook) => hook(&out),
            None => out,
        }
    }

    /// `value` with the values of sensitive keys replaced and every string redacted.
    pub fn redact_json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.redact_text(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.redact_json(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if self.is_sensitive_key(k) && !v.is_null() {
                            Value::String(REDACTED.to_owned())
                        } else {
                            self.redact_json(v)
                        };
                        (self.redact_text(k), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Redacts values written after a sensitive name (`Authorization: Bearer x`,
    /// `"api_key":"x"`, `password=x`) and bearer tokens anywhere.
    fn redact_labelled_values(&self, text: &str) -> String {
        // Same byte offsets as `text`: only ASCII bytes change.
        let lower: String = text
            .chars()
            .map(|c| match c {
                '_' => '-',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        let bytes = lower.as_bytes();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let names = self
            .keys
            .iter()
            .map(|k| (k.as_str(), true))
            .chain([("bearer", false)]);
        for (name, labelled) in names {
            let mut from = 0;
            while let Some(found) = lower[from..].find(name) {
                let start = from + found;
                from = start + name.len();
                if start > 0 && is_word_byte(bytes[start - 1]) {
                    continue;
                }
                let mut at = start + name.len();
                if labelled {
                    at = skip(bytes, at, b"\"'` ");
                    if !matches!(bytes.get(at), Some(b':' | b'=')) {
                        continue;
                    }
                    at = skip(bytes, at + 1, b"\"'` ");
                    if name.ends_with("authorization") {
                        at = skip_scheme(bytes, at);
                    }
                } else {
                    if bytes.get(at) != Some(&b' ') {
                        continue;
                    }
                    at = skip(bytes, at, b" ");
                }
                let whole_line = name.contains("cookie");
                let end = value_end(bytes, at, whole_line);
                if end > at {
                    spans.push((at, end));
                }
            }
        }
        if spans.is_empty() {
            return text.to_owned();
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        for (start, end) in spans {
            if end <= done {
                continue;
            }
            let start = start.max(done);
            out.push_str(&text[done..start]);
            if !out.ends_with(REDACTED) {
                out.push_str(REDACTED);
            }
            done = end;
        }
        out.push_str(&text[done..]);
        out
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn skip(bytes: &[u8], mut at: usize, set: &[u8]) -> usize {
    while at < bytes.len() && set.contains(&bytes[at]) {
        at += 1;
    }
    at
}

/// Skips an authorization scheme (`Bearer `, `Basic `…) so only the credential is replaced.
fn skip_scheme(bytes: &[u8], at: usize) -> usize {
    let mut end = at;
    while end < bytes.len() && bytes[end].is_ascii_alphabetic() {
        end += 1;
    }
    if end > at && bytes.get(end) == Some(&b' ') {
        skip(bytes, end, b" ")
    } else {
        at
    }
}

/// Where a value starting at `at` ends: at a quote, whitespace or separator, or (for cookies,
/// whose values hold `;` and spaces) at the end of the line or a quote.
fn value_end(bytes: &[u8], at: usize, whole_line: bool) -> usize {
    let mut end = at;
    while end < bytes.len() {
        let b = bytes[end];
        let stop = if whole_line {
            matches!(b, b'\n' | b'\r' | b'"' | b'\'')
        } else {
            b.is_ascii_whitespace()
                || matches!(b, b'"' | b'\'' | b',' | b';' | b'&' | b'}' | b']' | b')')
        };
        if stop {
            break;
        }
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_value_behind_a_quoted_json_path_is_redacted() {
        // How a schema validation message names a field and its value.
        let r = Redactor::new();
        let text = r.redact_text(r#"`/password`: "hunter2" is shorter than 8 characters"#);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("is shorter than 8 characters"), "{text}");
    }

    #[test]
    fn labelled_values_are_redacted_in_text() {
        let r = Redactor::new();
        for (text, want) in [
            (
                "Authorization: Bearer abc",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "authorization=Basic dXNlcg==",
                "authorization=Basic [REDACTED]",
            ),
            (
                r#"{"api_key":"k-123","n":1}"#,
                r#"{"api_key":"[REDACTED]","n":1}"#,
            ),
            ("x-api-key: k1\nnext", "x-api-key: [REDACTED]\nnext"),
            ("Cookie: a=1; b=2\nok", "Cookie: [REDACTED]\nok"),
            ("password=hunter2&user=bob", "password=[REDACTED]&user=bob"),
            ("use bearer xyz.abc now", "use bearer [REDACTED] now"),
            ("no secrets here", "no secrets here"),
            ("my-token-count: 3", "my-token-count: 3"),
        ] {
            assert_eq!(r.redact_text(text), want, "{text}");
        }
    }

    #[test]
    fn secret_values_are_replaced_longest_first() {
        let r = Redactor::new().with_secrets(["abcdef", "abcdefgh"]);
        assert_eq!(
            r.redact_text("x abcdefgh y abcdef"),
            "x [REDACTED] y [REDACTED]"
        );
    }

    #[test]
    fn json_keys_are_matched_case_and_separator_insensitively() {
        let r = Redactor::new();
        let v = json!({"X_API_KEY": "k", "nested": [{"Set-Cookie": "s"}], "token": null, "n": 2});
        assert_eq!(
            r.redact_json(&v),
            json!({"X_API_KEY": "[REDACTED]", "nested": [{"Set-Cookie": "[REDACTED]"}], "token": null, "n": 2})
        );
    }

    #[test]
    fn debug_shows_no_secret() {
        let r = Redactor::new().with_secrets(["very-secret-value"]);
        assert!(!format!("{r:?}").contains("very-secret-value"));
    }
}
