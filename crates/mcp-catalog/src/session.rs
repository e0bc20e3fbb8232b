//! The seam between the catalog and a live MCP session.
//!
//! The catalog's call path never knows how a session is transported (stdio, streamable HTTP, an
//! in-memory peer). It calls through [`ToolSession`], which the orchestration implements over an
//! rmcp client session and which tests implement with in-memory fakes.

use agent_core::JsonObject;
use async_trait::async_trait;
use rmcp::model::CallToolResult;

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
}
