//! The model: given the conversation and the tools, it answers or asks for tool calls.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{ModelError, ToolCall, ToolDescriptor};

/// Who wrote a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    #[serde(default)]
    pub content: String,
    /// Tool calls the model asks for (assistant messages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (tool messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message with text only.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// An assistant message with text only (a final answer).
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result answering `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }

    /// An assistant message asking for tool calls.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: calls,
            tool_call_id: None,
        }
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model may not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// How the model is asked: sampling and tool-choice settings. `None` leaves a setting to the
/// model's own default.
///
/// ```
/// use agent_core::{ModelSettings, ToolChoice};
///
/// let settings = ModelSettings::default()
///     .with_max_tokens(512)
///     .with_temperature(0.2)
///     .with_tool_choice(ToolChoice::Required);
/// assert_eq!(settings.max_tokens, Some(512));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ModelSettings {
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// The most tokens of one answer.
    pub max_tokens: Option<u32>,
    /// The sampling temperature.
    pub temperature: Option<f32>,
}

impl ModelSettings {
    /// Sets the tool choice.
    #[must_use]
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Sets the most tokens of one answer.
    #[must_use]
    pub fn with_max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = Some(tokens);
        self
    }

    /// Sets the sampling temperature.
    #[must_use]
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }
}

/// What the model is asked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools it may call.
    pub tools: Vec<ToolDescriptor>,
    /// Sampling and tool-choice settings.
    pub settings: ModelSettings,
}

impl ModelRequest {
    /// A request with the default settings.
    pub fn new(messages: Vec<Message>, tools: Vec<ToolDescriptor>) -> Self {
        Self {
            messages,
            tools,
            settings: ModelSettings::default(),
        }
    }

    /// Sets the settings.
    #[must_use]
    pub fn with_settings(mut self, settings: ModelSettings) -> Self {
        self.settings = settings;
        self
    }
}

/// Tokens a model used, as it reported them.
///
/// ```
/// use agent_core::Usage;
///
/// let mut total = Usage::default();
/// total += Usage::new(120, 30);
/// total += Usage::new(200, 10);
/// assert_eq!((total.input_tokens, total.output_tokens, total.total()), (320, 40, 360));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens of the prompt.
    pub input_tokens: u64,
    /// Tokens of the answer.
    pub output_tokens: u64,
}

impl Usage {
    /// A usage report.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
        }
    }

    /// Input and output tokens together.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelResponse {
    /// The assistant message; tool calls in it are to be run.
    pub message: Message,
    /// The tokens this answer used, when the model reported them.
    pub usage: Option<Usage>,
}

impl ModelResponse {
    /// A response.
    pub fn new(message: Message) -> Self {
        Self {
            message,
            usage: None,
        }
    }

    /// Sets the usage.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Receives the text of an answer as it arrives, piece by piece.
pub trait TextSink: Send + Sync {
    /// One piece of the answer's text.
    fn text(&self, delta: &str);
}

impl<F: Fn(&str) + Send + Sync> TextSink for F {
    fn text(&self, delta: &str) {
        self(delta);
    }
}

/// A chat model with tool calling.
///
/// ```
/// use agent_core::{Message, Model, ModelError, ModelRequest, ModelResponse, Role};
/// use async_trait::async_trait;
///
/// struct Parrot;
/// #[async_trait]
/// impl Model for Parrot {
///     async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
///         let last = req.messages.last().map(|m| m.content.clone()).unwrap_or_default();
///         Ok(ModelResponse::new(Message::new(Role::Assistant, last)))
///     }
/// }
/// ```
#[async_trait]
pub trait Model: Send + Sync {
    /// Produces the next assistant message.
    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError>;

    /// Produces the next assistant message, handing its text to `text` as it arrives. A model
    /// that cannot stream answers whole (the default: `complete`, then the whole text at
    /// once).
    async fn complete_streaming(
        &self,
        request: ModelRequest,
        text: &dyn TextSink,
    ) -> Result<ModelResponse, ModelError> {
        let response = self.complete(request).await?;
        if !response.message.content.is_empty() {
            text.text(&response.message.content);
        }
        Ok(response)
    }
}
