//! The governed layer and its builder.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::approval::{self, Answer, NoGate};
use super::{CallKind, CallResolver, OutputReader, Permit, ResolvedCall};
use crate::{
    AllowAll, ApprovalDecision, ApprovalGate, ApprovalRules, ApprovalTrigger, CallOutcome,
    DEFAULT_EVENT_CAPACITY, Event, EventBus, EventKind, EventReceiver, EventSink, History,
    HistoryError, IdentityRules, JsonObject, Message, NoopEventSink, OutputLimits, OutputStore,
    PolicyDecision, Redactor, Role, Runner, ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher,
    ToolError, ToolOutput, ToolPolicy,
};

/// How long the approval gate may take to answer, by default: 5 minutes.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Builds a [`Governed`] layer around any [`CallResolver`] (tower-style: configure once,
/// [`layer`](Self::layer) each dispatcher).
///
/// Defaults: no identity rules, no approval rules, the [`AllowAll`] policy, no approval gate
/// (a call that needs approval is then denied), a 5-minute approval timeout, no call timeout
/// of its own, events to no sink (subscribers still get them), no history, the default
/// [`Redactor`] and [`OutputLimits`], no [`OutputReader`].
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{AsNative, AutoApprove, GovernedLayer, IdentityRules, Rule, ToolCall,
///     ToolDispatcher, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// struct Echo;
/// #[async_trait]
/// impl ToolDispatcher for Echo {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::structured(call.arguments.into()))
///     }
/// }
///
/// let governed = GovernedLayer::new()
///     .identity_rules(IdentityRules::default().deny(Rule::new("*", "delete_*")))
///     .approval_gate(Arc::new(AutoApprove))
///     .layer(AsNative::new(Echo));
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let out = governed.dispatch(ToolCall::from_json("1", "echo", serde_json::json!({"a": 1})).unwrap()).await;
/// assert_eq!(out.unwrap().to_model_text(), r#"{"a":1}"#);
/// # });
/// ```
#[derive(Clone)]
pub struct GovernedLayer {
    identity: IdentityRules,
    approval: ApprovalRules,
    policy: Arc<dyn ToolPolicy>,
    gate: Arc<dyn ApprovalGate>,
    approval_timeout: Duration,
    call_timeout: Option<Duration>,
    sink: Arc<dyn EventSink>,
    event_capacity: usize,
    history: Option<Arc<History>>,
    redactor: Redactor,
    output: OutputLimits,
    output_reader: Option<Arc<dyn OutputReader>>,
}

impl std::fmt::Debug for GovernedLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernedLayer")
            .field("identity", &self.identity)
            .field("approval", &self.approval)
            .field("approval_timeout", &self.approval_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("history", &self.history)
            .field("output", &self.output)
            .field(
                "output_reader",
                &self.output_reader.as_ref().map(|r| r.name().to_owned()),
            )
            .finish_non_exhaustive()
    }
}

impl Default for GovernedLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl GovernedLayer {
    /// A builder with the defaults.
    pub fn new() -> Self {
        Self {
            identity: IdentityRules::default(),
            approval: ApprovalRules::default(),
            policy: Arc::new(AllowAll),
            gate: Arc::new(NoGate),
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            call_timeout: None,
            sink: Arc::new(NoopEventSink),
            event_capacity: DEFAULT_EVENT_CAPACITY,
            history: None,
            redactor: Redactor::new(),
            output: OutputLimits::default(),
            output_reader: None,
        }
    }

    /// Sets the identity rules (`[policy] allow` / `deny`).
    #[must_use]
    pub fn identity_rules(mut self, rules: IdentityRules) -> Self {
        self.identity = rules;
        self
    }

    /// Sets the approval rules (`[policy] approve`, `approve_destructive`,
    /// `approve_open_world`).
    #[must_use]
    pub fn approval_rules(mut self, rules: ApprovalRules) -> Self {
        self.approval = rules;
        self
    }

    /// Sets the tool policy, asked before and told after every call.
    #[must_use]
    pub fn policy(mut self, policy: Arc<dyn ToolPolicy>) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the approval gate.
    #[must_use]
    pub fn approval_gate(mut self, gate: Arc<dyn ApprovalGate>) -> Self {
        self.gate = gate;
        self
    }

    /// Sets how long the gate may take before the call is denied.
    #[must_use]
    pub fn approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// Sets the timeout of calls whose [`ResolvedCall::timeout`] is `None`.
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Sets the synchronous event sink.
    #[must_use]
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = sink;
        self
    }

    /// Sets how many events a subscriber may fall behind before it misses some.
    #[must_use]
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// Records the session in `history`: events to `events.jsonl`, each call and its result
    /// (as the model sees it) to `messages.jsonl`.
    #[must_use]
    pub fn history(mut self, history: History) -> Self {
        self.history = Some(Arc::new(history));
        self
    }

    /// Sets the redactor for approval prompts and event messages (the history applies its own
    /// to every line).
    #[must_use]
    pub fn redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The redactor set so far, for extending it with a run's own secrets
    /// (`layer.configured_redactor().clone().with_secrets(…)`).
    pub fn configured_redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Sets the output limits.
    #[must_use]
    pub fn output_limits(mut self, limits: OutputLimits) -> Self {
        self.output = limits;
        self
    }

    /// Sets the tool that reads the rest of cut outputs, which the layer lists and serves
    /// (see [`OutputReader`]).
    #[must_use]
    pub fn output_reader(mut self, reader: impl OutputReader) -> Self {
        self.output_reader = Some(Arc::new(reader));
        self
    }

    /// Wraps `inner`. Each layered dispatcher has its own remembered approvals, kept outputs
    /// and event bus; a history can serve only one of them.
    pub fn layer<D: CallResolver>(self, inner: D) -> Governed<D> {
        let mut bus = EventBus::with_capacity(self.sink, self.event_capacity);
        if let Some(history) = &self.history {
            bus = bus.with_sink(Arc::clone(history) as Arc<dyn EventSink>);
        }
        Governed {
            inner,
            identity: self.identity,
            approval: self.approval,
            policy: self.policy,
            gate: self.gate,
            approval_timeout: self.approval_timeout,
            call_timeout: self.call_timeout,
            bus: Arc::new(bus),
            history: self.history,
            redactor: self.redactor,
            outputs: match &self.output_reader {
                Some(reader) => OutputStore::new(self.output).with_reader_name(reader.name()),
                None => OutputStore::new(self.output),
            },
            output_reader: self.output_reader,
            allowed_for_run: Mutex::new(HashSet::new()),
        }
    }
}

/// A dispatcher whose every call goes through, in order: resolve → identity rules → policy
/// `before_call` → approval → dispatch (with the call's timeout) → policy `after_call` →
/// output limit → events → history. It also serves its [`OutputReader`], if it has one.
///
/// A refused call returns [`ToolError::Denied`] naming the rule, so the model reads it as a
/// tool error and the run goes on.
///
/// Events: `tool_call_started` right before a call runs (after rules and approval), then
/// exactly one of `tool_call_finished` or `tool_call_failed` (also when the caller stops
/// waiting: outcome `cancelled`); a refused call emits only `tool_call_denied`, a call that
/// does not resolve only `tool_call_failed`. Events name the real tool, its server key and
/// identity, the call id, duration and sizes; messages are redacted.
///
/// Timeouts need a Tokio runtime with its time driver enabled (as `#[tokio::main]` gives).
///
/// The [`OutputReader`] is served by the layer without rules, policy or approval (it reads
/// outputs of calls that were already allowed), with events and history like any call.
///
/// ```
/// use agent_core::{AsNative, EventKind, GovernedLayer, OutputLimits, ToolCall, ToolDispatcher,
///     ToolError, ToolOutput};
/// use async_trait::async_trait;
/// use serde_json::json;
///
/// struct Logs;
/// #[async_trait]
/// impl ToolDispatcher for Logs {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("line\n".repeat(1000)))
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let governed = GovernedLayer::new()
///     .output_limits(OutputLimits::default().with_max_output_bytes(1024))
///     .layer(AsNative::new(Logs));
/// let mut events = governed.subscribe();
///
/// let out = governed.dispatch(ToolCall::from_json("1", "logs", json!({})).unwrap()).await.unwrap();
/// assert!(out.to_model_text().len() <= 1024);
/// assert_eq!(events.recv().await.unwrap().kind, EventKind::ToolCallStarted);
/// let finished = events.recv().await.unwrap();
/// assert_eq!(finished.result_bytes, Some(5000));
///
/// // The rest of the output, kept under the handle.
/// let handle = finished.output_handle.unwrap();
/// let rest = governed.outputs().read(&handle, 4990, 100).unwrap();
/// assert_eq!(rest.text, "line\nline\n");
/// governed.shutdown().unwrap();
/// # });
/// ```
pub struct Governed<D> {
    inner: D,
    identity: IdentityRules,
    approval: ApprovalRules,
    policy: Arc<dyn ToolPolicy>,
    gate: Arc<dyn ApprovalGate>,
    approval_timeout: Duration,
    call_timeout: Option<Duration>,
    bus: Arc<EventBus>,
    history: Option<Arc<History>>,
    redactor: Redactor,
    outputs: OutputStore,
    output_reader: Option<Arc<dyn OutputReader>>,
    /// Action refs approved for the rest of the run.
    allowed_for_run: Mutex<HashSet<String>>,
}

impl<D> std::fmt::Debug for Governed<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governed")
            .field("identity", &self.identity)
            .field("approval", &self.approval)
            .field("outputs", &self.outputs)
            .field("history", &self.history)
            .finish_non_exhaustive()
    }
}

/// Who an event is about.
struct Subject {
    tool: String,
    server: Option<String>,
    identity: Option<String>,
    call_id: String,
    input_bytes: u64,
}

impl Subject {
    fn of(resolved: &ResolvedCall, call_id: &str) -> Self {
        Self {
            tool: resolved.action_ref.clone(),
            server: resolved.server.clone(),
            identity: resolved.server_identity.clone(),
            call_id: call_id.to_owned(),
            input_bytes: json_len(&resolved.arguments),
        }
    }

    fn unresolved(call: &ToolCall) -> Self {
        Self {
            tool: call.name.clone(),
            server: None,
            identity: None,
            call_id: call.id.clone(),
            input_bytes: json_len(&call.arguments),
        }
    }

    fn event(&self, kind: EventKind, began: Instant) -> Event {
        let mut event = Event::new(kind)
            .with_tool(self.server.as_deref(), &self.tool)
            .with_server_identity(self.identity.as_deref())
            .with_call_id(&self.call_id);
        event.input_bytes = Some(self.input_bytes);
        if kind != EventKind::ToolCallStarted {
            event.duration = Some(began.elapsed());
        }
        event
    }
}

/// The size of `value` as JSON, without building the text.
fn json_len(value: &JsonObject) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Emits the end event of a started call if the call is dropped before it ends.
struct Unfinished<'a> {
    bus: &'a EventBus,
    subject: &'a Subject,
    began: Instant,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            let why = if std::thread::panicking() {
                "the tool panicked"
            } else {
                "the call was abandoned before it finished"
            };
            self.bus.emit(
                self.subject
                    .event(EventKind::ToolCallFailed, self.began)
                    .with_outcome(CallOutcome::Cancelled)
                    .with_message(why),
            );
        }
    }
}

impl<D> Governed<D> {
    /// The wrapped dispatcher.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The identity rules, for hiding the tools they refuse from the model.
    pub fn identity_rules(&self) -> &IdentityRules {
        &self.identity
    }

    /// A new subscriber to this layer's events (bounded: a slow subscriber is told it lagged,
    /// and never holds up a call).
    pub fn subscribe(&self) -> EventReceiver {
        self.bus.subscribe()
    }

    /// The layer's event bus, for the wrapped side's own events (server connected, tools
    /// changed…), so that they reach the same sink, subscribers and history.
    pub fn events(&self) -> Arc<EventBus> {
        Arc::clone(&self.bus)
    }

    /// The secret engine of this layer's run: what it redacts from approval prompts, events
    /// and the history. A clone shares what the run learns, so whatever else prints for the
    /// run (a terminal, a log) uses it too.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The history this layer records in, if any (an agent loop adds the conversation's own
    /// messages to it).
    pub fn history(&self) -> Option<&Arc<History>> {
        self.history.as_ref()
    }

    /// The kept outputs (for reading a cut output whole, e.g. a `--full` flag).
    pub fn outputs(&self) -> &OutputStore {
        &self.outputs
    }

    /// The descriptor of the layer's [`OutputReader`], which it serves, if it has one.
    pub fn output_reader_descriptor(&self) -> Option<ToolDescriptor> {
        self.output_reader
            .as_ref()
            .map(|reader| reader.descriptor(&self.outputs))
    }

    /// Ends the layer's part of the run: drops kept outputs (deleting their temporary files)
    /// and closes the history, syncing it to disk. Reports a history write that failed during
    /// the run. Idempotent. Does not close the wrapped dispatcher.
    pub fn shutdown(&self) -> Result<(), HistoryError> {
        self.outputs.close();
        match &self.history {
            Some(history) => history.close(),
            None => Ok(()),
        }
    }

    fn record(&self, message: &Message) {
        if let Some(history) = &self.history {
            // A failure is kept by the history and reported when it closes.
            let _ = history.append_message(message);
        }
    }

    fn denied(resolved: &ResolvedCall, reason: String) -> ToolError {
        ToolError::Denied {
            server: resolved.server.clone(),
            tool: resolved.action_ref.clone(),
            reason,
        }
    }

    /// Identity rules, policy and approval; `Err` is the denial.
    async fn check(&self, resolved: &ResolvedCall) -> Result<(), ToolError> {
        let identity = resolved.server_identity.as_deref();
        let remote = match resolved.kind {
            CallKind::External => resolved.remote_tool.as_deref(),
            CallKind::Native | CallKind::Meta => None,
        };
        if let Some(remote) = remote
            && let Err(denial) = self.identity.allows(identity, remote)
        {
            return Err(Self::denied(resolved, denial.to_string()));
        }
        let mut trigger = match self.policy.before_call(&resolved.call_info()) {
            PolicyDecision::Allow => None,
            PolicyDecision::RequireApproval => Some(ApprovalTrigger::Policy),
            PolicyDecision::Deny { reason } => {
                return Err(Self::denied(
                    resolved,
                    format!(
                        "the tool policy refused it: {}",
                        self.redactor.redact_text(&reason)
                    ),
                ));
            }
        };
        if trigger.is_none() && resolved.kind != CallKind::Meta {
            trigger = self
                .approval
                .requires(identity, remote, &resolved.annotations);
        }
        let Some(trigger) = trigger else {
            return Ok(());
        };
        if self
            .allowed_for_run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&resolved.action_ref)
        {
            return Ok(());
        }
        let request = approval::request(resolved, &trigger, &self.redactor);
        let why = match approval::ask(&*self.gate, request, self.approval_timeout).await {
            Answer::Decided(ApprovalDecision::Approved) => return Ok(()),
            Answer::Decided(ApprovalDecision::ApprovedForRun) => {
                self.allowed_for_run
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(resolved.action_ref.clone());
                return Ok(());
            }
            Answer::Decided(ApprovalDecision::Rejected { reason }) => {
                format!("it was refused: {}", self.redactor.redact_text(&reason))
            }
            Answer::Decided(ApprovalDecision::Failed { message }) => format!(
                "the approval gate failed: {}",
                self.redactor.redact_text(&message)
            ),
            Answer::TimedOut => format!(
                "the approval gate did not answer within {} s",
                self.approval_timeout.as_secs_f64()
            ),
            Answer::Panicked => String::from("the approval gate panicked"),
        };
        Err(Self::denied(
            resolved,
            format!("approval required by {trigger} was not given: {why}"),
        ))
    }

    /// Cuts `error`'s text to the output limit, emits the end event of its call (with the
    /// sizes of the text shown and whole, and the handle of the whole) and returns what the
    /// caller gets.
    fn fail(&self, subject: &Subject, began: Instant, error: ToolError) -> ToolError {
        let limited = self.outputs.limit_error(error);
        let error = limited.error;
        let kind = match error {
            ToolError::Denied { .. } => EventKind::ToolCallDenied,
            _ => EventKind::ToolCallFailed,
        };
        let mut event = subject
            .event(kind, began)
            .with_outcome(CallOutcome::of_error(&error))
            .with_message(self.redactor.redact_text(&crate::error_chain(&error)));
        if limited.handle.is_some() || limited.full_bytes > limited.shown_bytes {
            event.output_bytes = Some(limited.shown_bytes);
            event.result_bytes = Some(limited.full_bytes);
            event.output_handle = limited.handle;
        }
        self.bus.emit(event);
        error
    }

    fn finish(&self, subject: &Subject, began: Instant, output: ToolOutput) -> ToolOutput {
        let limited = self.outputs.limit(output);
        let outcome = if limited.is_cut() {
            CallOutcome::Truncated
        } else {
            CallOutcome::Ok
        };
        let mut event = subject
            .event(EventKind::ToolCallFinished, began)
            .with_outcome(outcome);
        event.output_bytes = Some(limited.shown_bytes);
        event.result_bytes = Some(limited.full_bytes);
        event.output_handle = limited.handle;
        self.bus.emit(event);
        limited.output
    }
}

impl<D: CallResolver> Governed<D> {
    async fn run(&self, call: ToolCall, began: Instant) -> Result<ToolOutput, ToolError> {
        if let Some(reader) = &self.output_reader
            && call.name == reader.name()
        {
            let subject = Subject::of(
                &ResolvedCall::meta(reader.name(), call.arguments.clone()),
                &call.id,
            );
            self.bus
                .emit(subject.event(EventKind::ToolCallStarted, began));
            return match reader.read(&self.outputs, &call.arguments) {
                Ok(output) => Ok(self.finish(&subject, began, output)),
                Err(error) => Err(self.fail(&subject, began, error)),
            };
        }
        if let Some(error) = call.arguments_error() {
            return Err(self.fail(&Subject::unresolved(&call), began, error));
        }
        let (resolved, target) = match self.inner.resolve(&call) {
            Ok(resolved) => resolved,
            Err(error) => {
                return Err(self.fail(&Subject::unresolved(&call), began, error));
            }
        };
        let subject = Subject::of(&resolved, &call.id);
        if let Err(error) = self.check(&resolved).await {
            return Err(self.fail(&subject, began, error));
        }
        let began = Instant::now();
        self.bus
            .emit(subject.event(EventKind::ToolCallStarted, began));
        let mut unfinished = Unfinished {
            bus: &self.bus,
            subject: &subject,
            began,
            armed: true,
        };
        let running = self.inner.dispatch_resolved(Permit::new(), call, target);
        let outcome = match resolved.timeout.or(self.call_timeout) {
            Some(after) => tokio::time::timeout(after, running)
                .await
                .unwrap_or_else(|_| {
                    Err(ToolError::Timeout {
                        server: resolved.server.clone(),
                        tool: resolved.action_ref.clone(),
                        after,
                    })
                }),
            None => running.await,
        };
        unfinished.armed = false;
        self.policy.after_call(&resolved.call_info(), &outcome);
        match outcome {
            Ok(output) => Ok(self.finish(&subject, began, output)),
            Err(error) => Err(self.fail(&subject, began, error)),
        }
    }
}

#[async_trait]
impl<D: CallResolver> ToolDispatcher for Governed<D> {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let began = Instant::now();
        let call_id = call.id.clone();
        if self.history.is_some() {
            let mut asked = Message::new(Role::Assistant, "");
            asked.tool_calls.push(call.clone());
            self.record(&asked);
        }
        let result = self.run(call, began).await;
        if self.history.is_some() {
            let text = match &result {
                Ok(output) => output.to_model_text(),
                Err(error) => crate::error_chain(error),
            };
            self.record(&Message::tool_result(call_id, text));
        }
        result
    }
}

impl<D: CallResolver + ToolCatalog> ToolCatalog for Governed<D> {
    /// The wrapped side's tools, then the [`OutputReader`]'s (unless the wrapped side has a
    /// tool of that name).
    fn tools(&self) -> Vec<ToolDescriptor> {
        let mut tools = self.inner.tools();
        if let Some(reader) = &self.output_reader
            && !tools.iter().any(|t| t.name == reader.name())
        {
            tools.push(reader.descriptor(&self.outputs));
        }
        tools
    }

    /// The wrapped side's tool `name`, else the [`OutputReader`]'s descriptor when that is
    /// the name: what `tools` lists, without building the whole list.
    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.inner.tool(name).or_else(|| {
            self.output_reader
                .as_ref()
                .filter(|reader| reader.name() == name)
                .map(|reader| reader.descriptor(&self.outputs))
        })
    }
}

#[async_trait]
impl<D: CallResolver + Runner> Runner for Governed<D> {
    /// Closes the wrapped runner, then the layer ([`Governed::shutdown`]; call that first to
    /// see a history failure).
    async fn close(&self) {
        self.inner.close().await;
        let _ = self.shutdown();
    }
}
