//! Agent-side traits and types shared by every other crate of the workspace.
//!
//! This crate defines *what* an agent run is made of — tools and their descriptors, a
//! [`ToolCatalog`] the model sees, a [`ToolDispatcher`] that executes calls, a [`Runner`] scoped
//! to one run and the [`RunnerFactory`] that opens it, a [`ToolPolicy`], an [`ApprovalGate`],
//! an [`EventSink`] and a [`Model`] — and nothing about *how* tools are reached.
//!
//! It also holds the transport-agnostic core that governs every call: the [`Governed`] layer
//! ([`GovernedLayer`] builds it around any [`CallResolver`]; [`AsNative`] adapts a plain
//! [`ToolDispatcher`]) with its [`IdentityRules`], [`ApprovalRules`], [`OutputStore`] (the
//! output limit, read back through an [`OutputReader`]), [`EventBus`] and [`History`].
//!
//! # Architecture invariant
//!
//! `agent-core` depends on no MCP library, no HTTP stack and no process spawning. A tidy test
//! (`cargo xtask tidy`) fails if `cargo tree -p agent-core` ever contains `rmcp`, `hyper` or
//! tokio's `process` feature. Everything MCP-specific implements these traits from elsewhere.

mod agent;
mod approval;
mod bus;
mod context;
mod error;
mod event;
mod governed;
mod history;
mod model;
mod output;
mod policy;
pub mod progress;
mod redact;
mod rules;
mod run;
mod scripted;
pub mod telemetry;
mod tool;
pub mod trace;

#[cfg(feature = "testing")]
pub mod testing;

/// The token that cancels an [`AgentLoop`] run ([`AgentLoop::cancel_on`]).
pub use tokio_util::sync::CancellationToken;

pub use agent::{AgentLoop, AgentOutcome, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_STEPS};
pub use approval::{ApprovalDecision, ApprovalGate, ApprovalRequest, AutoApprove};
pub use bus::{DEFAULT_EVENT_CAPACITY, EventBus, EventReceiver};
pub use context::{Principal, RunContext, RunContextBuilder};
pub use error::{
    AgentError, BoxError, EventRecvError, HistoryError, ModelError, OutputError, RunnerError,
    ToolError, error_chain,
};
pub use event::{CallOutcome, Event, EventKind, EventSink, NoopEventSink};
pub use governed::{
    Approval, ApprovalLayer, AsNative, BoxCallService, CallKind, CallRequest, CallResolver,
    CallService, CallTrace, DEFAULT_APPROVAL_TIMEOUT, Events, EventsLayer, Governed, GovernedLayer,
    HistoryLayer, Identity, IdentityLayer, MAX_PROMPT_ARGUMENT_BYTES, MAX_PROMPT_ARGUMENTS,
    Metrics, MetricsLayer, OutputLimit, OutputLimitLayer, OutputReader, Permit, Policy,
    PolicyLayer, ReadSubject, Recorded, ResolvedCall, Shown, Timeout, TimeoutLayer,
};
pub use history::{
    EVENTS_FILE, History, InvalidLine, JsonlLines, LOCK_FILE, MAX_JSONL_LINE_BYTES, MESSAGES_FILE,
    OversizedLine, SessionHistory, TornLine, read_jsonl, read_jsonl_with_limit,
};
pub use model::{
    Message, Model, ModelRequest, ModelResponse, ModelSettings, Role, TextSink, ToolChoice, Usage,
};
pub use output::{
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SPILL_BYTES, Limited, LimitedError, MIN_MAX_OUTPUT_BYTES,
    OutputChunk, OutputLimits, OutputStore, SPILL_ROOT, SpillArea, spill_root,
};
pub use policy::{AllowAll, CallInfo, PolicyDecision, ToolPolicy};
pub use redact::{MAX_LEARNED_SECRETS, MIN_SECRET_LEN, REDACTED, Redactor, Secret, SecretSink};
pub use rules::{ApprovalRules, ApprovalTrigger, Denial, IdentityRules, Rule};
pub use run::{RunInput, RunScope, Runner, RunnerFactory, with_runner};
pub use scripted::ScriptedModel;
pub use tool::{
    ContentPart, JsonObject, ResourceContents, ToolAnnotations, ToolCall, ToolCatalog,
    ToolDescriptor, ToolDispatcher, ToolOutput, json_len,
};
/// The trait every governance layer implements (`tower-layer`'s), for stacking them.
pub use tower_layer::Layer;
