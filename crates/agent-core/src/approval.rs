//! Human-in-the-loop approval of tool calls.

use async_trait::async_trait;

use crate::JsonObject;

/// A request for approval of one call.
///
/// For an external tool reached through a generic caller, `action_ref` is the real tool
/// (`server__tool`), the prompt names it, and `metadata` holds `mcp_tool_name` and
/// `mcp_arguments`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// What is to be approved, e.g. `github__create_issue`.
    pub action_ref: String,
    /// A sentence for the human.
    pub prompt: String,
    /// Details for the UI.
    pub metadata: JsonObject,
}

impl ApprovalRequest {
    /// A request with empty metadata.
    pub fn new(action_ref: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            action_ref: action_ref.into(),
            prompt: prompt.into(),
            metadata: JsonObject::new(),
        }
    }

    /// Sets the metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: JsonObject) -> Self {
        self.metadata = metadata;
        self
    }
}

/// The answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Go ahead, this once.
    Approved,
    /// Go ahead, and do not ask again about the same tool (`action_ref`) for the rest of the
    /// run.
    ApprovedForRun,
    /// Don't; the reason is shown to the model.
    Rejected {
        /// Why.
        reason: String,
    },
    /// The gate could not decide (no terminal to ask on, a broken connection to the UI…). The
    /// call is denied, like a rejection; the message says what went wrong.
    Failed {
        /// What went wrong, for the model and the logs. Never a secret.
        message: String,
    },
}

/// Asks someone (a human, a rule engine) whether a call may run.
///
/// ```
/// use agent_core::{ApprovalDecision, ApprovalGate, ApprovalRequest};
/// use async_trait::async_trait;
///
/// struct NoWrites;
/// #[async_trait]
/// impl ApprovalGate for NoWrites {
///     async fn request(&self, req: ApprovalRequest) -> ApprovalDecision {
///         if req.action_ref.contains("delete") {
///             ApprovalDecision::Rejected { reason: "deletes are not allowed".into() }
///         } else {
///             ApprovalDecision::Approved
///         }
///     }
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let d = NoWrites.request(ApprovalRequest::new("fs__delete_file", "Delete /tmp/x?")).await;
/// assert!(matches!(d, ApprovalDecision::Rejected { .. }));
/// # });
/// ```
#[async_trait]
pub trait ApprovalGate: Send + Sync {
    /// Decides one request.
    async fn request(&self, request: ApprovalRequest) -> ApprovalDecision;
}

/// Approves everything. For tests and trusted local use.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

#[async_trait]
impl ApprovalGate for AutoApprove {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Approved
    }
}
