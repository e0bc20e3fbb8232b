//! Errors shared across the agent side. Messages name the server and the tool; they never carry
//! a secret.

use std::path::PathBuf;
use std::time::Duration;

/// A boxed error for cause chains that cross crate boundaries.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

fn on_server(server: &Option<String>) -> String {
    server
        .as_deref()
        .map(|s| format!(" on server `{s}`"))
        .unwrap_or_default()
}

fn suggest(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            suggestions
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Why one tool call did not produce an output.
///
/// Every variant names the tool (as the model called it, or the real external tool) and, when
/// one is involved, the server. `Display` is written for the model to read and act upon.
///
/// ```
/// use agent_core::ToolError;
/// let err = ToolError::unknown_tool("github__create_isue", vec!["github__create_issue".into()]);
/// assert_eq!(
///     err.to_string(),
///     "unknown tool `github__create_isue`; did you mean `github__create_issue`?"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool has that name.
    #[error("unknown tool `{tool}`{}", suggest(suggestions))]
    UnknownTool {
        /// The name that was asked for.
        tool: String,
        /// Close matches, best first.
        suggestions: Vec<String>,
    },
    /// The arguments do not match the tool's input schema.
    #[error("invalid arguments for tool `{tool}`{}: {message}", on_server(server))]
    InvalidArguments {
        /// The server, for an external tool.
        server: Option<String>,
        /// The tool.
        tool: String,
        /// What is wrong, field by field.
        message: String,
    },
    /// Policy or approval refused the call.
    #[error("call of tool `{tool}`{} denied: {reason}", on_server(server))]
    Denied {
        /// The server, for an external tool.
        server: Option<String>,
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The tool ran and reported an error of its own (MCP `isError`).
    #[error("tool `{tool}`{} failed: {message}", on_server(server))]
    Invocation {
        /// The server, for an external tool.
        server: Option<String>,
        /// The tool.
        tool: String,
        /// The tool's own error text.
        message: String,
    },
    /// The call did not finish within its timeout.
    #[error("tool `{tool}`{} timed out after {:.1} s", on_server(server), after.as_secs_f64())]
    Timeout {
        /// The server, for an external tool.
        server: Option<String>,
        /// The tool.
        tool: String,
        /// The timeout that expired.
        after: Duration,
    },
    /// The connection to the server failed during the call.
    #[error("transport error calling tool `{tool}`{}", on_server(server))]
    Transport {
        /// The server.
        server: Option<String>,
        /// The tool.
        tool: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// The runner or a tool is misconfigured.
    #[error(
        "configuration error for tool `{tool}`{}: {message}",
        on_server(server)
    )]
    Configuration {
        /// The server, for an external tool.
        server: Option<String>,
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

impl ToolError {
    /// An [`UnknownTool`](Self::UnknownTool) error.
    pub fn unknown_tool(tool: impl Into<String>, suggestions: Vec<String>) -> Self {
        Self::UnknownTool {
            tool: tool.into(),
            suggestions,
        }
    }

    /// The tool this error is about.
    pub fn tool(&self) -> &str {
        match self {
            Self::UnknownTool { tool, .. }
            | Self::InvalidArguments { tool, .. }
            | Self::Denied { tool, .. }
            | Self::Invocation { tool, .. }
            | Self::Timeout { tool, .. }
            | Self::Transport { tool, .. }
            | Self::Configuration { tool, .. } => tool,
        }
    }

    /// The server this error is about, if any.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::UnknownTool { .. } => None,
            Self::InvalidArguments { server, .. }
            | Self::Denied { server, .. }
            | Self::Invocation { server, .. }
            | Self::Timeout { server, .. }
            | Self::Transport { server, .. }
            | Self::Configuration { server, .. } => server.as_deref(),
        }
    }
}

/// Why a runner could not be opened.
///
/// ```
/// use agent_core::RunnerError;
/// let err = RunnerError::Configuration { message: "server `git`: unknown field `comand`".into() };
/// assert!(err.to_string().contains("comand"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// The run's configuration is invalid.
    #[error("configuration error: {message}")]
    Configuration {
        /// Every problem found, already formatted.
        message: String,
    },
    /// A server could not be connected, initialised or listed.
    #[error("server `{server}` unavailable")]
    Connect {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// Anything else, with its cause.
    #[error("{message}")]
    Other {
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Option<BoxError>,
    },
}

/// An error and its causes on one line, for people: `what failed: why: why…`.
///
/// A cause whose text was already told is skipped, and a cause that begins by naming a subject
/// already named (`server `x`: `, `tool `y`: `) has that prefix dropped, so the server and the
/// tool are named once however many layers report them.
///
/// ```
/// use std::fmt;
///
/// #[derive(Debug)]
/// struct Refused;
/// impl fmt::Display for Refused {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("server `web`: the connection was refused")
///     }
/// }
/// impl std::error::Error for Refused {}
///
/// #[derive(Debug)]
/// struct Initialize(Refused);
/// impl fmt::Display for Initialize {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("server `web`: initialize failed")
///     }
/// }
/// impl std::error::Error for Initialize {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// assert_eq!(
///     agent_core::error_chain(&Initialize(Refused)),
///     "server `web`: initialize failed: the connection was refused"
/// );
/// ```
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let mut text = cause.to_string();
        while let Some(rest) = strip_told_subject(&out, &text) {
            text = rest;
        }
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// `text` without a leading ``server `x`: `` or ``tool `y`: `` that `told` already names.
fn strip_told_subject(told: &str, text: &str) -> Option<String> {
    let subject_end = ["server `", "tool `"]
        .iter()
        .find(|p| text.starts_with(*p))
        .and_then(|p| text[p.len()..].find('`').map(|i| p.len() + i + 1))?;
    let subject = &text[..subject_end];
    let rest = text[subject_end..].strip_prefix(": ")?;
    told.contains(subject).then(|| rest.to_owned())
}

/// Why the model could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The model endpoint failed.
    #[error("model request failed: {message}")]
    Request {
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Option<BoxError>,
    },
    /// A scripted model ran out of turns, or the endpoint returned nothing usable.
    #[error("model returned no usable answer: {0}")]
    Unusable(String),
}

/// Why a stored output could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// No output of this run has that handle.
    #[error("unknown output handle `{handle}`: use the handle from a cut output's marker")]
    UnknownHandle {
        /// The handle asked for.
        handle: String,
    },
    /// The output existed but is no longer kept (the run ended, or newer outputs took its
    /// room).
    #[error("output `{handle}` has expired and can no longer be read")]
    Expired {
        /// The handle asked for.
        handle: String,
    },
    /// The output was spilled to disk and later dropped to keep the spilled outputs under
    /// `max_spill_bytes`.
    #[error(
        "output `{handle}` was dropped to keep spilled outputs under max_spill_bytes \
         ({max_spill_bytes} bytes); call the tool again for a fresh output"
    )]
    Dropped {
        /// The handle asked for.
        handle: String,
        /// The limit.
        max_spill_bytes: u64,
    },
    /// The offset lies beyond the output's end.
    #[error("offset {offset} is past the end of output `{handle}` ({total} bytes)")]
    OffsetPastEnd {
        /// The handle.
        handle: String,
        /// The offset asked for.
        offset: u64,
        /// The output's size.
        total: u64,
    },
    /// The output's temporary file could not be read.
    #[error("cannot read output `{handle}` from its temporary file")]
    Io {
        /// The handle.
        handle: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A history that could not be opened, written or read. Names the path; never holds a line's
/// content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The directory or one of its files could not be created or opened for writing.
    #[error("cannot create history `{}`", path.display())]
    Create {
        /// The directory or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Another writer has the session open.
    #[error(
        "history `{}` is already being written (lock file `{}`; delete it if no writer is running)",
        dir.display(),
        lock.display()
    )]
    Busy {
        /// The session directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// A line could not be written or the files could not be synced.
    #[error("cannot write history file `{}`", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be read.
    #[error("cannot read history file `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The history was closed.
    #[error("history `{}` is closed", dir.display())]
    Closed {
        /// The session directory.
        dir: PathBuf,
    },
}

/// Why [`EventReceiver::recv`](crate::EventReceiver::recv) returned no event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventRecvError {
    /// The subscriber fell behind and the oldest events were dropped for it; the next call
    /// returns the oldest event still kept.
    #[error("the event subscriber fell behind and missed {missed} events")]
    Lagged {
        /// How many events it missed.
        missed: u64,
    },
    /// The bus is gone and every event was read.
    #[error("the event bus is closed")]
    Closed,
}

/// Why an agent run ended without an answer.
///
/// ```
/// use agent_core::AgentError;
/// let err = AgentError::StepLimit { max_steps: 20 };
/// assert_eq!(
///     err.to_string(),
///     "no final answer within 20 steps: the model kept asking for tool calls"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model failed to answer.
    #[error("the model failed at step {step}")]
    Model {
        /// The step it was asked at (1 for the first).
        step: u32,
        /// Why.
        #[source]
        source: ModelError,
    },
    /// The model was still asking for tool calls when the step limit was reached.
    #[error("no final answer within {max_steps} steps: the model kept asking for tool calls")]
    StepLimit {
        /// The limit.
        max_steps: u32,
    },
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
}
