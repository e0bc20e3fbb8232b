//! Turning an MCP `tools/call` result into what the agent side understands.

use agent_core::{ContentPart, ResourceContents, ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock};

/// Converts a `tools/call` result of `tool` (the external `server__tool` name) on `server`.
///
/// - `isError: true` → [`ToolError::Invocation`] carrying the server's own text (its text parts
///   joined by newlines; failing that, its structured content as JSON).
/// - Otherwise a [`ToolOutput`]: `structuredContent` kept as is (it takes precedence when the
///   model reads the output), and every content part kept with its type — text, image, audio,
///   embedded resource and resource link. Nothing is dropped: a part of a kind this version
///   does not know becomes a text part holding its JSON.
///
/// ```
/// use mcp_catalog::normalize_result;
/// use rmcp::model::{CallToolResult, ContentBlock};
///
/// let ok = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
/// assert_eq!(normalize_result("srv", "srv__t", ok).unwrap().to_model_text(), "a\nb");
///
/// let failed = CallToolResult::error(vec![ContentBlock::text("repository not found")]);
/// let err = normalize_result("github", "github__get_repo", failed).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "tool `github__get_repo` on server `github` failed: repository not found"
/// );
/// ```
pub fn normalize_result(
    server: &str,
    tool: &str,
    result: CallToolResult,
) -> Result<ToolOutput, ToolError> {
    if result.is_error == Some(true) {
        return Err(ToolError::Invocation {
            server: Some(server.to_owned()),
            tool: tool.to_owned(),
            message: error_text(&result),
        });
    }
    let mut output = ToolOutput::from_parts(result.content.into_iter().map(part).collect());
    output.structured = result.structured_content;
    Ok(output)
}

fn error_text(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    if let Some(structured) = &result.structured_content {
        return structured.to_string();
    }
    if !result.content.is_empty() {
        return serde_json::to_string(&result.content)
            .unwrap_or_else(|_| String::from("the tool reported an error"));
    }
    String::from("the tool reported an error without a message")
}

pub(crate) fn part(block: ContentBlock) -> ContentPart {
    match block {
        ContentBlock::Text(t) => ContentPart::Text { text: t.text },
        ContentBlock::Image(i) => ContentPart::Image {
            data: i.data,
            mime_type: i.mime_type,
        },
        ContentBlock::Audio(a) => ContentPart::Audio {
            data: a.data,
            mime_type: a.mime_type,
        },
        ContentBlock::Resource(r) => match r.resource {
            rmcp::model::ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => ContentPart::Resource {
                resource: ResourceContents::Text {
                    uri,
                    mime_type,
                    text,
                },
            },
            rmcp::model::ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => ContentPart::Resource {
                resource: ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob,
                },
            },
            other => unknown(&other),
        },
        ContentBlock::ResourceLink(link) => ContentPart::ResourceLink {
            uri: link.uri,
            name: link.name,
            mime_type: link.mime_type,
        },
        other => unknown(&other),
    }
}

/// A part of a kind this version does not know, kept as a text part holding its JSON.
fn unknown(part: &impl serde::Serialize) -> ContentPart {
    ContentPart::Text {
        text: serde_json::to_string(part).unwrap_or_else(|_| String::from("<unprintable content>")),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{Resource, ResourceContents as RmcpResource};
    use serde_json::{Value, json};

    use super::*;

    fn ok(result: CallToolResult) -> ToolOutput {
        normalize_result("srv", "srv__t", result).expect("a successful result")
    }

    #[test]
    fn structured_content_is_kept_as_is() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("{\"n\":1}")]);
        result.structured_content = Some(json!({"n": 1, "list": [3, 2, 1]}));
        let out = ok(result);
        assert_eq!(out.structured, Some(json!({"n": 1, "list": [3, 2, 1]})));
        assert_eq!(out.to_model_text(), r#"{"n":1,"list":[3,2,1]}"#);
    }

    #[test]
    fn text_parts_are_joined() {
        let out = ok(CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::text("two"),
        ]));
        assert_eq!(out.to_model_text(), "one\ntwo");
    }

    #[test]
    fn every_content_type_keeps_its_type() {
        let mut link = Resource::new("file:///r.txt", "r.txt");
        link.mime_type = Some("text/plain".into());
        let out = ok(CallToolResult::success(vec![
            ContentBlock::text("t"),
            ContentBlock::image("aW1n", "image/png"),
            ContentBlock::audio("YXVk", "audio/wav"),
            ContentBlock::resource(RmcpResource::text("hello", "mem://a")),
            ContentBlock::resource(
                RmcpResource::blob("YmxvYg==", "mem://b").with_mime_type("application/x"),
            ),
            ContentBlock::resource_link(link),
        ]));
        assert_eq!(
            out.content,
            vec![
                ContentPart::text("t"),
                ContentPart::Image {
                    data: "aW1n".into(),
                    mime_type: "image/png".into()
                },
                ContentPart::Audio {
                    data: "YXVk".into(),
                    mime_type: "audio/wav".into()
                },
                ContentPart::Resource {
                    resource: ResourceContents::Text {
                        uri: "mem://a".into(),
                        mime_type: Some("text/plain".into()),
                        text: "hello".into()
                    }
                },
                ContentPart::Resource {
                    resource: ResourceContents::Blob {
                        uri: "mem://b".into(),
                        mime_type: Some("application/x".into()),
                        blob: "YmxvYg==".into()
                    }
                },
                ContentPart::ResourceLink {
                    uri: "file:///r.txt".into(),
                    name: "r.txt".into(),
                    mime_type: Some("text/plain".into())
                },
            ]
        );
        assert!(out.structured.is_none());
    }

    #[test]
    fn is_error_carries_the_servers_text() {
        let err = normalize_result(
            "github",
            "github__create_issue",
            CallToolResult::error(vec![
                ContentBlock::text("validation failed"),
                ContentBlock::text("title is empty"),
            ]),
        )
        .unwrap_err();
        match &err {
            ToolError::Invocation {
                server,
                tool,
                message,
            } => {
                assert_eq!(server.as_deref(), Some("github"));
                assert_eq!(tool, "github__create_issue");
                assert_eq!(message, "validation failed\ntitle is empty");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn is_error_without_text_still_says_something() {
        let mut result = CallToolResult::error(Vec::new());
        result.structured_content = Some(json!({"code": 7}));
        let err = normalize_result("s", "s__t", result).unwrap_err();
        assert!(err.to_string().ends_with(r#"failed: {"code":7}"#), "{err}");
        let err = normalize_result("s", "s__t", CallToolResult::error(Vec::new())).unwrap_err();
        assert!(err.to_string().contains("without a message"), "{err}");
    }

    /// A cheap, deterministic stand-in for the cargo-fuzz target (which needs nightly):
    /// thousands of random result-shaped JSON documents, none of which may panic.
    #[test]
    fn random_results_never_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let strings = [
            "",
            "x",
            "text",
            "image",
            "audio",
            "resource",
            "resource_link",
            "\u{0}",
        ];
        for _ in 0..3000 {
            let mut content = Vec::new();
            for _ in 0..next(4) {
                let kind = strings[next(strings.len() as u64) as usize];
                let mut part = serde_json::Map::new();
                part.insert("type".into(), json!(kind));
                for key in [
                    "text", "data", "mimeType", "uri", "name", "blob", "resource",
                ] {
                    match next(4) {
                        0 => {}
                        1 => {
                            part.insert(key.into(), json!(strings[next(8) as usize]));
                        }
                        2 => {
                            part.insert(key.into(), json!({"uri": "u", "text": "t"}));
                        }
                        _ => {
                            part.insert(key.into(), json!(next(100)));
                        }
                    }
                }
                content.push(Value::Object(part));
            }
            let mut doc = json!({"content": content});
            if next(3) == 0 {
                doc["isError"] = json!(next(2) == 0);
            }
            if next(3) == 0 {
                doc["structuredContent"] = json!({"k": next(10)});
            }
            if let Ok(result) = serde_json::from_value::<CallToolResult>(doc) {
                match normalize_result("s", "s__t", result) {
                    Ok(out) => drop(out.to_model_text()),
                    Err(e) => drop(e.to_string()),
                }
            }
        }
    }

    #[test]
    fn results_parse_from_the_wire() {
        let wire = json!({
            "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "eA==", "mimeType": "image/gif"}],
            "isError": false
        });
        let result: CallToolResult = serde_json::from_value(wire).unwrap();
        assert_eq!(ok(result).content.len(), 2);
    }
}
