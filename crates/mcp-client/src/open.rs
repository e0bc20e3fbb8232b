//! Opening a run's sessions: in parallel, bounded, with the run's partial-failure policy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{Event, EventKind, EventSink};
use futures::StreamExt;
use mcp_config::{PartialFailure, ServerSpec};
use rmcp::model::Tool;

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

/// Opens every server of `specs`, at most `max_parallel` at a time.
///
/// With [`PartialFailure::FailFast`] the first failure ends the opening: sessions already open
/// are closed, connects still in flight are dropped (which releases what they held), and the
/// error is returned. With [`PartialFailure::SkipUnavailable`] failed servers are reported in
/// [`Opened::skipped`]. Either way each outcome is an event.
pub(crate) async fn open_sessions(
    connectors: &Connectors,
    specs: Vec<ServerSpec>,
    default_connect_timeout: Duration,
    policy: PartialFailure,
    max_parallel: usize,
    grace: Duration,
    events: &dyn EventSink,
) -> Result<Opened, SessionError> {
    let count = specs.len();
    let mut attempts = futures::stream::iter(specs.into_iter().enumerate().map(|(index, spec)| {
        let timeout = spec.connect_timeout.unwrap_or(default_connect_timeout);
        let spec = Arc::new(spec);
        async move {
            let started = Instant::now();
            let outcome = Session::open(connectors, spec.clone(), timeout).await;
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
                events.emit(
                    Event::new(EventKind::ServerConnected)
                        .with_server(&spec.name)
                        .with_duration(took)
                        .with_message(format!("{} tools", tools.len())),
                );
                slots[index] = Some((Arc::new(session), tools));
            }
            Err(error) => {
                events.emit(
                    Event::new(EventKind::ServerFailed)
                        .with_server(&spec.name)
                        .with_duration(took)
                        .with_message(error.to_string()),
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
