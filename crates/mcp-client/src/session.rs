//! One live MCP session: opened through a connector, initialised, listed, called, closed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_catalog::{SessionError as CallError, ToolSession};
use mcp_config::ServerSpec;
use mcp_connector::{BoxError, ConnectError, Connection, ConnectionHandle, Connector};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use tokio::sync::{Mutex, watch};

use crate::SessionError;
use crate::error::stderr_suffix;
use crate::handler::SessionHandler;

/// What a server said about itself in its initialize result.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ServerIdentity {
    /// `serverInfo.name`, when the server gave one. Policy allowlists match this, not the
    /// configured key.
    pub name: Option<String>,
    /// `serverInfo.version`.
    pub version: Option<String>,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// The server's instructions for the model.
    pub instructions: Option<String>,
    /// The server's capabilities, as JSON.
    pub capabilities: serde_json::Value,
}

/// The ways to reach servers: one connector per transport kind.
#[derive(Clone, Default)]
pub struct Connectors {
    connectors: Vec<Arc<dyn Connector>>,
}

impl std::fmt::Debug for Connectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.connectors.iter().map(|c| c.kind()))
            .finish()
    }
}

impl Connectors {
    /// No connectors: every spec is refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a connector; a later one for the same kind replaces an earlier one.
    pub fn with(mut self, connector: impl Connector + 'static) -> Self {
        self.connectors.retain(|c| c.kind() != connector.kind());
        self.connectors.push(Arc::new(connector));
        self
    }

    /// The connector for `spec`'s transport.
    fn for_spec(&self, spec: &ServerSpec) -> Result<&dyn Connector, ConnectError> {
        let kind = spec.kind();
        self.connectors
            .iter()
            .find(|c| c.kind() == kind)
            .map(|c| &**c)
            .ok_or_else(|| {
                let feature = match kind {
                    mcp_config::TransportKind::Stdio => "stdio",
                    _ => "http",
                };
                ConnectError::Unsupported {
                    server: spec.name.clone(),
                    kind,
                    feature,
                }
            })
    }
}

/// A live session with one server.
#[derive(Debug)]
pub struct Session {
    spec: Arc<ServerSpec>,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, SessionHandler>>>,
    handle: Box<dyn ConnectionHandle>,
    identity: ServerIdentity,
    tools_changed: watch::Receiver<u64>,
}

impl Session {
    /// Opens a session: connect, initialise, list every tool page, all within `connect_timeout`.
    /// On any failure or expiry, whatever was opened is released (a child process is killed).
    pub(crate) async fn open(
        connectors: &Connectors,
        spec: Arc<ServerSpec>,
        connect_timeout: Duration,
    ) -> Result<(Self, Vec<Tool>), SessionError> {
        let connector = connectors.for_spec(&spec)?;
        // The diagnostics of a half-open session are read through this slot when the timeout
        // drops the future that owns the connection.
        let diag: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let attempt = Self::open_inner(connector, spec.clone(), diag.clone());
        match tokio::time::timeout(connect_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(SessionError::ConnectTimeout {
                server: spec.name.clone(),
                after: connect_timeout,
                diagnostics: diag.lock().ok().and_then(|d| d.clone()),
            }),
        }
    }

    async fn open_inner(
        connector: &dyn Connector,
        spec: Arc<ServerSpec>,
        diag: Arc<std::sync::Mutex<Option<String>>>,
    ) -> Result<(Self, Vec<Tool>), SessionError> {
        let Connection { transport, handle } = connector.connect(&spec).await?;
        // Keeps the handle's stderr tail reachable if this future is dropped by the timeout.
        struct DiagOnDrop<'a>(
            &'a dyn ConnectionHandle,
            Arc<std::sync::Mutex<Option<String>>>,
        );
        impl Drop for DiagOnDrop<'_> {
            fn drop(&mut self) {
                if let Ok(mut slot) = self.1.lock() {
                    *slot = self.0.diagnostics();
                }
            }
        }
        let (handler, tools_changed) = SessionHandler::new();
        let (service, tools) = {
            let _diag = DiagOnDrop(&*handle, diag);
            let service = match rmcp::serve_client(handler, transport).await {
                Ok(service) => service,
                Err(e) => {
                    return Err(SessionError::Initialize {
                        server: spec.name.clone(),
                        diagnostics: release(&*handle).await,
                        source: Box::new(e),
                    });
                }
            };
            match service.peer().list_all_tools().await {
                Ok(tools) => (service, tools),
                Err(e) => {
                    drop(service);
                    return Err(SessionError::Discovery {
                        server: spec.name.clone(),
                        diagnostics: release(&*handle).await,
                        source: Box::new(e),
                    });
                }
            }
        };
        let peer = service.peer().clone();
        let identity = identity_of(&peer);
        let session = Self {
            spec,
            peer,
            service: Mutex::new(Some(service)),
            handle,
            identity,
            tools_changed,
        };
        Ok((session, tools))
    }

    /// The spec this session was opened from.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The configured name of the server.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the server said about itself.
    pub fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    /// The operating-system pid of a child-process server.
    pub fn pid(&self) -> Option<u32> {
        self.handle.pid()
    }

    /// Recent stderr of a child-process server.
    pub fn diagnostics(&self) -> Option<String> {
        self.handle.diagnostics()
    }

    /// A receiver that changes whenever the server announces a new tool list.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_changed.clone()
    }

    /// A receiver that changes whenever the transport renewed the protocol session on its own
    /// (see [`ConnectionHandle::renewals`]); `None` for transports that never do.
    pub fn renewals(&self) -> Option<watch::Receiver<u64>> {
        self.handle.renewals()
    }

    /// Lists every tool again, across all pages, within the server's connect timeout.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        let timeout = self
            .spec
            .connect_timeout
            .unwrap_or(mcp_config::DEFAULT_CONNECT_TIMEOUT);
        match tokio::time::timeout(timeout, self.peer.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(SessionError::Discovery {
                server: self.spec.name.clone(),
                diagnostics: self.handle.diagnostics(),
                source: Box::new(e),
            }),
            Err(_) => Err(SessionError::ConnectTimeout {
                server: self.spec.name.clone(),
                after: timeout,
                diagnostics: self.handle.diagnostics(),
            }),
        }
    }

    /// Calls a tool with the server's call timeout. On expiry the request is abandoned, which
    /// sends `notifications/cancelled` to the server.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, CallError> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let timeout = self.spec.call_timeout;
        match tokio::time::timeout(timeout, self.peer.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::Timeout { timeout })) => {
                Err(CallError::Timeout { after: timeout })
            }
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Rpc {
                code: e.code.0,
                message: e.message.into_owned(),
            }),
            Ok(Err(ServiceError::TransportClosed)) => {
                match stderr_suffix(self.handle.diagnostics().as_deref()) {
                    suffix if suffix.is_empty() => Err(CallError::Closed),
                    suffix => Err(CallError::transport(format!("the session closed{suffix}"))),
                }
            }
            Ok(Err(e)) => Err(CallError::Transport(self.with_stderr(e))),
            Err(_) => Err(CallError::Timeout { after: timeout }),
        }
    }

    fn with_stderr(&self, e: ServiceError) -> BoxError {
        match stderr_suffix(self.handle.diagnostics().as_deref()) {
            suffix if suffix.is_empty() => Box::new(e),
            suffix => format!("{e}{suffix}").into(),
        }
    }

    /// Closes the session: ends the protocol session (closing stdin or sending HTTP DELETE),
    /// then releases the transport's resources, giving a child `grace` to exit before it is
    /// terminated and killed. Idempotent.
    pub async fn close(&self, grace: Duration) {
        let service = self.service.lock().await.take();
        if let Some(service) = service {
            // Bounded: a transport that cannot close cleanly is dropped, which tears it down.
            let _ = tokio::time::timeout(grace, service.cancel()).await;
        }
        self.handle.shutdown(grace).await;
    }
}

/// Releases the connection of a session that failed to open, then reads its diagnostics.
///
/// A server that fails the handshake has often just written why on stderr and exited; its
/// stdout closing reaches the client before the last stderr lines do, so diagnostics read at
/// once would miss them. Shutting the handle down first (the server already lost its stdin:
/// no grace, straight to SIGTERM if it still runs) waits for the exit and drains stderr.
async fn release(handle: &dyn ConnectionHandle) -> Option<String> {
    handle.shutdown(Duration::ZERO).await;
    handle.diagnostics()
}

fn identity_of(peer: &Peer<RoleClient>) -> ServerIdentity {
    let Some(info) = peer.peer_info() else {
        return ServerIdentity::default();
    };
    ServerIdentity {
        name: info.server_info.as_ref().map(|i| i.name.clone()),
        version: info.server_info.as_ref().map(|i| i.version.clone()),
        protocol_version: info.protocol_version.to_string(),
        instructions: info.instructions.clone(),
        capabilities: serde_json::to_value(&info.capabilities).unwrap_or_default(),
    }
}

#[async_trait]
impl ToolSession for Session {
    async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, CallError> {
        Session::call_tool(self, tool, arguments).await
    }
}
