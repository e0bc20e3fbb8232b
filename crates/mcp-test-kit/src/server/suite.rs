//! The tools the MCP conformance suite's server scenarios call by name, for a
//! [`TestServer`](super::TestServer) built
//! [`with_suite_tools`](super::TestServerOptions::with_suite_tools): each answers what its
//! scenario describes (simple text, an image, audio, an embedded resource, mixed content, a
//! tool error), and `json_schema_2020_12_tool` lists the JSON Schema 2020-12 keywords a
//! scenario checks are kept. Served behind a gateway that lists tools under their own names,
//! they let the suite check what the gateway passes through.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};
use serde_json::json;

use super::content::{PNG_1X1, base64, silent_wav};
use crate::schema::object;

/// The tools' names, in the order they are listed.
pub(super) const NAMES: &[&str] = &[
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "json_schema_2020_12_tool",
];

/// The tools as listed.
pub(super) fn tools() -> Vec<Tool> {
    let none = || object(json!({"type": "object", "properties": {}}));
    let describe = |name: &str| match name {
        "test_simple_text" => "Returns one text block.",
        "test_image_content" => "Returns a 1x1 PNG image.",
        "test_audio_content" => "Returns a short silent WAV clip.",
        "test_embedded_resource" => "Returns an embedded text resource.",
        "test_multiple_content_types" => "Returns text, an image and an embedded resource.",
        "test_error_handling" => "Always fails with a tool error (isError).",
        _ => "Takes arguments described with JSON Schema 2020-12 keywords; answers `ok`.",
    };
    NAMES
        .iter()
        .map(|&name| {
            let schema = if name == "json_schema_2020_12_tool" {
                schema_2020_12()
            } else {
                none()
            };
            Tool::new(name, describe(name), schema)
        })
        .collect()
}

/// `$schema`, `$defs` with an `$anchor`, `$ref`, `allOf` / `anyOf`, `if` / `then` / `else` and
/// `additionalProperties`: what the suite's `json-schema-2020-12` scenario looks for.
fn schema_2020_12() -> std::sync::Arc<rmcp::model::JsonObject> {
    object(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    }))
}

/// Runs the tool `name`; `None` when it is none of these.
pub(super) fn call(name: &str) -> Option<CallToolResult> {
    let embedded = || {
        ContentBlock::resource(
            ResourceContents::text(
                "This is an embedded resource content.",
                "test://embedded-resource",
            )
            .with_mime_type("text/plain"),
        )
    };
    let image = || ContentBlock::image(PNG_1X1, "image/png");
    Some(match name {
        "test_simple_text" => CallToolResult::success(vec![ContentBlock::text(
            "This is a simple text response for testing.",
        )]),
        "test_image_content" => CallToolResult::success(vec![image()]),
        "test_audio_content" => CallToolResult::success(vec![ContentBlock::audio(
            base64(&silent_wav()),
            "audio/wav",
        )]),
        "test_embedded_resource" => CallToolResult::success(vec![embedded()]),
        "test_multiple_content_types" => CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            image(),
            embedded(),
        ]),
        "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )]),
        "json_schema_2020_12_tool" => CallToolResult::success(vec![ContentBlock::text("ok")]),
        _ => return None,
    })
}
