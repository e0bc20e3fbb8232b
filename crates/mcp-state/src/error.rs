//! What can go wrong with the shared state. Every message names the server as `host:port` and
//! never carries the password, the URL as written, the seal key or a stored value.

use std::path::PathBuf;
use std::time::Duration;

/// The counter of failed exchanges with Redis (connections and commands), through the
/// `metrics` facade: `agent_core::telemetry`'s name of it (this crate knows no other crate of
/// the workspace).
pub const STATE_ERRORS: &str = "mcp_state_errors_total";

/// An error of the shared state: its configuration, the connection, or one command.
///
/// ```
/// use mcp_state::StateError;
///
/// let e = StateError::Unreachable { addr: "127.0.0.1:6390".into(), reason: "refused".into() };
/// assert_eq!(e.to_string(), "Redis at 127.0.0.1:6390 is unreachable: refused");
/// ```
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// Neither `url` nor `url_env` is set, or `url_env` names an unset variable.
    #[error("no Redis URL: {0}")]
    MissingUrl(String),
    /// The URL does not parse or is not `redis://` / `rediss://` with a host (the URL itself
    /// is not repeated: it may hold a password).
    #[error("the Redis URL is invalid: {reason}")]
    BadUrl {
        /// Why, without the URL.
        reason: String,
    },
    /// The CA file (`ca_file`) cannot be used: unreadable, too large, without a PEM
    /// certificate, or given for a `redis://` URL (no TLS).
    #[error("the CA file {} (`ca_file`) is unusable: {reason}", path.display())]
    CaFile {
        /// The file as configured.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No connection could be made (refused, timed out, TLS failed).
    #[error("Redis at {addr} is unreachable: {reason}")]
    Unreachable {
        /// `host:port`.
        addr: String,
        /// The cause, with the password removed.
        reason: String,
    },
    /// The server refused the credentials, or wants some and none were given.
    #[error("Redis at {addr} refused the credentials (wrong or missing password)")]
    AuthFailed {
        /// `host:port`.
        addr: String,
    },
    /// The seal key is missing or malformed (its value is never shown).
    #[error("the seal key from `{var}` is unusable: {reason}")]
    SealKey {
        /// The environment variable that should hold it (`seal_key_env` when none is
        /// configured).
        var: String,
        /// Why.
        reason: String,
    },
    /// A time to live that Redis cannot take (zero, or beyond its millisecond range).
    #[error("a TTL of {ttl:?} is not between 1 ms and {max:?}")]
    BadTtl {
        /// The TTL given.
        ttl: Duration,
        /// The largest accepted.
        max: Duration,
    },
    /// A command failed after the connection was made.
    #[error("Redis at {addr}: {op} failed: {reason}")]
    Command {
        /// `host:port`.
        addr: String,
        /// The operation (`get`, `put`, `delete`, …).
        op: &'static str,
        /// The cause, with the password removed.
        reason: String,
    },
}

impl StateError {
    /// Maps a client error at `addr` during `op` (`None`: while connecting) to a typed error,
    /// replacing any occurrence of `password` in its text, and counts it in [`STATE_ERRORS`].
    pub(crate) fn from_redis(
        e: &redis::RedisError,
        addr: &str,
        op: Option<&'static str>,
        password: Option<&str>,
    ) -> Self {
        metrics::counter!(STATE_ERRORS).increment(1);
        let auth = e.kind() == redis::ErrorKind::AuthenticationFailed
            || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"));
        if auth {
            return Self::AuthFailed { addr: addr.into() };
        }
        let mut reason = e.to_string();
        if let Some(password) = password.filter(|p| !p.is_empty()) {
            reason = reason.replace(password, "***");
        }
        match op {
            None => Self::Unreachable {
                addr: addr.into(),
                reason,
            },
            Some(op) => Self::Command {
                addr: addr.into(),
                op,
                reason,
            },
        }
    }
}
