//! Errors of the MCP client.

use std::time::Duration;

use mcp_connector::{BoxError, ConnectError};

use crate::ListLimit;

/// `"; server stderr (tail):\n…"` for a non-empty stderr tail, else nothing: the one way this
/// crate attaches a server's diagnostics to a message.
pub(crate) fn stderr_suffix(diagnostics: Option<&str>) -> String {
    match diagnostics {
        Some(d) if !d.trim().is_empty() => format!("; server stderr (tail):\n{}", d.trim_end()),
        _ => String::new(),
    }
}

fn with_diagnostics(diagnostics: &Option<String>) -> String {
    stderr_suffix(diagnostics.as_deref())
}

/// Why one server could not be opened or used.
///
/// Every text a server chose (its error messages, its stderr tail) is scrubbed of the run's
/// known secret values; a cause that held one is replaced by a [`Scrubbed`](crate::Scrubbed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The transport could not be opened.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The MCP handshake failed.
    #[error(
        "server `{server}`: initialize failed{}",
        with_diagnostics(diagnostics)
    )]
    Initialize {
        /// The server.
        server: String,
        /// Recent stderr of a child process.
        diagnostics: Option<String>,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// Listing the server's tools failed.
    #[error(
        "server `{server}`: tools/list failed{}",
        with_diagnostics(diagnostics)
    )]
    Discovery {
        /// The server.
        server: String,
        /// Recent stderr of a child process.
        diagnostics: Option<String>,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// The server's tool listing broke one of the client's [`ListLimits`](crate::ListLimits):
    /// the listing stopped at once.
    #[error("server `{server}`: tools/list stopped: {limit}")]
    ListLimit {
        /// The server.
        server: String,
        /// The bound it broke.
        limit: ListLimit,
    },
    /// The server's tools could not join the run's catalog (e.g. a name collides with another
    /// server's tool or a native tool).
    #[error("server `{server}`: its tools cannot join the catalog")]
    Catalog {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// Connecting, initialising and listing took longer than the connect timeout.
    #[error("server `{server}`: not ready within the connect timeout of {:.1} s{}", after.as_secs_f64(), with_diagnostics(diagnostics))]
    ConnectTimeout {
        /// The server.
        server: String,
        /// The timeout.
        after: Duration,
        /// Recent stderr of a child process, when known.
        diagnostics: Option<String>,
    },
}

impl SessionError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            Self::Connect(e) => e.server(),
            Self::Initialize { server, .. }
            | Self::Discovery { server, .. }
            | Self::ListLimit { server, .. }
            | Self::Catalog { server, .. }
            | Self::ConnectTimeout { server, .. } => server,
        }
    }
}

/// Why a runner could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The run's server selection or a spec is invalid.
    #[error("configuration error: {0}")]
    Config(#[source] BoxError),
    /// A server failed and the run's policy is `fail_fast`.
    #[error("server `{}` unavailable", .0.server())]
    Server(#[source] SessionError),
}
