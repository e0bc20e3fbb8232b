//! The resources, prompts and completions of a [`TestServer`](super::TestServer) built
//! [`with_features`](super::TestServerOptions::with_features): well-formed ones and hostile
//! ones (a resource larger than a client's bound, a blob that is not base64, names with
//! control characters, an overlong URI), and the `flood_updates` tool, which sends
//! `notifications/resources/updated` for a URI as many times as asked.

use rmcp::model::{
    CallToolResult, CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotificationParam, Role, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use crate::schema::{object, structured};

/// The size of `test://huge`: 9 MiB of text.
pub const HUGE_RESOURCE_BYTES: usize = 9 * 1024 * 1024;

/// The resources listed.
pub(super) fn resources() -> ListResourcesResult {
    let overlong = format!("test://long/{}", "x".repeat(5000));
    ListResourcesResult::with_all_items(vec![
        Resource::new("test://text/hello", "hello").with_mime_type("text/plain"),
        Resource::new("test://blob/ok", "blob"),
        Resource::new("test://blob/bad", "bad blob"),
        Resource::new("test://huge", "huge"),
        Resource::new("test://hostile", "evil\u{1b}[31mname\u{7}")
            .with_description(format!("line\u{0}one\n{}", "d".repeat(10_000))),
        Resource::new("test://bad\u{7}uri", "control in the URI"),
        Resource::new(overlong, "overlong URI"),
    ])
}

/// The resource templates listed.
pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![ResourceTemplate::new(
        "test://items/{id}",
        "item",
    )])
}

/// `resources/read`.
pub(super) fn read(request: &ReadResourceRequestParams) -> Result<ReadResourceResult, ErrorData> {
    let uri = request.uri.as_str();
    let content = match uri {
        "test://text/hello" => ResourceContents::text("hello", uri),
        "test://blob/ok" => ResourceContents::blob("AAEC", uri),
        "test://blob/bad" => ResourceContents::blob("not base64!!", uri),
        "test://huge" => ResourceContents::text("x".repeat(HUGE_RESOURCE_BYTES), uri),
        "test://hostile" => ResourceContents::text("hostile", "test://hostile\u{1b}[0m"),
        _ if uri.starts_with("test://items/") => ResourceContents::text(uri.to_owned(), uri),
        _ => {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            ));
        }
    };
    Ok(ReadResourceResult::new(vec![content]))
}

/// The prompts listed.
pub(super) fn prompts() -> ListPromptsResult {
    ListPromptsResult::with_all_items(vec![
        Prompt::new(
            "greet",
            Some("Greets someone."),
            Some(vec![
                PromptArgument::new("name").with_required(true),
                PromptArgument::new("greeting"),
            ]),
        ),
        Prompt::new("evil\u{1b}name", Some("left out by a careful client"), None),
    ])
}

/// `prompts/get`.
pub(super) fn get_prompt(request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    if request.name != "greet" {
        return Err(ErrorData::invalid_params(
            format!("no prompt {}", request.name),
            None,
        ));
    }
    let arg = |key: &str| {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let Some(name) = arg("name") else {
        return Err(ErrorData::invalid_params("`name` is required", None));
    };
    let greeting = arg("greeting").unwrap_or_else(|| "Hello".to_owned());
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        format!("{greeting}, {name}!"),
    )]))
}

/// `completion/complete`: names for `greet`'s `name` (Spanish ones once the context says the
/// `greeting` is `Hola`), ids for `test://items/{id}`.
pub(super) fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let spanish = request
        .context
        .as_ref()
        .and_then(|c| c.get_argument("greeting"))
        .is_some_and(|g| g == "Hola");
    let candidates: &[&str] = match &request.r#ref {
        Reference::Prompt(p) if p.name == "greet" && request.argument.name == "name" => {
            if spanish {
                &["alba", "ana"]
            } else {
                &["alice", "albert", "bob"]
            }
        }
        Reference::Resource(r) if r.uri == "test://items/{id}" => &["1", "2", "10"],
        _ => &[],
    };
    let values = candidates
        .iter()
        .filter(|c| c.starts_with(&request.argument.value))
        .map(|c| (*c).to_owned())
        .collect();
    CompletionInfo::with_all_values(values)
        .map(CompleteResult::new)
        .map_err(|e| ErrorData::internal_error(e, None))
}

/// The `flood_updates` tool as listed.
pub(super) fn flood_tool() -> Tool {
    Tool::new(
        "flood_updates",
        "Sends notifications/resources/updated for `uri` `count` times, then answers.",
        object(json!({
            "type": "object",
            "properties": {"uri": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["uri", "count"]
        })),
    )
}

/// The `flood_updates` tool.
pub(super) async fn flood(
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let uri = args.get("uri").and_then(|v| v.as_str()).unwrap_or_default();
    let count = args.get("count").and_then(|v| v.as_u64()).unwrap_or(0);
    let mut sent = 0u64;
    for _ in 0..count {
        if context
            .peer
            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
            .await
            .is_err()
        {
            break;
        }
        sent += 1;
    }
    Ok(structured(json!({ "sent": sent })))
}

/// The `roots` tool as listed.
pub(super) fn roots_tool() -> Tool {
    Tool::new(
        "roots",
        "Asks the client for its roots (roots/list) and returns their URIs.",
        object(json!({"type": "object"})),
    )
}

/// The `roots` tool: the client's `roots/list` answer, or a tool error naming why it failed.
/// (Roots are deprecated by SEP-2577 but part of revision 2025-11-25, which this server speaks.)
#[allow(deprecated)]
pub(super) async fn roots(context: &RequestContext<RoleServer>) -> CallToolResult {
    match context.peer.list_roots().await {
        Ok(result) => {
            let uris: Vec<String> = result.roots.into_iter().map(|r| r.uri).collect();
            structured(json!({ "roots": uris }))
        }
        Err(e) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
            "roots/list failed: {e}"
        ))]),
    }
}
