//! The conformance client's error.

use std::time::Duration;

use mcp_connector::{BoxError, ConnectError};

/// Why a scenario run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec could not be built.
    #[error("the server spec is not valid")]
    Config(#[source] BoxError),
    /// The transport could not be opened.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The MCP handshake failed.
    #[error("the MCP handshake failed")]
    Initialize(#[source] BoxError),
    /// A request failed.
    #[error("`{method}` failed")]
    Request {
        /// The method.
        method: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A tool answered with `isError: true`.
    #[error("tool `{tool}` returned an error: {content}")]
    ToolError {
        /// The tool.
        tool: String,
        /// Its content, as JSON.
        content: String,
    },
    /// A skill, or a file of one, was refused (a listing that failed, a read whose size,
    /// digest or frontmatter is not what the server listed).
    #[error(transparent)]
    Skill(#[from] mcp_client::FeatureError),
    /// The server did not list a tool the scenario needs.
    #[error("the server lists no tool `{0}`")]
    MissingTool(String),
    /// The step did not finish in time.
    #[error("{what} did not finish within {:.1} s", after.as_secs_f64())]
    Timeout {
        /// The step.
        what: String,
        /// The limit.
        after: Duration,
    },
}
