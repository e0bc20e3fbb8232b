//! The `ask` tool of a [`TestServer`](super::TestServer) built
//! [`with_ask`](super::TestServerOptions::with_ask): it sends the client the elicitation
//! request given as its `request` argument, as it is, and returns the client's answer.

use rmcp::model::{CallToolResult, ElicitRequestParams, JsonObject, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::schema::{object, structured};

/// The tool as listed.
pub(super) fn tool() -> Tool {
    Tool::new(
        "ask",
        "Sends the client `request` (an elicitation/create request: form or URL mode) and returns its answer (`action`, `content`).",
        object(json!({
            "type": "object",
            "properties": {"request": {"type": "object"}},
            "required": ["request"],
        })),
    )
}

/// Runs it.
pub(super) async fn call(
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let request = args.get("request").cloned().unwrap_or(Value::Null);
    let request: ElicitRequestParams = serde_json::from_value(request).map_err(|e| {
        ErrorData::invalid_params(
            format!("`request` is not an elicitation request: {e}"),
            None,
        )
    })?;
    let answer = context
        .peer
        .create_elicitation(request)
        .await
        .map_err(|e| ErrorData::internal_error(format!("elicitation failed: {e}"), None))?;
    Ok(structured(
        serde_json::to_value(&answer).unwrap_or_default(),
    ))
}
