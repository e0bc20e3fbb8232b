//! The seam between the MCP client and its transports.
//!
//! The client (orchestration) opens every session through a [`Connector`]: given a validated
//! [`ServerSpec`], a connector returns a [`Connection`] — a type-erased rmcp client transport,
//! ready for the MCP handshake, plus a [`ConnectionHandle`] that owns whatever the transport
//! holds outside the protocol (a child process, a connection pool) and releases it on
//! [`ConnectionHandle::shutdown`] or, as a safety net, on drop.
//!
//! Transport crates (`mcp-transport-stdio`, `mcp-transport-http`, or one outside this
//! workspace) implement [`Connector`]; the client depends only on this crate and picks a
//! connector for each spec from the [`Connectors`] registry, so a deployment picks transports
//! with features, a spec whose built-in transport is not compiled in is refused with
//! [`ConnectError::Unsupported`] (naming the missing feature), and a custom transport needs no
//! change here or in the client. The `testing` feature adds an in-memory connector
//! (`testing::InMemoryConnector`).
//!
//! # Architecture invariant
//!
//! This crate knows the protocol layer (rmcp's transport trait) and server specs, nothing else:
//! no catalog, no process spawning, no HTTP stack.

mod erased;
mod error;
mod registry;
#[cfg(feature = "testing")]
pub mod testing;

use std::time::Duration;

use async_trait::async_trait;
use mcp_config::{ServerSpec, TransportKind};

pub use erased::{BoxTransport, Tap};
pub use error::{ConnectError, TransportError};
pub use registry::Connectors;

/// The workspace's one boxed error type, for cause chains (defined in `agent-core`).
pub use mcp_config::BoxError;

/// Opens transports of one kind.
///
/// ```
/// use async_trait::async_trait;
/// use mcp_config::{ServerSpec, TransportKind};
/// use mcp_connector::{ConnectError, Connection, Connector};
///
/// /// A connector that refuses everything: a stand-in for a transport that is not built in.
/// struct Refuse;
/// #[async_trait]
/// impl Connector for Refuse {
///     fn kind(&self) -> TransportKind {
///         TransportKind::Stdio
///     }
///     async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
///         Err(ConnectError::Unsupported { server: spec.name.clone(), kind: self.kind(), feature: "stdio" })
///     }
/// }
/// ```
#[async_trait]
pub trait Connector: Send + Sync {
    /// The transport kind this connector opens.
    fn kind(&self) -> TransportKind;

    /// Opens a transport to `spec`'s server: spawns the process or prepares the HTTP client.
    /// The MCP handshake is the caller's job. Must not block longer than the caller's connect
    /// timeout needs: the caller wraps this future in that timeout and drops it on expiry, so
    /// dropping it must release anything half-opened.
    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError>;
}

/// An open transport to one server.
#[derive(Debug)]
pub struct Connection {
    /// The protocol transport, ready for the handshake.
    pub transport: BoxTransport,
    /// What the transport holds outside the protocol.
    pub handle: Box<dyn ConnectionHandle>,
}

impl Connection {
    /// A connection from any rmcp client transport and its handle.
    pub fn new<T>(transport: T, handle: impl ConnectionHandle + 'static) -> Self
    where
        T: rmcp::transport::Transport<rmcp::RoleClient> + 'static,
    {
        Self {
            transport: BoxTransport::new(transport),
            handle: Box::new(handle),
        }
    }
}

/// Owns what a transport holds outside the protocol, for the life of a session.
///
/// Dropping the handle must release everything synchronously (kill the process group, drop
/// the pool); [`shutdown`](Self::shutdown) is the graceful path.
#[async_trait]
pub trait ConnectionHandle: Send + Sync + std::fmt::Debug {
    /// Releases everything gracefully, after the protocol transport was closed. For a child
    /// process: wait up to `grace` for it to exit, then terminate, then kill its process group.
    async fn shutdown(&self, grace: Duration);

    /// Recent diagnostic output (a child's stderr tail), for error messages. Never secret
    /// values from the spec.
    fn diagnostics(&self) -> Option<String> {
        None
    }

    /// The operating-system process id of the server, for a child process.
    fn pid(&self) -> Option<u32> {
        None
    }

    /// Why the transport ended the session on its own, when it did (a server's message over a
    /// size or depth limit, say). The client reports it as the cause of the requests that
    /// failed with the session, instead of a bare "the session closed".
    fn failure(&self) -> Option<BoxError> {
        None
    }

    /// How many requests of the session failed in the transport so far (refused, timed out, an
    /// answer over a limit, …), whether or not the session went on: the client takes a count
    /// that moved as a sign that what it knew of the server may no longer hold. Transports
    /// whose failures end the session count none.
    fn failures(&self) -> u64 {
        0
    }

    /// A signal that changes each time the transport renews the protocol session on its own
    /// (an HTTP session re-initialised after a 404, or a reconnect). Notifications sent while
    /// the session was down — `tools/list_changed` among them — may be lost, so the client
    /// re-lists the server's tools when it changes. `None`: this transport never renews.
    fn renewals(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// Reports every secret the session obtains at run time (an OAuth token its auth hook is
    /// issued or loads), now and later, to `sink`: the client gives the sink of each run that
    /// uses the session, so the run's [`Redactor`](mcp_config::Redactor) replaces them. The
    /// transport keeps only a weak reference. Transports that obtain no secret ignore it.
    fn report_secrets_to(&self, sink: &std::sync::Arc<dyn mcp_config::SecretSink>) {
        let _ = sink;
    }
}

/// A handle that holds nothing (for transports whose protocol close releases everything).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHandle;

#[async_trait]
impl ConnectionHandle for NoHandle {
    async fn shutdown(&self, _grace: Duration) {}
}
