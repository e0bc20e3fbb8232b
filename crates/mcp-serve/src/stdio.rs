//! Serving one session over stdio, or over any rmcp transport.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt as _;
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ErrorCode, ErrorData, JsonRpcMessage, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::service::{RunningServiceCancellationToken, serve_server};
use rmcp::transport::{IntoTransport, Transport};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::drain::{CUT_GRACE, InFlight, InFlightGuard, Lifecycle, ServeState, ShutdownReport};
use crate::handler::{Session, Shared};
use crate::lines::Lines;
use crate::server::ToolServer;
use crate::{ServeError, cut};

/// This process's stdin and stdout, for an rmcp transport (a tuple of the two is one).
///
/// On Linux, when they are pipes (as when a host spawns the process with pipes), each is
/// opened anew through `/proc/self/fd` and read or written non-blocking on the runtime's own
/// threads. Anything else (a terminal, a file, a socket, another system, no runtime) gets
/// tokio's `stdin()` and `stdout()`, which hand every read and write to a blocking thread: a
/// thread switch per message. Opened anew, the pipes' non-blocking mode is their own:
/// descriptors 0 and 1, and whatever else shares them, stay as they were.
///
/// A [`ToolServer`] serves its session on them with [`ToolServer::serve_stdio`], which also
/// bounds what it reads; this is for an rmcp service of one's own.
///
/// # Panics
///
/// Inside a Tokio runtime whose IO driver is not enabled, when stdin or stdout is a pipe.
///
/// ```no_run
/// # async fn demo<S: rmcp::ServerHandler>(service: S) -> Result<(), Box<dyn std::error::Error>> {
/// use rmcp::ServiceExt as _;
/// let running = service.serve(mcp_serve::process_stdio()).await?;
/// running.waiting().await?;
/// # Ok(())
/// # }
/// ```
pub fn process_stdio() -> (
    impl tokio::io::AsyncRead + Send + Unpin + 'static,
    impl tokio::io::AsyncWrite + Send + Unpin + 'static,
) {
    use tokio::net::unix::pipe::OpenOptions;
    use tokio_util::either::Either;
    let input = reopened_pipe(0, |path| OpenOptions::new().open_receiver(path));
    let output = reopened_pipe(1, |path| OpenOptions::new().open_sender(path));
    (
        input.map_or_else(|| Either::Right(tokio::io::stdin()), Either::Left),
        output.map_or_else(|| Either::Right(tokio::io::stdout()), Either::Left),
    )
}

/// This process's descriptor `fd` opened anew with `open`, when it is a pipe and a runtime
/// is there to register it with.
fn reopened_pipe<T>(fd: u8, open: impl FnOnce(&str) -> std::io::Result<T>) -> Option<T> {
    use std::os::unix::fs::FileTypeExt as _;
    tokio::runtime::Handle::try_current().ok()?;
    let path = format!("/proc/self/fd/{fd}");
    let metadata = std::fs::metadata(&path).ok()?;
    if !metadata.file_type().is_fifo() {
        return None;
    }
    open(&path).ok()
}

impl ToolServer {
    /// Serves one session on this process's stdin and stdout (the way a desktop host runs an
    /// MCP server), as [`process_stdio`] opens them. A request line longer than
    /// [`max_request_bytes`](Self::max_request_bytes) is dropped unread and answered with an
    /// error naming the limit, as is one nested deeper than 128 levels; a line that is not
    /// JSON is ignored; one that is JSON but no JSON-RPC message is answered with an error
    /// (-32602 for a known method's unfitting params, such as `tools/call` `arguments` that
    /// are no object); the session goes on either way.
    ///
    /// ```no_run
    /// # async fn demo(server: mcp_serve::ToolServer) -> Result<(), mcp_serve::ServeError> {
    /// let session = server.serve_stdio().await?;
    /// session.wait().await; // until the host closes stdin
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve_stdio(self) -> Result<SessionServer, ServeError> {
        let (stdin, stdout) = process_stdio();
        let transport = Lines::new(stdin, stdout, self.max_request_bytes_value());
        self.serve_transport(transport).await
    }

    /// Serves one session over `transport` (any rmcp server transport: a pipe pair, a socket,
    /// an in-memory duplex). Returns once the client has initialised the session.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
    /// use mcp_serve::{Exposure, ToolServer};
    ///
    /// struct Nothing;
    /// impl ToolCatalog for Nothing {
    ///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
    /// }
    /// #[async_trait::async_trait]
    /// impl ToolDispatcher for Nothing {
    ///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
    ///         Err(ToolError::unknown_tool(call.name, Vec::new()))
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    /// let serving = tokio::spawn(
    ///     ToolServer::new(Arc::new(Nothing), Exposure::only(["none"])).serve_transport(server_end),
    /// );
    /// drop(client_end); // the client leaves before initialising
    /// assert!(serving.await.unwrap().is_err());
    /// # }
    /// ```
    pub async fn serve_transport<T, E, A>(self, transport: T) -> Result<SessionServer, ServeError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let lifecycle = Lifecycle::default();
        let shared = Shared::new(&self, lifecycle.clone(), None);
        let in_flight = InFlight::default();
        let tracked = Tracked {
            inner: transport.into_transport(),
            pending: Arc::default(),
            in_flight: in_flight.clone(),
        };
        let open_tools = shared.open_tools.clone();
        let running = serve_server(Session::new(&shared), tracked)
            .await
            .map_err(|e| ServeError::Initialize {
                reason: cut(&e.to_string(), 512),
            })?;
        let stop = running.cancellation_token();
        let ended = lifecycle.clone();
        let task = tokio::spawn(async move {
            let _ = running.waiting().await;
            ended.set(ServeState::Stopped);
        });
        Ok(SessionServer {
            lifecycle,
            in_flight,
            open_tools,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// One served session (stdio or another single transport). Dropping it closes the session.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use mcp_serve::{Exposure, ServeState, ToolServer};
/// use rmcp::ServiceExt as _;
///
/// struct Nothing;
/// impl ToolCatalog for Nothing {
///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
/// }
/// #[async_trait::async_trait]
/// impl ToolDispatcher for Nothing {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Err(ToolError::unknown_tool(call.name, Vec::new()))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (server_end, client_end) = tokio::io::duplex(64 * 1024);
/// let server = ToolServer::new(Arc::new(Nothing), Exposure::read_only());
/// let serving = tokio::spawn(server.serve_transport(server_end));
/// let client = ().serve(client_end).await.unwrap();
/// let session = serving.await.unwrap().unwrap();
/// assert_eq!(*session.state().borrow(), ServeState::Serving);
/// let report = session.shutdown(Duration::from_secs(5)).await;
/// assert_eq!(report.abandoned, 0);
/// drop(client);
/// # }
/// ```
pub struct SessionServer {
    lifecycle: Lifecycle,
    in_flight: InFlight,
    /// Per-session tools still open.
    open_tools: InFlight,
    stop: Option<RunningServiceCancellationToken>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SessionServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionServer")
            .field("state", &self.lifecycle.get())
            .field("in_flight", &self.in_flight.count())
            .finish_non_exhaustive()
    }
}

impl SessionServer {
    /// The server's state, to watch it drain and stop.
    pub fn state(&self) -> watch::Receiver<ServeState> {
        self.lifecycle.watch()
    }

    /// Waits until the session has ended: the client closed it (stdin closed), or a
    /// shutdown did.
    pub async fn wait(&self) {
        let mut state = self.lifecycle.watch();
        let _ = state.wait_for(|s| *s == ServeState::Stopped).await;
    }

    /// Shuts down gracefully: new calls are refused with an `isError` result, requests in
    /// flight are answered (waiting at most `drain_timeout`; calls still running then are
    /// answered with a JSON-RPC error saying the server shut down), then the session closes, and
    /// its per-session tools are closed (waiting at most `drain_timeout` again). Call it
    /// after [`wait`](Self::wait) too, to wait for those closes.
    pub async fn shutdown(mut self, drain_timeout: Duration) -> ShutdownReport {
        let in_flight = self.in_flight.count();
        if self.lifecycle.get() == ServeState::Serving {
            self.lifecycle.set(ServeState::Draining);
        }
        let abandoned = self.in_flight.drained(drain_timeout).await;
        if abandoned > 0 {
            // Calls still running answer with an error instead of a closed session.
            self.lifecycle.cut();
            self.in_flight.drained(CUT_GRACE).await;
        }
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        // The ended session closes its per-session tools (upstream sessions, processes).
        self.open_tools.drained(drain_timeout).await;
        self.lifecycle.set(ServeState::Stopped);
        ShutdownReport {
            in_flight,
            abandoned,
        }
    }
}

impl Drop for SessionServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
    }
}

/// A transport that counts the client's requests until their answers are written, so a
/// shutdown can wait for them.
struct Tracked<T> {
    inner: T,
    pending: Arc<Mutex<HashMap<RequestId, InFlightGuard>>>,
    in_flight: InFlight,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Tracked<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        let pending = self.pending.clone();
        // A combinator, not an `async` block, which would hold the inner send future twice
        // over (as captured and as awaited).
        self.inner.send(item).map(move |outcome| {
            if let Some(id) = answered {
                lock(&pending).remove(&id);
            }
            outcome
        })
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Request(request) = &message
                && lock(&self.pending).contains_key(&request.id)
            {
                // Two requests in flight under one id could not be told apart by their
                // answers: the second is refused, the first goes on. Sent on a task of its
                // own, so a cancelled `receive` cannot cut it short.
                let id = request.id.clone();
                let message = format!(
                    "Invalid Request: a request with id {id} is already in flight; \
                     use a new id for each request"
                );
                let error = ErrorData::new(ErrorCode::INVALID_REQUEST, message, None);
                let sent = self
                    .inner
                    .send(ServerJsonRpcMessage::error(error, Some(id)));
                tokio::spawn(sent);
                continue;
            }
            self.track(&message);
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        lock(&self.pending).clear();
        self.inner.close().await
    }
}

impl<T> Tracked<T> {
    /// Counts a request as in flight until its answer is sent; a cancelled one is no longer
    /// waited for.
    fn track(&self, message: &ClientJsonRpcMessage) {
        match message {
            JsonRpcMessage::Request(request) => {
                let guard = self.in_flight.enter();
                lock(&self.pending).insert(request.id.clone(), guard);
            }
            // A cancelled request gets no answer: it is no longer waited for.
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    lock(&self.pending).remove(id);
                }
            }
            _ => {}
        }
    }
}
