//! An in-memory connector for tests (feature `testing`): servers served on in-process pipes,
//! reached through the same registry, orchestration and catalog as real transports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mcp_config::{CustomSpec, ServerSpec, TransportKind, TransportSpec};
use tokio::io::DuplexStream;

use crate::{ConnectError, Connection, Connector, NoHandle};

/// The transport kind of [`InMemoryConnector`].
pub const IN_MEMORY: &str = "in_memory";

type Serve = Arc<dyn Fn() -> DuplexStream + Send + Sync>;

/// Opens in-memory servers by name: each [`server`](Self::server) is a function that starts
/// a server on a fresh pipe and returns the client's end (e.g. the test kit's
/// `serve_in_memory`). Specs are `transport = "in_memory"` ([`spec`]); the spec's name picks
/// the server.
///
/// ```
/// use mcp_connector::Connectors;
/// use mcp_connector::testing::{InMemoryConnector, spec};
///
/// let connector = InMemoryConnector::new().server("echo", || tokio::io::duplex(1024).0);
/// let connectors = Connectors::new().with(connector);
/// assert!(connectors.for_spec(&spec("echo")).is_ok());
/// ```
#[derive(Clone, Default)]
pub struct InMemoryConnector {
    servers: Arc<Mutex<HashMap<String, Serve>>>,
}

impl std::fmt::Debug for InMemoryConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .servers
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("InMemoryConnector")
            .field("servers", &names)
            .finish()
    }
}

impl InMemoryConnector {
    /// No servers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the server `name`, started by `serve` on each connect.
    #[must_use]
    pub fn server(
        self,
        name: impl Into<String>,
        serve: impl Fn() -> DuplexStream + Send + Sync + 'static,
    ) -> Self {
        if let Ok(mut servers) = self.servers.lock() {
            servers.insert(name.into(), Arc::new(serve));
        }
        self
    }
}

/// A spec for the in-memory server `name`.
pub fn spec(name: &str) -> ServerSpec {
    ServerSpec::new(name, TransportSpec::Custom(CustomSpec::new(IN_MEMORY)))
}

#[async_trait]
impl Connector for InMemoryConnector {
    fn kind(&self) -> TransportKind {
        TransportKind::Other(IN_MEMORY.into())
    }

    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let serve = self
            .servers
            .lock()
            .ok()
            .and_then(|s| s.get(&spec.name).cloned())
            .ok_or_else(|| ConnectError::Config {
                server: spec.name.clone(),
                message: "no in-memory server of that name".into(),
            })?;
        let (read, write) = tokio::io::split(serve());
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write);
        Ok(Connection::new(transport, NoHandle))
    }
}
