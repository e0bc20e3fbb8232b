//! The agent loop: the model answers or asks for tool calls; the calls run (several at once, up
//! to a bound) through whatever dispatcher the run has — for a governed runner, through rules,
//! approval, events and history — and their results go back to the model, until it answers
//! or the step limit is reached.
//!
//! The loop knows nothing of where tools come from: it works on any
//! [`ToolCatalog`] + [`ToolDispatcher`].

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::{
    AgentError, Event, EventKind, EventSink, History, Message, Model, ModelRequest, ModelSettings,
    NoopEventSink, Role, TextSink, ToolCall, ToolCatalog, ToolDispatcher, Usage,
};

/// The most model answers one run may take, by default.
pub const DEFAULT_MAX_STEPS: u32 = 20;

/// The most tool calls of one answer that run at once, by default.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 4;

/// How a run ended with an answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AgentOutcome {
    /// The model's final answer.
    pub answer: String,
    /// The whole conversation, the answer last.
    pub messages: Vec<Message>,
    /// Tokens used over the run, as the model reported them.
    pub usage: Usage,
    /// How many times the model was asked.
    pub steps: u32,
}

/// Drives a [`Model`] through a run's tools until it gives a final answer.
///
/// Each step asks the model with the conversation and the tools the catalog shows now (a
/// lazy surface may grow as tools are promoted). The tool calls of one answer run
/// concurrently, at most [`max_concurrent_calls`](Self::max_concurrent_calls) at once, and
/// their results go back in the order the model asked for them. A tool error or a denial is
/// a result like any other: the model reads it and the run goes on. Every step is an event
/// (`model_responded`), and the run's end is one (`run_finished` or `run_failed`).
///
/// Cancelling the token (or dropping the future) stops the run at once: calls in flight are
/// abandoned (a governed dispatcher reports them as cancelled).
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{AgentLoop, AsNative, GovernedLayer, Message, ScriptedModel, ToolCall,
///     ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use async_trait::async_trait;
/// use serde_json::json;
///
/// struct Clock;
/// #[async_trait]
/// impl ToolDispatcher for Clock {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("12:00"))
///     }
/// }
/// impl ToolCatalog for Clock {
///     fn tools(&self) -> Vec<ToolDescriptor> {
///         vec![ToolDescriptor::new("now", Default::default())]
///     }
/// }
///
/// let model = ScriptedModel::new([
///     Message::tool_calls(vec![ToolCall::from_json("1", "now", json!({})).unwrap()]),
///     Message::assistant("It is noon."),
/// ]);
/// let tools = GovernedLayer::new().layer(AsNative::new(Clock));
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let outcome = AgentLoop::new(Arc::new(model)).run(&tools, "What time is it?").await.unwrap();
/// assert_eq!(outcome.answer, "It is noon.");
/// assert_eq!(outcome.steps, 2);
/// # });
/// ```
#[derive(Clone)]
#[must_use]
pub struct AgentLoop {
    model: Arc<dyn Model>,
    max_steps: u32,
    max_concurrent_calls: usize,
    settings: ModelSettings,
    system: Option<String>,
    events: Arc<dyn EventSink>,
    text: Option<Arc<dyn TextSink>>,
    history: Option<Arc<History>>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for AgentLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoop")
            .field("max_steps", &self.max_steps)
            .field("max_concurrent_calls", &self.max_concurrent_calls)
            .field("settings", &self.settings)
            .field("system", &self.system.is_some())
            .field("history", &self.history)
            .finish_non_exhaustive()
    }
}

impl AgentLoop {
    /// A loop over `model` with the defaults: 20 steps, 4 concurrent calls, the model's own
    /// settings, no system prompt, events to no sink, no history.
    pub fn new(model: Arc<dyn Model>) -> Self {
        Self {
            model,
            max_steps: DEFAULT_MAX_STEPS,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            settings: ModelSettings::default(),
            system: None,
            events: Arc::new(NoopEventSink),
            text: None,
            history: None,
            cancel: CancellationToken::new(),
        }
    }

    /// Sets the most model answers of one run (at least 1).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// Sets the most tool calls that run at once (at least 1).
    pub fn max_concurrent_calls(mut self, calls: usize) -> Self {
        self.max_concurrent_calls = calls.max(1);
        self
    }

    /// Sets the model settings (tool choice, max tokens, temperature).
    pub fn settings(mut self, settings: ModelSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Sets a system prompt, put before the conversation.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// Sets where the loop's events go (for a governed runner, its bus, so that tool and
    /// loop events make one stream: [`Governed::events`](crate::Governed::events)).
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = sink;
        self
    }

    /// Streams the model's text as it arrives to `sink`.
    pub fn text_sink(mut self, sink: Arc<dyn TextSink>) -> Self {
        self.text = Some(sink);
        self
    }

    /// Records the conversation's own messages (the instruction, the model's text and its
    /// answer) in `history`. Tool calls and their results are recorded by the governed layer
    /// as they run, so give it the layer's history
    /// ([`Governed::history`](crate::Governed::history)).
    pub fn history(mut self, history: Arc<History>) -> Self {
        self.history = Some(history);
        self
    }

    /// Runs in the run's `context`: the loop's events go to the run's bus (one stream with the
    /// tool calls' events, reaching the same sink, subscribers and history) and its
    /// conversation to the run's history, if it records one. A later
    /// [`event_sink`](Self::event_sink) or [`history`](Self::history) overrides either.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{AgentLoop, RunContext, ScriptedModel};
    ///
    /// let context = RunContext::builder().build();
    /// let agent = AgentLoop::new(Arc::new(ScriptedModel::new(Vec::new()))).in_context(&context);
    /// # let _ = agent;
    /// ```
    pub fn in_context(mut self, context: &crate::RunContext) -> Self {
        self.events = Arc::clone(context.events()) as Arc<dyn EventSink>;
        self.history = context.history().cloned();
        self
    }

    /// Stops the run when `token` is cancelled.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Runs one instruction from the user to a final answer.
    pub async fn run<T>(&self, tools: &T, instruction: &str) -> Result<AgentOutcome, AgentError>
    where
        T: ToolCatalog + ToolDispatcher + ?Sized,
    {
        self.run_conversation(tools, vec![Message::new(Role::User, instruction)])
            .await
    }

    /// Runs a conversation (its last message usually the user's) to a final answer.
    pub async fn run_conversation<T>(
        &self,
        tools: &T,
        conversation: Vec<Message>,
    ) -> Result<AgentOutcome, AgentError>
    where
        T: ToolCatalog + ToolDispatcher + ?Sized,
    {
        let began = Instant::now();
        let mut messages = Vec::with_capacity(conversation.len() + 1);
        if let Some(system) = &self.system {
            messages.push(Message::new(Role::System, system.clone()));
        }
        for message in conversation {
            self.record(&message);
            messages.push(message);
        }
        let result = tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(AgentError::Cancelled),
            result = self.steps(tools, &mut messages) => result,
        };
        match result {
            Ok((answer, usage, steps)) => {
                let mut event = Event::new(EventKind::RunFinished).with_duration(began.elapsed());
                event.step = Some(steps);
                event.usage = Some(usage);
                self.events.emit(event);
                Ok(AgentOutcome {
                    answer,
                    messages,
                    usage,
                    steps,
                })
            }
            Err(error) => {
                self.events.emit(
                    Event::new(EventKind::RunFailed)
                        .with_duration(began.elapsed())
                        .with_message(crate::error_chain(&error)),
                );
                Err(error)
            }
        }
    }

    /// The steps of a run: `(answer, usage, steps)`.
    async fn steps<T>(
        &self,
        tools: &T,
        messages: &mut Vec<Message>,
    ) -> Result<(String, Usage, u32), AgentError>
    where
        T: ToolCatalog + ToolDispatcher + ?Sized,
    {
        let mut usage = Usage::default();
        let no_text = |_: &str| {};
        for step in 1..=self.max_steps {
            let request = ModelRequest::new(messages.clone(), tools.tools())
                .with_settings(self.settings.clone());
            let asked = Instant::now();
            let sink: &dyn TextSink = match &self.text {
                Some(sink) => &**sink,
                None => &no_text,
            };
            let response = self
                .model
                .complete_streaming(request, sink)
                .await
                .map_err(|source| AgentError::Model { step, source })?;
            let answer_usage = response.usage.unwrap_or_default();
            usage += answer_usage;
            let mut message = response.message;
            name_calls(&mut message.tool_calls, step);
            let mut event = Event::new(EventKind::ModelResponded).with_duration(asked.elapsed());
            event.step = Some(step);
            event.usage = Some(answer_usage);
            event.tool_call_count =
                Some(u32::try_from(message.tool_calls.len()).unwrap_or(u32::MAX));
            self.events.emit(event);
            if !message.content.is_empty() {
                self.record(&Message::new(Role::Assistant, message.content.clone()));
            }
            if message.tool_calls.is_empty() {
                let answer = message.content.clone();
                messages.push(message);
                return Ok((answer, usage, step));
            }
            let calls = message.tool_calls.clone();
            messages.push(message);
            let results: Vec<Message> = futures::stream::iter(calls)
                .map(|call| async move {
                    let id = call.id.clone();
                    if let Some(error) = call.arguments_error() {
                        return self.refuse_malformed(call, &error);
                    }
                    let text = match tools.dispatch(call).await {
                        Ok(output) => output.to_model_text(),
                        Err(error) => crate::error_chain(&error),
                    };
                    Message::tool_result(id, text)
                })
                .buffered(self.max_concurrent_calls)
                .collect()
                .await;
            messages.extend(results);
        }
        Err(AgentError::StepLimit {
            max_steps: self.max_steps,
        })
    }

    /// Answers a call whose arguments could not be read, without running it: the model is
    /// told why, the refusal is an event and, with a history, recorded like a call.
    fn refuse_malformed(&self, call: ToolCall, error: &crate::ToolError) -> Message {
        let text = error.to_string();
        self.events.emit(
            Event::new(EventKind::ToolCallFailed)
                .with_tool(None, &call.name)
                .with_call_id(&call.id)
                .with_outcome(crate::CallOutcome::of_error(error))
                .with_message(text.clone()),
        );
        let result = Message::tool_result(call.id.clone(), text);
        self.record(&Message::tool_calls(vec![call]));
        self.record(&result);
        result
    }

    fn record(&self, message: &Message) {
        if let Some(history) = &self.history {
            // A failed write is kept by the history and reported when it closes.
            let _ = history.append_message(message);
        }
    }
}

/// Gives every call an id, unique within the answer: a model may leave ids out or repeat
/// them, and each result must answer exactly one call.
fn name_calls(calls: &mut [ToolCall], step: u32) {
    let mut seen = std::collections::HashSet::new();
    for (i, call) in calls.iter_mut().enumerate() {
        if call.id.trim().is_empty() || !seen.insert(call.id.clone()) {
            call.id = format!("call_{step}_{i}");
            seen.insert(call.id.clone());
        }
    }
}

#[cfg(test)]
mod tests;
