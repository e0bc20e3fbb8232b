//! What one run owns: its event bus, its history, its kept outputs, its secret engine and the
//! principal it acts for. A library run, `run`, `tools call` and each gateway session build
//! one; the governed layers and the run's sessions receive it. Nothing of a run is
//! process-wide, so two runs in one process never see each other's secrets or outputs.

use std::sync::Arc;

use crate::{
    DEFAULT_EVENT_CAPACITY, EventBus, EventReceiver, EventSink, History, HistoryError,
    NoopEventSink, OutputLimits, OutputStore, Redactor,
};

/// Who a run acts for: the authenticated subject of a gateway session (a token's `sub`), or
/// the local user of a library run or the CLI. Later per-user rules match it.
///
/// ```
/// let alice = agent_core::Principal::new("alice@example.com");
/// assert_eq!(alice.subject(), "alice@example.com");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    subject: String,
}

impl Principal {
    /// The principal named `subject`.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
        }
    }

    /// Its name.
    pub fn subject(&self) -> &str {
        &self.subject
    }
}

/// The state of one run, shared by its layers and sessions (see the module doc).
///
/// Built with [`RunContext::builder`]; the history, when there is one, is a sink of the bus,
/// so every event of the run (a call's, a session's) is recorded once.
///
/// ```
/// use agent_core::{Event, EventKind, EventSink, Principal, Redactor, RunContext};
///
/// let context = RunContext::builder()
///     .redactor(Redactor::new().with_secrets(["tok-12345678"]))
///     .principal(Principal::new("alice"))
///     .build();
/// let mut events = context.subscribe();
/// context.events().emit(Event::new(EventKind::ServerConnected));
/// assert_eq!(events.try_recv().unwrap().unwrap().kind, EventKind::ServerConnected);
/// assert_eq!(context.principal().unwrap().subject(), "alice");
/// assert!(!context.redactor().scrub("key tok-12345678").contains("tok-12345678"));
/// ```
pub struct RunContext {
    events: Arc<EventBus>,
    history: Option<Arc<History>>,
    outputs: OutputStore,
    redactor: Redactor,
    principal: Option<Principal>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("history", &self.history)
            .field("outputs", &self.outputs)
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl RunContext {
    /// A builder with no sink, no history, the default [`Redactor`] and [`OutputLimits`], and
    /// no principal.
    pub fn builder() -> RunContextBuilder {
        RunContextBuilder::default()
    }

    /// The run's event bus: every layer and session of the run emits on it.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.events
    }

    /// A new subscriber to the run's events (bounded: a slow subscriber is told it lagged,
    /// and never holds up a call).
    pub fn subscribe(&self) -> EventReceiver {
        self.events.subscribe()
    }

    /// The run's history, if it records one.
    pub fn history(&self) -> Option<&Arc<History>> {
        self.history.as_ref()
    }

    /// The run's kept outputs (the whole of a cut output, read back by handle).
    pub fn outputs(&self) -> &OutputStore {
        &self.outputs
    }

    /// The run's one secret engine: what every station of the run scrubs with. A clone shares
    /// what the run learns.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Who the run acts for, when known.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// Ends the run's state: drops kept outputs (deleting their temporary files) and closes
    /// the history, syncing it to disk. Reports a history write that failed during the run.
    /// Idempotent.
    pub fn close(&self) -> Result<(), HistoryError> {
        self.outputs.close();
        match &self.history {
            Some(history) => history.close(),
            None => Ok(()),
        }
    }
}

/// Builds a [`RunContext`].
///
/// ```
/// use agent_core::{OutputLimits, RunContext};
///
/// let context = RunContext::builder()
///     .output_limits(OutputLimits::default().with_max_output_bytes(4096))
///     .build();
/// assert_eq!(context.outputs().limits().max_output_bytes, 4096);
/// ```
#[derive(Clone)]
pub struct RunContextBuilder {
    sink: Arc<dyn EventSink>,
    capacity: usize,
    history: Option<Arc<History>>,
    limits: OutputLimits,
    reader: Option<String>,
    redactor: Redactor,
    principal: Option<Principal>,
}

impl Default for RunContextBuilder {
    fn default() -> Self {
        Self {
            sink: Arc::new(NoopEventSink),
            capacity: DEFAULT_EVENT_CAPACITY,
            history: None,
            limits: OutputLimits::default(),
            reader: None,
            redactor: Redactor::new(),
            principal: None,
        }
    }
}

impl std::fmt::Debug for RunContextBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContextBuilder")
            .field("capacity", &self.capacity)
            .field("history", &self.history)
            .field("limits", &self.limits)
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl RunContextBuilder {
    /// Sets the synchronous event sink.
    #[must_use]
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = sink;
        self
    }

    /// Sets how many events a subscriber may fall behind before it misses some.
    #[must_use]
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Records the run in `history`: its events to `events.jsonl`, each call and its result to
    /// `messages.jsonl`.
    #[must_use]
    pub fn history(mut self, history: Arc<History>) -> Self {
        self.history = Some(history);
        self
    }

    /// Sets the output limits of the run's [`OutputStore`].
    #[must_use]
    pub fn output_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Names the tool that reads kept outputs, in the markers of cut outputs.
    #[must_use]
    pub fn output_reader_name(mut self, name: impl Into<String>) -> Self {
        self.reader = Some(name.into());
        self
    }

    /// Sets the run's secret engine.
    #[must_use]
    pub fn redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The secret engine set so far.
    pub(crate) fn configured_redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Sets who the run acts for.
    #[must_use]
    pub fn principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// The context.
    pub fn build(self) -> RunContext {
        let mut bus = EventBus::with_capacity(self.sink, self.capacity);
        if let Some(history) = &self.history {
            bus = bus.with_sink(Arc::clone(history) as Arc<dyn EventSink>);
        }
        let outputs = match self.reader {
            Some(name) => OutputStore::new(self.limits).with_reader_name(name),
            None => OutputStore::new(self.limits),
        };
        RunContext {
            events: Arc::new(bus),
            history: self.history,
            outputs,
            redactor: self.redactor,
            principal: self.principal,
        }
    }
}
