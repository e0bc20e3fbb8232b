//! Errors of the features beyond tools: resources, prompts, completions.

use std::time::Duration;

use crate::error::ProtocolError;
use crate::{ListLimit, SkillProblem};

/// Why a resource, prompt or completion request failed. Each names the server (its
/// configured key), the method and, where there is one, the URI or prompt and the limit.
/// Every text a server chose is scrubbed of the run's known secrets and cut.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FeatureError {
    /// The run has no open session of this server.
    #[error("no server `{server}` is open in this run")]
    UnknownServer {
        /// The server key asked for.
        server: String,
    },
    /// The run's `[policy]` refuses the resource or prompt.
    #[error("server `{server}`: {what} `{target}` is refused: {reason}")]
    Denied {
        /// The server.
        server: String,
        /// `"resource"`, `"prompt"` or `"skill"`.
        what: &'static str,
        /// The URI, prompt name or skill name.
        target: String,
        /// The rule that decided.
        reason: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("server `{server}`: {method} failed with error {code}: {message}")]
    Rpc {
        /// The server.
        server: String,
        /// The method, e.g. `resources/read`.
        method: &'static str,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message, bounded and scrubbed.
        message: String,
    },
    /// The exchange failed (the connection closed, the transport failed, an answer that does
    /// not follow the protocol).
    #[error("server `{server}`: {method} failed")]
    Failed {
        /// The server.
        server: String,
        /// The method.
        method: &'static str,
        /// What went wrong.
        #[source]
        source: ProtocolError,
    },
    /// The transport ended the session during the exchange, and said why (a message over its
    /// size or depth bound, a write that failed); scrubbed of the run's secrets.
    #[error("server `{server}`: {method} failed")]
    Transport {
        /// The server.
        server: String,
        /// The method.
        method: &'static str,
        /// Why the transport ended the session.
        #[source]
        source: agent_core::BoxError,
    },
    /// The server did not answer within its call timeout.
    #[error("server `{server}`: {method} timed out after {:.1} s", after.as_secs_f64())]
    Timeout {
        /// The server.
        server: String,
        /// The method.
        method: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// A listing broke one of the session's [`ListLimits`](crate::ListLimits).
    #[error("server `{server}`: {method} stopped: {limit}")]
    ListLimit {
        /// The server.
        server: String,
        /// The method.
        method: &'static str,
        /// The bound it broke.
        limit: ListLimit,
    },
    /// A resource's contents (or a prompt's messages) exceed the size limit: refused whole.
    #[error("server `{server}`: `{target}` is larger than {limit} bytes (the size limit)")]
    TooLarge {
        /// The server.
        server: String,
        /// The URI or prompt name.
        target: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A resource's `blob` is not base64.
    #[error("server `{server}`: resource `{uri}` has a blob that is not valid base64")]
    NotBase64 {
        /// The server.
        server: String,
        /// The URI of the content whose blob is invalid.
        uri: String,
    },
    /// A URI given to the client is empty, too long, holds control characters, whitespace, an
    /// uppercase scheme, a `.`/`..` path segment or a percent-encoded letter, digit, `-`, `.`
    /// or `_`: not sent.
    #[error(
        "server `{server}`: the URI is empty, longer than {limit} bytes, or not in its one plain spelling (control characters, whitespace, an uppercase scheme, a `.`/`..` path segment, or a percent-encoded letter, digit, `-`, `.` or `_`)"
    )]
    InvalidUri {
        /// The server.
        server: String,
        /// [`MAX_URI_BYTES`](crate::MAX_URI_BYTES).
        limit: usize,
    },
    /// The server lists no prompt of this name.
    #[error("server `{server}`: no prompt `{prompt}` is listed")]
    UnknownPrompt {
        /// The server.
        server: String,
        /// The prompt asked for.
        prompt: String,
    },
    /// Arguments the prompt requires are missing (checked before anything is sent).
    #[error("server `{server}`: prompt `{prompt}` needs the argument(s) {}", missing.join(", "))]
    MissingArguments {
        /// The server.
        server: String,
        /// The prompt.
        prompt: String,
        /// The required arguments not given.
        missing: Vec<String>,
    },
    /// A skill (or one of its files) is refused: over a bound, breaking the extension's rules,
    /// or read with another size, digest or frontmatter than its listing promised. Nothing
    /// read of it is used.
    #[error("server `{server}`: skill `{skill}`{}: {problem}", file_part(file.as_deref()))]
    Skill {
        /// The server.
        server: String,
        /// The skill's name (or the name or URI asked for), cleaned.
        skill: String,
        /// The file, when the problem is one file's.
        file: Option<String>,
        /// What is wrong.
        problem: SkillProblem,
    },
    /// The server does not offer the method: it did not declare it (nothing sent) or
    /// answered that it does not know it (-32601).
    #[error("server `{server}` does not offer {method}")]
    NotOffered {
        /// The server.
        server: String,
        /// The method, e.g. `resources/directory/read`.
        method: &'static str,
    },
    /// The run holds [`MAX_SUBSCRIPTIONS`](crate::MAX_SUBSCRIPTIONS) on this server already.
    #[error("server `{server}`: more than {limit} subscriptions (the subscription limit)")]
    TooManySubscriptions {
        /// The server.
        server: String,
        /// The limit.
        limit: usize,
    },
}

impl FeatureError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            Self::UnknownServer { server }
            | Self::Denied { server, .. }
            | Self::Rpc { server, .. }
            | Self::Failed { server, .. }
            | Self::Transport { server, .. }
            | Self::Timeout { server, .. }
            | Self::ListLimit { server, .. }
            | Self::TooLarge { server, .. }
            | Self::NotBase64 { server, .. }
            | Self::InvalidUri { server, .. }
            | Self::UnknownPrompt { server, .. }
            | Self::MissingArguments { server, .. }
            | Self::TooManySubscriptions { server, .. }
            | Self::NotOffered { server, .. }
            | Self::Skill { server, .. } => server,
        }
    }

    /// The outcome an event records for this error.
    pub(crate) fn outcome(&self) -> agent_core::CallOutcome {
        use agent_core::CallOutcome as O;
        match self {
            Self::Denied { .. } => O::Denied,
            Self::MissingArguments { .. } | Self::InvalidUri { .. } => O::InvalidArguments,
            Self::UnknownPrompt { .. } | Self::NotOffered { .. } => O::UnknownTool,
            Self::Rpc { .. } => O::ToolError,
            Self::Timeout { .. } => O::Timeout,
            Self::UnknownServer { .. } => O::Configuration,
            Self::Skill { problem, .. } => match problem {
                SkillProblem::Unknown
                | SkillProblem::Ambiguous { .. }
                | SkillProblem::NotListed => O::InvalidArguments,
                _ => O::Transport,
            },
            Self::Failed { .. }
            | Self::Transport { .. }
            | Self::ListLimit { .. }
            | Self::TooLarge { .. }
            | Self::NotBase64 { .. }
            | Self::TooManySubscriptions { .. } => O::Transport,
        }
    }
}

/// `, file `uri``, or nothing.
fn file_part(file: Option<&str>) -> String {
    file.map(|f| format!(", file `{f}`")).unwrap_or_default()
}
