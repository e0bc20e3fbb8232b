//! The tools the MCP conformance suite's server scenarios call by name, for a
//! [`TestServer`](super::TestServer) built
//! [`with_suite_tools`](super::TestServerOptions::with_suite_tools): each answers what its
//! scenario describes (simple text, an image, audio, an embedded resource, mixed content, a
//! tool error, an elicitation request of the scenario's schema sent to the client), and
//! `json_schema_2020_12_tool` lists the JSON Schema 2020-12 keywords a scenario checks are
//! kept. Served behind a gateway that lists tools under their own names, they let the suite
//! check what the gateway passes through.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, JsonObject, ProgressNotificationParam,
    ResourceContents, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::content::{PNG_1X1, base64, silent_wav};
use crate::schema::object;

/// The tools' names and descriptions, in the order they are listed.
const TOOLS: &[(&str, &str)] = &[
    ("test_simple_text", "Returns one text block."),
    ("test_image_content", "Returns a 1x1 PNG image."),
    ("test_audio_content", "Returns a short silent WAV clip."),
    (
        "test_embedded_resource",
        "Returns an embedded text resource.",
    ),
    (
        "test_multiple_content_types",
        "Returns text, an image and an embedded resource.",
    ),
    (
        "test_error_handling",
        "Always fails with a tool error (isError).",
    ),
    (
        "json_schema_2020_12_tool",
        "Takes arguments described with JSON Schema 2020-12 keywords; answers `ok`.",
    ),
    (
        "test_elicitation",
        "Asks the client for a username and an email, showing `message`.",
    ),
    (
        "test_elicitation_sep1034_defaults",
        "Asks the client for five fields, each with a default value.",
    ),
    (
        "test_elicitation_sep1330_enums",
        "Asks the client to pick from five kinds of enum.",
    ),
    (
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100, 50 ms apart, to a client that asked for it.",
    ),
];

/// True for the name of one of these tools.
pub(super) fn is_suite_tool(name: &str) -> bool {
    TOOLS.iter().any(|&(n, _)| n == name)
}

/// The tools as listed.
pub(super) fn tools() -> Vec<Tool> {
    let none = || object(json!({"type": "object", "properties": {}}));
    TOOLS
        .iter()
        .map(|&(name, description)| {
            let schema = match name {
                "json_schema_2020_12_tool" => schema_2020_12(),
                "test_elicitation" => object(json!({
                    "type": "object",
                    "properties": {"message": {"type": "string"}},
                    "required": ["message"],
                })),
                _ => none(),
            };
            Tool::new(name, description, schema)
        })
        .collect()
}

/// The elicitation request a suite tool sends the client, and how its answer is reported.
pub(super) fn elicitation(name: &str, args: &JsonObject) -> Option<(Value, &'static str)> {
    let request = match name {
        "test_elicitation" => json!({
            "mode": "form",
            "message": args.get("message").and_then(Value::as_str).unwrap_or("Your details?"),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}
                },
                "required": ["username", "email"]
            }
        }),
        "test_elicitation_sep1034_defaults" => json!({
            "mode": "form",
            "message": "Please review and update the form fields with defaults",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {
                        "type": "string",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active"
                    },
                    "verified": {"type": "boolean", "default": true}
                }
            }
        }),
        "test_elicitation_sep1330_enums" => json!({
            "mode": "form",
            "message": "Please pick an option of each kind",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}
                    ]},
                    "legacyEnum": {
                        "type": "string",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]
                    },
                    "untitledMulti": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                    },
                    "titledMulti": {
                        "type": "array",
                        "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}
                        ]}
                    }
                }
            }
        }),
        _ => return None,
    };
    let report = if name == "test_elicitation" {
        "User response"
    } else {
        "Elicitation completed"
    };
    Some((request, report))
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

/// Runs the tool `name` (a tool error when it is none of these).
pub(super) async fn call(
    name: &str,
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    if name == "test_tool_with_progress" {
        return Ok(with_progress(context).await);
    }
    if let Some((request, report)) = elicitation(name, args) {
        let request: ElicitRequestParams = serde_json::from_value(request)
            .map_err(|e| ErrorData::internal_error(format!("{name}'s request: {e}"), None))?;
        return Ok(match context.peer.create_elicitation(request).await {
            Ok(answer) => {
                let action = serde_json::to_value(answer.action).unwrap_or_default();
                let action = action.as_str().unwrap_or("unknown");
                let content = answer.content.unwrap_or(Value::Null);
                let text = format!("{report}: action={action}, content={content}");
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "the client was not asked: {e}"
            ))]),
        });
    }
    Ok(contents(name).unwrap_or_else(|| {
        CallToolResult::error(vec![ContentBlock::text(format!("no suite tool `{name}`"))])
    }))
}

/// `test_tool_with_progress`: progress 0, 50 and 100 of 100, 50 ms apart (the scenario's
/// pace), sent under the call's progress token when it has one.
async fn with_progress(context: &RequestContext<RoleServer>) -> CallToolResult {
    let token = context.meta.get_progress_token();
    for (step, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if step > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(token) = &token {
            let report = ProgressNotificationParam::new(token.clone(), progress).with_total(100.0);
            let _ = context.peer.notify_progress(report).await;
        }
    }
    CallToolResult::success(vec![ContentBlock::text("Progress tool completed: 3 steps")])
}

/// The result of a tool that only answers; `None` when `name` is none of them.
fn contents(name: &str) -> Option<CallToolResult> {
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
