//! The problem-collecting reader: field access, type checks, unknown-field rejection with
//! "did you mean", and the value checks shared by server and auth objects (timeouts, URLs,
//! environment variable names).
//!
//! Each reader returns what it could read and pushes a problem for what it could not, with the
//! value's path; the caller goes on either way.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};
use url::Url;

use crate::ProblemKind::*;
use crate::path::{JsonPath, Problems};

/// A field's value; `null` counts as absent.
pub fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// Reports every key of `obj` not in `allowed`, with the closest allowed name.
pub fn reject_unknown(
    obj: &Map<String, Value>,
    allowed: &[&str],
    path: &JsonPath,
    p: &mut Problems,
) {
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            p.push(
                &path.key(key),
                UnknownField,
                format!(
                    "unknown field {}{}",
                    shown(key),
                    did_you_mean(key, allowed.iter().copied())
                ),
            );
        }
    }
}

/// `value` as an object, or a problem saying `what` must be one.
pub fn expect_object<'a>(
    value: &'a Value,
    path: &JsonPath,
    what: &str,
    p: &mut Problems,
) -> Option<&'a Map<String, Value>> {
    let obj = value.as_object();
    if obj.is_none() {
        p.push(
            path,
            WrongType,
            format!("{what} must be an object, found {}", type_name(value)),
        );
    }
    obj
}

/// `value` as a string, or a problem.
pub fn as_str<'a>(value: &'a Value, path: &JsonPath, p: &mut Problems) -> Option<&'a str> {
    let s = value.as_str();
    if s.is_none() {
        p.push(
            path,
            WrongType,
            format!("expected a string, found {}", type_name(value)),
        );
    }
    s
}

pub(super) fn non_empty_str(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<String> {
    let s = as_str(value, path, p)?;
    if s.is_empty() {
        p.push(path, InvalidValue, "must not be empty");
        return None;
    }
    Some(s.to_owned())
}

/// `value` as a boolean, or a problem.
pub fn as_bool(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<bool> {
    let b = value.as_bool();
    if b.is_none() {
        p.push(
            path,
            WrongType,
            format!("expected true or false, found {}", type_name(value)),
        );
    }
    b
}

pub(super) fn string_list(value: &Value, path: &JsonPath, p: &mut Problems) -> Vec<String> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            WrongType,
            format!("expected an array of strings, found {}", type_name(value)),
        );
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, v)| as_str(v, &path.index(i), p).map(str::to_owned))
        .collect()
}

pub(super) fn string_map(
    value: &Value,
    path: &JsonPath,
    p: &mut Problems,
) -> BTreeMap<String, String> {
    let Some(obj) = value.as_object() else {
        p.push(
            path,
            WrongType,
            format!(
                "expected an object of string values, found {}",
                type_name(value)
            ),
        );
        return BTreeMap::new();
    };
    obj.iter()
        .filter_map(|(k, v)| as_str(v, &path.key(k), p).map(|s| (k.clone(), s.to_owned())))
        .collect()
}

/// "a string", "an array", … for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The longest timeout [`parse_timeout`] takes: 365 days.
pub const MAX_TIMEOUT_SECS: f64 = 31_536_000.0;

/// A positive, finite number of seconds, at most [`MAX_TIMEOUT_SECS`].
pub fn parse_timeout(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Duration> {
    let Some(secs) = value.as_f64() else {
        p.push(
            path,
            WrongType,
            format!("expected a number of seconds, found {}", type_name(value)),
        );
        return None;
    };
    if !(secs > 0.0 && secs.is_finite()) {
        p.push(
            path,
            InvalidTimeout,
            format!("a timeout must be a positive number of seconds, not {secs}"),
        );
        return None;
    }
    if secs > MAX_TIMEOUT_SECS {
        // Far beyond any wait, and a deadline past what a clock can add.
        p.push(
            path,
            InvalidTimeout,
            format!("timeout {secs} s is over the longest taken, {MAX_TIMEOUT_SECS} s (a year)"),
        );
        return None;
    }
    let timeout = Duration::from_secs_f64(secs);
    if timeout.is_zero() {
        p.push(path, InvalidTimeout, "a timeout must be at least 1 ns");
        return None;
    }
    Some(timeout)
}

/// An `http` or `https` URL with a host and no credentials.
pub fn parse_http_url(s: &str, path: &JsonPath, p: &mut Problems) -> Option<Url> {
    http_url(s, path, "`auth.headers` or `auth.bearer_token`", p)
}

/// [`parse_http_url`], the message on credentials naming `instead` as where they go.
fn http_url(s: &str, path: &JsonPath, instead: &str, p: &mut Problems) -> Option<Url> {
    let url = match Url::parse(s) {
        Ok(url) => url,
        Err(e) => {
            p.push_caused(path, InvalidUrl, "not a valid URL", e);
            return None;
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        p.push(
            path,
            UnsupportedScheme,
            format!(
                "URL scheme {} is not supported: use http or https",
                shown(url.scheme())
            ),
        );
        return None;
    }
    if url.host().is_none() {
        p.push(path, InvalidUrl, "the URL has no host");
        return None;
    }
    if !url.username().is_empty() || url.password().is_some() {
        p.push(
            path,
            InvalidUrl,
            format!("the URL must not carry credentials (`user:password@`); use {instead}"),
        );
        return None;
    }
    Some(url)
}

/// The base URL of an HTTP API (`http://localhost:11434/v1`): an `http` or `https` URL with a
/// host and no credentials, kept as written less trailing slashes, since the API's paths are
/// appended to it.
///
/// ```
/// use mcp_config::read::{JsonPath, Problems, parse_base_url};
///
/// let mut p = Problems::new();
/// let at = JsonPath::root().key("model").key("base_url");
/// let url = parse_base_url(&"http://localhost:8000/v1/".into(), &at, &mut p);
/// assert_eq!(url.as_deref(), Some("http://localhost:8000/v1"));
/// assert!(parse_base_url(&"https://user:pw@host/v1".into(), &at, &mut p).is_none());
/// assert!(!p.finish(()).unwrap_err().to_string().contains("pw"));
/// ```
pub fn parse_base_url(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<String> {
    let s = non_blank(value, path, "the base URL", p)?;
    http_url(&s, path, "`api_key_env` or `headers`", p)?;
    Some(s.trim_end_matches('/').to_owned())
}

/// A string that is not blank, trimmed; else a problem saying `what` is empty.
pub fn non_blank(value: &Value, path: &JsonPath, what: &str, p: &mut Problems) -> Option<String> {
    let s = as_str(value, path, p)?.trim();
    if s.is_empty() {
        p.push(path, InvalidValue, format!("{what} is empty"));
        return None;
    }
    Some(s.to_owned())
}

/// A whole number of at least `min`.
pub fn whole_number(value: &Value, path: &JsonPath, min: u64, p: &mut Problems) -> Option<u64> {
    match value.as_u64() {
        Some(n) if n >= min => Some(n),
        Some(_) => {
            p.push(path, InvalidValue, format!("must be at least {min}"));
            None
        }
        None => {
            p.push(
                path,
                WrongType,
                format!("must be a whole number, found {}", type_name(value)),
            );
            None
        }
    }
}

/// An environment variable name: non-empty, no `=`, no NUL.
pub(super) fn check_env_name(name: &str, path: &JsonPath, p: &mut Problems) -> bool {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        p.push(
            path,
            InvalidValue,
            format!("{} is not a valid environment variable name", shown(name)),
        );
        return false;
    }
    true
}

/// The candidate closest to `word`, if it is close enough to be a likely typo: the edit
/// distance counts a swap of two neighbours as one edit (optimal string alignment), so `gti`
/// is one edit from `git`.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let word_l = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(&word_l, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean `x`?` or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(word, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// A short, printable rendering of a user-supplied word for messages (never used for values
/// that may be secrets).
pub fn shown(word: &str) -> String {
    const MAX: usize = 64;
    if word.chars().count() <= MAX {
        format!("`{word}`")
    } else {
        let cut: String = word.chars().take(MAX).collect();
        format!("`{cut}…`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_catch_typos_only() {
        let fields = ["command", "args", "env", "cwd", "url"];
        assert_eq!(closest("comand", fields), Some("command"));
        assert_eq!(closest("ur", fields), Some("url"));
        assert_eq!(closest("Command", fields), Some("command"));
        assert_eq!(closest("timeout", fields), None);
        assert_eq!(closest("kitten", ["sitting"]), None);
        assert_eq!(closest("gti", ["git", "web"]), Some("git"));
    }
}
