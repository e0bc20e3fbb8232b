//! Opening a run's sessions: in parallel, bounded, with the run's partial-failure policy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{Event, EventKind, EventSink};
use futures::StreamExt;
use mcp_catalog::{SkipReason, SkippedTool, ToolLimits};
use mcp_config::{PartialFailure, Scrubber, ServerSpec};
use rmcp::model::Tool;

use crate::session::SessionOptions;
use crate::{Connectors, Session, SessionError};

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
    pub(crate) sessions: Vec<(Arc<Session>, Vec<Tool>)>,
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
    } = settings;
    let scrubber = options.scrubber.clone();
    let count = specs.len();
    let mut attempts =
        futures::stream::iter(specs.into_iter().enumerate().map(|(index, mut spec)| {
            // Decided once, here: every later step of the session (re-listing, OAuth renewal)
            // reads the spec's own timeout, whoever resolved the spec.
            let timeout = *spec.connect_timeout.get_or_insert(default_connect_timeout);
            let spec = Arc::new(spec);
            let options = options.clone();
            async move {
                let started = Instant::now();
                let outcome = Session::open(connectors, spec.clone(), timeout, options).await;
                (index, spec, started.elapsed(), outcome)
            }
        }))
        .buffer_unordered(max_parallel.max(1));

    let mut slots: Vec<Option<(Arc<Session>, Vec<Tool>)>> = (0..count).map(|_| None).collect();
    let mut skipped = Vec::new();
    let mut failure = None;
    while let Some((index, spec, took, outcome)) = attempts.next().await {
        match outcome {
            Ok((session, tools)) => {
                let listed = tools.len();
                let (tools, left_out) = screen(&spec.name, tools, tool_limits, &scrubber);
                events.emit(
                    Event::new(EventKind::ServerConnected)
                        .with_server(&spec.name)
                        .with_duration(took)
                        .with_message(scrubber.scrub(&tools_message(listed, &left_out))),
                );
                slots[index] = Some((Arc::new(session), tools));
            }
            Err(error) => {
                events.emit(
                    Event::new(EventKind::ServerFailed)
                        .with_server(&spec.name)
                        .with_duration(took)
                        .with_message(scrubber.scrub(&error.to_string())),
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

/// Removes the tools whose name holds a known secret (the catalog cannot know them), and lists
/// with them the tools the catalog will leave out by its [`ToolLimits`] (it checks them again
/// and keeps its own record, [`mcp_catalog::Catalog::skipped_tools`]).
pub(crate) fn screen(
    server: &str,
    tools: Vec<Tool>,
    limits: &ToolLimits,
    scrubber: &Scrubber,
) -> (Vec<Tool>, Vec<SkippedTool>) {
    let mut left_out = Vec::new();
    let mut kept = Vec::with_capacity(tools.len());
    for tool in tools {
        let scrubbed = scrubber.scrub(&tool.name);
        if scrubbed != tool.name {
            left_out.push(SkippedTool::new(
                server,
                &scrubbed,
                SkipReason::NameHoldsSecret,
            ));
            continue;
        }
        if let Err(reason) = limits.check(&tool) {
            left_out.push(SkippedTool::new(server, &tool.name, reason));
        }
        kept.push(tool);
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
