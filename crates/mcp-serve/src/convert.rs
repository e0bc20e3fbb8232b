//! The agent-side vocabulary as MCP wire types: tool descriptors and call outcomes.

use std::sync::Arc;

use agent_core::{ContentPart, JsonObject, ToolDescriptor, ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// The MCP tool definition of `descriptor`: name, description, title, input schema, hints and
/// output schema. An output schema that does not describe an object is wrapped the way the
/// result is ([`call_result`]): `{"result": …}`.
///
/// ```
/// use agent_core::{ToolAnnotations, ToolDescriptor};
/// use serde_json::json;
///
/// let descriptor = ToolDescriptor::new("count", json!({"type": "object"}).as_object().unwrap().clone())
///     .with_description("Counts words")
///     .with_output_schema(json!({"type": "integer"}).as_object().unwrap().clone())
///     .with_annotations(ToolAnnotations::read_only());
/// let tool = mcp_serve::mcp_tool(&descriptor);
/// assert_eq!(tool.name, "count");
/// assert_eq!(tool.annotations.unwrap().read_only_hint, Some(true));
/// let output = serde_json::Value::Object((*tool.output_schema.unwrap()).clone());
/// assert_eq!(output["properties"]["result"], json!({"type": "integer"}));
/// ```
pub fn mcp_tool(descriptor: &ToolDescriptor) -> Tool {
    let mut tool = Tool::default();
    tool.name = descriptor.name.clone().into();
    tool.description = descriptor.description.clone().map(Into::into);
    tool.input_schema = descriptor.input_schema.clone();
    tool.output_schema = descriptor.output_schema.as_ref().map(output_schema);
    let hints = &descriptor.annotations;
    tool.title = hints.title.clone();
    if !hints.is_empty() {
        let mut annotations = ToolAnnotations::new();
        annotations.title = hints.title.clone();
        annotations.read_only_hint = hints.read_only_hint;
        annotations.destructive_hint = hints.destructive_hint;
        annotations.idempotent_hint = hints.idempotent_hint;
        annotations.open_world_hint = hints.open_world_hint;
        tool.annotations = Some(annotations);
    }
    tool
}

/// An object schema as is; any other schema as the schema of `{"result": value}`.
fn output_schema(schema: &Arc<JsonObject>) -> Arc<JsonObject> {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        return schema.clone();
    }
    let wrapped = json!({
        "type": "object",
        "properties": { "result": Value::Object((**schema).clone()) },
        "required": ["result"],
    });
    match wrapped {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("a json! object literal"),
    }
}

/// The MCP result of one call:
///
/// - structured output that is a JSON object → `structuredContent`, and its JSON text as the
///   content (or the tool's own content parts, when it gave some);
/// - any other structured value (a number, string, boolean, array or null) →
///   `structuredContent` `{"result": value}`, and the value as text;
/// - content parts only → the same parts;
/// - an error → `isError: true` with the error's text (its causes included).
///
/// ```
/// use agent_core::{ToolError, ToolOutput};
/// use serde_json::json;
///
/// let mapping = mcp_serve::call_result(Ok(ToolOutput::structured(json!({"sum": 3}))));
/// assert_eq!(mapping.structured_content, Some(json!({"sum": 3})));
/// assert_eq!(mapping.content[0].as_text().unwrap().text, r#"{"sum":3}"#);
///
/// let scalar = mcp_serve::call_result(Ok(ToolOutput::structured(json!(42))));
/// assert_eq!(scalar.structured_content, Some(json!({"result": 42})));
/// assert_eq!(scalar.content[0].as_text().unwrap().text, "42");
///
/// let failed = mcp_serve::call_result(Err(ToolError::Invocation {
///     server: None,
///     tool: "add".into(),
///     message: "overflow".into(),
/// }));
/// assert_eq!(failed.is_error, Some(true));
/// assert_eq!(failed.content[0].as_text().unwrap().text, "tool `add` failed: overflow");
/// ```
pub fn call_result(outcome: Result<ToolOutput, ToolError>) -> CallToolResult {
    match outcome {
        Ok(output) => success(output),
        Err(error) => error_result(agent_core::error_chain(&error)),
    }
}

/// An `isError` result carrying `text`.
pub(crate) fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn success(output: ToolOutput) -> CallToolResult {
    let parts: Vec<ContentBlock> = output.content.iter().map(content_block).collect();
    let Some(value) = output.structured else {
        return CallToolResult::success(parts);
    };
    let (structured, text) = match value {
        Value::Object(map) => {
            let text = Value::Object(map.clone()).to_string();
            (Value::Object(map), text)
        }
        Value::String(text) => (json!({ "result": text }), text),
        other => {
            let text = other.to_string();
            (json!({ "result": other }), text)
        }
    };
    let content = if parts.is_empty() {
        vec![ContentBlock::text(text)]
    } else {
        parts
    };
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(structured);
    result
}

/// One content part as an MCP content block. Both sides use the MCP shapes, so the part is
/// carried over through its JSON; a part rmcp cannot read becomes that JSON as text, so
/// nothing is dropped.
fn content_block(part: &ContentPart) -> ContentBlock {
    if let ContentPart::Text { text } = part {
        return ContentBlock::text(text.clone());
    }
    let json = serde_json::to_value(part).unwrap_or(Value::Null);
    serde_json::from_value(json.clone()).unwrap_or_else(|_| ContentBlock::text(json.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_content_part_keeps_its_type() {
        let parts = vec![
            ContentPart::text("hi"),
            ContentPart::Image {
                data: "AAAA".into(),
                mime_type: "image/png".into(),
            },
            ContentPart::Audio {
                data: "AAAA".into(),
                mime_type: "audio/wav".into(),
            },
            ContentPart::ResourceLink {
                uri: "file:///a".into(),
                name: "a".into(),
                mime_type: None,
            },
        ];
        let result = call_result(Ok(ToolOutput::from_parts(parts)));
        assert!(result.content[0].as_text().is_some());
        assert!(result.content[1].as_image().is_some());
        assert!(result.content[2].as_audio().is_some());
        assert!(result.content[3].as_resource_link().is_some());
        assert_eq!(result.structured_content, None);
        assert_eq!(result.is_error, Some(false));
    }

    #[test]
    fn non_mapping_values_are_wrapped() {
        for (value, text) in [
            (json!("hé"), "hé"),
            (json!(true), "true"),
            (json!(null), "null"),
            (json!([1, 2]), "[1,2]"),
        ] {
            let result = call_result(Ok(ToolOutput::structured(value.clone())));
            assert_eq!(result.structured_content, Some(json!({ "result": value })));
            assert_eq!(result.content[0].as_text().unwrap().text, text);
        }
    }

    #[test]
    fn an_object_output_schema_is_kept() {
        let schema = json!({"type": "object", "properties": {}});
        let descriptor = ToolDescriptor::new("t", JsonObject::new())
            .with_output_schema(schema.as_object().unwrap().clone());
        let tool = mcp_tool(&descriptor);
        assert_eq!(
            Value::Object((*tool.output_schema.unwrap()).clone()),
            schema
        );
        assert!(tool.annotations.is_none());
    }
}
