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

/// What the model is asked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools it may call.
    pub tools: Vec<ToolDescriptor>,
}

impl ModelRequest {
    /// A request.
    pub fn new(messages: Vec<Message>, tools: Vec<ToolDescriptor>) -> Self {
        Self { messages, tools }
    }
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelResponse {
    /// The assistant message; tool calls in it are to be run.
    pub message: Message,
}

impl ModelResponse {
    /// A response.
    pub fn new(message: Message) -> Self {
        Self { message }
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
}
