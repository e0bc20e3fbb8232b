//! Opening a run's sessions: in parallel, bounded, with the run's partial-failure policy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{Event, EventKind, EventSink, Principal};
use futures::StreamExt;
use mcp_catalog::{SkipReason, SkippedTool, ToolLimits};
use mcp_config::{PartialFailure, Redactor, ServerSpec, SpecOrigin};
use rmcp::model::Tool;

use crate::fingerprint::Fingerprint;
use crate::last_listing::Listing;
use crate::pool::Pool;
use crate::session::SessionOptions;
use crate::{Connectors, ElicitationHandler, Session, SessionError};

/// What one run is opened with beyond its input, for [`McpClient::open_runner_with`] and
/// [`McpClient::open_resolved_with`]: where its history goes and who answers its servers'
/// requests for user input. The default is what [`McpClient::open_runner`] does.
///
/// A run's own [`ElicitationHandler`] wins over the client's
/// ([`McpClientBuilder::elicitation`]) for the run's private sessions: each of them declares
/// the elicitation capability from the handler it actually uses. Pooled sessions of
/// `shared = true` servers are opened once for many runs, so they keep the client's handler
/// (or none: declined) whatever a run brings.
///
/// ```no_run
/// use std::sync::Arc;
/// use agent_core::RunInput;
/// use mcp_client::{DeclineElicitation, McpClient, OpenOptions};
/// use mcp_config::Config;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = McpClient::builder(Config::from_env()?).build();
/// let options = OpenOptions::new()
///     .with_elicitation(Arc::new(DeclineElicitation))
///     .with_history("history/state-1");
/// let runner = client.open_runner_with(&RunInput::new("state-1", "…"), options).await?;
/// runner.shutdown().await?;
/// # Ok(())
/// # }
/// ```
///
/// [`McpClient::open_runner_with`]: crate::McpClient::open_runner_with
/// [`McpClient::open_resolved_with`]: crate::McpClient::open_resolved_with
/// [`McpClient::open_runner`]: crate::McpClient::open_runner
/// [`McpClientBuilder::elicitation`]: crate::McpClientBuilder::elicitation
#[derive(Clone, Default)]
#[must_use]
pub struct OpenOptions {
    pub(crate) history: Option<PathBuf>,
    pub(crate) elicitation: Option<Arc<dyn ElicitationHandler>>,
    pub(crate) principal: Option<Principal>,
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenOptions")
            .field("history", &self.history)
            .field("elicitation", &self.elicitation.is_some())
            .field("principal", &self.principal)
            .finish()
    }
}

impl OpenOptions {
    /// The defaults: the client's history root (if any) and the client's handler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the run directly in `dir` (`dir/messages.jsonl`, `dir/events.jsonl`; created
    /// if missing, appended to if it holds a history already) instead of under the client's
    /// history root. A directory that cannot be written fails the opening with
    /// [`ClientError::History`](crate::ClientError::History) before any server is contacted.
    pub fn with_history(mut self, dir: impl Into<PathBuf>) -> Self {
        self.history = Some(dir.into());
        self
    }

    /// Who answers the requests for user input of this run's private sessions (form or URL
    /// mode, also inside input-required tool results), instead of the client's handler.
    pub fn with_elicitation(mut self, handler: Arc<dyn ElicitationHandler>) -> Self {
        self.elicitation = Some(handler);
        self
    }

    /// Who the run acts for (a gateway session's authenticated subject): kept in the run's
    /// [`RunContext`](agent_core::RunContext), for rules about users.
    ///
    /// ```
    /// use agent_core::Principal;
    /// use mcp_client::OpenOptions;
    ///
    /// let options = OpenOptions::new().with_principal(Principal::new("alice"));
    /// assert!(format!("{options:?}").contains("alice"));
    /// ```
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }
}

/// A server a run went on without, and why.
#[derive(Debug)]
#[non_exhaustive]
pub struct SkippedServer {
    /// The server's configured name.
    pub server: String,
    /// Why it could not be opened.
    pub error: SessionError,
}

/// The sessions of a run, in the order of the run's server list.
pub(crate) struct Opened {
    /// Each session with its tools, screened, and what it had heard when they were listed.
    pub(crate) sessions: Vec<(Arc<Session>, Listing)>,
    pub(crate) skipped: Vec<SkippedServer>,
}

/// How a run opens its sessions.
pub(crate) struct OpenSettings<'a> {
    pub(crate) default_connect_timeout: Duration,
    pub(crate) policy: PartialFailure,
    pub(crate) max_parallel: usize,
    pub(crate) grace: Duration,
    pub(crate) events: &'a dyn EventSink,
    pub(crate) session: SessionOptions,
    pub(crate) tool_limits: &'a ToolLimits,
    /// The client's pool, for `shared = true` operator servers.
    pub(crate) pool: &'a Pool,
    /// The client's handler, which pooled sessions use whatever `session` holds.
    pub(crate) shared_elicitation: Option<Arc<dyn ElicitationHandler>>,
}

/// Opens every server of `specs`, at most `max_parallel` at a time.
///
/// With [`PartialFailure::FailFast`] the first failure ends the opening: sessions already open
/// are closed, connects still in flight are dropped (which releases what they held), and the
/// error is returned. With [`PartialFailure::SkipUnavailable`] failed servers are reported in
/// [`Opened::skipped`]. Either way each outcome is an event; a connected server's event names
/// the tools the catalog will leave out.
pub(crate) async fn open_sessions(
    connectors: &Connectors,
    specs: Vec<ServerSpec>,
    settings: OpenSettings<'_>,
) -> Result<Opened, SessionError> {
    let OpenSettings {
        default_connect_timeout,
        policy,
        max_parallel,
        grace,
        events,
        session: options,
        tool_limits,
        pool,
        shared_elicitation,
    } = settings;
    let redactor = options.redactor.clone();
    let count = specs.len();
    let mut attempts =
        futures::stream::iter(specs.into_iter().enumerate().map(|(index, mut spec)| {
            // The pool knows a spec as configured, before the run's defaults.
            let fingerprint = spec.shared.then(|| Fingerprint::of(&spec));
            // Decided once, here: every later step of the session (re-listing, OAuth renewal)
            // reads the spec's own timeout, whoever resolved the spec.
            let timeout = *spec.connect_timeout.get_or_insert(default_connect_timeout);
            let spec = Arc::new(spec);
            let options = options.clone();
            let shared_elicitation = shared_elicitation.clone();
            async move {
                let started = Instant::now();
                let how = How {
                    connectors,
                    pool,
                    fingerprint,
                    timeout,
                    grace,
                    shared_elicitation,
                };
                let outcome = open_one(how, spec.clone(), options).await;
                (index, spec, started.elapsed(), outcome)
            }
        }))
        .buffer_unordered(max_parallel.max(1));

    let mut slots: Vec<Option<(Arc<Session>, Listing)>> = (0..count).map(|_| None).collect();
    let mut skipped = Vec::new();
    let mut failure = None;
    while let Some((index, spec, took, outcome)) = attempts.next().await {
        match outcome {
            Ok((session, Listing { tools, stamp }, note)) => {
                let listed = tools.len();
                let (tools, left_out) = screen(&spec.name, tools, tool_limits, &redactor);
                let mut message = tools_message(listed, &left_out);
                if let Some(note) = note {
                    message = format!("{message}; {note}");
                }
                events.emit(
                    Event::new(EventKind::ServerConnected)
                        .with_server(&spec.name)
                        .with_duration(took)
                        .with_message(redactor.scrub(&message)),
                );
                slots[index] = Some((session, Listing { tools, stamp }));
            }
            Err(error) => {
                events.emit(
                    Event::new(EventKind::ServerFailed)
                        .with_server(&spec.name)
                        .with_duration(took)
                        .with_message(redactor.scrub(&error.to_string())),
                );
                match policy {
                    PartialFailure::SkipUnavailable => {
                        skipped.push((
                            index,
                            SkippedServer {
                                server: spec.name.clone(),
                                error,
                            },
                        ));
                    }
                    _ => {
                        failure = Some(error);
                        break;
                    }
                }
            }
        }
    }
    // Connects still in flight are dropped here, releasing their half-open transports.
    drop(attempts);
    let sessions: Vec<_> = slots.into_iter().flatten().collect();
    if let Some(error) = failure {
        futures::future::join_all(sessions.iter().map(|(s, _)| s.close(grace))).await;
        return Err(error);
    }
    skipped.sort_by_key(|(index, _)| *index);
    Ok(Opened {
        sessions,
        skipped: skipped.into_iter().map(|(_, s)| s).collect(),
    })
}

/// What opening one server needs beside its spec.
struct How<'a> {
    connectors: &'a Connectors,
    pool: &'a Pool,
    /// Set for a `shared = true` spec.
    fingerprint: Option<Fingerprint>,
    timeout: Duration,
    grace: Duration,
    /// The client's elicitation handler: a pooled session serves many runs, so it never takes
    /// one run's.
    shared_elicitation: Option<Arc<dyn ElicitationHandler>>,
}

/// What the `server_connected` event of an inline spec with `shared = true` says.
pub(crate) const INLINE_NOT_SHARED: &str =
    "`shared` ignored: a caller-supplied server always gets a private session";

/// What the `server_connected` event of a shared server says once the client has shut down.
pub(crate) const POOL_CLOSED: &str =
    "`shared` not honoured: the client has shut down its session pool, so a private session";

/// Opens one server: from the client's pool for a `shared = true` operator spec, else a
/// private session. The note, if any, says which (for the `server_connected` event).
async fn open_one(
    how: How<'_>,
    spec: Arc<ServerSpec>,
    options: SessionOptions,
) -> Result<(Arc<Session>, Listing, Option<&'static str>), SessionError> {
    let note = match how.fingerprint {
        // Caller-supplied specs are never pooled: whatever a caller asks, its servers are its own.
        Some(_) if spec.origin != SpecOrigin::Operator => Some(INLINE_NOT_SHARED),
        Some(fingerprint) => {
            let mut shared_options = options.clone();
            shared_options.elicitation = how.shared_elicitation.clone();
            let pooled = how
                .pool
                .acquire(
                    how.connectors,
                    fingerprint,
                    spec.clone(),
                    how.timeout,
                    shared_options,
                    how.grace,
                )
                .await;
            match pooled {
                Some(outcome) => {
                    return outcome
                        .map(|(session, listing, reuse)| (session, listing, Some(reuse.note())));
                }
                None => Some(POOL_CLOSED),
            }
        }
        None => None,
    };
    let (session, listing) = Session::open(how.connectors, spec, how.timeout, options).await?;
    Ok((Arc::new(session), listing, note))
}

/// Removes the tools whose name holds a known secret (the catalog cannot know them), and lists
/// with them the tools the catalog will leave out: a name empty or listed more than once, or
/// out of its [`ToolLimits`] (it checks them again and keeps its own record,
/// [`mcp_catalog::Catalog::skipped_tools`]). Each one left out is logged as a warning naming
/// the server and the tool; the server's other tools join.
pub(crate) fn screen(
    server: &str,
    tools: Vec<Tool>,
    limits: &ToolLimits,
    redactor: &Redactor,
) -> (Vec<Tool>, Vec<SkippedTool>) {
    let mut left_out = Vec::new();
    let mut kept = Vec::with_capacity(tools.len());
    for tool in tools {
        let scrubbed = redactor.scrub(&tool.name);
        if scrubbed != tool.name {
            left_out.push(SkippedTool::new(
                server,
                &scrubbed,
                SkipReason::NameHoldsSecret,
            ));
            continue;
        }
        kept.push(tool);
    }
    left_out.extend(limits.left_out(server, &kept));
    for skipped in &left_out {
        tracing::warn!("{}", redactor.scrub(&skipped.to_string()));
    }
    (kept, left_out)
}

/// The message of a server's connected or re-listed event: `"N tools"`, and the first few
/// tools left out with why.
pub(crate) fn tools_message(listed: usize, left_out: &[SkippedTool]) -> String {
    const SHOWN: usize = 3;
    let mut message = format!("{listed} tools");
    if left_out.is_empty() {
        return message;
    }
    let named: Vec<String> = left_out
        .iter()
        .take(SHOWN)
        .map(|s| format!("tool `{}` ({})", s.tool, s.reason))
        .collect();
    message.push_str(&format!(
        "; {} left out: {}",
        left_out.len(),
        named.join("; ")
    ));
    if left_out.len() > SHOWN {
        message.push_str(&format!("; and {} more", left_out.len() - SHOWN));
    }
    message
}
