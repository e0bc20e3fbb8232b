//! In-memory fake MCP servers, for tests of the catalog and of crates built on it.
//!
//! Enabled by the `testing` feature (and always in this crate's own tests):
//!
//! ```toml
//! [dev-dependencies]
//! mcp-catalog = { workspace = true, features = ["testing"] }
//! ```
//!
//! A [`FakeServer`] implements [`ToolSession`] with no transport at all: each tool has a
//! [`Behavior`] (echo its arguments, fail with a message, return a fixed result, or fail at the
//! session level), and every call is recorded so a test can check what was sent.

use std::sync::{Arc, Mutex, PoisonError};

use agent_core::JsonObject;
use async_trait::async_trait;
use rmcp::model::{CallToolResult, ContentBlock, Resource, ResourceContents, Tool};
use serde_json::{Value, json};

use crate::{ServerTools, SessionError, ToolSession};

/// What a fake tool does when called.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Behavior {
    /// Returns the arguments: as structured content, and as a text part holding their JSON.
    Echo,
    /// Returns `isError: true` with this text.
    Fail(String),
    /// Returns this result.
    Respond(CallToolResult),
    /// Fails at the session level with this error.
    SessionFailure(SessionFailure),
}

/// Session-level failures a fake can simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionFailure {
    /// A JSON-RPC error response (`-32603`, "internal error").
    Rpc,
    /// A timeout after one second.
    Timeout,
    /// A closed session.
    Closed,
}

impl SessionFailure {
    fn error(self) -> SessionError {
        match self {
            Self::Rpc => SessionError::Rpc {
                code: -32603,
                message: "internal error".into(),
            },
            Self::Timeout => SessionError::Timeout {
                after: std::time::Duration::from_secs(1),
            },
            Self::Closed => SessionError::Closed,
        }
    }
}

/// A tool definition for a fake: a name, a description and an input schema.
///
/// ```
/// let tool = mcp_catalog::testing::tool("echo", "Echo", serde_json::json!({"type": "object"}));
/// assert_eq!(tool.name, "echo");
/// ```
pub fn tool(name: &str, description: &str, input_schema: Value) -> Tool {
    let schema = match input_schema {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
}

/// An in-memory MCP server.
///
/// ```
/// use agent_core::JsonObject;
/// use mcp_catalog::ToolSession;
/// use mcp_catalog::testing::{Behavior, FakeServer, tool};
/// use serde_json::json;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let fake = FakeServer::new().with_tool(tool("ping", "Ping", json!({"type": "object"})), Behavior::Echo);
/// let result = fake.call_tool("ping", JsonObject::new()).await.unwrap();
/// assert_eq!(result.structured_content, Some(json!({})));
/// assert_eq!(fake.calls().len(), 1);
/// # });
/// ```
#[derive(Debug, Default)]
pub struct FakeServer {
    tools: Vec<(Tool, Behavior)>,
    calls: Mutex<Vec<(String, JsonObject)>>,
    /// Texts `mcp_read` reads, by resource URI or prompt name.
    readable: Vec<(String, String)>,
    /// Every read so far.
    reads: Mutex<Vec<crate::ReadRequest>>,
}

impl FakeServer {
    /// A server with no tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool.
    #[must_use]
    pub fn with_tool(mut self, tool: Tool, behavior: Behavior) -> Self {
        self.tools.push((tool, behavior));
        self
    }

    /// A server with one tool of each kind:
    ///
    /// | tool | does |
    /// |---|---|
    /// | `echo` | echoes `{"text": string}` (required) |
    /// | `fail` | `isError` with "something went wrong" |
    /// | `image`, `audio`, `resource`, `resource_link` | one part of that type |
    /// | `structured` | structured content plus a text part |
    /// | `mixed` | text, image and an embedded resource |
    /// | `rpc_error`, `timeout`, `closed` | the session-level failure |
    pub fn everything() -> Self {
        let text_schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to echo back"}},
            "required": ["text"]
        });
        let empty = json!({"type": "object"});
        let mut link = Resource::new("file:///tmp/report.txt", "report.txt");
        link.mime_type = Some("text/plain".into());
        let mut structured = CallToolResult::success(vec![ContentBlock::text("{\"temp\":21}")]);
        structured.structured_content = Some(json!({"temp": 21}));
        Self::new()
            .with_tool(
                tool("echo", "Echo the input text back unchanged", text_schema),
                Behavior::Echo,
            )
            .with_tool(
                tool("fail", "Always fails with an error message", empty.clone()),
                Behavior::Fail("something went wrong".into()),
            )
            .with_tool(
                tool("image", "Return a tiny PNG image", empty.clone()),
                Behavior::Respond(CallToolResult::success(vec![ContentBlock::image(
                    "iVBORw0KGgo=",
                    "image/png",
                )])),
            )
            .with_tool(
                tool("audio", "Return a short audio clip", empty.clone()),
                Behavior::Respond(CallToolResult::success(vec![ContentBlock::audio(
                    "UklGRg==",
                    "audio/wav",
                )])),
            )
            .with_tool(
                tool(
                    "resource",
                    "Return an embedded text resource",
                    empty.clone(),
                ),
                Behavior::Respond(CallToolResult::success(vec![ContentBlock::resource(
                    ResourceContents::text("file contents", "file:///tmp/a.txt"),
                )])),
            )
            .with_tool(
                tool(
                    "resource_link",
                    "Return a link to a resource",
                    empty.clone(),
                ),
                Behavior::Respond(CallToolResult::success(vec![ContentBlock::resource_link(
                    link,
                )])),
            )
            .with_tool(
                tool(
                    "structured",
                    "Return structured weather data",
                    empty.clone(),
                ),
                Behavior::Respond(structured),
            )
            .with_tool(
                tool(
                    "mixed",
                    "Return text, an image and a resource",
                    empty.clone(),
                ),
                Behavior::Respond(CallToolResult::success(vec![
                    ContentBlock::text("see attached"),
                    ContentBlock::image("iVBORw0KGgo=", "image/png"),
                    ContentBlock::embedded_text("mem://note", "a note"),
                ])),
            )
            .with_tool(
                tool("rpc_error", "Fails with a protocol error", empty.clone()),
                Behavior::SessionFailure(SessionFailure::Rpc),
            )
            .with_tool(
                tool("timeout", "Never answers in time", empty.clone()),
                Behavior::SessionFailure(SessionFailure::Timeout),
            )
            .with_tool(
                tool("closed", "Its session is closed", empty),
                Behavior::SessionFailure(SessionFailure::Closed),
            )
    }

    /// Adds a text this server reads as the resource at `uri` or the prompt named `uri`
    /// ([`ToolSession::read`]); a prompt's answer is the text followed by its arguments as
    /// `name=value` lines.
    #[must_use]
    pub fn with_readable(mut self, uri: &str, text: &str) -> Self {
        self.readable.push((uri.to_owned(), text.to_owned()));
        self
    }

    /// Every read so far.
    pub fn reads(&self) -> Vec<crate::ReadRequest> {
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The tools, as `tools/list` would return them.
    pub fn tools(&self) -> Vec<Tool> {
        self.tools.iter().map(|(t, _)| t.clone()).collect()
    }

    /// Every call so far: the tool's name and the arguments exactly as received.
    pub fn calls(&self) -> Vec<(String, JsonObject)> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// This server as the catalog takes it, under `key`.
    pub fn into_server(self: Arc<Self>, key: &str) -> ServerTools {
        let tools = self.tools();
        ServerTools::new(key, self, tools)
    }
}

#[async_trait]
impl ToolSession for FakeServer {
    async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, SessionError> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((tool.to_owned(), arguments.clone()));
        let Some((_, behavior)) = self.tools.iter().find(|(t, _)| t.name == tool) else {
            return Err(SessionError::Rpc {
                code: -32602,
                message: format!("unknown tool {tool}"),
            });
        };
        match behavior {
            Behavior::Echo => {
                let text = Value::Object(arguments.clone()).to_string();
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(Value::Object(arguments));
                Ok(result)
            }
            Behavior::Fail(message) => Ok(CallToolResult::error(vec![ContentBlock::text(
                message.clone(),
            )])),
            Behavior::Respond(result) => Ok(result.clone()),
            Behavior::SessionFailure(failure) => Err(failure.error()),
        }
    }

    async fn read(&self, request: &crate::ReadRequest) -> Result<crate::ReadResult, SessionError> {
        use crate::{ReadRequest, ReadResult};
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        let target = request.target();
        let Some((_, text)) = self.readable.iter().find(|(k, _)| *k == target) else {
            return Err(SessionError::Rpc {
                code: -32002,
                message: format!("no such {}", request.kind().as_str()),
            });
        };
        match request {
            ReadRequest::Prompt { arguments, .. } => {
                let mut text = text.clone();
                for (name, value) in arguments {
                    text.push_str(&format!("\n{name}={value}"));
                }
                Ok(ReadResult::Prompt(rmcp::model::GetPromptResult::new(vec![
                    rmcp::model::PromptMessage::new_text(rmcp::model::Role::User, text),
                ])))
            }
            _ => Ok(ReadResult::Contents(vec![ResourceContents::text(
                text.clone(),
                target,
            )])),
        }
    }
}
