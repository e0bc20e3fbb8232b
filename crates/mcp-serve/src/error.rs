//! The crate's one error type.

use std::net::SocketAddr;
use std::time::Duration;

/// Why serving could not start, or did not end cleanly.
///
/// What a downstream client sends never becomes a `ServeError`: a malformed, oversized or
/// unauthorised request is answered (an HTTP status, a JSON-RPC error or an `isError` result)
/// and the server goes on.
///
/// ```
/// use mcp_serve::ServeError;
///
/// let err = ServeError::InvalidOption {
///     option: "path",
///     reason: "must start with `/`".into(),
/// };
/// assert_eq!(err.to_string(), "invalid serve option `path`: must start with `/`");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The HTTP listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An option is unusable (a path, a URL, an origin, a zero limit).
    #[error("invalid serve option `{option}`: {reason}")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The client closed the connection or broke the protocol before the MCP session was
    /// initialised (stdio and other single-session transports).
    #[error("the MCP session did not start: {reason}")]
    Initialize {
        /// What happened, in words.
        reason: String,
    },
}

/// Why a request forwarded to a session's downstream client
/// ([`Downstream::elicit`](crate::Downstream::elicit)) got no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DownstreamError {
    /// The client did not answer within the bound (the request was cancelled).
    #[error("the downstream client did not answer within {}", humanize(*after))]
    Timeout {
        /// The bound.
        after: Duration,
    },
    /// The call whose stream the request rode ended (answered, failed or cancelled) before
    /// the client answered; the request was cancelled.
    #[error("the call that asked ended before the downstream client answered")]
    CallEnded,
    /// The session ended before the client answered.
    #[error("the downstream session ended before its client answered")]
    Closed,
    /// The client answered with a JSON-RPC error, or with something else than the answer
    /// asked for. Its text is the client's choice: bounded, control characters removed.
    #[error("the downstream client refused the request: {reason}")]
    Refused {
        /// What it said.
        reason: String,
    },
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
