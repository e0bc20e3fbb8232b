//! What one run owns: its event bus, its history, its kept outputs, its secret engine and the
//! principal it acts for. A library run, `run`, `tools call` and each gateway session build
//! one; the governed layers and the run's sessions receive it. Nothing of a run is
//! process-wide, so two runs in one process never see each other's secrets or outputs.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{
    DEFAULT_EVENT_CAPACITY, EventBus, EventReceiver, EventSink, History, HistoryError,
    NoopEventSink, OutputLimits, OutputStore, Redactor,
};

/// Who a run acts for: the authenticated subject of a gateway session (a token's `sub`, its
/// granted scopes and the claims the gateway is told to keep), or the local user of a library
/// run or the CLI. `[policy]` rules that name a subject, scopes or claims apply only to the
/// principals they match ([`Rule::applies_to`](crate::Rule::applies_to)).
///
/// ```
/// use agent_core::Principal;
///
/// let alice = Principal::new("alice@example.com")
///     .with_scopes(["files:read", "files:write"])
///     .with_claim("groups", ["admins", "staff"]);
/// assert_eq!(alice.subject(), "alice@example.com");
/// assert!(alice.has_scope("files:write"));
/// assert_eq!(alice.claim("groups"), ["admins", "staff"]);
/// assert!(alice.claim("department").is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    subject: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    claims: BTreeMap<String, Vec<String>>,
}

impl Principal {
    /// The principal named `subject`, with no scopes or claims.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            scopes: Vec::new(),
            claims: BTreeMap::new(),
        }
    }

    /// The same principal, granted `scopes`.
    #[must_use]
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The same principal, with claim `name` holding `values` (a claim of one value is a
    /// list of one).
    #[must_use]
    pub fn with_claim<S: Into<String>>(
        mut self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        self.claims
            .insert(name.into(), values.into_iter().map(Into::into).collect());
        self
    }

    /// Its name.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The scopes it was granted.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// True when it was granted `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The values of claim `name` (none when it has no such claim).
    pub fn claim(&self, name: &str) -> &[String] {
        self.claims.get(name).map_or(&[], Vec::as_slice)
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
        if let Some(principal) = &self.principal {
            bus = bus.with_principal(principal.subject());
        }
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
