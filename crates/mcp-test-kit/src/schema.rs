//! JSON Schema helpers.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

/// A schema literal as the object rmcp wants. Panics on a non-object: the literals are ours.
pub(crate) fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        other => panic!("a tool schema must be a JSON object, not {other}"),
    }
}
