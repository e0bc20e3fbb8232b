//! The resources, templates, prompts and completions the MCP conformance suite's server
//! scenarios read by name, for a [`TestServer`](super::TestServer) built
//! [`with_suite_resources`](super::TestServerOptions::with_suite_resources):
//! `test://static-text`, `test://static-binary`, `test://watched-resource`, the template
//! `test://template/{id}/data`, the prompts `test_simple_prompt`,
//! `test_prompt_with_arguments`, `test_prompt_with_embedded_resource` and
//! `test_prompt_with_image`, each answering what its scenario describes. A URI it does not
//! serve is `resource_not_found` with the URI in `data` (SEP-2164).

use rmcp::ErrorData;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, GetPromptRequestParams,
    GetPromptResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, Prompt,
    PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResult, Reference,
    Resource, ResourceContents, ResourceTemplate, Role,
};
use serde_json::json;

use super::content::PNG_1X1;

/// The resources listed.
pub(super) fn resources() -> ListResourcesResult {
    ListResourcesResult::with_all_items(vec![
        Resource::new("test://static-text", "static-text")
            .with_mime_type("text/plain")
            .with_description("A static text resource."),
        Resource::new("test://static-binary", "static-binary")
            .with_mime_type("image/png")
            .with_description("A static binary resource (a 1x1 PNG)."),
        Resource::new("test://watched-resource", "watched-resource")
            .with_mime_type("text/plain")
            .with_description("A resource to subscribe to."),
    ])
}

/// The resource templates listed.
pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new("test://template/{id}/data", "template-data")
            .with_mime_type("application/json"),
    ])
}

/// `resources/read`.
pub(super) fn read(request: &ReadResourceRequestParams) -> Result<ReadResourceResult, ErrorData> {
    let uri = request.uri.as_str();
    let content = match uri {
        "test://static-text" => {
            ResourceContents::text("This is the content of the static text resource.", uri)
        }
        "test://watched-resource" => ResourceContents::text("Watched resource content.", uri),
        "test://static-binary" => ResourceContents::blob(PNG_1X1, uri).with_mime_type("image/png"),
        _ => match uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
        {
            Some(id) => ResourceContents::text(
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
                uri,
            )
            .with_mime_type("application/json"),
            None => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {uri}"),
                    Some(json!({ "uri": uri })),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![content]))
}

/// The prompts listed.
pub(super) fn prompts() -> ListPromptsResult {
    let required = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(true)
    };
    ListPromptsResult::with_all_items(vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A prompt without arguments."),
            None,
        ),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with two required arguments."),
            Some(vec![
                required("arg1", "First test argument"),
                required("arg2", "Second test argument"),
            ]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt embedding a resource."),
            Some(vec![required(
                "resourceUri",
                "URI of the resource to embed",
            )]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt with an image."),
            None,
        ),
    ])
}

/// `prompts/get`.
pub(super) fn get_prompt(request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    let arg = |key: &str| {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let required = |key: &str| {
        arg(key).ok_or_else(|| ErrorData::invalid_params(format!("`{key}` is required"), None))
    };
    let messages = match request.name.as_str() {
        "test_simple_prompt" => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (required("arg1")?, required("arg2")?);
            vec![PromptMessage::new_text(
                Role::User,
                format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
            )]
        }
        "test_prompt_with_embedded_resource" => vec![
            PromptMessage::new_resource(
                Role::User,
                required("resourceUri")?,
                Some("text/plain".to_owned()),
                Some("Embedded resource content for testing.".to_owned()),
                None,
                None,
                None,
            ),
            PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
        ],
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG_1X1, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        other => {
            return Err(ErrorData::invalid_params(
                format!("no prompt {other}"),
                None,
            ));
        }
    };
    Ok(GetPromptResult::new(messages))
}

/// `completion/complete`: a few values for any argument, those starting with its value.
pub(super) fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let candidates: &[&str] = match &request.r#ref {
        Reference::Prompt(p) if p.name == "test_prompt_with_arguments" => {
            &["test", "testValue1", "testValue2"]
        }
        Reference::Resource(r) if r.uri == "test://template/{id}/data" => &["1", "123"],
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
