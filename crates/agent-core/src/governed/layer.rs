//! The governed stack and its builder: resolution in front, then the layers, the dispatch
//! innermost.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tower_layer::Layer;

use super::approval::{ApprovalLayer, DEFAULT_APPROVAL_TIMEOUT};
use super::dispatch::Dispatch;
use super::events::{Events, EventsLayer};
use super::history::Recorded;
use super::identity::IdentityLayer;
use super::limit::{OutputLimit, OutputLimitLayer};
use super::metered::{Metrics, MetricsLayer};
use super::policy::PolicyLayer;
use super::timeout::TimeoutLayer;
use super::{BoxCallService, CallRequest, CallResolver, CallService, OutputReader, ResolvedCall};
use crate::{
    AllowAll, ApprovalGate, ApprovalRules, EventBus, EventReceiver, EventSink, History,
    HistoryError, IdentityRules, OutputLimits, OutputStore, Redactor, RunContext,
    RunContextBuilder, Runner, ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError,
    ToolOutput, ToolPolicy,
};

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
    /// The run state's settings: event sink and capacity, history, redactor, output limits.
    context: RunContextBuilder,
    output_reader: Option<Arc<dyn OutputReader>>,
}

impl std::fmt::Debug for GovernedLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernedLayer")
            .field("identity", &self.identity)
            .field("approval", &self.approval)
            .field("approval_timeout", &self.approval_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("context", &self.context)
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
            gate: Arc::new(super::approval::NoGate),
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            call_timeout: None,
            context: RunContext::builder(),
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
        self.context = self.context.event_sink(sink);
        self
    }

    /// Sets how many events a subscriber may fall behind before it misses some.
    #[must_use]
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.context = self.context.event_capacity(capacity);
        self
    }

    /// Records the session in `history`: events to `events.jsonl`, each call and its result
    /// (as the model sees it) to `messages.jsonl`.
    #[must_use]
    pub fn history(mut self, history: History) -> Self {
        self.context = self.context.history(Arc::new(history));
        self
    }

    /// Sets the redactor for approval prompts and event messages (the history applies its own
    /// to every line).
    #[must_use]
    pub fn redactor(mut self, redactor: Redactor) -> Self {
        self.context = self.context.redactor(redactor);
        self
    }

    /// The redactor set so far, for extending it with a run's own secrets
    /// (`layer.configured_redactor().clone().with_secrets(…)`).
    pub fn configured_redactor(&self) -> &Redactor {
        self.context.configured_redactor()
    }

    /// Sets the output limits.
    #[must_use]
    pub fn output_limits(mut self, limits: OutputLimits) -> Self {
        self.context = self.context.output_limits(limits);
        self
    }

    /// Sets the tool that reads the rest of cut outputs, which the layer lists and serves
    /// (see [`OutputReader`]).
    #[must_use]
    pub fn output_reader(mut self, reader: impl OutputReader) -> Self {
        self.output_reader = Some(Arc::new(reader));
        self
    }

    /// A builder of the run context this builder's settings describe (its event sink and
    /// capacity, history, redactor, output limits and output reader's name), for adding what
    /// only the run knows (its secrets, its principal) before [`layer_in`](Self::layer_in).
    pub fn run_context(&self) -> RunContextBuilder {
        // A learned set of the run's own: what one run learns, no other run sees.
        let redactor = self.configured_redactor().clone().with_own_learned();
        let mut context = self.context.clone().redactor(redactor);
        if let Some(reader) = &self.output_reader {
            context = context.output_reader_name(reader.name());
        }
        context
    }

    /// Wraps `inner` in a run context of its own ([`run_context`](Self::run_context)): each
    /// layered dispatcher has its own remembered approvals, kept outputs, event bus and learned
    /// secrets; a history can serve only one of them.
    pub fn layer<D: CallResolver + 'static>(self, inner: D) -> Governed<D> {
        let context = Arc::new(self.run_context().build());
        self.layer_in(context, inner)
    }

    /// Wraps `inner` in the run's `context`: its bus, history, kept outputs and secret engine
    /// serve the layers (the builder's own sink, history, redactor and output limits are then
    /// not used; the context names the output reader in its markers only if it was built with
    /// [`RunContextBuilder::output_reader_name`], as [`run_context`](Self::run_context) does).
    /// Approvals given "for the run" are remembered by the stack this call builds. The stack,
    /// outside in: history, then resolution, metrics, events, output limit, identity rules (only when
    /// there are some), policy, approval, timeout, and the dispatch, which alone holds the
    /// [`Permit`](super::Permit).
    pub fn layer_in<D: CallResolver + 'static>(
        self,
        context: Arc<RunContext>,
        inner: D,
    ) -> Governed<D> {
        let resolver = Arc::new(inner);
        let redactor = context.redactor().clone();
        // Rules naming principals apply only to the run's own.
        let principal = context.principal();
        let identity = self.identity.for_principal(principal);
        let approval = self.approval.for_principal(principal);
        let mut stack: BoxCallService<D::Target> = Arc::new(Dispatch {
            resolver: Arc::clone(&resolver),
        });
        stack = Arc::new(TimeoutLayer::new(self.call_timeout).layer(stack));
        stack = Arc::new(
            ApprovalLayer::new(approval)
                .gate(self.gate, self.approval_timeout)
                .redactor(redactor.clone())
                .layer(stack),
        );
        stack = Arc::new(PolicyLayer::new(self.policy, redactor.clone()).layer(stack));
        if !identity.is_empty() {
            stack = Arc::new(IdentityLayer::new(identity.clone()).layer(stack));
        }
        let events = EventsLayer::new(Arc::clone(context.events()), redactor);
        let limit = OutputLimitLayer::new(Arc::clone(&context));
        let stack: BoxCallService<D::Target> =
            Arc::new(MetricsLayer.layer(events.layer(limit.layer(stack))));
        let plain = MetricsLayer.layer(events.layer(limit.layer(Plain {
            context: Arc::clone(&context),
        })));
        let entry = Entry {
            resolver,
            stack,
            plain,
            output_reader: self.output_reader,
        };
        Governed {
            recorded: Recorded::new(context.history().cloned(), entry),
            identity,
            context,
        }
    }
}

/// A dispatcher whose every call goes through a stack of layers (see
/// [`GovernedLayer::layer_in`]): history, resolution, metrics, events, output limit, identity rules,
/// policy (`before_call`, and `after_call` once the call ran), approval, timeout, dispatch. It
/// also serves its [`OutputReader`], if it has one.
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
pub struct Governed<D: CallResolver> {
    recorded: Recorded<Entry<D>>,
    identity: IdentityRules,
    context: Arc<RunContext>,
}

impl<D: CallResolver> std::fmt::Debug for Governed<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governed")
            .field("identity", &self.identity)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// Resolution in front of the stack: the model's call becomes a [`CallRequest`] for the real
/// tool. What is no call of a tool (the output reader, a call that does not resolve) passes
/// only the metrics, the events and the output limit.
struct Entry<D: CallResolver> {
    resolver: Arc<D>,
    stack: BoxCallService<D::Target>,
    plain: Metrics<Events<OutputLimit<Plain>>>,
    output_reader: Option<Arc<dyn OutputReader>>,
}

/// What a call that reaches no resolver does.
enum Served {
    /// Read a kept output.
    Read(Arc<dyn OutputReader>),
    /// Fail with why the call is no call of a tool.
    Refused(ToolError),
}

/// Serves [`Served`] targets: the output reader, over the run's kept outputs.
struct Plain {
    context: Arc<RunContext>,
}

#[async_trait]
impl CallService<Served> for Plain {
    async fn call(&self, request: CallRequest<Served>) -> Result<ToolOutput, ToolError> {
        match request.target {
            Served::Read(reader) => {
                request.trace.start();
                reader.read(self.context.outputs(), &request.call.arguments)
            }
            Served::Refused(error) => Err(error),
        }
    }
}

impl<D: CallResolver> ToolDispatcher for Entry<D> {
    /// Resolves the call, then hands back the future of the stack it goes through (no future
    /// of the entry's own around it).
    fn dispatch<'life0, 'async_trait>(
        &'life0 self,
        call: ToolCall,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let began = Instant::now();
        let plain = |call: ToolCall, name: &str, target| {
            let resolved = ResolvedCall::meta(name, call.arguments.clone());
            let mut request = CallRequest::new(call, resolved, target);
            request.began = began;
            self.plain.call(request)
        };
        if let Some(reader) = &self.output_reader
            && call.name == reader.name()
        {
            return plain(call, reader.name(), Served::Read(Arc::clone(reader)));
        }
        if let Some(error) = call.arguments_error() {
            let name = call.name.clone();
            return plain(call, &name, Served::Refused(error));
        }
        let mut call = call;
        match self.resolver.resolve(&mut call) {
            Ok((resolved, target)) => {
                let mut request = CallRequest::new(call, resolved, target);
                request.began = began;
                self.stack.call(request)
            }
            Err(error) => {
                let name = call.name.clone();
                plain(call, &name, Served::Refused(error))
            }
        }
    }
}

impl<D: CallResolver> Governed<D> {
    /// The wrapped dispatcher.
    pub fn inner(&self) -> &D {
        &self.recorded.inner().resolver
    }

    /// The identity rules, for hiding the tools they refuse from the model.
    pub fn identity_rules(&self) -> &IdentityRules {
        &self.identity
    }

    /// The run context the layers serve: its bus, history, kept outputs and secret engine.
    pub fn context(&self) -> &Arc<RunContext> {
        &self.context
    }

    /// A new subscriber to this layer's events (bounded: a slow subscriber is told it lagged,
    /// and never holds up a call).
    pub fn subscribe(&self) -> EventReceiver {
        self.context.subscribe()
    }

    /// The run's event bus, for the wrapped side's own events (server connected, tools
    /// changed…), so that they reach the same sink, subscribers and history.
    pub fn events(&self) -> Arc<EventBus> {
        Arc::clone(self.context.events())
    }

    /// The secret engine of this layer's run: what it redacts from approval prompts, events
    /// and the history. A clone shares what the run learns, so whatever else prints for the
    /// run (a terminal, a log) uses it too.
    pub fn redactor(&self) -> &Redactor {
        self.context.redactor()
    }

    /// The history this layer records in, if any (an agent loop adds the conversation's own
    /// messages to it).
    pub fn history(&self) -> Option<&Arc<History>> {
        self.context.history()
    }

    /// The kept outputs (for reading a cut output whole, e.g. a `--full` flag).
    pub fn outputs(&self) -> &OutputStore {
        self.context.outputs()
    }

    /// The descriptor of the layer's [`OutputReader`], which it serves, if it has one.
    pub fn output_reader_descriptor(&self) -> Option<ToolDescriptor> {
        self.output_reader()
            .map(|reader| reader.descriptor(self.outputs()))
    }

    fn output_reader(&self) -> Option<&Arc<dyn OutputReader>> {
        self.recorded.inner().output_reader.as_ref()
    }

    /// Ends the layer's part of the run ([`RunContext::close`]): drops kept outputs (deleting
    /// their temporary files) and closes the history, syncing it to disk. Reports a history
    /// write that failed during the run. Idempotent. Does not close the wrapped dispatcher.
    pub fn shutdown(&self) -> Result<(), HistoryError> {
        self.context.close()
    }
}

impl<D: CallResolver> ToolDispatcher for Governed<D> {
    /// The stack's own future (no second one around it).
    fn dispatch<'life0, 'async_trait>(
        &'life0 self,
        call: ToolCall,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.recorded.dispatch(call)
    }
}

impl<D: CallResolver + ToolCatalog> ToolCatalog for Governed<D> {
    /// The wrapped side's tools, then the [`OutputReader`]'s (unless the wrapped side has a
    /// tool of that name).
    fn tools(&self) -> Vec<ToolDescriptor> {
        let mut tools = self.inner().tools();
        if let Some(reader) = self.output_reader()
            && !tools.iter().any(|t| t.name == reader.name())
        {
            tools.push(reader.descriptor(self.outputs()));
        }
        tools
    }

    /// The wrapped side's tool `name`, else the [`OutputReader`]'s descriptor when that is
    /// the name: what `tools` lists, without building the whole list.
    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.inner().tool(name).or_else(|| {
            self.output_reader()
                .filter(|reader| reader.name() == name)
                .map(|reader| reader.descriptor(self.outputs()))
        })
    }
}

#[async_trait]
impl<D: CallResolver + Runner> Runner for Governed<D> {
    /// Closes the wrapped runner, then the layer ([`Governed::shutdown`]; call that first to
    /// see a history failure).
    async fn close(&self) {
        self.inner().close().await;
        let _ = self.shutdown();
    }
}
