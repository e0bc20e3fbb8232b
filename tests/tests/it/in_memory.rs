//! A connector that serves rmcp server handlers in memory, for tests of what servers send
//! (shared by the hostile-server tests through `#[path]`; each uses part of it).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_client::{Connectors, McpClient, McpClientBuilder};
use mcp_config::{Config, Secret, ServerSpec, StdioSpec, TransportKind, TransportSpec};
use mcp_connector::{ConnectError, Connection, Connector, NoHandle};
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::DuplexStream;

/// Serves a new in-memory server for every connection, whatever the spec.
#[derive(Clone)]
pub(crate) struct InMemory(Arc<dyn Fn() -> DuplexStream + Send + Sync>);

impl InMemory {
    /// Every connection gets a clone of `handler`.
    pub(crate) fn new<S: rmcp::ServerHandler + Clone>(handler: S) -> Self {
        Self(Arc::new(move || {
            mcp_test_kit::serve_handler_in_memory(handler.clone(), Default::default())
        }))
    }
}

#[async_trait]
impl Connector for InMemory {
    fn kind(&self) -> TransportKind {
        TransportKind::Stdio
    }

    async fn connect(&self, _spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let (read, write) = tokio::io::split((self.0)());
        Ok(Connection::new(
            AsyncRwTransport::new_client(read, write),
            NoHandle,
        ))
    }
}

/// A stdio spec named `name` (served in memory by [`InMemory`]) with `env` and a connect
/// timeout.
pub(crate) fn spec(name: &str, env: &[(&str, &str)], connect_timeout: Duration) -> ServerSpec {
    let mut stdio = StdioSpec::new("unused", Vec::<String>::new());
    for (key, value) in env {
        stdio.env.insert((*key).into(), Secret::new(*value));
    }
    let mut spec = ServerSpec::new(name, TransportSpec::Stdio(stdio));
    spec.connect_timeout = Some(connect_timeout);
    spec
}

/// A client builder over `specs`, connecting through `connector`, with its events in `events`.
pub(crate) fn builder(
    specs: Vec<ServerSpec>,
    connector: InMemory,
    events: Arc<integration_tests::harness::Events>,
) -> McpClientBuilder {
    builder_for(Config::new(specs).expect("valid specs"), connector, events)
}

/// [`builder`] over a whole configuration.
pub(crate) fn builder_for(
    config: Config,
    connector: InMemory,
    events: Arc<integration_tests::harness::Events>,
) -> McpClientBuilder {
    McpClient::builder(config)
        .connectors(Connectors::new().with(connector))
        .events(events)
}
