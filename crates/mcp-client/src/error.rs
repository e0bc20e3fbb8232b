//! Errors of the MCP client.

use std::time::Duration;

use agent_core::HistoryError;
use mcp_catalog::CatalogError;
use mcp_connector::{BoxError, ConnectError};

use crate::list::{ListError, ListLimit};

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
    #[error("the run's MCP configuration is invalid")]
    Config(#[source] BoxError),
    /// A server failed and the run's policy is `fail_fast`. Shows as the session error, which
    /// names the server.
    #[error(transparent)]
    Server(SessionError),
    /// The run's history could not be opened (before any server was contacted) or, at
    /// [`McpRunner::shutdown`](crate::McpRunner::shutdown), written; the cause names the path.
    #[error("the run's history cannot be kept")]
    History(#[source] HistoryError),
    /// The native tools given to [`McpClientBuilder::native_tools`](crate::McpClientBuilder::native_tools)
    /// cannot join the catalog (two share a name, or one is named like the lazy surface).
    #[error("the native tools cannot join the catalog")]
    NativeTools(#[source] CatalogError),
}

/// A failure of the MCP exchange itself, told in words. rmcp's own errors name the Rust types
/// of the transport stack; the client shows this instead, unless the transport recorded the
/// real cause ([`ConnectionHandle::failure`](mcp_connector::ConnectionHandle::failure)),
/// which is shown as it is (docs/upstream.md#rmcp-error-type-names).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The connection closed before the exchange was done.
    #[error("the connection closed while {during}")]
    Closed {
        /// What the client was doing.
        during: String,
    },
    /// The transport could not carry a message.
    #[error("the transport failed while {during}")]
    Transport {
        /// What the client was doing.
        during: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Rejected {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message (scrubbed and bounded).
        message: String,
    },
    /// The two sides share no protocol version.
    #[error("the server speaks no protocol version this client does")]
    NoCommonVersion,
    /// The server's answer does not follow the protocol.
    #[error("the server's answer does not follow the protocol")]
    Unexpected,
}

impl ProtocolError {
    /// The words for a failed handshake.
    pub(crate) fn of_initialize(error: &rmcp::service::ClientInitializeError) -> Self {
        use rmcp::service::ClientInitializeError as E;
        match error {
            E::ConnectionClosed(_) => Self::Closed {
                during: "initialising".into(),
            },
            E::TransportError { context, .. } => Self::Transport {
                during: during(context),
            },
            E::JsonRpcError(e) => Self::Rejected {
                code: e.code.0,
                message: e.message.to_string(),
            },
            E::NoCompatibleProtocolVersion { .. } => Self::NoCommonVersion,
            // The server did not discover; what counts is why `initialize` failed too.
            E::LegacyFallbackFailed { fallback, .. } => Self::of_initialize(fallback),
            _ => Self::Unexpected,
        }
    }

    /// The words for a failed request of a live session.
    pub(crate) fn of_service(error: &rmcp::service::ServiceError, doing: &str) -> Self {
        use rmcp::service::ServiceError as E;
        match error {
            E::TransportClosed => Self::Closed {
                during: doing.into(),
            },
            E::McpError(e) => Self::Rejected {
                code: e.code.0,
                message: e.message.to_string(),
            },
            E::TransportSend(_) => Self::Transport {
                during: doing.into(),
            },
            _ => Self::Unexpected,
        }
    }
}

/// rmcp's context of a transport failure ("send initialize request") as words.
fn during(context: &str) -> String {
    match context {
        c if c.contains("initialized") => "sending the initialized notification".into(),
        c if c.contains("initialize") => "sending the initialize request".into(),
        c if c.contains("discover") => "sending server/discover".into(),
        _ => "initialising".into(),
    }
}

impl ListError {
    /// The failure as a session error of `server`: a broken bound, or the request's failure
    /// (the transport's recorded `failure` when it has one).
    pub(crate) fn into_session_error(
        self,
        server: &str,
        diagnostics: Option<String>,
        failure: Option<BoxError>,
    ) -> SessionError {
        match self {
            Self::Limit(limit) => SessionError::ListLimit {
                server: server.to_owned(),
                limit,
            },
            Self::Service(e) => SessionError::Discovery {
                server: server.to_owned(),
                diagnostics,
                source: failure.unwrap_or_else(|| {
                    Box::new(ProtocolError::of_service(&e, "listing the tools"))
                }),
            },
        }
    }
}
