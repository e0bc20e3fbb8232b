//! JSON Schema helpers.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

/// A schema literal as the object rmcp wants. Panics on a non-object: the literals are ours.
pub(crate) fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        other => panic!("a tool schema must be a JSON object, not {other}"),
    }
}

/// A structured result with the same JSON as text, for clients that read only text.
pub(crate) fn structured(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}
