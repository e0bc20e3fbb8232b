//! The one secret engine: redaction of secrets in text and JSON before anything is shown to a
//! human, written down or handed on (approval prompts, events, history, errors, server text).
//!
//! `secret.rs` is the [`Secret`] type, `learned.rs` the bounded set of values learned at run
//! time and the [`SecretSink`] that teaches them.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

mod learned;
mod secret;

pub use learned::{MAX_LEARNED_SECRETS, SecretSink};
pub use secret::{REDACTED, Secret};

use learned::Learned;

/// Secret values shorter than this many characters are not searched for. Six, because values
/// of four or five characters are ordinary words and settings (`true`, `debug`, `8080`,
/// `admin`) whose replacement would make errors, stderr tails and results unreadable, while a
/// credential that short can be guessed anyway, so hiding it protects nothing. Values of
/// sensitive keys are redacted whatever their length.
pub const MIN_SECRET_LEN: usize = 6;

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

/// The secret engine: every place that shows, records or passes on text uses one.
///
/// It knows secret values two ways: given when it is built ([`with_secrets`](Self::with_secrets):
/// a run's configured credentials) and learned while it is used ([`sink`](Self::sink): OAuth
/// tokens issued or loaded during the run, at most [`MAX_LEARNED_SECRETS`], oldest dropped;
/// clones share what is learned). Two operations:
///
/// - [`scrub`](Self::scrub) / [`scrub_json`](Self::scrub_json): every known value replaced by
///   [`REDACTED`], nothing else touched, for text a server chose that is passed on (errors,
///   results for the model, stderr tails).
/// - [`redact_text`](Self::redact_text) / [`redact_json`](Self::redact_json): also the values
///   of sensitive keys and headers (`Authorization`, `Cookie`, API keys, passwords, tokens…)
///   in JSON objects and in `Name: value` / `name=value` text, bearer tokens, and whatever a
///   caller-provided hook removes, for what a person reads (approval prompts, events, history).
///
/// Cheap to clone; `Debug` shows counts, never values.
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
/// // Known values only: a server's text keeps its labels.
/// assert_eq!(redactor.scrub("token: s3cr3t-token"), "token: [REDACTED]");
/// ```
#[derive(Clone)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    secrets: Arc<[Secret]>,
    /// Learned at run time, shared by clones.
    learned: Arc<Learned>,
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
            .field("learned", &self.learned.len())
            .field("keys", &self.keys.len())
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl SecretSink for Learned {
    fn learn(&self, secret: &Secret) {
        self.add(secret, MIN_SECRET_LEN);
    }
}

fn normalize_key(key: &str) -> String {
    key.to_ascii_lowercase().replace('_', "-")
}

impl Redactor {
    /// A redactor with the default sensitive keys, no known secret value and an empty learned
    /// set of its own.
    pub fn new() -> Self {
        Self {
            secrets: Arc::from(Vec::new()),
            learned: Arc::default(),
            keys: DEFAULT_SENSITIVE_KEYS
                .iter()
                .map(|k| (*k).to_owned())
                .collect(),
            hook: None,
        }
    }

    /// Adds secret values to replace wherever they appear (values shorter than
    /// [`MIN_SECRET_LEN`] characters are ignored). What is learned stays shared with the
    /// redactor this one was made from.
    ///
    /// ```
    /// use agent_core::{Redactor, Secret};
    /// let r = Redactor::new().with_secrets(["hunter22", "abc"]);
    /// assert_eq!(r.redact_text("hunter22 abc"), "[REDACTED] abc");
    /// let r = r.with_secrets([Secret::new("tok-123456")]);
    /// assert_eq!(r.scrub("tok-123456"), "[REDACTED]");
    /// ```
    #[must_use]
    pub fn with_secrets<S: Into<Secret>>(mut self, secrets: impl IntoIterator<Item = S>) -> Self {
        let mut all: Vec<Secret> = self.secrets.iter().cloned().collect();
        all.extend(
            secrets
                .into_iter()
                .map(Into::into)
                .filter(|s| s.expose().chars().count() >= MIN_SECRET_LEN),
        );
        all.sort_by(|a, b| {
            b.expose()
                .len()
                .cmp(&a.expose().len())
                .then_with(|| a.expose().cmp(b.expose()))
        });
        all.dedup();
        self.secrets = all.into();
        self
    }

    /// This redactor with a learned set of its own: what it has learned so far is copied,
    /// what is learned from now on (through it, its clones or its [`sink`](Self::sink)) is
    /// not shared with the redactor it was made from. A run's redactor is made this way from
    /// its client's template, so one run's tokens are the business of that run.
    ///
    /// ```
    /// use agent_core::{Redactor, Secret};
    /// let template = Redactor::new();
    /// let run = template.clone().with_own_learned();
    /// run.learn(&Secret::new("run-token-123"));
    /// assert_eq!(run.scrub("run-token-123"), "[REDACTED]");
    /// assert_eq!(template.scrub("run-token-123"), "run-token-123");
    /// ```
    #[must_use]
    pub fn with_own_learned(mut self) -> Self {
        self.learned = Arc::new(Learned::copy_of(&self.learned));
        self
    }

    /// Replaces `secret` from now on, in this redactor and every clone of it (see
    /// [`SecretSink`]).
    pub fn learn(&self, secret: &Secret) {
        self.learned.learn(secret);
    }

    /// The sink that teaches this redactor and its clones: give it to whoever obtains secrets
    /// at run time (an OAuth provider keeps only a weak reference, so a run that ended is
    /// forgotten).
    pub fn sink(&self) -> Arc<dyn SecretSink> {
        self.learned.clone()
    }

    /// True when there is no secret value to scrub: none given, none learned.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.learned.len() == 0
    }

    /// `text` with every known secret value — given, then learned — replaced by
    /// [`REDACTED`]; borrowed when none occurs. Nothing else is touched.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in self.secrets.iter() {
            if out.contains(secret.expose()) {
                out = Cow::Owned(out.replace(secret.expose(), REDACTED));
            }
        }
        let learned = self.learned.read();
        // Longest first, so that a secret containing another is replaced whole.
        let mut found: Vec<&Secret> = learned
            .iter()
            .filter(|s| out.contains(s.expose()))
            .collect();
        found.sort_by_key(|s| std::cmp::Reverse(s.expose().len()));
        for secret in found {
            if out.contains(secret.expose()) {
                out = Cow::Owned(out.replace(secret.expose(), REDACTED));
            }
        }
        out
    }

    /// True when a known secret value may occur in a string of the JSON text `json` (as
    /// `serde_json` writes it): each secret is looked for as it appears inside a JSON string,
    /// escapes included. False means [`scrub_json`](Self::scrub_json) of the value would
    /// change nothing, so a caller holding the value in a typed form can keep it as it is.
    ///
    /// ```
    /// let r = agent_core::Redactor::new().with_secrets(["tok\"123456"]);
    /// assert!(r.occurs_in_json(r#"{"echo":"a tok\"123456 b"}"#));
    /// assert!(!r.occurs_in_json(r#"{"echo":"nothing here"}"#));
    /// ```
    pub fn occurs_in_json(&self, json: &str) -> bool {
        let occurs = |secret: &Secret| {
            let raw = secret.expose();
            // `serde_json` escapes only `"`, `\` and bytes below 0x20 (not U+007F, not
            // U+2028), one by one, so a secret inside a string appears in the text as its own
            // escaped form.
            if raw.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
                let escaped = serde_json::to_string(raw).unwrap_or_default();
                let inner = escaped.strip_prefix('"').and_then(|e| e.strip_suffix('"'));
                json.contains(inner.unwrap_or(&escaped))
            } else {
                json.contains(raw)
            }
        };
        self.secrets.iter().any(occurs) || self.learned.read().iter().any(occurs)
    }

    /// Scrubs `text` in place; true when something was replaced.
    pub fn scrub_string(&self, text: &mut String) -> bool {
        match self.scrub(text) {
            Cow::Borrowed(_) => false,
            Cow::Owned(clean) => {
                *text = clean;
                true
            }
        }
    }

    /// Scrubs every string (and object key) of a JSON value in place.
    ///
    /// ```
    /// let r = agent_core::Redactor::new().with_secrets(["tok-123456"]);
    /// let mut value = serde_json::json!({"echo": ["tok-123456"], "token": "kept"});
    /// r.scrub_json(&mut value);
    /// assert_eq!(value, serde_json::json!({"echo": ["[REDACTED]"], "token": "kept"}));
    /// ```
    pub fn scrub_json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                self.scrub_string(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_json(v)),
            Value::Object(map) => {
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

    /// Adds a redaction step of the caller's, run by [`redact_text`](Self::redact_text) after
    /// the built-in ones (a tenant name, a pattern of the caller's).
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
        let out = self.redact_labelled_values(&self.scrub(text));
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
    fn a_secret_is_found_in_json_text_as_serde_json_escapes_it() {
        let quoted = "tok\"en\\12\n34";
        let plain = "plain-secret-99";
        let control = "ctl\u{1}secret";
        let unescaped = "del\u{7f}line\u{2028}sep";
        let r = Redactor::new().with_secrets([quoted, plain, control, unescaped]);
        for (value, holds) in [
            (json!({"text": format!("<{control}>")}), true),
            (json!({"text": format!("<{unescaped}>")}), true),
            (json!({"text": "ctl secret del line sep"}), false),
            (json!({"text": format!("a {quoted} b")}), true),
            (json!({"list": [format!("x{plain}y")]}), true),
            (json!({ format!("key {quoted}"): 1 }), true),
            (json!({"text": "tok\"en", "other": "en\\12"}), false),
            (json!({"n": 1, "text": "nothing"}), false),
        ] {
            let text = serde_json::to_string(&value).unwrap();
            assert_eq!(r.occurs_in_json(&text), holds, "{text}");
            // Where it says none occurs, scrubbing would change nothing.
            let mut scrubbed = value.clone();
            r.scrub_json(&mut scrubbed);
            assert_eq!(scrubbed == value, !holds, "{text}");
        }
        let learned = Redactor::new();
        learned.learn(&Secret::new("learned\ttoken".to_owned()));
        assert!(learned.occurs_in_json(&json!(["learned\ttoken"]).to_string()));
        assert!(!learned.occurs_in_json(&json!(["learned token"]).to_string()));
    }

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
        r.learn(&Secret::new("learned-secret-value"));
        assert_eq!(
            format!("{r:?}"),
            "Redactor { secrets: 1, learned: 1, keys: 18, hook: false }"
        );
    }

    #[test]
    fn scrubbing_replaces_the_longest_secret_first_and_ignores_short_values() {
        let r = Redactor::new().with_secrets(["abcdef", "abcdef-ghijkl", "abc"]);
        assert_eq!(
            r.scrub("x abcdef-ghijkl y abcdef z abc"),
            "x [REDACTED] y [REDACTED] z abc"
        );
        assert_eq!(
            format!("{r:?}"),
            "Redactor { secrets: 2, learned: 0, keys: 18, hook: false }"
        );
    }

    #[test]
    fn json_keys_and_nested_strings_are_scrubbed() {
        let r = Redactor::new().with_secrets(["sk-999999"]);
        let mut value = json!({"sk-999999": {"a": ["x sk-999999 y", 1, null]}});
        r.scrub_json(&mut value);
        assert_eq!(
            value,
            json!({"[REDACTED]": {"a": ["x [REDACTED] y", 1, null]}})
        );
    }

    #[test]
    fn short_values_are_ignored_and_the_learned_set_is_bounded() {
        let r = Redactor::new().with_secrets(["abcde", "abcdef"]);
        assert_eq!(r.scrub("abcde abcdef"), "abcde [REDACTED]");
        for i in 0..=MAX_LEARNED_SECRETS {
            r.learn(&Secret::new(format!("learned-{i:04}")));
        }
        r.learn(&Secret::new("short"));
        assert_eq!(
            r.scrub("learned-0000"),
            "learned-0000",
            "the oldest was dropped"
        );
        assert_eq!(
            r.scrub("learned-0001 learned-0256"),
            "[REDACTED] [REDACTED]"
        );
        assert_eq!(r.learned.len(), MAX_LEARNED_SECRETS);
    }

    #[test]
    fn clones_share_what_is_learned_and_a_sink_holds_no_run_alive() {
        let r = Redactor::new();
        let clone = r.clone().with_secrets(["given-123456"]);
        let sink = std::sync::Arc::downgrade(&r.sink());
        r.learn(&Secret::new("learned-abcdef"));
        assert_eq!(clone.scrub("learned-abcdef"), "[REDACTED]");
        drop((r, clone));
        assert!(sink.upgrade().is_none());
    }
}
