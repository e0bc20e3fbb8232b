//! Asking the approval gate about the real tool, safely: a gate that hangs, panics or fails
//! denies.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::Value;

use super::{CallKind, ResolvedCall};
use crate::{
    ApprovalDecision, ApprovalGate, ApprovalRequest, ApprovalTrigger, JsonObject, Redactor,
};

/// The most characters of the arguments a prompt shows (the metadata holds them all).
const PROMPT_ARGUMENT_CHARS: usize = 2000;

/// How the gate answered, including the ways it can fail to.
#[derive(Debug)]
pub(super) enum Answer {
    Decided(ApprovalDecision),
    TimedOut,
    Panicked,
}

/// Asks `gate`, giving it at most `timeout`; a panic inside it is caught.
pub(super) async fn ask(
    gate: &dyn ApprovalGate,
    request: ApprovalRequest,
    timeout: Duration,
) -> Answer {
    // The call itself is inside the guarded future, so a gate that panics before returning
    // its future is caught too.
    let asking = AssertUnwindSafe(async move { gate.request(request).await }).catch_unwind();
    match tokio::time::timeout(timeout, asking).await {
        Err(_) => Answer::TimedOut,
        Ok(Err(_panic)) => Answer::Panicked,
        Ok(Ok(decision)) => Answer::Decided(decision),
    }
}

/// The request for `call`: action ref `server__tool`, a prompt naming server, tool and the
/// (redacted) arguments, metadata `mcp_tool_name` and `mcp_arguments`.
pub(super) fn request(
    call: &ResolvedCall,
    trigger: &ApprovalTrigger,
    redactor: &Redactor,
) -> ApprovalRequest {
    let arguments = redactor.redact_json(&Value::Object(call.arguments.clone()));
    let mut shown = arguments.to_string();
    if let Some((cut, _)) = shown.char_indices().nth(PROMPT_ARGUMENT_CHARS) {
        shown.truncate(cut);
        shown.push('…');
    }
    let tool = match call.kind {
        CallKind::External => {
            let server = call.server.as_deref().unwrap_or_default();
            let identity = match call.server_identity.as_deref() {
                Some(identity) if identity != server => format!(" (`{identity}`)"),
                _ => String::new(),
            };
            format!(
                "tool `{}` of MCP server `{server}`{identity}",
                call.remote_tool.as_deref().unwrap_or(&call.action_ref)
            )
        }
        CallKind::Native | CallKind::Meta => format!("tool `{}`", call.action_ref),
    };
    let prompt =
        format!("Allow the {tool} to run with arguments {shown}? (approval required by {trigger})");
    let mut metadata = JsonObject::new();
    metadata.insert("mcp_tool_name".into(), call.action_ref.clone().into());
    metadata.insert("mcp_arguments".into(), arguments);
    if let Some(server) = &call.server {
        metadata.insert("mcp_server".into(), server.clone().into());
    }
    if let Some(identity) = &call.server_identity {
        metadata.insert("mcp_server_identity".into(), identity.clone().into());
    }
    if let Some(remote) = &call.remote_tool {
        metadata.insert("mcp_remote_tool".into(), remote.clone().into());
    }
    metadata.insert("approval_rule".into(), trigger.to_string().into());
    ApprovalRequest::new(call.action_ref.clone(), prompt).with_metadata(metadata)
}

/// Used when no gate is configured: a call that needs approval is denied.
#[derive(Debug, Clone, Copy)]
pub(super) struct NoGate;

#[async_trait]
impl ApprovalGate for NoGate {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Failed {
            message: String::from("no approval gate is configured"),
        }
    }
}
