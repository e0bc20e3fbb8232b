//! The events layer: every call ends in exactly one end event, and a call that runs is
//! announced when it starts — when someone hears the bus ([`EventBus::is_heard`]); a call asked
//! while nobody does builds no events at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::time::Instant;
use tower_layer::Layer;

use super::{CallRequest, CallService, ResolvedCall, Shown};
use crate::{CallOutcome, Event, EventBus, EventKind, EventSink, Redactor, ToolError, ToolOutput};

/// Emits the events of each call on the run's bus: `tool_call_started` right before the call
/// runs (after rules and approval: the innermost service starts the
/// [`CallTrace`](super::CallTrace)), then exactly one of `tool_call_finished` or
/// `tool_call_failed` (also when the caller stops waiting: outcome `cancelled`); a refused call
/// emits only `tool_call_denied`. Events name the real tool, its server key and identity, the
/// call id, the duration and sizes (with what the output limit below kept); messages are
/// scrubbed.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{CallRequest, CallService, EventBus, EventKind, EventsLayer,
///     NoopEventSink, Redactor, ResolvedCall, ToolCall, ToolError, ToolOutput};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct Ran;
/// #[async_trait]
/// impl CallService<()> for Ran {
///     async fn call(&self, request: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         request.trace.start();
///         Ok(ToolOutput::text("ran"))
///     }
/// }
/// let bus = Arc::new(EventBus::new(Arc::new(NoopEventSink)));
/// let mut events = bus.subscribe();
/// let service = EventsLayer::new(Arc::clone(&bus), Redactor::new()).layer(Ran);
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let call = ToolCall::new("1", "clock", Default::default());
/// service.call(CallRequest::new(call, ResolvedCall::native("clock", Default::default()), ())).await.unwrap();
/// assert_eq!(events.recv().await.unwrap().kind, EventKind::ToolCallStarted);
/// assert_eq!(events.recv().await.unwrap().kind, EventKind::ToolCallFinished);
/// # });
/// ```
#[derive(Clone)]
pub struct EventsLayer {
    bus: Arc<EventBus>,
    redactor: Redactor,
}

impl std::fmt::Debug for EventsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventsLayer").finish_non_exhaustive()
    }
}

impl EventsLayer {
    /// The layer emitting on `bus`, scrubbing messages with `redactor`.
    pub fn new(bus: Arc<EventBus>, redactor: Redactor) -> Self {
        Self { bus, redactor }
    }
}

impl<S> Layer<S> for EventsLayer {
    type Service = Events<S>;

    fn layer(&self, inner: S) -> Events<S> {
        Events {
            layer: self.clone(),
            inner,
        }
    }
}

/// The service of an [`EventsLayer`].
pub struct Events<S> {
    layer: EventsLayer,
    inner: S,
}

impl<S> std::fmt::Debug for Events<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl<T: Send + 'static, S: CallService<T>> CallService<T> for Events<S> {
    /// Nobody would read this call's events (no sink that keeps them, no subscriber): none are
    /// built, and the call is the inner service's own future. Decided once, when the call is
    /// asked, so a call has both its events or neither.
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        if !self.layer.bus.is_heard() {
            return self.inner.call(request);
        }
        Box::pin(self.observed(request))
    }
}

impl<S> Events<S> {
    /// The call, announced when it starts and ended by exactly one end event.
    async fn observed<T: Send + 'static>(
        &self,
        request: CallRequest<T>,
    ) -> Result<ToolOutput, ToolError>
    where
        S: CallService<T>,
    {
        let EventsLayer { bus, redactor } = &self.layer;
        let subject = Subject::of(&request.resolved, &request.call.id);
        let trace = request.trace.clone();
        let asked = request.began;
        trace.announce(
            Arc::clone(bus),
            subject.event(EventKind::ToolCallStarted, None),
        );
        let mut unfinished = Unfinished {
            bus,
            subject: &subject,
            trace: &trace,
            armed: true,
        };
        let outcome = self.inner.call(request).await;
        unfinished.armed = false;
        let began = trace.started().unwrap_or(asked);
        let shown = trace.shown();
        let event = match &outcome {
            Ok(_) => {
                let shown = shown.unwrap_or_default();
                let outcome = if shown.full_bytes > shown.shown_bytes {
                    CallOutcome::Truncated
                } else {
                    CallOutcome::Ok
                };
                with_sizes(
                    subject.event(EventKind::ToolCallFinished, Some(began)),
                    shown,
                )
                .with_outcome(outcome)
            }
            Err(error) => {
                let kind = match error {
                    ToolError::Denied { .. } => EventKind::ToolCallDenied,
                    _ => EventKind::ToolCallFailed,
                };
                let event = subject
                    .event(kind, Some(began))
                    .with_outcome(CallOutcome::of_error(error))
                    .with_message(redactor.redact_text(&crate::error_chain(error)));
                match shown.filter(Shown::differs) {
                    Some(shown) => with_sizes(event, shown),
                    None => event,
                }
            }
        };
        bus.emit(event);
        outcome
    }
}

fn with_sizes(mut event: Event, shown: Shown) -> Event {
    event.output_bytes = Some(shown.shown_bytes);
    event.result_bytes = Some(shown.full_bytes);
    event.output_handle = shown.handle;
    event
}

/// Who an event is about: the resolved call (shared, not copied) and the call's id.
struct Subject {
    resolved: Arc<ResolvedCall>,
    call_id: String,
    input_bytes: u64,
}

impl Subject {
    fn of(resolved: &Arc<ResolvedCall>, call_id: &str) -> Self {
        Self {
            resolved: Arc::clone(resolved),
            call_id: call_id.to_owned(),
            input_bytes: crate::json_len(&resolved.arguments).unwrap_or_default() as u64,
        }
    }

    /// The event of `kind`; with a duration since `began` unless it is the start.
    fn event(&self, kind: EventKind, began: Option<Instant>) -> Event {
        let resolved = &*self.resolved;
        let mut event = Event::new(kind)
            .with_tool(resolved.server.as_deref(), &resolved.action_ref)
            .with_server_identity(resolved.server_identity.as_deref())
            .with_call_id(&self.call_id);
        event.input_bytes = Some(self.input_bytes);
        event.target = resolved.reads.as_ref().map(|r| r.target().to_owned());
        if let Some(began) = began {
            event.duration = Some(began.elapsed());
        }
        event
    }
}

/// Emits the end event of a started call if the call is dropped before it ends.
struct Unfinished<'a> {
    bus: &'a EventBus,
    subject: &'a Subject,
    trace: &'a super::CallTrace,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let Some(began) = self.trace.started() else {
            return;
        };
        if self.armed {
            let why = if std::thread::panicking() {
                "the call panicked"
            } else {
                "the call was abandoned before it finished"
            };
            self.bus.emit(
                self.subject
                    .event(EventKind::ToolCallFailed, Some(began))
                    .with_outcome(CallOutcome::Cancelled)
                    .with_message(why),
            );
        }
    }
}
