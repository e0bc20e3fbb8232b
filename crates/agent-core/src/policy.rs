//! Tool policy: a hook before each call decides whether it runs; a hook after it observes the
//! outcome.

use crate::{JsonObject, ToolAnnotations, ToolError, ToolOutput};

/// What policy knows about a call before it runs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallInfo<'a> {
    /// The tool as the model named it (for an external tool reached through a generic caller,
    /// the real tool's `server__tool` name, never the caller's name).
    pub tool: &'a str,
    /// The configured server key, for an external tool.
    pub server: Option<&'a str>,
    /// The server's self-declared identity (MCP `serverInfo.name`), when known.
    pub server_identity: Option<&'a str>,
    /// The tool's name on its server, for an external tool.
    pub remote_tool: Option<&'a str>,
    /// The argument object.
    pub arguments: &'a JsonObject,
    /// The tool's hints.
    pub annotations: &'a ToolAnnotations,
}

impl<'a> CallInfo<'a> {
    /// Info for a native tool (no server).
    pub fn native(
        tool: &'a str,
        arguments: &'a JsonObject,
        annotations: &'a ToolAnnotations,
    ) -> Self {
        Self {
            tool,
            server: None,
            server_identity: None,
            remote_tool: None,
            arguments,
            annotations,
        }
    }

    /// Sets the server fields for an external tool.
    #[must_use]
    pub fn with_server(
        mut self,
        server: &'a str,
        identity: Option<&'a str>,
        remote_tool: &'a str,
    ) -> Self {
        self.server = Some(server);
        self.server_identity = identity;
        self.remote_tool = Some(remote_tool);
        self
    }
}

/// The verdict of [`ToolPolicy::before_call`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyDecision {
    /// Run the call.
    Allow,
    /// Ask the approval gate first.
    RequireApproval,
    /// Refuse the call; the reason is shown to the model.
    Deny {
        /// Why.
        reason: String,
    },
}

/// Decides which calls run, for native and external tools alike.
///
/// ```
/// use agent_core::{CallInfo, PolicyDecision, ToolPolicy};
///
/// /// Destructive tools need a human.
/// struct Careful;
/// impl ToolPolicy for Careful {
///     fn before_call(&self, call: &CallInfo<'_>) -> PolicyDecision {
///         if call.annotations.destructive_hint == Some(true) {
///             PolicyDecision::RequireApproval
///         } else {
///             PolicyDecision::Allow
///         }
///     }
/// }
/// let args = Default::default();
/// let hints = agent_core::ToolAnnotations::read_only();
/// assert_eq!(Careful.before_call(&CallInfo::native("ls", &args, &hints)), PolicyDecision::Allow);
/// ```
pub trait ToolPolicy: Send + Sync {
    /// Called before each call.
    fn before_call(&self, call: &CallInfo<'_>) -> PolicyDecision;

    /// Called after each call that ran, with its outcome. The default does nothing.
    fn after_call(&self, call: &CallInfo<'_>, outcome: &Result<ToolOutput, ToolError>) {
        let _ = (call, outcome);
    }

    /// Whether [`after_call`](Self::after_call) wants the outcomes. The default says yes; a
    /// policy that does not override `after_call` may say no, and then an allowed call costs
    /// the policy layer nothing once it ran (no future of its own waits for the outcome).
    ///
    /// ```
    /// use agent_core::{AllowAll, ToolPolicy};
    /// assert!(!AllowAll.observes_outcomes());
    /// ```
    fn observes_outcomes(&self) -> bool {
        true
    }
}

/// A policy that allows every call.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl ToolPolicy for AllowAll {
    fn before_call(&self, _call: &CallInfo<'_>) -> PolicyDecision {
        PolicyDecision::Allow
    }

    fn observes_outcomes(&self) -> bool {
        false
    }
}
