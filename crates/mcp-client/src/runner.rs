//! The runner of one run: the catalog over the run's sessions behind the run's governed layer,
//! kept current, closed at the end.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_core::{
    Event, EventKind, EventSink, Governed, RunContext, Runner, ToolCall, ToolCatalog,
    ToolDescriptor, ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use mcp_catalog::{Catalog, ServerTools};
use rmcp::model::Tool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use mcp_config::{PartialFailure, Redactor};

use crate::last_listing::{Listing, Stamp};
use crate::open::{screen, tools_message};
use crate::scrub::scrub_session_error;
use crate::{ClientError, Session, SessionError, SkippedServer};

/// The tools of one run's MCP servers (and the agent's native tools), behind the catalog's
/// lazy surface and the run's governed layer.
///
/// Every call — [`ToolDispatcher::dispatch`] of `mcp_search_tools`, `mcp_call_tool`, a pinned,
/// promoted or eager MCP tool, a native tool, or `mcp_read_output` — goes through the layer
/// ([`governed`](Self::governed)): identity rules, policy, approval of the real tool, output
/// limit, `tool_call_*` events and history. There is no other way to run a tool of the run:
/// the catalog ([`catalog`](Self::catalog)) searches, promotes and lists, and runs calls only
/// for the layer. Server events (`server_connected`, `server_failed`, `tools_changed`) go to the
/// layer's event bus too, so its sink, its subscribers and the history see one stream.
///
/// Valid until [`Runner::close`] or [`shutdown`](Self::shutdown); dropping it without closing
/// still releases every session (child process groups are killed, HTTP sessions deleted on a
/// best-effort basis) and syncs the history.
pub struct McpRunner {
    governed: Arc<Governed<Catalog>>,
    sessions: Vec<SessionView>,
    skipped: Vec<SkippedServer>,
    watchers: Vec<JoinHandle<()>>,
    /// Counts the catalog's re-listings (see [`McpRunner::tools_changed`]).
    relisted: Arc<watch::Sender<u64>>,
    closed: AtomicBool,
    grace: Duration,
    /// The run's resource subscriptions (`features.rs`).
    pub(crate) updates: crate::updates::RunUpdates,
}

impl std::fmt::Debug for McpRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRunner")
            .field(
                "servers",
                &self
                    .sessions
                    .iter()
                    .map(SessionView::name)
                    .collect::<Vec<_>>(),
            )
            .field(
                "skipped",
                &self.skipped.iter().map(|s| &s.server).collect::<Vec<_>>(),
            )
            .field("tools", &self.catalog().len())
            .finish_non_exhaustive()
    }
}

/// Keeps only the tools the spec's filter allows.
pub(crate) fn filtered(session: &Session, tools: Vec<Tool>) -> Vec<Tool> {
    let filter = &session.spec().tools;
    tools
        .into_iter()
        .filter(|t| filter.allows(&t.name))
        .collect()
}

impl McpRunner {
    /// Adds each opened server to the catalog. A server whose tools cannot join (a name
    /// collision) is closed and, under `skip_unavailable`, reported as skipped; under
    /// `fail_fast` every session is closed and the error returned.
    pub(crate) async fn new(
        governed: Arc<Governed<Catalog>>,
        sessions: Vec<(Arc<Session>, Listing)>,
        mut skipped: Vec<SkippedServer>,
        policy: PartialFailure,
        grace: Duration,
    ) -> Result<Self, SessionError> {
        let catalog = governed.inner();
        let events = governed.events();
        let redactor = governed.redactor().clone();
        let mut added: Vec<Arc<Session>> = Vec::with_capacity(sessions.len());
        let mut heard = Vec::with_capacity(sessions.len());
        let mut rest = sessions.into_iter();
        while let Some((session, Listing { tools, stamp })) = rest.next() {
            let mut server =
                ServerTools::new(session.name(), session.clone(), filtered(&session, tools));
            if let Some(identity) = &session.identity().name {
                server = server.with_identity(identity.clone());
            }
            let Err(e) = catalog.add_server(server) else {
                added.push(session);
                heard.push(stamp);
                continue;
            };
            let error = scrub_session_error(
                &redactor,
                SessionError::Catalog {
                    server: session.name().to_owned(),
                    source: Box::new(e),
                },
            );
            events.emit(
                Event::new(EventKind::ServerFailed)
                    .with_server(session.name())
                    .with_message(redactor.scrub(&error.to_string())),
            );
            session.close(grace).await;
            if matches!(policy, PartialFailure::SkipUnavailable) {
                skipped.push(SkippedServer {
                    server: session.name().to_owned(),
                    error,
                });
                continue;
            }
            let others = added
                .iter()
                .cloned()
                .chain(rest.map(|(s, _)| s))
                .collect::<Vec<_>>();
            futures::future::join_all(others.iter().map(|s| s.close(grace))).await;
            return Err(error);
        }
        crate::offered::index(catalog, &added).await;
        let relisted = Arc::new(watch::Sender::new(0));
        let watchers = added
            .iter()
            .zip(heard)
            .map(|(s, heard)| {
                let watch = Watch {
                    governed: Arc::clone(&governed),
                    redactor: redactor.clone(),
                    relisted: Arc::clone(&relisted),
                    heard,
                };
                watch_tools(s.clone(), watch)
            })
            .collect();
        Ok(Self {
            governed,
            sessions: added.into_iter().map(SessionView).collect(),
            skipped,
            watchers,
            relisted,
            closed: AtomicBool::new(false),
            grace,
            updates: Default::default(),
        })
    }

    /// The catalog behind this runner: search, promote, list entries. Its calls run only
    /// through the governed layer: [`CallResolver::dispatch_resolved`] takes a
    /// [`Permit`](agent_core::Permit) that only the layer makes.
    ///
    /// ```compile_fail,E0061
    /// # async fn call(runner: &mcp_client::McpRunner, mut call: agent_core::ToolCall) {
    /// use agent_core::CallResolver;
    /// let (_, target) = CallResolver::resolve(runner.catalog(), &mut call).unwrap();
    /// runner.catalog().dispatch_resolved(call, target).await; // no permit: does not compile
    /// # }
    /// ```
    ///
    /// [`CallResolver::dispatch_resolved`]: agent_core::CallResolver::dispatch_resolved
    pub fn catalog(&self) -> &Catalog {
        self.governed.inner()
    }

    /// The run's governed layer: [`subscribe`](Governed::subscribe) to its events,
    /// [`outputs`](Governed::outputs) to read a cut result whole (a `--full` flag).
    ///
    /// ```no_run
    /// # async fn run(runner: mcp_client::McpRunner) {
    /// let mut events = runner.governed().subscribe();
    /// while let Ok(event) = events.recv().await {
    ///     println!("{:?} {:?}", event.kind, event.tool);
    /// }
    /// # }
    /// ```
    pub fn governed(&self) -> &Governed<Catalog> {
        &self.governed
    }

    /// A receiver that changes each time a server of the run announced a new tool list and the
    /// catalog was updated from its re-listing (when the `tools_changed` event is emitted):
    /// what a gateway needs to tell its client the list changed, without subscribing to every
    /// event of the run (a subscriber's buffer holds [`DEFAULT_EVENT_CAPACITY`] events).
    ///
    /// ```no_run
    /// # async fn run(runner: mcp_client::McpRunner) {
    /// let mut changed = runner.tools_changed();
    /// while changed.changed().await.is_ok() {
    ///     println!("now {} tools", runner.catalog().len());
    /// }
    /// # }
    /// ```
    ///
    /// [`DEFAULT_EVENT_CAPACITY`]: agent_core::DEFAULT_EVENT_CAPACITY
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.relisted.subscribe()
    }

    /// The run's secret engine: its specs' secrets, the template's, and the tokens its
    /// sessions obtain (learned while the run goes on). Print what belongs to the run through
    /// it (a clone keeps learning).
    ///
    /// ```no_run
    /// # fn show(runner: &mcp_client::McpRunner, text: &str) {
    /// println!("{}", runner.redactor().scrub(text));
    /// # }
    /// ```
    pub fn redactor(&self) -> &Redactor {
        self.governed.redactor()
    }

    /// The run's context: its event bus, history, kept outputs, secret engine and principal,
    /// shared by the governed layers and the run's sessions.
    ///
    /// ```no_run
    /// # fn show(runner: &mcp_client::McpRunner) {
    /// if let Some(principal) = runner.context().principal() {
    ///     println!("acting for {}", principal.subject());
    /// }
    /// # }
    /// ```
    pub fn context(&self) -> &Arc<RunContext> {
        self.governed.context()
    }

    /// Closes the run as [`Runner::close`] does — every session, then the governed layer —
    /// and reports a history write that failed during the run, or the sync at its end.
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        self.close_sessions().await;
        self.governed.shutdown().map_err(ClientError::History)
    }

    /// Stops the watchers and closes every session, once.
    async fn close_sessions(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        for watcher in &self.watchers {
            watcher.abort();
        }
        let sessions: Vec<(String, &crate::updates::Updates)> = self
            .sessions
            .iter()
            .map(|s| (s.name().to_owned(), &**s.0.updates()))
            .collect();
        let released = self.updates.close(&sessions);
        // A shared session outlives the run: its server stops sending updates no run wants.
        // Bounded by the grace period; an unsubscribe that fails or overstays is dropped.
        let unsubscribes = released.iter().flat_map(|(server, uris)| {
            let session = self
                .sessions
                .iter()
                .find(|s| s.name() == server && s.0.is_shared());
            uris.iter()
                .filter_map(move |uri| session.map(|s| s.0.unsubscribe_resource(uri)))
        });
        let _ = tokio::time::timeout(self.grace, futures::future::join_all(unsubscribes)).await;
        futures::future::join_all(self.sessions.iter().map(|s| s.0.close(self.grace))).await;
    }

    /// The run's open sessions, in the order of its server list, as read-only views: name,
    /// spec, identity, process and listings, but no way to call a tool (calls go through
    /// [`dispatch`](ToolDispatcher::dispatch), i.e. the governed layer).
    ///
    /// ```no_run
    /// # fn show(runner: &mcp_client::McpRunner) {
    /// for session in runner.sessions() {
    ///     println!("{}: {:?}", session.name(), session.identity().name);
    /// }
    /// # }
    /// ```
    ///
    /// A view does not hand out its session, so a run's tools cannot be called around the
    /// layer:
    ///
    /// ```compile_fail,E0599
    /// # async fn call(runner: &mcp_client::McpRunner) {
    /// runner.sessions()[0].call_tool("echo", Default::default()).await;
    /// # }
    /// ```
    pub fn sessions(&self) -> &[SessionView] {
        &self.sessions
    }

    /// The servers skipped under `skip_unavailable`, with their causes.
    pub fn skipped(&self) -> &[SkippedServer] {
        &self.skipped
    }
}

/// A read-only view of one session of a run ([`McpRunner::sessions`]): what the server said
/// about itself, its spec, its process, its tool listings — and no way to call a tool, which
/// only the run's governed layer does.
///
/// A session outside any run, called directly, is the explicitly ungoverned
/// [`Session::open_standalone`].
#[derive(Debug, Clone)]
pub struct SessionView(pub(crate) Arc<Session>);

impl SessionView {
    /// The spec this session was opened from.
    pub fn spec(&self) -> &mcp_config::ServerSpec {
        self.0.spec()
    }

    /// The configured name of the server.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// What the server said about itself.
    pub fn identity(&self) -> &crate::ServerIdentity {
        self.0.identity()
    }

    /// The operating-system pid of a child-process server.
    pub fn pid(&self) -> Option<u32> {
        self.0.pid()
    }

    /// Recent stderr of a child-process server, with the run's known secrets replaced.
    pub fn diagnostics(&self) -> Option<String> {
        self.0.diagnostics()
    }

    /// The bounds on this session's tool listings.
    pub fn list_limits(&self) -> crate::ListLimits {
        self.0.list_limits()
    }

    /// True once the session's connection ended: closed, or its server went away (a child
    /// process that exited, a transport that failed for good). A run whose session is closed
    /// fails that server's calls.
    ///
    /// ```no_run
    /// # fn check(runner: &mcp_client::McpRunner) {
    /// let gone: Vec<&str> = runner.sessions().iter().filter(|s| s.is_closed()).map(|s| s.name()).collect();
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// A receiver that changes whenever the server announces a new tool list.
    pub fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.tools_changed()
    }

    /// A receiver that changes whenever the transport renewed the protocol session on its
    /// own; `None` for transports that never do.
    pub fn renewals(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.0.renewals()
    }

    /// Lists every tool again (`tools/list`, every page, within the server's connect timeout
    /// and the session's [`ListLimits`](crate::ListLimits)). Listing runs no tool.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.0.list_tools().await
    }
}

/// What a watcher of a server's tool list updates.
struct Watch {
    governed: Arc<Governed<Catalog>>,
    redactor: Redactor,
    /// Counts the re-listings, for [`McpRunner::tools_changed`].
    relisted: Arc<watch::Sender<u64>>,
    /// What the session had heard when the run's tools were listed.
    heard: Stamp,
}

/// Re-lists a server's tools whenever it announces a change, or whenever its transport renewed
/// the session (a change announced while the session was down may be lost), and updates the
/// catalog. A change or renewal heard since the run's tools were listed re-lists them at once;
/// those heard before do not.
fn watch_tools(session: Arc<Session>, watch: Watch) -> JoinHandle<()> {
    let Watch {
        governed,
        redactor,
        relisted,
        heard,
    } = watch;
    let mut changed = session.tools_changed();
    let mut renewed = session.renewals();
    let behind = *changed.borrow_and_update() != heard.changes
        || renewed
            .as_mut()
            .is_some_and(|renewed| *renewed.borrow_and_update() != heard.renewals);
    tokio::spawn(async move {
        let mut behind = behind;
        loop {
            // Behind: listed at once.
            if !std::mem::take(&mut behind) && !wait_for_news(&mut changed, &mut renewed).await {
                return;
            }
            let catalog = governed.inner();
            let limits = &catalog.config().tool_limits;
            // Boxed: the listing's state lives on the heap only while it runs, so the idle
            // watcher of each session is small.
            let outcome = match Box::pin(session.list_tools()).await {
                Ok(tools) => {
                    let (tools, left_out) = screen(session.name(), tools, limits, &redactor);
                    let tools = filtered(&session, tools);
                    let count = tools.len();
                    catalog
                        .replace_tools(session.name(), &tools)
                        .map(|()| tools_message(count, &left_out))
                        .map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            let event = Event::new(EventKind::ToolsChanged).with_server(session.name());
            let message = match outcome {
                Ok(message) => message,
                Err(message) => format!("re-listing failed: {message}"),
            };
            governed
                .events()
                .emit(event.with_message(redactor.scrub(&message)));
            relisted.send_modify(|n| *n = n.wrapping_add(1));
        }
    })
}

/// Waits until the session announces a tool-list change or its transport renews the session:
/// `false` once the session is gone (its change signal closed). A renewal signal that closes is
/// no longer waited on.
async fn wait_for_news(
    changed: &mut watch::Receiver<u64>,
    renewed: &mut Option<watch::Receiver<u64>>,
) -> bool {
    let signal = async {
        match renewed.as_mut() {
            Some(renewed) => renewed.changed().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = changed.changed() => r.is_ok(),
        r = signal => {
            if r.is_err() {
                *renewed = None;
            }
            true
        }
    }
}

impl ToolCatalog for McpRunner {
    /// The tools to show the model — the catalog's, then `mcp_read_output` — none once the
    /// runner is closed.
    fn tools(&self) -> Vec<ToolDescriptor> {
        if self.closed.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.governed.tools()
    }

    /// One tool of `tools` by name, looked up without listing them all.
    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        self.governed.tool(name)
    }
}

impl ToolDispatcher for McpRunner {
    /// The governed stack's own future (no second one around it), or the refusal of a call
    /// made after the run closed.
    fn dispatch<'life0, 'async_trait>(
        &'life0 self,
        call: ToolCall,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        if self.closed.load(Ordering::Acquire) {
            return Box::pin(std::future::ready(Err(ToolError::Transport {
                server: None,
                tool: call.name,
                source: "the run has ended and its MCP sessions are closed".into(),
            })));
        }
        self.governed.dispatch(call)
    }
}

#[async_trait]
impl Runner for McpRunner {
    /// Closes every session, then the governed layer (kept outputs dropped, history synced);
    /// [`McpRunner::shutdown`] does the same and reports a history failure.
    async fn close(&self) {
        self.close_sessions().await;
        let _ = self.governed.shutdown();
    }
}

impl Drop for McpRunner {
    fn drop(&mut self) {
        for watcher in &self.watchers {
            watcher.abort();
        }
    }
}
