//! The embedded demo MCP server: a few small, useful tools (`echo`, `add`, `current_time`,
//! `word_count`).
//!
//! With no configuration, the CLI's main job runs this server as a child process over stdio
//! (`mcp-agent demo-server`, a hidden command of the same binary) and drives it end to end
//! through the library: spawn, initialize, list, search, call, close.

use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use std::sync::Arc;

/// A schema literal as the object rmcp wants. The literals are this module's own objects.
fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

/// The demo tools, in a stable order.
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Returns the given text unchanged.",
            object(json!({
                "type": "object",
                "properties": { "text": { "type": "string", "description": "The text to echo." } },
                "required": ["text"]
            })),
        ),
        Tool::new(
            "add",
            "Adds two numbers.",
            object(json!({
                "type": "object",
                "properties": {
                    "a": { "type": "number", "description": "The first addend." },
                    "b": { "type": "number", "description": "The second addend." }
                },
                "required": ["a", "b"]
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": { "sum": { "type": "number" } },
            "required": ["sum"]
        }))),
        Tool::new(
            "current_time",
            "The current date and time in UTC (RFC 3339) and as Unix seconds.",
            object(json!({ "type": "object", "properties": {} })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {
                "utc": { "type": "string" },
                "unix_seconds": { "type": "integer" }
            },
            "required": ["utc", "unix_seconds"]
        }))),
        Tool::new(
            "word_count",
            "Counts the words, lines and characters of a text.",
            object(json!({
                "type": "object",
                "properties": { "text": { "type": "string", "description": "The text to count." } },
                "required": ["text"]
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {
                "words": { "type": "integer" },
                "lines": { "type": "integer" },
                "characters": { "type": "integer" }
            },
            "required": ["words", "lines", "characters"]
        }))),
    ]
}

/// Calls demo tool `name` with `args`. `None` for an unknown tool; bad arguments give a
/// tool-level error result (`isError`), as MCP asks for errors the model should see.
pub(crate) fn call(name: &str, args: &JsonObject) -> Option<CallToolResult> {
    let result = match name {
        "echo" => string_arg(args, "text")
            .map(|text| CallToolResult::success(vec![ContentBlock::text(text)])),
        "add" => number_arg(args, "a")
            .and_then(|a| Ok((a, number_arg(args, "b")?)))
            .map(|(a, b)| structured(json!({ "sum": a + b }))),
        "current_time" => {
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            Ok(structured(
                json!({ "utc": rfc3339_utc(secs), "unix_seconds": secs }),
            ))
        }
        "word_count" => string_arg(args, "text").map(|text| {
            structured(json!({
                "words": text.split_whitespace().count(),
                "lines": text.lines().count(),
                "characters": text.chars().count(),
            }))
        }),
        _ => return None,
    };
    Some(result.unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)])))
}

/// A structured result with the same JSON as text, for clients that read only text.
fn structured(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

fn string_arg(args: &JsonObject, key: &str) -> Result<String, String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("argument `{key}` must be a string"))
}

fn number_arg(args: &JsonObject, key: &str) -> Result<f64, String> {
    args.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("argument `{key}` must be a number"))
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
fn rfc3339_utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (days-from-civil, inverted).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// An MCP server offering the demo tools.
///
/// ```
/// use rmcp::ServerHandler;
///
/// let info = mcp_agent::demo::DemoServer.get_info();
/// assert_eq!(info.server_info.name, "mcp-demo");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DemoServer;

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mcp-demo", env!("CARGO_PKG_VERSION")))
            .with_instructions("A demo server: echo text, add numbers, tell the time, count words.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        call(&request.name, &args).map(Into::into).ok_or_else(|| {
            ErrorData::invalid_params(format!("unknown tool `{}`", request.name), None)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_gregorian() {
        for (secs, expected) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_709_251_199, "2024-02-29T23:59:59Z"),
            (4_102_444_800, "2100-01-01T00:00:00Z"),
        ] {
            assert_eq!(rfc3339_utc(secs), expected);
        }
    }

    #[test]
    fn tools_check_their_arguments() {
        let args = json!({ "a": 1 }).as_object().unwrap().clone();
        let result = call("add", &args).unwrap();
        assert_eq!(result.is_error, Some(true));
        assert!(call("nope", &args).is_none());
    }

    #[test]
    fn the_tools_in_order_and_a_structured_count() {
        let names: Vec<_> = tools().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["echo", "add", "current_time", "word_count"]);
        let args = json!({ "text": "two words" }).as_object().unwrap().clone();
        let result = call("word_count", &args).unwrap();
        assert_eq!(result.structured_content.unwrap()["words"], 2);
    }

    #[test]
    fn add_is_structured() {
        let args = json!({ "a": 1.5, "b": 2 }).as_object().unwrap().clone();
        let result = call("add", &args).unwrap();
        assert_eq!(result.structured_content, Some(json!({ "sum": 3.5 })));
    }
}
