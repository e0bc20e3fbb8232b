//! Secrets of a configuration: the [`Secret`] type and the one secret engine, [`Redactor`],
//! are `agent-core`'s (re-exported here, since every spec holds secrets); this file adds where
//! a spec's secret comes from ([`SecretSource`]) and what error messages made of server-chosen
//! text need.

use serde::Serialize;

pub use agent_core::{MAX_LEARNED_SECRETS, MIN_SECRET_LEN, REDACTED, Redactor, Secret, SecretSink};

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

/// Where a secret comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SecretSource {
    /// Given in the spec.
    Inline(Secret),
    /// Read from this environment variable when the session opens (operator specs only,
    /// unless the operator opts in).
    Env(String),
}

impl SecretSource {
    /// The secret: the inline value, or the variable read from the process environment.
    /// `None` when the variable is unset or not UTF-8.
    pub fn resolve(&self) -> Option<Secret> {
        match self {
            Self::Inline(s) => Some(s.clone()),
            Self::Env(var) => std::env::var(var).ok().map(Secret::from),
        }
    }
}
