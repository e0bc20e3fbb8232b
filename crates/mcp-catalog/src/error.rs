//! Errors of the catalog's own operations (adding servers, promoting tools).
//!
//! Errors of a tool *call* are [`agent_core::ToolError`]s, since they go back to the model;
//! [`SessionError`] is the error of the [`ToolSession`](crate::ToolSession) seam.

use std::time::Duration;

use agent_core::BoxError;

/// Why the catalog refused a change.
///
/// ```
/// use mcp_catalog::CatalogError;
/// let err = CatalogError::NameCollision {
///     name: "a__b-c".into(),
///     existing: "a__b.c".into(),
///     incoming: "a__b-c".into(),
/// };
/// assert_eq!(
///     err.to_string(),
///     "tool `a__b-c` would be shown to the model as `a__b-c`, which tool `a__b.c` already has"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two tools (or a tool and a native tool) would be shown to the model under one name.
    #[error(
        "tool `{incoming}` would be shown to the model as `{name}`, which tool `{existing}` already has"
    )]
    NameCollision {
        /// The model-facing name both would have.
        name: String,
        /// The tool that has it (external `server__tool` name, or a native tool's name).
        existing: String,
        /// The tool that was being added.
        incoming: String,
    },
    /// A server listed a tool whose name is unusable. (Tools with an empty or repeated name
    /// are now left out, see [`SkipReason`]; kept for compatibility.)
    #[error("server `{server}` lists an invalid tool `{tool}`: {reason}")]
    InvalidTool {
        /// The server.
        server: String,
        /// The tool's name as listed.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A server key is unusable.
    #[error("invalid server key `{server}`: {reason}")]
    InvalidServer {
        /// The key.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// No tool has that name.
    #[error("unknown tool `{tool}`")]
    UnknownTool {
        /// The name asked for.
        tool: String,
    },
    /// The run already promoted as many tools as allowed.
    #[error("cannot promote `{tool}`: the limit of {limit} promoted tools is reached")]
    PromotionLimit {
        /// The tool.
        tool: String,
        /// The limit.
        limit: usize,
    },
}

/// A tool the catalog left out of a server's tools, and why (see [`ToolLimits`](crate::ToolLimits)).
///
/// ```
/// use mcp_catalog::{SkipReason, SkippedTool};
/// let skipped = SkippedTool::new("evil", &"x".repeat(300), SkipReason::NameTooLong { chars: 300, limit: 128 });
/// assert!(skipped.to_string().starts_with("server `evil`: tool `xxx"));
/// assert!(skipped.to_string().ends_with("…` left out: its name has 300 characters, more than the limit of 128"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server `{server}`: tool `{tool}` left out: {reason}")]
#[non_exhaustive]
pub struct SkippedTool {
    /// The server key.
    pub server: String,
    /// The tool's name as listed, with control characters escaped and cut after 128
    /// characters: safe to show.
    pub tool: String,
    /// What is wrong with it.
    pub reason: SkipReason,
}

impl SkippedTool {
    /// A skipped tool of `server`; `tool` is the name as listed (it is escaped and cut here).
    pub fn new(server: &str, tool: &str, reason: SkipReason) -> Self {
        Self {
            server: server.to_owned(),
            tool: crate::sanitize::escape(tool, 128),
            reason,
        }
    }
}

/// Why a tool was left out of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkipReason {
    /// The name is longer than the limit.
    #[error("its name has {chars} characters, more than the limit of {limit}")]
    NameTooLong {
        /// The name's length, in characters.
        chars: usize,
        /// The limit ([`ToolLimits::max_name_chars`](crate::ToolLimits::max_name_chars)).
        limit: usize,
    },
    /// The name is empty.
    #[error("its name is empty")]
    NameEmpty,
    /// The listing holds more than one tool of this name; every copy is left out (which one a
    /// call would reach is the server's choice, and their descriptions may differ).
    #[error("its name is listed {times} times")]
    ListedTwice {
        /// How many tools of the listing have the name.
        times: usize,
    },
    /// The name holds control or bidirectional-override characters.
    #[error("its name holds control characters")]
    NameCharacters,
    /// An input or output schema is larger than the limit.
    #[error("its {which} schema is larger than the limit of {limit} bytes")]
    SchemaTooLarge {
        /// `input` or `output`.
        which: &'static str,
        /// The limit ([`ToolLimits::max_schema_bytes`](crate::ToolLimits::max_schema_bytes)).
        limit: usize,
    },
    /// An input or output schema is nested deeper than the limit.
    #[error("its {which} schema is nested deeper than the limit of {limit} levels")]
    SchemaTooDeep {
        /// `input` or `output`.
        which: &'static str,
        /// The limit ([`ToolLimits::max_schema_depth`](crate::ToolLimits::max_schema_depth)).
        limit: usize,
    },
    /// The name holds a secret value of the run (reported by the orchestration, which knows
    /// the secrets).
    #[error("its name holds a secret value")]
    NameHoldsSecret,
}

/// Why a session could not produce a `tools/call` result.
///
/// ```
/// use mcp_catalog::SessionError;
/// let err = SessionError::Rpc { code: -32602, message: "unknown tool".into() };
/// assert_eq!(err.to_string(), "the server answered with error -32602: unknown tool");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The server answered the request with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Rpc {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The call did not finish within the session's timeout.
    #[error("no answer within {:.1} s", after.as_secs_f64())]
    Timeout {
        /// The timeout that expired.
        after: Duration,
    },
    /// The call was cancelled before it finished.
    #[error("the call was cancelled")]
    Cancelled,
    /// The session is closed (the run ended, or the server went away).
    #[error("the session is closed")]
    Closed,
    /// The transport failed (broken pipe, HTTP error, malformed message, …).
    #[error("transport failure")]
    Transport(#[source] BoxError),
    /// The session does not offer this kind of read (`resources`, `prompts`, `skills`).
    #[error("the session offers no {what} to read")]
    NotOffered {
        /// What is not offered.
        what: &'static str,
    },
    /// A read was refused or failed for a reason the session states: its message names the
    /// server, the URI or name and the limit it broke (already bounded and scrubbed).
    #[error("{message}")]
    Refused {
        /// What went wrong.
        message: String,
    },
}

impl SessionError {
    /// A [`Transport`](Self::Transport) error from any error type.
    pub fn transport(source: impl Into<BoxError>) -> Self {
        Self::Transport(source.into())
    }
}
