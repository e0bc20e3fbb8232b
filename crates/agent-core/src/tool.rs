//! Tools: what a model can call, how a call looks, and what comes back.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolError;

/// A JSON object (`{"key": value, …}`) whose keys keep the order in which they were received.
pub type JsonObject = serde_json::Map<String, Value>;

/// Everything a model needs to know to call one tool.
///
/// Schemas are kept exactly as received: the workspace builds `serde_json` with
/// `preserve_order`, so serialising `input_schema` again yields the same keys in the same order.
///
/// ```
/// use agent_core::ToolDescriptor;
/// use serde_json::json;
///
/// let tool = ToolDescriptor::new("echo", json!({"type": "object"}).as_object().unwrap().clone())
///     .with_description("Echo the input back");
/// assert_eq!(tool.name, "echo");
/// assert_eq!(tool.description.as_deref(), Some("Echo the input back"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolDescriptor {
    /// The name the model uses to call the tool.
    pub name: String,
    /// What the tool does, in words a model can match against a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the tool's arguments, as received.
    pub input_schema: Arc<JsonObject>,
    /// The JSON Schema of the tool's structured output, if it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Arc<JsonObject>>,
    /// Behaviour hints. Hints select which calls need approval; they never grant permission.
    #[serde(default, skip_serializing_if = "ToolAnnotations::is_empty")]
    pub annotations: ToolAnnotations,
}

impl ToolDescriptor {
    /// A descriptor with a name and an input schema, and nothing else.
    pub fn new(name: impl Into<String>, input_schema: JsonObject) -> Self {
        Self {
            name: name.into(),
            description: None,
            input_schema: Arc::new(input_schema),
            output_schema: None,
            annotations: ToolAnnotations::default(),
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the output schema.
    #[must_use]
    pub fn with_output_schema(mut self, schema: JsonObject) -> Self {
        self.output_schema = Some(Arc::new(schema));
        self
    }

    /// Sets the annotations.
    #[must_use]
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }
}

/// Hints a tool gives about its behaviour (MCP tool annotations). Untrusted: a hint may decide
/// that a call needs approval, never that it may skip policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool claims not to modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling the tool twice with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool talks to an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// True when no hint is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Annotations that claim the tool is read-only.
    pub fn read_only() -> Self {
        Self {
            read_only_hint: Some(true),
            ..Self::default()
        }
    }
}

/// One call of a tool, as a model asked for it.
///
/// ```
/// use agent_core::ToolCall;
/// use serde_json::json;
///
/// let call = ToolCall::new("call-1", "echo", json!({"text": "hi"}).as_object().unwrap().clone());
/// assert_eq!(call.arguments["text"], "hi");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The model's id for this call, echoed back with the result.
    pub id: String,
    /// The tool's name as the model saw it.
    pub name: String,
    /// The argument object, passed through unchanged.
    pub arguments: JsonObject,
    /// Why the model's arguments could not be read (not JSON, or not an object), when they
    /// could not: such a call is never run; the model is told why instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_arguments: Option<String>,
}

impl ToolCall {
    /// A call of `name` with `arguments`.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: JsonObject) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
            invalid_arguments: None,
        }
    }

    /// A call the model asked for with arguments that could not be read (`problem` says
    /// why, e.g. "invalid JSON at line 1 column 9"). It has no arguments and is never run:
    /// the governed layer and the agent loop answer it with
    /// [`ToolError::InvalidArguments`](crate::ToolError::InvalidArguments), so the model can
    /// try again.
    ///
    /// ```
    /// let call = agent_core::ToolCall::malformed("1", "add", "invalid JSON (EOF at column 7)");
    /// assert!(call.arguments.is_empty());
    /// assert_eq!(call.invalid_arguments.as_deref(), Some("invalid JSON (EOF at column 7)"));
    /// ```
    pub fn malformed(
        id: impl Into<String>,
        name: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Self {
            invalid_arguments: Some(problem.into()),
            ..Self::new(id, name, JsonObject::new())
        }
    }

    /// The error a malformed call is answered with, if it is one.
    pub fn arguments_error(&self) -> Option<crate::ToolError> {
        self.invalid_arguments
            .as_ref()
            .map(|problem| crate::ToolError::InvalidArguments {
                server: None,
                tool: self.name.clone(),
                message: format!("the arguments could not be read: {problem}"),
            })
    }

    /// A call of `name` with arguments given as a JSON value, which must be an object (what a
    /// model or a `json!` literal produces).
    ///
    /// ```
    /// use agent_core::{ToolCall, ToolError};
    /// use serde_json::json;
    ///
    /// let call = ToolCall::from_json("1", "add", json!({"a": 1, "b": 2}))?;
    /// assert_eq!(call.arguments["b"], 2);
    ///
    /// let err = ToolCall::from_json("2", "add", json!([1, 2])).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid arguments for tool `add`: the arguments must be a JSON object, not an array");
    /// # Ok::<(), ToolError>(())
    /// ```
    pub fn from_json(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Result<Self, crate::ToolError> {
        let name = name.into();
        match arguments {
            serde_json::Value::Object(arguments) => Ok(Self::new(id, name, arguments)),
            other => Err(crate::ToolError::InvalidArguments {
                server: None,
                message: format!(
                    "the arguments must be a JSON object, not {}",
                    json_kind(&other)
                ),
                tool: name,
            }),
        }
    }
}

/// `a string`, `an array`, … for messages about a JSON value's type.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The contents of an embedded resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ResourceContents {
    /// A textual resource.
    Text {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The text.
        text: String,
    },
    /// A binary resource, base64-encoded.
    Blob {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The base64 data.
        blob: String,
    },
}

/// One part of a tool's result. Nothing a tool returns is dropped: parts that are not text keep
/// their type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// The base64 data.
        data: String,
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// The base64 data.
        data: String,
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource embedded in the result.
    Resource {
        /// The resource.
        resource: ResourceContents,
    },
    /// A link to a resource the client may read.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its name.
        name: String,
        /// Its MIME type, if known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// What a successful tool call returns.
///
/// ```
/// use agent_core::{ContentPart, ToolOutput};
/// use serde_json::json;
///
/// let out = ToolOutput::structured(json!({"sum": 3}));
/// assert_eq!(out.to_model_text(), r#"{"sum":3}"#);
/// let out = ToolOutput::text("hello");
/// assert_eq!(out.to_model_text(), "hello");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolOutput {
    /// The content parts, in order.
    #[serde(default)]
    pub content: Vec<ContentPart>,
    /// Structured JSON output, when the tool produced it. It takes precedence for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
}

impl ToolOutput {
    /// A text-only output.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentPart::text(text)],
            structured: None,
        }
    }

    /// A structured output.
    pub fn structured(value: Value) -> Self {
        Self {
            content: Vec::new(),
            structured: Some(value),
        }
    }

    /// An output from content parts.
    pub fn from_parts(content: Vec<ContentPart>) -> Self {
        Self {
            content,
            structured: None,
        }
    }

    /// The length in bytes of [`to_model_text`](Self::to_model_text), counted without
    /// building the text (what a size check needs).
    ///
    /// ```
    /// use agent_core::{ContentPart, ToolOutput};
    ///
    /// let output = ToolOutput::from_parts(vec![ContentPart::text("one"), ContentPart::text("two")]);
    /// assert_eq!(output.model_text_len(), output.to_model_text().len());
    /// let output = ToolOutput::structured(serde_json::json!({"a": [1, "é"]}));
    /// assert_eq!(output.model_text_len(), output.to_model_text().len());
    /// ```
    pub fn model_text_len(&self) -> usize {
        if let Some(value) = &self.structured {
            return value_json_len(value);
        }
        self.content.iter().fold(0, |length, part| {
            // A newline goes before a part only once there is text before it.
            let separator = usize::from(length > 0);
            length
                + separator
                + match part {
                    ContentPart::Text { text } => text.len(),
                    other => json_len(other).unwrap_or(UNPRINTABLE.len()),
                }
        })
    }

    /// The output as the model reads it: structured JSON as is; otherwise the text parts joined
    /// by newlines, with non-text parts rendered as compact JSON so nothing is lost.
    pub fn to_model_text(&self) -> String {
        if let Some(value) = &self.structured {
            return value.to_string();
        }
        let mut out = String::new();
        for part in &self.content {
            if !out.is_empty() {
                out.push('\n');
            }
            match part {
                ContentPart::Text { text } => out.push_str(text),
                other => out.push_str(
                    &serde_json::to_string(other).unwrap_or_else(|_| String::from(UNPRINTABLE)),
                ),
            }
        }
        out
    }
}

/// What [`ToolOutput::to_model_text`] shows of a part that does not serialise.
const UNPRINTABLE: &str = "<unprintable>";

/// The length in bytes of `value` as compact JSON, counted without building the text; `None`
/// when it does not serialise.
///
/// ```
/// assert_eq!(agent_core::json_len(&serde_json::json!({"a": [1, "é"]})), Some(14));
/// ```
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> Option<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value)
        .ok()
        .map(|()| count.0)
}

/// The length of `value` as compact JSON (what `serde_json::to_string` writes), counted by
/// walking the value: no serializer runs, since a size check on every call's output must cost
/// little (`json_len` gives the same figure for any serializable type).
fn value_json_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number_json_len(number),
        Value::String(text) => string_json_len(text),
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(value_json_len).sum::<usize>()
        }
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(key, value)| string_json_len(key) + 1 + value_json_len(value))
                    .sum::<usize>()
        }
    }
}

/// A number's length as serde_json prints it: integers counted in decimal, floats (rarer)
/// through [`json_len`].
fn number_json_len(number: &serde_json::Number) -> usize {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    if let Some(n) = number.as_u64() {
        return digits(n);
    }
    if let Some(n) = number.as_i64() {
        return 1 + digits(n.unsigned_abs());
    }
    json_len(number).unwrap_or_default()
}

/// A string's length as a JSON string: quoted, with `"`, `\\` and control characters escaped
/// the way serde_json escapes them (`\n`-style where JSON has a short escape, else `\u00XX`).
fn string_json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The tools a model is shown for one run.
///
/// ```
/// use agent_core::{ToolCatalog, ToolDescriptor};
///
/// struct Fixed(Vec<ToolDescriptor>);
/// impl ToolCatalog for Fixed {
///     fn tools(&self) -> Vec<ToolDescriptor> {
///         self.0.clone()
///     }
/// }
/// let catalog = Fixed(vec![ToolDescriptor::new("echo", Default::default())]);
/// assert_eq!(catalog.tools().len(), 1);
/// assert!(catalog.tool("echo").is_some());
/// ```
pub trait ToolCatalog: Send + Sync {
    /// The tools to show the model, in a stable order.
    fn tools(&self) -> Vec<ToolDescriptor>;

    /// One tool by its model-facing name.
    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.tools().into_iter().find(|t| t.name == name)
    }
}

/// Executes tool calls.
///
/// ```
/// use agent_core::{ToolCall, ToolDispatcher, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// struct Echo;
/// #[async_trait]
/// impl ToolDispatcher for Echo {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         match call.name.as_str() {
///             "echo" => Ok(ToolOutput::structured(call.arguments.into())),
///             _ => Err(ToolError::unknown_tool(call.name, Vec::new())),
///         }
///     }
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let out = Echo.dispatch(ToolCall::new("1", "echo", Default::default())).await.unwrap();
/// assert_eq!(out.to_model_text(), "{}");
/// # });
/// ```
#[async_trait]
pub trait ToolDispatcher: Send + Sync {
    /// Runs one call to completion.
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError>;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_values_length_is_what_serde_json_writes() {
        let mut strings: Vec<String> = (0u8..0x80).map(|b| format!("a{}z", b as char)).collect();
        strings.extend(["".into(), "é€😀".into(), "\\\"quoted\\\"".into()]);
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(9),
            json!(10),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(0.5),
            json!(-1.5e300),
            json!(1e-7),
            json!(123456789.125),
            json!([]),
            json!({}),
            json!([1, [2, [3, {}]], {"k": [null]}]),
            json!({"text": "hello, server", "n": 42, "flags": [true, false], "": {"\n": "\u{7f}"}}),
            json!(strings),
        ];
        for value in values {
            let written = serde_json::to_string(&value).unwrap();
            assert_eq!(value_json_len(&value), written.len(), "{written}");
            assert_eq!(json_len(&value), Some(written.len()));
        }
    }

    #[test]
    fn the_counted_length_is_the_rendered_texts() {
        let parts = vec![
            ContentPart::text("plain"),
            ContentPart::text("é \"quoted\"\n\u{1}"),
            ContentPart::Image {
                data: "aGk=".into(),
                mime_type: "image/png".into(),
            },
            ContentPart::Resource {
                resource: ResourceContents::Text {
                    uri: "file:///a b".into(),
                    mime_type: None,
                    text: "tab\there".into(),
                },
            },
            ContentPart::ResourceLink {
                uri: "mem://x".into(),
                name: "x".into(),
                mime_type: Some("text/plain".into()),
            },
        ];
        let outputs = [
            ToolOutput::default(),
            ToolOutput::text(""),
            ToolOutput::from_parts(vec![ContentPart::text(""), ContentPart::text("")]),
            ToolOutput::from_parts(parts.clone()),
            ToolOutput::structured(json!({"ü": [1.5, null, "\u{7f}"], "n": -0.0})),
            ToolOutput {
                content: parts,
                structured: Some(json!("structured wins")),
            },
        ];
        for output in outputs {
            assert_eq!(
                output.model_text_len(),
                output.to_model_text().len(),
                "{output:?}"
            );
        }
    }
}
