//! The `ask` tool of a [`TestServer`](super::TestServer) built
//! [`with_ask`](super::TestServerOptions::with_ask): it sends the client the elicitation
//! request given as its `request` argument, as it is, and returns the client's answer. With
//! `timeout_ms`, it gives up on the request after that long (rmcp then sends the client
//! `notifications/cancelled` for it) and the call fails.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientResult, ElicitRequest, ElicitRequestParams, JsonObject, ServerRequest,
    Tool,
};
use rmcp::service::{PeerRequestOptions, RequestContext, ServiceError};
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
            "properties": {
                "request": {"type": "object"},
                "timeout_ms": {"type": "integer", "minimum": 0},
            },
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
    let answer = match args.get("timeout_ms").and_then(Value::as_u64) {
        None => context.peer.create_elicitation(request).await,
        Some(ms) => {
            let options = PeerRequestOptions::with_timeout(Duration::from_millis(ms));
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(request));
            match context
                .peer
                .send_request_with_option(request, options)
                .await
            {
                Ok(handle) => match handle.await_response().await {
                    Ok(ClientResult::ElicitResult(answer)) => Ok(answer),
                    Ok(_) => Err(ServiceError::UnexpectedResponse),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
    }
    .map_err(|e| ErrorData::internal_error(format!("elicitation failed: {e}"), None))?;
    Ok(structured(
        serde_json::to_value(&answer).unwrap_or_default(),
    ))
}
