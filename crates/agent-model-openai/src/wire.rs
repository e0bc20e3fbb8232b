//! The chat-completions wire format: the request built from an [`agent_core::ModelRequest`],
//! and the answers (a whole completion, a stream chunk, an error object) as sent.

use agent_core::{Message, ModelRequest, ModelSettings, Role, ToolCall, ToolChoice, Usage};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::{ChatOptions, MaxTokensField};
use crate::error::{OpenAiError, ProviderError};
use crate::text::Shown;

/// The JSON body of a request.
pub(crate) fn request_body(
    model: &str,
    request: &ModelRequest,
    options: &ChatOptions,
    stream: bool,
) -> Result<Value, OpenAiError> {
    let messages = request
        .messages
        .iter()
        .map(message)
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let mut function = Map::new();
                function.insert("name".into(), tool.name.clone().into());
                if let Some(description) = &tool.description {
                    function.insert("description".into(), description.clone().into());
                }
                function.insert(
                    "parameters".into(),
                    Value::Object((*tool.input_schema).clone()),
                );
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = options.tool_choice.as_ref().and_then(tool_choice) {
            body.insert("tool_choice".into(), choice);
        }
        if let Some(parallel) = options.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), parallel.into());
        }
    }
    if let Some(max_tokens) = options.max_tokens {
        let field = match options.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            _ => "max_tokens",
        };
        body.insert(field.into(), max_tokens.into());
    }
    if let Some(temperature) = options.temperature {
        // Through its shortest decimal form, so 0.2 goes out as 0.2, not 0.20000000298….
        let temperature = temperature
            .to_string()
            .parse::<f64>()
            .unwrap_or(f64::from(temperature));
        body.insert("temperature".into(), temperature.into());
    }
    if stream {
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body))
}

fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    Some(match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        _ => return None,
    })
}

/// The options of one request: the configured ones, with the request's own settings winning
/// (`max_tokens` and `temperature` when set, `tool_choice` when other than `Auto`).
pub(crate) fn effective_options(configured: &ChatOptions, settings: &ModelSettings) -> ChatOptions {
    let mut options = configured.clone();
    if settings.tool_choice != ToolChoice::Auto {
        options.tool_choice = Some(settings.tool_choice.clone());
    }
    if settings.max_tokens.is_some() {
        options.max_tokens = settings.max_tokens;
    }
    if settings.temperature.is_some() {
        options.temperature = settings.temperature;
    }
    options
}

fn message(message: &Message) -> Result<Value, OpenAiError> {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        other => {
            return Err(OpenAiError::Config {
                field: "request.messages".into(),
                reason: format!("a message of role {other:?} cannot be sent"),
            });
        }
    };
    let mut out = Map::new();
    out.insert("role".into(), role.into());
    if message.role == Role::Assistant && !message.tool_calls.is_empty() {
        let content = if message.content.is_empty() {
            Value::Null
        } else {
            message.content.clone().into()
        };
        out.insert("content".into(), content);
        let calls = message.tool_calls.iter().map(tool_call).collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    } else {
        out.insert("content".into(), message.content.clone().into());
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), id.clone().into());
    }
    Ok(Value::Object(out))
}

fn tool_call(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": Value::Object(call.arguments.clone()).to_string(),
        },
    })
}

/// Token counts as the provider reports them.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage::new(usage.prompt_tokens, usage.completion_tokens)
    }
}

/// A whole (non-streamed) completion.
#[derive(Debug, Deserialize)]
pub(crate) struct Completion {
    #[serde(default)]
    pub(crate) choices: Option<Vec<Choice>>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub(crate) message: Option<WireMessage>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireMessage {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireToolCall {
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireFunction {
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// A JSON text by the specification; some servers send the object itself.
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

impl WireFunction {
    pub(crate) fn arguments_text(&self) -> String {
        match &self.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }
    }
}

/// One chunk of a stream.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) delta: Option<Delta>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeltaToolCall {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<DeltaFunction>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeltaFunction {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
}

/// The provider's error object (`{"error": {...}}`, or `{"error": "text"}`), shown safely.
pub(crate) fn provider_error(error: &Value, shown: &Shown) -> ProviderError {
    let field = |name: &str| match error.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(shown.text(s)),
        Some(other) => Some(shown.text(&other.to_string())),
    };
    match error {
        Value::String(message) => ProviderError {
            message: Some(shown.text(message)),
            ..ProviderError::default()
        },
        Value::Object(_) => ProviderError {
            message: field("message"),
            code: field("code"),
            kind: field("type"),
        },
        other => ProviderError {
            message: Some(shown.text(&other.to_string())),
            ..ProviderError::default()
        },
    }
}

/// What an error answer's body says: its error object, else the start of its text.
pub(crate) fn error_body(body: &[u8], shown: &Shown) -> Option<ProviderError> {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Some(provider_error(error, shown));
        }
        // FastAPI-style servers answer `{"detail": …}`, others `{"message": …}`.
        for key in ["message", "detail"] {
            if let Some(detail) = value.get(key).filter(|e| !e.is_null()) {
                return Some(provider_error(detail, shown));
            }
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    (!text.is_empty()).then(|| ProviderError {
        message: Some(shown.text(text)),
        ..ProviderError::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::ToolDescriptor;

    #[test]
    fn the_request_carries_the_conversation_tools_and_options() {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let tool = ToolDescriptor::new("search", schema.as_object().unwrap().clone())
            .with_description("Finds things");
        let call = ToolCall::from_json("call_1", "search", json!({"q": "rust"})).unwrap();
        let request = ModelRequest::new(
            vec![
                Message::new(Role::System, "Be brief."),
                Message::new(Role::User, "Find rust."),
                Message::tool_calls(vec![call]),
                Message::tool_result("call_1", "found"),
            ],
            vec![tool],
        );
        let options = ChatOptions::default()
            .with_tool_choice(ToolChoice::Tool("search".into()))
            .with_max_tokens(64)
            .with_temperature(0.5)
            .with_parallel_tool_calls(true);
        let body = request_body("m", &request, &options, true).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Find rust."},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "search", "arguments": "{\"q\":\"rust\"}"}}
                    ]},
                    {"role": "tool", "content": "found", "tool_call_id": "call_1"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "search", "description": "Finds things", "parameters": schema}}],
                "tool_choice": {"type": "function", "function": {"name": "search"}},
                "parallel_tool_calls": true,
                "max_tokens": 64,
                "temperature": 0.5,
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn max_tokens_can_go_as_max_completion_tokens_and_temperatures_stay_short() {
        let request = ModelRequest::new(vec![Message::new(Role::User, "hi")], vec![]);
        let options = ChatOptions::default()
            .with_max_tokens(5)
            .with_max_tokens_field(MaxTokensField::MaxCompletionTokens)
            .with_temperature(0.2);
        let body = request_body("m", &request, &options, false).unwrap();
        assert_eq!(body["max_completion_tokens"], 5);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["temperature"].to_string(), "0.2");
    }

    #[test]
    fn tool_options_are_left_out_without_tools() {
        let request = ModelRequest::new(vec![Message::new(Role::User, "hi")], vec![]);
        let options = ChatOptions::default().with_tool_choice(ToolChoice::Required);
        let body = request_body("m", &request, &options, false).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn the_requests_settings_win_over_the_configured_options() {
        let configured = ChatOptions::default()
            .with_tool_choice(ToolChoice::Required)
            .with_max_tokens(100)
            .with_temperature(0.5);
        let kept = effective_options(&configured, &ModelSettings::default());
        assert_eq!(kept, configured);
        let settings = ModelSettings::default()
            .with_tool_choice(ToolChoice::None)
            .with_max_tokens(7);
        let merged = effective_options(&configured, &settings);
        assert_eq!(merged.tool_choice, Some(ToolChoice::None));
        assert_eq!(merged.max_tokens, Some(7));
        assert_eq!(merged.temperature, Some(0.5));
    }

    #[test]
    fn error_bodies_of_several_shapes_are_read() {
        let shown = Shown::new(&[], 40);
        let err = error_body(
            br#"{"error": {"message": "bad", "code": 42, "type": "invalid"}}"#,
            &shown,
        )
        .unwrap();
        assert_eq!(err.to_string(), "bad (code `42`, type `invalid`)");
        let err = error_body(br#"{"detail": "Not Found"}"#, &shown).unwrap();
        assert_eq!(err.to_string(), "Not Found");
        let err = error_body(b"<html>\n\x1b[31mBad Gateway</html>", &shown).unwrap();
        assert_eq!(err.to_string(), "<html> [31mBad Gateway</html>");
        assert!(error_body(b"  ", &shown).is_none());
    }
}
