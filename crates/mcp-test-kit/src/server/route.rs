//! The `route` tool of a [`TestServer`](super::TestServer) built
//! [`with_header_params`](super::TestServerOptions::with_header_params): its `region` and
//! `shard` arguments declare `x-mcp-header` (SEP-2243, revision 2026-07-28), so a client over
//! HTTP mirrors them into `Mcp-Param-Region` and `Mcp-Param-Shard`; it echoes its arguments.

use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Value, json};

use crate::schema::{object, structured};

/// The tool as listed.
pub(super) fn tool() -> Tool {
    Tool::new(
        "route",
        "Echoes its arguments; `region` and `shard` are mirrored into `Mcp-Param-Region` and `Mcp-Param-Shard` headers by clients over HTTP (SEP-2243).",
        object(json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "shard": {"type": "integer", "x-mcp-header": "Shard"},
                "note": {"type": "string"}
            },
            "required": ["region"],
        })),
    )
}

/// Runs it.
pub(super) fn call(args: JsonObject) -> CallToolResult {
    structured(Value::Object(args))
}
