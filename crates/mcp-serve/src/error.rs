//! The crate's one error type.

use std::net::SocketAddr;

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
