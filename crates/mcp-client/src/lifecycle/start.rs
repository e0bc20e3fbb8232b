//! The start of a session: connect, start the lifecycle, list every tool page, all within the
//! connect timeout, and start again on a new connection when the first way in was the wrong one.
//!
//! The sequence:
//!
//! 0. a server that refused the probe before, for this client ([`super::known`]): `initialize`
//!    alone; if it refuses that (it changed meanwhile), it is forgotten and the sequence
//!    starts over at 1 on a new connection;
//! 1. `server/discover`, falling back to `initialize` ([`super::serve`]), or `initialize`
//!    alone when discovery is off; a server that refused the probe and answered `initialize`
//!    is remembered;
//! 2. a server that answered `server/discover` but refused the tool listing with a JSON-RPC
//!    error may only speak `initialize`: once more, on a new connection, with `initialize`
//!    alone;
//! 3. a probe that gave up on a server which then refused `initialize` met a modern server
//!    slow to start ([`super::gave_up_on_a_modern_server`]): once more, on a new connection,
//!    waiting for its discover result ([`super::serve_discover`]); if that fails too, the
//!    first failure is the one told.
//!
//! Every failed attempt releases its connection (a child process is killed) before the next.

use std::sync::Arc;
use std::time::Duration;

use agent_core::telemetry;
use mcp_config::ServerSpec;
use mcp_connector::{Connection, ConnectionHandle, Connector, Connectors};
use rmcp::model::Tool;
use rmcp::service::{RoleClient, RunningService, ServiceError};

use super::known::KnownLifecycles;
use crate::error::ProtocolError;
use crate::handler::SessionHandler;
use crate::list::{ListError, list_all_tools};
use crate::{ListLimits, SessionError};

/// How a session is to start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartOptions<'a> {
    /// The bounds on the tool listing.
    pub(crate) limits: ListLimits,
    /// Start with `server/discover` (else `initialize`), not `initialize` alone.
    pub(crate) discover: bool,
    /// What the client learned of its servers' lifecycles, and learns here.
    pub(crate) known: &'a KnownLifecycles,
}

/// A started session: its running service, its tools and its connection.
pub(crate) struct Started {
    pub(crate) service: RunningService<RoleClient, SessionHandler>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) handle: Box<dyn ConnectionHandle>,
}

/// The diagnostics of a half-open session, read through this slot when the timeout drops the
/// future that owns the connection.
type DiagnosticsSlot = Arc<std::sync::Mutex<Option<String>>>;

/// Starts a session with `spec`'s server through `connectors`: connect, lifecycle, tool
/// listing (see the [module docs](self)), all within `connect_timeout`. On any failure or
/// expiry, whatever was opened is released. Errors are not yet scrubbed.
pub(crate) async fn start_session(
    connectors: &Connectors,
    spec: &ServerSpec,
    connect_timeout: Duration,
    options: StartOptions<'_>,
    handler: SessionHandler,
) -> Result<Started, SessionError> {
    let connector = connectors.for_spec(spec)?;
    let diag = DiagnosticsSlot::default();
    let attempt = start_sequence(connector, spec, &diag, options, handler);
    let started = match tokio::time::timeout(connect_timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(SessionError::ConnectTimeout {
            server: spec.name.clone(),
            after: connect_timeout,
            diagnostics: diag.lock().ok().and_then(|d| d.clone()),
        }),
    };
    count_open(&spec.name, &started);
    started
}

/// Counts one open of `server`'s session in [`UPSTREAM_OPENS`](telemetry::UPSTREAM_OPENS) by
/// its outcome: `ok`, `timeout` (the connect timeout expired) or `error`.
fn count_open(server: &str, started: &Result<Started, SessionError>) {
    let outcome = match started {
        Ok(_) => "ok",
        Err(SessionError::ConnectTimeout { .. }) => "timeout",
        Err(_) => "error",
    };
    metrics::counter!(
        telemetry::UPSTREAM_OPENS,
        "server" => telemetry::server_label(Some(server)),
        "outcome" => outcome,
    )
    .increment(1);
}

/// The attempts of one start, in order (see the [module docs](self)).
async fn start_sequence(
    connector: &dyn Connector,
    spec: &ServerSpec,
    diag: &DiagnosticsSlot,
    options: StartOptions<'_>,
    handler: SessionHandler,
) -> Result<Started, SessionError> {
    let attempt =
        |lifecycle| start_once(connector, spec, diag, options, handler.clone(), lifecycle);
    if options.discover && options.known.initialize_only(spec) {
        match attempt(Lifecycle::Initialize).await {
            // Refused at the handshake: the server changed since; probe it again.
            Err(Refused::Error(SessionError::Initialize { .. })) => options.known.forget(spec),
            other => return other.map_err(|e| e.into_error(&spec.name)),
        }
    }
    let lifecycle = if options.discover {
        Lifecycle::Discover
    } else {
        Lifecycle::Initialize
    };
    match attempt(lifecycle).await {
        Ok(started) => Ok(started),
        Err(Refused::AfterDiscover) => attempt(Lifecycle::Initialize)
            .await
            .map_err(|e| e.into_error(&spec.name)),
        Err(Refused::Slow(first)) => attempt(Lifecycle::DiscoverOnly).await.map_err(|_| first),
        Err(Refused::Error(e)) => Err(e),
    }
}

/// Connects, starts the lifecycle and lists the tools. A failure releases the connection.
async fn start_once(
    connector: &dyn Connector,
    spec: &ServerSpec,
    diag: &DiagnosticsSlot,
    options: StartOptions<'_>,
    handler: SessionHandler,
    lifecycle: Lifecycle,
) -> Result<Started, Refused> {
    let Connection { transport, handle } = connector.connect(spec).await?;
    // Before any request: the tokens the transport obtains reach the run's redactor.
    handle.report_secrets_to(&handler.secret_sink());
    let transport = transport.with_tap(handler.progress_tap());
    // Keeps the handle's stderr tail reachable if this future is dropped by the timeout.
    struct DiagOnDrop<'a>(&'a dyn ConnectionHandle, DiagnosticsSlot);
    impl Drop for DiagOnDrop<'_> {
        fn drop(&mut self) {
            if let Ok(mut slot) = self.1.lock() {
                *slot = self.0.diagnostics();
            }
        }
    }
    let _diag = DiagOnDrop(&*handle, diag.clone());
    let mut refused_probe = false;
    let served = match lifecycle {
        Lifecycle::Discover => {
            let timeout = super::discover_timeout(spec);
            let (served, refused) = super::serve_noting_refusal(handler, transport, timeout).await;
            refused_probe = refused;
            served
        }
        Lifecycle::DiscoverOnly => super::serve_discover(handler, transport).await,
        Lifecycle::Initialize => super::serve_initialize(handler, transport).await,
    };
    let service = match served {
        Ok(service) => service,
        Err(e) => {
            let diagnostics = release(&*handle).await;
            let error = SessionError::Initialize {
                server: spec.name.clone(),
                diagnostics,
                source: handle
                    .failure()
                    .unwrap_or_else(|| Box::new(ProtocolError::of_initialize(&e))),
            };
            if lifecycle == Lifecycle::Discover && super::gave_up_on_a_modern_server(&e) {
                return Err(Refused::Slow(error));
            }
            return Err(Refused::Error(error));
        }
    };
    let discovered = service
        .peer()
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    match list_all_tools(service.peer(), options.limits).await {
        Ok(tools) => {
            drop(_diag);
            if refused_probe && !discovered {
                options.known.remember_initialize_only(spec);
            }
            Ok(Started {
                service,
                tools,
                handle,
            })
        }
        Err(e) => {
            drop(service);
            let diagnostics = release(&*handle).await;
            if discovered
                && lifecycle == Lifecycle::Discover
                && matches!(e, ListError::Service(ServiceError::McpError(_)))
            {
                return Err(Refused::AfterDiscover);
            }
            Err(Refused::Error(e.into_session_error(
                &spec.name,
                diagnostics,
                handle.failure(),
            )))
        }
    }
}

/// How one attempt starts the lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    /// `server/discover`, else `initialize` ([`super::serve`]).
    Discover,
    /// `server/discover` alone ([`super::serve_discover`]).
    DiscoverOnly,
    /// `initialize` only ([`super::serve_initialize`]).
    Initialize,
}

/// Why an attempt failed.
enum Refused {
    /// The server answered `server/discover`, then refused the tool listing with a JSON-RPC
    /// error: it may only speak `initialize`.
    AfterDiscover,
    /// The probe gave up on the server, which then refused `initialize`: a modern server slow
    /// to start. The error is the one to tell if the next attempt fails too.
    Slow(SessionError),
    Error(SessionError),
}

impl From<mcp_connector::ConnectError> for Refused {
    fn from(e: mcp_connector::ConnectError) -> Self {
        Self::Error(e.into())
    }
}

impl Refused {
    fn into_error(self, server: &str) -> SessionError {
        match self {
            Self::Error(e) | Self::Slow(e) => e,
            // Not reached: `initialize` alone never reports a discover.
            Self::AfterDiscover => SessionError::Initialize {
                server: server.to_owned(),
                diagnostics: None,
                source: Box::new(ProtocolError::Unexpected),
            },
        }
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
