//! Errors of the catalog's own operations (adding servers, promoting tools).
//!
//! Errors of a tool *call* are [`agent_core::ToolError`]s, since they go back to the model.

/// Why the catalog refused a change.
///
/// ```
/// use mcp_catalog::CatalogError;
/// let err = CatalogError::NameCollision {
///     name: "a__b-c".into(),
///     existing: "a__b.c".into(),
///     incoming: "a__b-c".into(),
/// };
/// assert_eq!(
///     err.to_string(),
///     "tool `a__b-c` would be shown to the model as `a__b-c`, which tool `a__b.c` already has"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two tools (or a tool and a native tool) would be shown to the model under one name.
    #[error(
        "tool `{incoming}` would be shown to the model as `{name}`, which tool `{existing}` already has"
    )]
    NameCollision {
        /// The model-facing name both would have.
        name: String,
        /// The tool that has it (external `server__tool` name, or a native tool's name).
        existing: String,
        /// The tool that was being added.
        incoming: String,
    },
    /// A server listed a tool whose name is unusable (empty, or listed twice).
    #[error("server `{server}` lists an invalid tool `{tool}`: {reason}")]
    InvalidTool {
        /// The server.
        server: String,
        /// The tool's name as listed.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A server key is unusable.
    #[error("invalid server key `{server}`: {reason}")]
    InvalidServer {
        /// The key.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// No tool has that name.
    #[error("unknown tool `{tool}`")]
    UnknownTool {
        /// The name asked for.
        tool: String,
    },
    /// The run already promoted as many tools as allowed.
    #[error("cannot promote `{tool}`: the limit of {limit} promoted tools is reached")]
    PromotionLimit {
        /// The tool.
        tool: String,
        /// The limit.
        limit: usize,
    },
}
