//! Events: what happened during a run, for native and external tools alike.

use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// The server key, for server events and external tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The real tool (`server__tool` for external tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
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
    /// The error or denial reason, for failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Event {
    /// An event of `kind` with no details.
    pub fn new(kind: EventKind) -> Self {
        Self {
            kind,
            server: None,
            tool: None,
            call_id: None,
            duration: None,
            input_bytes: None,
            output_bytes: None,
            message: None,
        }
    }

    /// Sets the server and tool.
    #[must_use]
    pub fn with_tool(mut self, server: Option<&str>, tool: &str) -> Self {
        self.server = server.map(str::to_owned);
        self.tool = Some(tool.to_owned());
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
}

/// Discards every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopEventSink;

impl EventSink for NoopEventSink {
    fn emit(&self, _event: Event) {}
}
