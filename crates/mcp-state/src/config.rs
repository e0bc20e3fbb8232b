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
}
