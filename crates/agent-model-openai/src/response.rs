//! What a completion gives: [`ChatResponse`] with its [`RawToolCall`]s, the [`StreamDelta`]s
//! handed on while a stream arrives, and the assembling of stream chunks and whole completions
//! into one response.

use std::collections::BTreeMap;

use agent_core::{JsonObject, Message, Role, ToolCall, Usage};
use serde_json::Value;

use crate::error::OpenAiError;
use crate::text::Shown;
use crate::wire::{Chunk, Completion, provider_error};

/// A tool call as the model sent it: its arguments are still JSON text, which
/// [`RawToolCall::parse`] checks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawToolCall {
    /// The call's id (made up as `call_<index>` when the provider sent none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
}

impl RawToolCall {
    /// The call with its arguments parsed. Empty arguments are `{}`; anything other than a
    /// JSON object is [`OpenAiError::ToolArguments`], and such a call must not be run.
    pub fn parse(&self) -> Result<ToolCall, OpenAiError> {
        let fail = |reason: String| OpenAiError::ToolArguments {
            id: shown_name(&self.id),
            tool: shown_name(&self.name),
            reason,
        };
        if self.arguments.trim().is_empty() {
            return Ok(ToolCall::new(&self.id, &self.name, JsonObject::new()));
        }
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(Value::Object(arguments)) => Ok(ToolCall::new(&self.id, &self.name, arguments)),
            Ok(other) => Err(fail(format!("it is {}", json_kind(&other)))),
            Err(e) => Err(fail(format!("invalid JSON ({e})"))),
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A model-chosen name as shown in an error: at most 128 characters, no control characters.
fn shown_name(name: &str) -> String {
    Shown::new(&[], 128).text(name)
}

/// One completion.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The assistant's text.
    pub text: String,
    /// The tool calls it asks for, in the provider's order (by index when streamed).
    pub tool_calls: Vec<RawToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`…), if the provider said.
    pub finish_reason: Option<String>,
    /// Token counts, if the provider reported them.
    pub usage: Option<Usage>,
    /// Attempts made (1 without retries).
    pub attempts: u32,
}

impl ChatResponse {
    /// The assistant message, with every tool call's arguments parsed. A call whose
    /// arguments are not a JSON object becomes a [`ToolCall::malformed`] call: it is never
    /// run, and the agent loop tells the model why, so it can try again.
    pub fn into_message(self) -> Result<Message, OpenAiError> {
        let calls = self
            .tool_calls
            .iter()
            .map(|raw| {
                raw.parse().or_else(|error| match error {
                    OpenAiError::ToolArguments { reason, .. } => {
                        Ok(ToolCall::malformed(&raw.id, &raw.name, reason))
                    }
                    other => Err(other),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut message = if calls.is_empty() {
            Message::new(Role::Assistant, String::new())
        } else {
            Message::tool_calls(calls)
        };
        message.content = self.text;
        Ok(message)
    }
}

/// What a stream hands on as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamDelta<'a> {
    /// More of the assistant's text.
    Text(&'a str),
    /// A tool call began (its name is known; its arguments are still arriving).
    ToolCall {
        /// The call's index in the answer.
        index: u32,
        /// The tool's name.
        name: &'a str,
    },
}

#[derive(Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Builds a [`ChatResponse`] from stream chunks.
#[derive(Default)]
pub(crate) struct Assembler {
    text: String,
    calls: BTreeMap<u32, Partial>,
    /// The index the last fragment went to, for providers that leave `index` out.
    last_index: Option<u32>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// `[DONE]` arrived.
    pub(crate) done: bool,
    /// Something was handed to the caller; the attempt can no longer be retried.
    pub(crate) emitted: bool,
}

impl Assembler {
    /// One event's data.
    pub(crate) fn event(
        &mut self,
        data: &[u8],
        shown: &Shown,
        sink: &mut (dyn FnMut(StreamDelta<'_>) + Send),
    ) -> Result<(), OpenAiError> {
        if self.done {
            return Ok(());
        }
        if data.trim_ascii() == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_slice(data).map_err(|e| OpenAiError::InvalidResponse {
                reason: shown.text(&format!("a stream chunk is not valid: {e}")),
            })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(OpenAiError::Provider {
                provider: provider_error(&error, shown),
            });
        }
        if let Some(usage) = chunk.usage {
            // Providers report the answer's running total; the last report is the answer's.
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    self.text.push_str(&text);
                    self.emitted = true;
                    sink(StreamDelta::Text(&text));
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    let index = self.index_of(fragment.index, fragment.id.as_deref());
                    self.last_index = Some(index);
                    let call = self.calls.entry(index).or_default();
                    if let Some(id) = fragment.id.filter(|id| !id.is_empty())
                        && call.id.is_empty()
                    {
                        call.id = id;
                    }
                    if let Some(function) = fragment.function {
                        if let Some(name) = function.name {
                            call.name.push_str(&name);
                        }
                        if let Some(arguments) = function.arguments {
                            call.arguments.push_str(&arguments);
                        }
                    }
                    if !call.announced && !call.name.is_empty() {
                        call.announced = true;
                        self.emitted = true;
                        sink(StreamDelta::ToolCall {
                            index,
                            name: &call.name,
                        });
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    /// Where a fragment goes: its index; without one, the call its id names, a new call for a
    /// new id, else the call the last fragment went to.
    fn index_of(&self, index: Option<u32>, id: Option<&str>) -> u32 {
        if let Some(index) = index {
            return index;
        }
        match id.filter(|id| !id.is_empty()) {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, call)| call.id == id)
                .map(|(index, _)| *index)
                .unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |i| i + 1)),
            None => self.last_index.unwrap_or(0),
        }
    }

    /// The answer, once the stream ended: complete only after `[DONE]` or a finish reason.
    pub(crate) fn finish(self) -> Result<ChatResponse, OpenAiError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(OpenAiError::StreamCut);
        }
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| raw_call(index, call.id, call.name, call.arguments))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            attempts: 1,
        })
    }
}

fn raw_call(
    index: u32,
    id: String,
    name: String,
    arguments: String,
) -> Result<RawToolCall, OpenAiError> {
    if name.is_empty() {
        return Err(OpenAiError::InvalidResponse {
            reason: format!("tool call {index} has no name"),
        });
    }
    let id = if id.is_empty() {
        format!("call_{index}")
    } else {
        id
    };
    Ok(RawToolCall {
        id,
        name,
        arguments,
    })
}

/// A whole completion as a response.
pub(crate) fn from_completion(
    completion: Completion,
    shown: &Shown,
) -> Result<ChatResponse, OpenAiError> {
    if let Some(error) = completion.error.filter(|e| !e.is_null()) {
        return Err(OpenAiError::Provider {
            provider: provider_error(&error, shown),
        });
    }
    let choice = completion
        .choices
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| OpenAiError::InvalidResponse {
            reason: "it has no choices".into(),
        })?;
    let message = choice.message.ok_or_else(|| OpenAiError::InvalidResponse {
        reason: "its first choice has no message".into(),
    })?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, call)| {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            let (name, arguments) = call
                .function
                .map(|f| (f.name.clone().unwrap_or_default(), f.arguments_text()))
                .unwrap_or_default();
            raw_call(index, call.id.unwrap_or_default(), name, arguments)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ChatResponse {
        text: message.content.unwrap_or_default(),
        tool_calls,
        finish_reason: choice.finish_reason,
        usage: completion.usage.map(Usage::from),
        attempts: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(events: &[Value]) -> (Result<ChatResponse, OpenAiError>, Vec<String>) {
        let shown = Shown::new(&[], 100);
        let mut seen = Vec::new();
        let mut sink = |d: StreamDelta<'_>| seen.push(format!("{d:?}"));
        let mut asm = Assembler::default();
        for event in events {
            let data = match event {
                Value::String(s) => s.clone().into_bytes(),
                other => other.to_string().into_bytes(),
            };
            if let Err(e) = asm.event(&data, &shown, &mut sink) {
                return (Err(e), seen);
            }
        }
        (asm.finish(), seen)
    }

    #[test]
    fn fragments_without_index_follow_their_id() {
        let (response, seen) = feed(&[
            json!({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ":1}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        ]);
        let response = response.unwrap();
        let calls: Vec<_> = response
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("a", "f", "{\"x\":1}"), ("b", "g", "{}")]);
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn a_stream_without_its_end_is_cut_and_gives_no_calls() {
        let (response, _) = feed(&[json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"x\": 1"}}]}}]})]);
        assert!(matches!(response, Err(OpenAiError::StreamCut)));
    }

    #[test]
    fn arguments_that_are_not_an_object_fail_the_answer() {
        let call = RawToolCall {
            id: "c1".into(),
            name: "add".into(),
            arguments: "{\"a\": 1".into(),
        };
        let err = call.parse().unwrap_err().to_string();
        assert!(
            err.starts_with("the arguments of tool call `c1` of tool `add` are not a JSON object: invalid JSON ("),
            "{err}"
        );
        let call = RawToolCall {
            arguments: "[1]".into(),
            ..call
        };
        assert!(
            call.parse()
                .unwrap_err()
                .to_string()
                .ends_with("it is an array")
        );
        let call = RawToolCall {
            arguments: " ".into(),
            ..call
        };
        assert!(call.parse().unwrap().arguments.is_empty());
    }

    #[test]
    fn an_error_chunk_is_the_providers_error() {
        let (response, _) = feed(&[
            json!({"choices": [{"delta": {"content": "Hel"}}]}),
            json!({"error": {"message": "overloaded", "type": "server_error"}}),
        ]);
        assert_eq!(
            response.unwrap_err().to_string(),
            "the provider reported an error: overloaded (type `server_error`)"
        );
    }
}
