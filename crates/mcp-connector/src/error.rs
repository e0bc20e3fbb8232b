//! The connector seam's errors: opening a transport ([`ConnectError`]) and a running
//! transport's failure ([`TransportError`]).

use std::borrow::Cow;

use mcp_config::TransportKind;

use crate::BoxError;

/// Why a transport could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The spec needs a transport this build does not include.
    #[error(
        "server `{server}` uses the {kind} transport, which this build does not include (enable the `{feature}` feature)"
    )]
    Unsupported {
        /// The server.
        server: String,
        /// Its transport kind.
        kind: TransportKind,
        /// The cargo feature that adds the transport.
        feature: &'static str,
    },
    /// No connector is registered for the spec's transport kind.
    #[error(
        "server `{server}` uses the {kind} transport, for which no connector is registered (registered: {})",
        kinds(registered)
    )]
    NoConnector {
        /// The server.
        server: String,
        /// Its transport kind.
        kind: TransportKind,
        /// The kinds that are registered.
        registered: Vec<TransportKind>,
    },
    /// The spec is not usable by this connector (e.g. an environment secret is missing).
    #[error("server `{server}`: {message}")]
    Config {
        /// The server.
        server: String,
        /// What is wrong (never a secret value).
        message: String,
    },
    /// Spawning the process or opening the connection failed.
    #[error("server `{server}`: could not open the {kind} transport")]
    Io {
        /// The server.
        server: String,
        /// Its transport kind.
        kind: TransportKind,
        /// The cause.
        #[source]
        source: BoxError,
    },
}

fn kinds(kinds: &[TransportKind]) -> String {
    if kinds.is_empty() {
        return "none".into();
    }
    kinds
        .iter()
        .map(TransportKind::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl ConnectError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            Self::Unsupported { server, .. }
            | Self::NoConnector { server, .. }
            | Self::Config { server, .. }
            | Self::Io { server, .. } => server,
        }
    }
}

/// The error of a [`BoxTransport`](crate::BoxTransport): the inner transport's error, shown
/// as it is (its message and its `source()` are the inner error's own), so a readable cause
/// reaches the reader once and the transport's Rust type never does (that is
/// [`transport_name`](Self::transport_name), for diagnostics).
#[derive(Debug)]
pub struct TransportError {
    name: Cow<'static, str>,
    source: BoxError,
}

impl TransportError {
    pub(crate) fn new(name: Cow<'static, str>, source: BoxError) -> Self {
        Self { name, source }
    }

    /// The inner transport's name (its Rust type, as rmcp names transports).
    pub fn transport_name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.source, f)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}
