//! Governed calls: every tool call — native or external — passes the same stack of layers:
//! identity rules, policy, approval, timeout, output limit, events, metrics and history, each its own
//! [`tower_layer::Layer`] over a [`CallService`], each testable alone by stacking just it.
//!
//! The wrapped side tells the stack what a call really is through [`CallResolver`]: the stack
//! decides on the *real* tool (for a generic caller such as `mcp_call_tool`, the tool it
//! targets), then hands the resolved target back to the innermost dispatch, so what runs is
//! exactly what was approved.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    CallInfo, JsonObject, ToolAnnotations, ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher,
    ToolError, ToolOutput,
};

mod approval;
mod dispatch;
mod events;
mod history;
mod identity;
mod layer;
mod limit;
mod metered;
mod policy;
mod reader;
mod service;
mod timeout;

pub use approval::{Approval, ApprovalLayer, DEFAULT_APPROVAL_TIMEOUT};
pub use events::{Events, EventsLayer};
pub use history::{HistoryLayer, Recorded};
pub use identity::{Identity, IdentityLayer};
pub use layer::{Governed, GovernedLayer};
pub use limit::{OutputLimit, OutputLimitLayer};
pub use metered::{Metrics, MetricsLayer};
pub use policy::{Policy, PolicyLayer};
pub use reader::OutputReader;
pub use service::{BoxCallService, CallRequest, CallService, CallTrace, Shown};
pub use timeout::{Timeout, TimeoutLayer};

/// The refusal of `resolved`, for `reason`.
fn denied(resolved: &ResolvedCall, reason: String) -> ToolError {
    ToolError::Denied {
        server: resolved.server.clone(),
        tool: resolved.action_ref.clone(),
        reason,
    }
}

/// What kind of tool a call reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// A tool of the application itself: no server. Identity and `approve` rules (about
    /// servers) do not apply; annotation rules and the policy do.
    Native,
    /// A tool of an external server: every rule applies.
    External,
    /// A tool of the tool surface itself (searching the catalog): only the policy applies.
    Meta,
}

/// The most arguments of one prompt: a prompt declaring more is not listed, a request giving
/// more is refused, in a run (`mcp_read`, the library) and at the gateway alike.
pub const MAX_PROMPT_ARGUMENTS: usize = 64;

/// The longest name or value of one prompt argument a request may give, in bytes.
pub const MAX_PROMPT_ARGUMENT_BYTES: usize = 64 * 1024;

/// What a read of a server's content (the lazy surface's `mcp_read`) is about: the `[policy]`
/// `resource` / `prompt` / `skill` rules decide it, instead of the tool rules.
///
/// ```
/// use agent_core::ReadSubject;
///
/// let read = ReadSubject::Resource("file:///srv/readme.md".into());
/// assert_eq!(read.what(), "resource");
/// assert_eq!(read.target(), "file:///srv/readme.md");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadSubject {
    /// A resource, by URI.
    Resource(String),
    /// A prompt, by name.
    Prompt(String),
    /// A file of a skill (the skills extension), by the skill's name.
    Skill(String),
}

impl ReadSubject {
    /// `"resource"`, `"prompt"` or `"skill"`.
    pub fn what(&self) -> &'static str {
        match self {
            Self::Resource(_) => "resource",
            Self::Prompt(_) => "prompt",
            Self::Skill(_) => "skill",
        }
    }

    /// The URI, the prompt's name or the skill's name.
    pub fn target(&self) -> &str {
        match self {
            Self::Resource(target) | Self::Prompt(target) | Self::Skill(target) => target,
        }
    }
}

/// A call resolved to the real tool it runs: what rules, policy, approval, events and history
/// are about.
///
/// ```
/// use agent_core::{CallKind, ResolvedCall, ToolAnnotations};
/// use serde_json::json;
///
/// let args = json!({"title": "bug"}).as_object().unwrap().clone();
/// let call = ResolvedCall::external("github__create_issue", "github", "create_issue", args)
///     .with_identity("github/github-mcp-server")
///     .with_annotations(ToolAnnotations::default());
/// assert_eq!(call.kind, CallKind::External);
/// let info = call.call_info();
/// assert_eq!(info.tool, "github__create_issue");
/// assert_eq!(info.server_identity, Some("github/github-mcp-server"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResolvedCall {
    /// The real tool's name: `server__tool` for an external tool, the tool's name otherwise.
    /// Approval is asked, remembered, evented and recorded under it.
    pub action_ref: String,
    /// What kind of tool it is.
    pub kind: CallKind,
    /// The configured server key, for an external tool.
    pub server: Option<String>,
    /// The server's self-declared identity (MCP `serverInfo.name`, may contain `/`), when
    /// known. Identity and approval rules match it, never the key.
    pub server_identity: Option<String>,
    /// The tool's name on its server, for an external tool.
    pub remote_tool: Option<String>,
    /// The real arguments (for `mcp_call_tool`, the inner `arguments`).
    pub arguments: JsonObject,
    /// The real tool's hints.
    pub annotations: ToolAnnotations,
    /// This call's timeout; the layer's default when `None`.
    pub timeout: Option<Duration>,
    /// Set for a read of a server's resource or prompt: the identity layer then applies the
    /// `resource` / `prompt` rules to it, and events name it as their `target`.
    pub reads: Option<ReadSubject>,
    /// The metric labels of the tool, when the resolver keeps them per tool (the metrics
    /// layer works them out otherwise).
    pub labels: Option<crate::telemetry::CallLabels>,
}

impl ResolvedCall {
    fn new(action_ref: String, kind: CallKind, arguments: JsonObject) -> Self {
        Self {
            action_ref,
            kind,
            server: None,
            server_identity: None,
            remote_tool: None,
            arguments,
            annotations: ToolAnnotations::default(),
            timeout: None,
            reads: None,
            labels: None,
        }
    }

    /// A native tool call.
    ///
    /// ```
    /// let call = agent_core::ResolvedCall::native("calculator", Default::default());
    /// assert_eq!(call.server, None);
    /// ```
    pub fn native(name: impl Into<String>, arguments: JsonObject) -> Self {
        Self::new(name.into(), CallKind::Native, arguments)
    }

    /// A call of the tool surface itself (such as `mcp_search_tools`).
    ///
    /// ```
    /// let call = agent_core::ResolvedCall::meta("mcp_search_tools", Default::default());
    /// assert_eq!(call.kind, agent_core::CallKind::Meta);
    /// ```
    pub fn meta(name: impl Into<String>, arguments: JsonObject) -> Self {
        Self::new(name.into(), CallKind::Meta, arguments)
    }

    /// A call of `remote_tool` on the server configured as `server`, named `action_ref`
    /// (`server__tool`).
    ///
    /// ```
    /// let call = agent_core::ResolvedCall::external("fs__read", "fs", "read", Default::default());
    /// assert_eq!(call.remote_tool.as_deref(), Some("read"));
    /// ```
    pub fn external(
        action_ref: impl Into<String>,
        server: impl Into<String>,
        remote_tool: impl Into<String>,
        arguments: JsonObject,
    ) -> Self {
        Self {
            server: Some(server.into()),
            remote_tool: Some(remote_tool.into()),
            ..Self::new(action_ref.into(), CallKind::External, arguments)
        }
    }

    /// A read (`action_ref`, e.g. `mcp_read`) of `subject` on the server configured as
    /// `server`: an external call without a remote tool, decided by the `resource` / `prompt`
    /// rules.
    ///
    /// ```
    /// use agent_core::{CallKind, ReadSubject, ResolvedCall};
    ///
    /// let read = ReadSubject::Prompt("review".into());
    /// let call = ResolvedCall::read("mcp_read", "git", read, Default::default());
    /// assert_eq!(call.kind, CallKind::External);
    /// assert_eq!(call.remote_tool, None);
    /// assert_eq!(call.reads.unwrap().target(), "review");
    /// ```
    pub fn read(
        action_ref: impl Into<String>,
        server: impl Into<String>,
        subject: ReadSubject,
        arguments: JsonObject,
    ) -> Self {
        Self {
            server: Some(server.into()),
            reads: Some(subject),
            ..Self::new(action_ref.into(), CallKind::External, arguments)
        }
    }

    /// Sets the server's identity.
    #[must_use]
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.server_identity = Some(identity.into());
        self
    }

    /// Sets the hints.
    #[must_use]
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Carries the tool's metric labels, worked out once by the resolver (see
    /// [`CallLabels`](crate::telemetry::CallLabels)).
    #[must_use]
    pub fn with_labels(mut self, labels: crate::telemetry::CallLabels) -> Self {
        self.labels = Some(labels);
        self
    }

    /// Sets this call's timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// What [`ToolPolicy`](crate::ToolPolicy) sees.
    pub fn call_info(&self) -> CallInfo<'_> {
        let info = CallInfo::native(&self.action_ref, &self.arguments, &self.annotations);
        match (&self.server, &self.remote_tool) {
            (Some(server), Some(remote)) => {
                info.with_server(server, self.server_identity.as_deref(), remote)
            }
            // A read names its server; its "remote tool" is the reading tool itself.
            (Some(server), None) if self.reads.is_some() => {
                info.with_server(server, self.server_identity.as_deref(), &self.action_ref)
            }
            _ => info,
        }
    }
}

/// The capability to run a resolved call: [`CallResolver::dispatch_resolved`] takes one, and
/// only a [`Governed`] layer makes one — once identity rules, policy and approval agreed —
/// so the layer is the only caller of a resolver's dispatch. Other crates implement
/// [`CallResolver`] (they receive a permit) but cannot call one.
///
/// Zero-sized, neither `Clone` nor `Default`, with a private field. A test of a resolver
/// itself takes one from `agent_core::testing::ungoverned_permit` (the `testing` feature, for
/// tests only).
///
/// Outside this crate it cannot be made, so a catalog's calls cannot be run around the layer:
///
/// ```compile_fail,E0451
/// let permit = agent_core::Permit { _private: () };
/// ```
///
/// ```compile_fail,E0599
/// let permit = agent_core::Permit::default();
/// ```
#[derive(Debug)]
#[must_use = "a permit is handed to `dispatch_resolved`"]
pub struct Permit {
    _private: (),
}

impl Permit {
    /// Made by the layer only, for the one call it approved.
    pub(crate) fn new() -> Self {
        Self { _private: () }
    }
}

/// What the wrapped side of a [`Governed`] layer provides: resolving a model's call to the
/// real tool, and running a call it resolved.
///
/// `resolve` must not run anything. Its `Target` is whatever the wrapped side needs to run
/// exactly the resolved tool (for a catalog, the resolved entry); the layer hands it back to
/// [`dispatch_resolved`](Self::dispatch_resolved), with a [`Permit`] only the layer can make,
/// once rules, policy and approval agreed. Any crate can implement this trait; only the layer
/// can call `dispatch_resolved`.
///
/// ```
/// use agent_core::{CallResolver, Permit, ResolvedCall, ToolCall, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// /// One server's tools, reached as `files__<tool>`.
/// struct Files;
/// #[async_trait]
/// impl CallResolver for Files {
///     type Target = String;
///     fn resolve(&self, call: &mut ToolCall) -> Result<(ResolvedCall, String), ToolError> {
///         let remote = call
///             .name
///             .strip_prefix("files__")
///             .ok_or_else(|| ToolError::unknown_tool(call.name.clone(), Vec::new()))?;
///         let arguments = std::mem::take(&mut call.arguments);
///         let resolved = ResolvedCall::external(&call.name, "files", remote, arguments)
///             .with_identity("acme/files");
///         Ok((resolved, remote.to_owned()))
///     }
///     async fn dispatch_resolved(
///         &self,
///         _permit: Permit,
///         _call: ToolCall,
///         remote: String,
///     ) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text(format!("ran {remote}")))
///     }
/// }
/// let mut call = ToolCall::new("1", "files__ls", Default::default());
/// let (resolved, _) = Files.resolve(&mut call).unwrap();
/// assert_eq!(resolved.server_identity.as_deref(), Some("acme/files"));
/// ```
#[async_trait]
pub trait CallResolver: Send + Sync {
    /// What `resolve` hands to `dispatch_resolved`.
    type Target: Send + 'static;

    /// The real tool behind `call`, or why there is none (unknown tool, malformed generic
    /// call).
    ///
    /// The real tool's arguments go into the [`ResolvedCall`], and may be moved out of `call`
    /// rather than copied: `dispatch_resolved` gets them back as the call's arguments. A
    /// resolver moves them only once it resolved; a call that does not resolve keeps its own.
    fn resolve(&self, call: &mut ToolCall) -> Result<(ResolvedCall, Self::Target), ToolError>;

    /// Runs `call`, which `resolve` turned into `target`, as it is: the `permit` says the
    /// layer checked it. The call's arguments are the resolved call's — exactly what rules,
    /// policy and approval decided on (for a generic caller, the real tool's own).
    async fn dispatch_resolved(
        &self,
        permit: Permit,
        call: ToolCall,
        target: Self::Target,
    ) -> Result<ToolOutput, ToolError>;
}

/// Makes any [`ToolDispatcher`] governable: every call resolves to a native tool of its own
/// name, with the hints of the matching descriptor, if one was given.
///
/// ```
/// use agent_core::{AsNative, CallResolver, ToolAnnotations, ToolCall, ToolDescriptor,
///     ToolDispatcher, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// struct Clock;
/// #[async_trait]
/// impl ToolDispatcher for Clock {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("12:00"))
///     }
/// }
/// let tools = AsNative::new(Clock).with_descriptors([
///     ToolDescriptor::new("now", Default::default()).with_annotations(ToolAnnotations::read_only()),
/// ]);
/// let (resolved, ()) = tools.resolve(&mut ToolCall::new("1", "now", Default::default())).unwrap();
/// assert_eq!(resolved.annotations.read_only_hint, Some(true));
/// ```
#[derive(Debug)]
pub struct AsNative<D> {
    inner: D,
    annotations: HashMap<String, ToolAnnotations>,
}

impl<D> AsNative<D> {
    /// Wraps `inner`; its tools have no hints until [`with_descriptors`](Self::with_descriptors).
    pub fn new(inner: D) -> Self {
        Self {
            inner,
            annotations: HashMap::new(),
        }
    }

    /// Takes each tool's hints from its descriptor.
    #[must_use]
    pub fn with_descriptors(
        mut self,
        descriptors: impl IntoIterator<Item = ToolDescriptor>,
    ) -> Self {
        self.annotations
            .extend(descriptors.into_iter().map(|d| (d.name, d.annotations)));
        self
    }

    /// The wrapped dispatcher.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

#[async_trait]
impl<D: ToolDispatcher> CallResolver for AsNative<D> {
    type Target = ();

    fn resolve(&self, call: &mut ToolCall) -> Result<(ResolvedCall, ()), ToolError> {
        let annotations = self
            .annotations
            .get(&call.name)
            .cloned()
            .unwrap_or_default();
        let arguments = std::mem::take(&mut call.arguments);
        Ok((
            ResolvedCall::native(&call.name, arguments).with_annotations(annotations),
            (),
        ))
    }

    async fn dispatch_resolved(
        &self,
        _permit: Permit,
        call: ToolCall,
        (): (),
    ) -> Result<ToolOutput, ToolError> {
        self.inner.dispatch(call).await
    }
}

impl<D: ToolCatalog> ToolCatalog for AsNative<D> {
    fn tools(&self) -> Vec<ToolDescriptor> {
        self.inner.tools()
    }

    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.inner.tool(name)
    }
}

#[cfg(test)]
mod tests;
