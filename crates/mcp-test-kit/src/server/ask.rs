//! The `ask` tool of a [`TestServer`](super::TestServer) built
//! [`with_ask`](super::TestServerOptions::with_ask): it sends the client the elicitation
//! request given as its `request` argument, as it is, and returns the client's answer. With
//! `timeout_ms`, it gives up on the request after that long (rmcp then sends the client
//! `notifications/cancelled` for it) and the call fails. With `then` (another request), it
//! sends that one once the first is answered, and returns the second answer. With
//! `complete`, once a URL request is answered it sends `notifications/elicitation/complete`
//! for its `elicitationId`.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientResult, CustomNotification, ElicitRequest, ElicitRequestParams,
    ElicitResult, JsonObject, ServerNotification, ServerRequest, Tool,
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
                "then": {"type": "object"},
                "complete": {"type": "boolean"},
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
    let mut answer = elicit(args, "request", context).await?;
    if args.contains_key("then") {
        answer = elicit(args, "then", context).await?;
    }
    let id = args
        .get("request")
        .and_then(|request| request.get("elicitationId"))
        .and_then(Value::as_str);
    if let (Some(Value::Bool(true)), Some(id)) = (args.get("complete"), id) {
        let params = json!({"elicitationId": id});
        let notification =
            CustomNotification::new("notifications/elicitation/complete", Some(params));
        context
            .peer
            .send_notification(ServerNotification::CustomNotification(notification))
            .await
            .map_err(|e| ErrorData::internal_error(format!("completion not sent: {e}"), None))?;
    }
    Ok(structured(
        serde_json::to_value(&answer).unwrap_or_default(),
    ))
}

/// Sends the client the request in `args[key]` and returns its answer.
async fn elicit(
    args: &JsonObject,
    key: &str,
    context: &RequestContext<RoleServer>,
) -> Result<ElicitResult, ErrorData> {
    let request = args.get(key).cloned().unwrap_or(Value::Null);
    let request: ElicitRequestParams = serde_json::from_value(request).map_err(|e| {
        ErrorData::invalid_params(format!("`{key}` is not an elicitation request: {e}"), None)
    })?;
    match args.get("timeout_ms").and_then(Value::as_u64) {
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
    .map_err(|e| ErrorData::internal_error(format!("elicitation failed: {e}"), None))
}
