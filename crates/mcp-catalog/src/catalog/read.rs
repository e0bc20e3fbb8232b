//! `mcp_read`: the tool of the lazy surface that reads a server's resource, prompt or skill file
//! through the server's [`ToolSession::read`](crate::ToolSession::read) — resolved here, decided
//! by the governed layer (the `[policy]` `resource` / `prompt` rules), its answer bounded by the
//! layer's output limit like any tool's (the rest read with `mcp_read_output`).

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::{
    ContentPart, JsonObject, MAX_PROMPT_ARGUMENT_BYTES, ReadSubject, ResolvedCall, ToolAnnotations,
    ToolDescriptor, ToolError, ToolOutput,
};
use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::{Value, json};

use crate::normalize::part;
use crate::sanitize::{Lines, clean};
use crate::{FeatureKind, ReadRequest, ReadResult, SessionError};

use super::{Catalog, READ_OUTPUT_TOOL, READ_TOOL};

/// A `mcp_read` call resolved to the server and what it reads.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResolvedRead {
    /// The server key.
    pub server: String,
    /// Its self-declared name, when known.
    pub server_identity: Option<String>,
    /// What is read.
    pub request: ReadRequest,
}

impl ResolvedRead {
    /// What the `[policy]` rules decide: the resource's URI, the prompt's name or the skill's
    /// name.
    pub fn subject(&self) -> ReadSubject {
        match &self.request {
            ReadRequest::Prompt { name, .. } => ReadSubject::Prompt(name.clone()),
            ReadRequest::SkillFile { skill, .. } => ReadSubject::Skill(skill.clone()),
            other => ReadSubject::Resource(other.target()),
        }
    }

    /// The call the governed layer decides on: `mcp_read` on the server, read-only.
    pub(super) fn resolved_call(&self, arguments: JsonObject) -> ResolvedCall {
        let mut annotations = ToolAnnotations::read_only();
        annotations.title = Some(String::from("Read a resource, prompt or skill file"));
        let call = ResolvedCall::read(READ_TOOL, self.server.clone(), self.subject(), arguments)
            .with_annotations(annotations);
        match &self.server_identity {
            Some(identity) => call.with_identity(identity.clone()),
            None => call,
        }
    }
}

fn invalid(server: Option<&str>, message: String) -> ToolError {
    ToolError::InvalidArguments {
        server: server.map(str::to_owned),
        tool: READ_TOOL.into(),
        message,
    }
}

/// A string argument, cut nowhere: `Err` names the argument and the limit.
fn text_argument<'a>(
    input: &'a JsonObject,
    key: &str,
    max: usize,
    server: Option<&str>,
) -> Result<Option<&'a str>, ToolError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s))
            if !s.is_empty()
                && matches!(clean(s, max, Lines::Single), std::borrow::Cow::Borrowed(_)) =>
        {
            Ok(Some(s.as_str()))
        }
        Some(Value::String(_)) => Err(invalid(
            server,
            format!("`/{key}`: empty, longer than {max} bytes or holds control characters"),
        )),
        Some(other) => Err(invalid(
            server,
            format!(
                "`/{key}`: {} is not a string",
                clean(&other.to_string(), 64, Lines::Single)
            ),
        )),
    }
}

impl Catalog {
    /// Resolves a `mcp_read` call: the server must be in the catalog and offer the kind asked
    /// for (else a "not offered" error naming the server); exactly one of `uri`, `prompt`,
    /// `skill`; names and URIs within the [`FeatureLimits`](crate::FeatureLimits).
    pub(super) fn resolve_read(&self, input: &JsonObject) -> Result<ResolvedRead, ToolError> {
        if let Some(key) = input.keys().find(|k| {
            !matches!(
                k.as_str(),
                "server" | "uri" | "prompt" | "arguments" | "skill" | "file"
            )
        }) {
            let key = clean(key, 64, Lines::Single);
            return Err(invalid(None, format!("unknown argument `{key}`")));
        }
        let limits = &self.config.feature_limits;
        let Some(server) = text_argument(input, "server", limits.max_name_bytes, None)? else {
            return Err(invalid(None, "`/server` is required".into()));
        };
        let state = self.read();
        let Some(entry) = state.servers.get(server) else {
            let known: Vec<&str> = state.servers.keys().map(String::as_str).collect();
            return Err(invalid(
                None,
                format!(
                    "unknown server `{server}`; the servers are: {}",
                    known.join(", ")
                ),
            ));
        };
        let at = Some(server);
        let uri = text_argument(input, "uri", limits.max_uri_bytes, at)?;
        let prompt = text_argument(input, "prompt", limits.max_name_bytes, at)?;
        let skill = text_argument(input, "skill", limits.max_name_bytes, at)?;
        let request = match (uri, prompt, skill) {
            (Some(uri), None, None) => ReadRequest::Resource {
                uri: uri.to_owned(),
            },
            (None, Some(name), None) => ReadRequest::Prompt {
                name: name.to_owned(),
                arguments: prompt_arguments(input.get("arguments"), limits.max_arguments, at)?,
            },
            (None, None, Some(skill)) => {
                let file =
                    text_argument(input, "file", limits.max_uri_bytes, at)?.unwrap_or("SKILL.md");
                ReadRequest::SkillFile {
                    skill: skill.to_owned(),
                    file: file.to_owned(),
                }
            }
            _ => {
                return Err(invalid(
                    at,
                    "give exactly one of `uri` (a resource), `prompt` (with `arguments`) or \
                     `skill` (with `file`)"
                        .into(),
                ));
            }
        };
        if input.contains_key("arguments") && !matches!(request, ReadRequest::Prompt { .. }) {
            return Err(invalid(at, "`/arguments` go with `prompt` only".into()));
        }
        if input.contains_key("file") && !matches!(request, ReadRequest::SkillFile { .. }) {
            return Err(invalid(at, "`/file` goes with `skill` only".into()));
        }
        let kind = request.kind();
        if !state.offered.reads(server).offers(kind) {
            return Err(not_offered(server, kind));
        }
        Ok(ResolvedRead {
            server: server.to_owned(),
            server_identity: entry.identity.clone(),
            request,
        })
    }

    /// Reads what a resolved `mcp_read` names through its server's session. Reached only
    /// through the governed layer.
    pub(super) async fn read_feature(&self, read: ResolvedRead) -> Result<ToolOutput, ToolError> {
        let session = {
            let state = self.read();
            match state.servers.get(&read.server) {
                Some(entry) => Arc::clone(&entry.session),
                None => return Err(invalid(None, format!("unknown server `{}`", read.server))),
            }
        };
        let result = session
            .read(&read.request)
            .await
            .map_err(|e| read_error(&read.server, &read.request, e))?;
        Ok(match result {
            ReadResult::Contents(contents) => contents_output(contents),
            ReadResult::Prompt(prompt) => {
                let mut parts = Vec::new();
                if let Some(description) = prompt.description.filter(|d| !d.is_empty()) {
                    parts.push(ContentPart::text(description));
                }
                for message in prompt.messages {
                    let role = match message.role {
                        rmcp::model::Role::User => "user",
                        rmcp::model::Role::Assistant => "assistant",
                    };
                    match message.content {
                        ContentBlock::Text(t) => {
                            parts.push(ContentPart::text(format!("[{role}] {}", t.text)));
                        }
                        other => {
                            parts.push(ContentPart::text(format!("[{role}]")));
                            parts.push(part(other));
                        }
                    }
                }
                ToolOutput::from_parts(parts)
            }
        })
    }

    /// `mcp_read`'s descriptor.
    pub(super) fn read_descriptor(&self) -> ToolDescriptor {
        let limits = &self.config.feature_limits;
        let schema = json!({
            "type": "object",
            "properties": {
                "server": {
                    "type": "string",
                    "description": "The server, as mcp_search_tools (or a resource link) named it."
                },
                "uri": {
                    "type": "string",
                    "maxLength": limits.max_uri_bytes,
                    "description": "A resource's URI (a resource template's with its {placeholders} filled in)."
                },
                "prompt": {"type": "string", "description": "A prompt's name."},
                "arguments": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "The prompt's arguments, by name."
                },
                "skill": {"type": "string", "description": "A skill's name."},
                "file": {"type": "string", "description": "The skill's file to read (default SKILL.md)."}
            },
            "required": ["server"],
            "additionalProperties": false
        });
        let Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        ToolDescriptor::new(READ_TOOL, schema)
            .with_description(format!(
                "Read a resource (server + uri), get a prompt (server + prompt + arguments) or read \
                 a skill's file (server + skill + file) of a connected MCP server; \
                 mcp_search_tools finds them. A long answer is cut like any tool output: read \
                 the rest with {READ_OUTPUT_TOOL}."
            ))
            .with_annotations(ToolAnnotations::read_only())
    }

    /// The tool result of `server`, a server that offers resources, with a line after it naming
    /// how to follow each of its resource links with `mcp_read`.
    pub(super) fn with_link_hints(server: &str, mut output: ToolOutput) -> ToolOutput {
        let links: Vec<Value> = output
            .content
            .iter()
            .filter_map(|p| match p {
                ContentPart::ResourceLink { uri, .. } => {
                    Some(json!({"server": server, "uri": uri}))
                }
                _ => None,
            })
            .collect();
        for link in links {
            output.content.push(ContentPart::text(format!(
                "[resource link: read with {READ_TOOL} {link}]"
            )));
        }
        output
    }
}

/// The "not offered" error of `kind` on `server`.
fn not_offered(server: &str, kind: FeatureKind) -> ToolError {
    ToolError::Configuration {
        server: Some(server.to_owned()),
        tool: READ_TOOL.into(),
        message: format!("server `{server}` offers no {} to read", kind.plural()),
    }
}

/// `arguments` of a prompt: an object of strings (numbers and booleans are taken as their
/// text), at most `max` of them, each at most [`MAX_PROMPT_ARGUMENT_BYTES`].
fn prompt_arguments(
    value: Option<&Value>,
    max: usize,
    server: Option<&str>,
) -> Result<BTreeMap<String, String>, ToolError> {
    let object = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(invalid(server, "`/arguments`: not an object".into())),
    };
    if object.len() > max {
        return Err(invalid(
            server,
            format!("`/arguments`: more than {max} arguments (the limit)"),
        ));
    }
    object
        .iter()
        .map(|(name, value)| {
            if name.is_empty()
                || !matches!(
                    clean(name, MAX_PROMPT_ARGUMENT_BYTES, Lines::Single),
                    std::borrow::Cow::Borrowed(_)
                )
            {
                let name = clean(name, 64, Lines::Single);
                return Err(invalid(
                    server,
                    format!(
                        "`/arguments`: the name `{name}` is empty, longer than \
                         {MAX_PROMPT_ARGUMENT_BYTES} bytes (the limit) or holds control characters"
                    ),
                ));
            }
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    let name = clean(name, 64, Lines::Single);
                    return Err(invalid(
                        server,
                        format!("`/arguments/{name}`: not a string"),
                    ));
                }
            };
            if text.len() > MAX_PROMPT_ARGUMENT_BYTES {
                let name = clean(name, 64, Lines::Single);
                return Err(invalid(
                    server,
                    format!(
                        "`/arguments/{name}`: longer than {MAX_PROMPT_ARGUMENT_BYTES} bytes (the limit)"
                    ),
                ));
            }
            Ok((name.clone(), text))
        })
        .collect()
}

/// A resource's contents as the model reads them: each text under a line naming its URI (and
/// type); an image as an image; any other blob as an embedded resource.
fn contents_output(contents: Vec<ResourceContents>) -> ToolOutput {
    let mut parts = Vec::with_capacity(contents.len());
    for content in contents {
        match content {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => {
                let kind = mime_type.map(|m| format!(" ({m})")).unwrap_or_default();
                parts.push(ContentPart::text(format!("[{uri}{kind}]\n{text}")));
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type: Some(mime),
                blob,
                ..
            } if mime.starts_with("image/") => {
                parts.push(ContentPart::text(format!("[{uri} ({mime})]")));
                parts.push(ContentPart::Image {
                    data: blob,
                    mime_type: mime,
                });
            }
            other => parts.push(part(ContentBlock::resource(other))),
        }
    }
    ToolOutput::from_parts(parts)
}

/// Maps a failed read to the error the model and the events see, naming the server and what
/// was read (the session's own messages name the limit they broke).
fn read_error(server: &str, request: &ReadRequest, error: SessionError) -> ToolError {
    let what = format!(
        "{} `{}`",
        request.kind().as_str().replace('_', " "),
        request.target()
    );
    let at = Some(server.to_owned());
    let tool = READ_TOOL.to_owned();
    match error {
        SessionError::NotOffered { .. } => not_offered(server, request.kind()),
        SessionError::Refused { message } => ToolError::Invocation {
            server: at,
            tool,
            message,
        },
        SessionError::Rpc { code, message } => ToolError::Invocation {
            server: at,
            tool,
            message: format!("reading {what}: {message} (JSON-RPC error {code})"),
        },
        SessionError::Timeout { after } => ToolError::Timeout {
            server: at,
            tool,
            after,
        },
        other => ToolError::Transport {
            server: at,
            tool,
            source: Box::new(other),
        },
    }
}
