//! Events: what happened during a run, for native and external tools alike.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{ToolError, Usage};

/// The kind of an [`Event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A tool call passed policy and approval and is about to run.
    ToolCallStarted,
    /// A tool call returned an output.
    ToolCallFinished,
    /// Policy or approval refused a tool call.
    ToolCallDenied,
    /// A tool call ran and failed.
    ToolCallFailed,
    /// A server session was opened and its tools listed.
    ServerConnected,
    /// A server could not be opened (with `skip_unavailable`, it was skipped).
    ServerFailed,
    /// A server's tool list changed and the catalog was updated.
    ToolsChanged,
    /// A tool search ranked by words alone although hybrid ranking is configured (the
    /// embedder failed, stalled or answered nonsense), or the embedding of the tools ran into
    /// trouble; `message` says what. The search itself still answered.
    SearchWarning,
    /// The agent loop asked the model and it answered (one per step: `step`, `duration`,
    /// `usage`, and how many tool calls it asked for in `tool_call_count`).
    ModelResponded,
    /// The agent loop ended with a final answer (`step`: the steps taken, `usage`: the
    /// run's total, `duration`: the whole run).
    RunFinished,
    /// A resource was read (`resources/read`) or refused: `server`, the URI in `target`,
    /// `outcome` (`ok`, `denied`, `transport`, …), `output_bytes` and `duration`.
    ResourceRead,
    /// A prompt was got (`prompts/get`) or refused: `server`, the prompt's name in
    /// `target`, `outcome`, `output_bytes` and `duration`.
    PromptGot,
    /// A subscribed resource changed (`notifications/resources/updated`): `server`, the URI
    /// in `target`, and in `message` how many notifications this event stands for (a flood is
    /// coalesced per URI, and what could not be kept is counted as dropped).
    ResourceUpdated,
    /// A skill's `SKILL.md` was loaded or one of its files read (skills extension), or either
    /// was refused: `server`, the file's URI in `target`, `outcome` (`ok`, `denied`,
    /// `transport` for a file that failed its digest or size check, …), `output_bytes` and
    /// `duration`.
    SkillRead,
    /// The agent loop ended without an answer (`message`: why; the step limit, a model
    /// failure or cancellation).
    RunFailed,
}

/// How a tool call ended.
///
/// ```
/// use agent_core::{CallOutcome, ToolError};
///
/// let err = ToolError::unknown_tool("nope", Vec::new());
/// assert_eq!(CallOutcome::of_error(&err), CallOutcome::UnknownTool);
/// assert_eq!(serde_json::to_value(CallOutcome::Truncated).unwrap(), "truncated");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallOutcome {
    /// The output reached the model whole.
    Ok,
    /// The output was cut to the output limit; the rest is readable through its handle.
    Truncated,
    /// Rules, policy or approval refused the call.
    Denied,
    /// No tool has that name.
    UnknownTool,
    /// The arguments were rejected before the call.
    InvalidArguments,
    /// The tool reported an error of its own.
    ToolError,
    /// The call did not finish within its timeout.
    Timeout,
    /// The connection to the server failed.
    Transport,
    /// A tool or the runner is misconfigured.
    Configuration,
    /// The call was abandoned before it finished (its caller stopped waiting, or the tool
    /// panicked).
    Cancelled,
}

impl CallOutcome {
    /// The outcome a [`ToolError`] stands for.
    pub fn of_error(error: &ToolError) -> Self {
        match error {
            ToolError::UnknownTool { .. } => Self::UnknownTool,
            ToolError::InvalidArguments { .. } => Self::InvalidArguments,
            ToolError::Denied { .. } => Self::Denied,
            ToolError::Invocation { .. } => Self::ToolError,
            ToolError::Timeout { .. } => Self::Timeout,
            ToolError::Transport { .. } => Self::Transport,
            ToolError::Configuration { .. } => Self::Configuration,
        }
    }
}

/// One event. Fields that do not apply to the kind are `None`. Never holds a secret.
///
/// ```
/// use agent_core::{Event, EventKind};
/// let e = Event::new(EventKind::ToolCallStarted).with_tool(Some("github"), "github__create_issue");
/// let json = serde_json::to_value(&e).unwrap();
/// assert_eq!(json["kind"], "tool_call_started");
/// assert_eq!(json["tool"], "github__create_issue");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Whom the run acted for (its principal's subject), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The server key, for server events and external tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The server's self-declared identity (MCP `serverInfo.name`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_identity: Option<String>,
    /// The real tool (`server__tool` for external tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The resource URI or prompt name, for resource and prompt events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The call id the model gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// How long it took.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_millis")]
    pub duration: Option<Duration>,
    /// Size of the arguments, in bytes of JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_bytes: Option<u64>,
    /// Size of the output as the model reads it, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// Size of the whole result before the output limit, in bytes (as the model would read
    /// it); larger than `output_bytes` when the output was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<u64>,
    /// The handle under which a cut output's full text can be read (the layer's
    /// [`OutputReader`](crate::OutputReader)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_handle: Option<String>,
    /// How a tool call ended, for `tool_call_*` end events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CallOutcome>,
    /// The error or denial reason, for failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The agent loop's step (1 for the first model answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// Tokens used: by one answer (`model_responded`) or the whole run (`run_finished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// How many tool calls the model asked for (`model_responded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_count: Option<u32>,
}

impl Event {
    /// An event of `kind` with no details.
    pub fn new(kind: EventKind) -> Self {
        Self {
            kind,
            principal: None,
            server: None,
            server_identity: None,
            tool: None,
            target: None,
            call_id: None,
            duration: None,
            input_bytes: None,
            output_bytes: None,
            result_bytes: None,
            output_handle: None,
            outcome: None,
            message: None,
            step: None,
            usage: None,
            tool_call_count: None,
        }
    }

    /// Sets the server's identity.
    #[must_use]
    pub fn with_server_identity(mut self, identity: Option<&str>) -> Self {
        self.server_identity = identity.map(str::to_owned);
        self
    }

    /// Sets the call id.
    #[must_use]
    pub fn with_call_id(mut self, call_id: &str) -> Self {
        self.call_id = Some(call_id.to_owned());
        self
    }

    /// Sets the outcome.
    #[must_use]
    pub fn with_outcome(mut self, outcome: CallOutcome) -> Self {
        self.outcome = Some(outcome);
        self
    }

    /// Sets the server and tool.
    #[must_use]
    pub fn with_tool(mut self, server: Option<&str>, tool: &str) -> Self {
        self.server = server.map(str::to_owned);
        self.tool = Some(tool.to_owned());
        self
    }

    /// Sets the server and the resource URI or prompt name.
    #[must_use]
    pub fn with_target(mut self, server: &str, target: &str) -> Self {
        self.server = Some(server.to_owned());
        self.target = Some(target.to_owned());
        self
    }

    /// Sets the server only.
    #[must_use]
    pub fn with_server(mut self, server: &str) -> Self {
        self.server = Some(server.to_owned());
        self
    }

    /// Sets the message.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Sets the duration.
    #[must_use]
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64() * 1000.0),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0)))
    }
}

/// Receives events. `emit` must not block: hand the event to a channel or a buffer.
///
/// ```
/// use std::sync::Mutex;
/// use agent_core::{Event, EventKind, EventSink};
///
/// #[derive(Default)]
/// struct Collect(Mutex<Vec<Event>>);
/// impl EventSink for Collect {
///     fn emit(&self, event: Event) {
///         self.0.lock().unwrap().push(event);
///     }
/// }
/// let sink = Collect::default();
/// sink.emit(Event::new(EventKind::ServerConnected).with_server("git"));
/// assert_eq!(sink.0.lock().unwrap().len(), 1);
/// ```
pub trait EventSink: Send + Sync {
    /// Records one event.
    fn emit(&self, event: Event);

    /// True when this sink drops every event unread, so that a bus with no other consumer need
    /// not build events at all (see [`EventBus::is_heard`](crate::EventBus::is_heard)). The
    /// default is `false`: a sink is assumed to want what it is given.
    fn discards(&self) -> bool {
        false
    }
}

/// Discards every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopEventSink;

impl EventSink for NoopEventSink {
    fn emit(&self, _event: Event) {}

    fn discards(&self) -> bool {
        true
    }
}
