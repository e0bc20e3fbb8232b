//! The seam between the catalog and a live MCP session.
//!
//! The catalog's call path never knows how a session is transported (stdio, streamable HTTP, an
//! in-memory peer). It calls through [`ToolSession`], which the orchestration implements over an
//! rmcp client session and which tests implement with in-memory fakes.

use std::time::Duration;

use agent_core::{BoxError, JsonObject};
use async_trait::async_trait;
use rmcp::model::CallToolResult;

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

/// Why a session could not produce a `tools/call` result.
///
/// ```
/// use mcp_catalog::SessionError;
/// let err = SessionError::Rpc { code: -32602, message: "unknown tool".into() };
/// assert_eq!(err.to_string(), "the server answered with error -32602: unknown tool");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The server answered the request with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Rpc {
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The call did not finish within the session's timeout.
    #[error("no answer within {:.1} s", after.as_secs_f64())]
    Timeout {
        /// The timeout that expired.
        after: Duration,
    },
    /// The call was cancelled before it finished.
    #[error("the call was cancelled")]
    Cancelled,
    /// The session is closed (the run ended, or the server went away).
    #[error("the session is closed")]
    Closed,
    /// The transport failed (broken pipe, HTTP error, malformed message, …).
    #[error("transport failure")]
    Transport(#[source] BoxError),
}

impl SessionError {
    /// A [`Transport`](Self::Transport) error from any error type.
    pub fn transport(source: impl Into<BoxError>) -> Self {
        Self::Transport(source.into())
    }
}
