//! `StateConfig`: where the shared state lives and how it is sealed, as the gateway's
//! configuration gives it; its `Debug` never shows the password.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use crate::error::StateError;

/// The key prefix when none is configured.
pub const DEFAULT_PREFIX: &str = "mcp-agent:";

/// What a gateway does when the shared state cannot be reached.
///
/// ```
/// assert_eq!(mcp_state::OnError::default(), mcp_state::OnError::Closed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Refuse what needs the state (a token cannot be checked, a limit cannot be counted): safe
    /// for a fleet, and the default.
    #[default]
    Closed,
    /// Go on with the replica's own memory alone, as if it ran by itself.
    Open,
}

/// The shared state's settings.
///
/// ```
/// use mcp_state::{OnError, StateConfig};
///
/// let config = StateConfig::new("redis://:hunter2@10.0.0.5:6379/0");
/// assert_eq!(config.key_prefix, "mcp-agent:");
/// assert_eq!(config.on_error, OnError::Closed);
/// let shown = format!("{config:?}");
/// assert!(shown.contains("10.0.0.5:6379") && !shown.contains("hunter2"));
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// The server: `redis://[user][:password@]host[:port][/db]`, or `rediss://` for TLS.
    #[serde(default)]
    pub url: Option<String>,
    /// An environment variable holding the URL, used when `url` is unset (keeps the password
    /// out of the configuration file).
    #[serde(default)]
    pub url_env: Option<String>,
    /// Put before every key, so that several deployments can share one server.
    #[serde(default = "default_prefix")]
    pub key_prefix: String,
    /// An environment variable holding the seal key: 32 random bytes in standard base64
    /// (`head -c 32 /dev/urandom | base64`).
    #[serde(default)]
    pub seal_key_env: Option<String>,
    /// What to do when the state is unreachable.
    #[serde(default)]
    pub on_error: OnError,
    /// A PEM file of the certificate authorities trusted for a `rediss://` server, in place of
    /// the built-in web roots (webpki-roots): for a server whose certificate a private CA
    /// issued. Read when connecting; only with `rediss://`.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn default_prefix() -> String {
    DEFAULT_PREFIX.to_owned()
}

impl StateConfig {
    /// Settings for the server at `url`, with the default prefix, no seal key variable,
    /// `on_error = closed` and the built-in roots for `rediss://`.
    ///
    /// ```
    /// let config = mcp_state::StateConfig::new("redis://127.0.0.1:6379");
    /// assert_eq!(config.url.as_deref(), Some("redis://127.0.0.1:6379"));
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            url_env: None,
            key_prefix: default_prefix(),
            seal_key_env: None,
            on_error: OnError::default(),
            ca_file: None,
        }
    }

    /// Whether `url` is one a connection takes: `redis://` or `rediss://` with a host and no
    /// fragment (`#insecure` would ask the client to check no certificate). The error never
    /// repeats the URL: it may hold a password.
    ///
    /// ```
    /// use mcp_state::StateConfig;
    ///
    /// assert!(StateConfig::check_url("rediss://:pw@cache.local:6380/0").is_ok());
    /// let refused = StateConfig::check_url("rediss://:pw@cache.local:6380/#insecure").unwrap_err();
    /// assert!(!refused.to_string().contains("pw"));
    /// ```
    pub fn check_url(url: &str) -> Result<(), crate::StateError> {
        target(url).map(drop)
    }

    /// Settings that read the URL from the environment variable `var` when connecting.
    ///
    /// ```
    /// let config = mcp_state::StateConfig::from_env("MCP_AGENT_REDIS_URL");
    /// assert_eq!(config.url, None);
    /// assert_eq!(config.url_env.as_deref(), Some("MCP_AGENT_REDIS_URL"));
    /// ```
    pub fn from_env(var: impl Into<String>) -> Self {
        Self {
            url: None,
            url_env: Some(var.into()),
            ..Self::new("")
        }
    }

    /// The URL to connect to: `url`, else the value of `url_env`.
    ///
    /// ```
    /// use mcp_state::{StateConfig, StateError};
    ///
    /// let config = StateConfig::from_env("MCP_STATE_DOC_UNSET_VARIABLE");
    /// assert!(matches!(config.resolve_url(), Err(StateError::MissingUrl(_))));
    /// ```
    pub fn resolve_url(&self) -> Result<String, StateError> {
        if let Some(url) = &self.url {
            return Ok(url.clone());
        }
        let Some(var) = &self.url_env else {
            return Err(StateError::MissingUrl("set `url` or `url_env`".into()));
        };
        match std::env::var(var) {
            Ok(url) if !url.trim().is_empty() => Ok(url.trim().to_owned()),
            _ => Err(StateError::MissingUrl(format!(
                "${var} (from `url_env`) is not set"
            ))),
        }
    }
}

/// `url` with its password replaced by `***`; an unparsable URL is hidden whole, since where
/// its password is cannot be told.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => "<unparsable URL, hidden>".to_owned(),
    }
}

impl fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateConfig")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("url_env", &self.url_env)
            .field("key_prefix", &self.key_prefix)
            .field("seal_key_env", &self.seal_key_env)
            .field("on_error", &self.on_error)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// `host:port` of `url`, its password, and whether it is `rediss://` (TLS), checking the
/// scheme and host first so that a bad URL is reported without being repeated.
pub(crate) fn target(url: &str) -> Result<(String, Option<String>, bool), StateError> {
    let bad = |reason: &str| StateError::BadUrl {
        reason: reason.to_owned(),
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "redis" | "rediss") {
        return Err(bad(&format!(
            "scheme `{}` is not `redis` or `rediss`",
            parsed.scheme()
        )));
    }
    if parsed.fragment().is_some() {
        // The client reads `#insecure` as "check no certificate": never taken.
        return Err(bad(
            "a fragment (`#…`) is not taken: certificates are always checked \
             (trust a private CA with `ca_file`)",
        ));
    }
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("no host"))?;
    let port = parsed.port().unwrap_or(6379);
    let password = parsed.password().map(percent_decode);
    Ok((
        format!("{host}:{port}"),
        password,
        parsed.scheme() == "rediss",
    ))
}

/// The password as the client sends it (the URL carries it percent-encoded).
fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("p={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_keeps_host_and_user_and_hides_password() {
        assert_eq!(
            redact_url("redis://alice:pw@h:1/2"),
            "redis://alice:***@h:1/2"
        );
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("not a url :pw@"), "<unparsable URL, hidden>");
    }

    #[test]
    fn targets_name_host_and_port_and_keep_the_password_apart() {
        assert_eq!(
            target("redis://:p%40ss@cache.local/0").unwrap(),
            ("cache.local:6379".into(), Some("p@ss".into()), false)
        );
        assert_eq!(
            target("rediss://u:a+b@10.1.2.3:7000").unwrap(),
            ("10.1.2.3:7000".into(), Some("a+b".into()), true)
        );
        assert_eq!(target("redis://127.0.0.1:1").unwrap().1, None);
    }

    #[test]
    fn bad_urls_are_refused_without_being_repeated() {
        for url in [
            "http://:secret@h:1",
            "redis://:secret@",
            "::secret::",
            "rediss://:secret@cache.local:6380/#insecure",
        ] {
            let e = target(url).unwrap_err();
            assert!(matches!(e, StateError::BadUrl { .. }), "{url}: {e:?}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }
}
