//! The seam between the catalog and a live MCP session.
//!
//! The catalog's call path never knows how a session is transported (stdio, streamable HTTP, an
//! in-memory peer). It calls through [`ToolSession`], which the orchestration implements over an
//! rmcp client session and which tests implement with in-memory fakes.

use std::collections::BTreeMap;

use agent_core::JsonObject;
use async_trait::async_trait;
use rmcp::model::{CallToolResult, GetPromptResult, ResourceContents};

use crate::SessionError;

/// One live session to one MCP server, reduced to what the catalog needs: calling a tool.
///
/// Implementations own timeouts, cancellation and reconnection; the catalog awaits the future and
/// maps a [`SessionError`] to an [`agent_core::ToolError`] naming the server and the tool.
/// A tool that ran and failed is **not** a `SessionError`: it is an `Ok` result with
/// `isError: true`, which the catalog turns into [`agent_core::ToolError::Invocation`] carrying
/// the server's own text.
///
/// ```
/// use agent_core::JsonObject;
/// use async_trait::async_trait;
/// use mcp_catalog::{SessionError, ToolSession};
/// use rmcp::model::{CallToolResult, ContentBlock};
///
/// /// Answers every call with the name of the tool.
/// struct Named;
///
/// #[async_trait]
/// impl ToolSession for Named {
///     async fn call_tool(
///         &self,
///         tool: &str,
///         _arguments: JsonObject,
///     ) -> Result<CallToolResult, SessionError> {
///         Ok(CallToolResult::success(vec![ContentBlock::text(tool)]))
///     }
/// }
/// ```
#[async_trait]
pub trait ToolSession: Send + Sync {
    /// Calls `tool` — its name **on the server**, not the catalog's `server__tool` name — with
    /// `arguments`, which the catalog has validated and passes through unchanged.
    async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, SessionError>;

    /// Reads what `request` names — a resource, a prompt, a skill file — for `mcp_read`,
    /// bounded and cleaned by the implementation (it owns the size limit and the run's
    /// secrets). The catalog has checked nothing but the shape of the request: the governed
    /// layer decided it before this is called.
    ///
    /// The default offers nothing: [`SessionError::NotOffered`].
    async fn read(&self, request: &ReadRequest) -> Result<ReadResult, SessionError> {
        Err(SessionError::NotOffered {
            what: request.kind().plural(),
        })
    }
}

/// What `mcp_read` asks a session for.
///
/// ```
/// use mcp_catalog::{FeatureKind, ReadRequest};
///
/// let read = ReadRequest::Resource { uri: "file:///srv/a.md".into() };
/// assert_eq!(read.kind(), FeatureKind::Resource);
/// assert_eq!(read.target(), "file:///srv/a.md");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadRequest {
    /// `resources/read` of `uri`.
    Resource {
        /// The URI.
        uri: String,
    },
    /// `prompts/get` of `name` with `arguments`.
    Prompt {
        /// The prompt's name.
        name: String,
        /// Its arguments.
        arguments: BTreeMap<String, String>,
    },
    /// One file of a skill the server lists (SEP-2640: `skill://<skill>/<file>`).
    SkillFile {
        /// The skill's name.
        skill: String,
        /// The file's path within the skill (`SKILL.md` by default).
        file: String,
    },
}

impl ReadRequest {
    /// The kind of thing read.
    pub fn kind(&self) -> crate::FeatureKind {
        match self {
            Self::Resource { .. } => crate::FeatureKind::Resource,
            Self::Prompt { .. } => crate::FeatureKind::Prompt,
            Self::SkillFile { .. } => crate::FeatureKind::Skill,
        }
    }

    /// The URI, the prompt's name, or the skill file's `skill://` URI.
    pub fn target(&self) -> String {
        match self {
            Self::Resource { uri } => uri.clone(),
            Self::Prompt { name, .. } => name.clone(),
            Self::SkillFile { skill, file } => format!("skill://{skill}/{file}"),
        }
    }
}

/// What a session read for `mcp_read`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ReadResult {
    /// A resource's (or a skill file's) contents.
    Contents(Vec<ResourceContents>),
    /// A prompt's messages.
    Prompt(GetPromptResult),
}
