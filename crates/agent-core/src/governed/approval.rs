//! The approval layer: a call that the policy or the approval rules say needs approval runs
//! only once the gate approved it. The gate is asked about the real tool, safely: a gate that
//! hangs, panics or fails denies.

use std::collections::HashSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::Value;
use tower_layer::Layer;

use super::{CallKind, CallRequest, CallService, ResolvedCall, denied};
use crate::{
    ApprovalDecision, ApprovalGate, ApprovalRequest, ApprovalRules, ApprovalTrigger, JsonObject,
    Redactor, ToolError, ToolOutput,
};

/// How long the approval gate may take to answer, by default: 5 minutes.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Asks the [`ApprovalGate`] about each call that needs approval: the policy said so (the
/// request's [`approval`](CallRequest::approval)), or the [`ApprovalRules`] do for an external
/// or native tool. "Approved for the run" is remembered by the layer's service, which a run
/// builds once. A gate that does not answer within the timeout, fails or panics denies.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use agent_core::{ApprovalLayer, ApprovalRules, AutoApprove, CallRequest, CallService,
///     Redactor, ResolvedCall, ToolCall, ToolError, ToolOutput};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct Ran;
/// #[async_trait]
/// impl CallService<()> for Ran {
///     async fn call(&self, _: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("ran"))
///     }
/// }
/// let layer = ApprovalLayer::new(ApprovalRules::default().with_approve_destructive(true))
///     .gate(Arc::new(AutoApprove), Duration::from_secs(5));
/// let service = layer.layer(Ran);
/// // No hints: by MCP's defaults the tool may be destructive, so the rule asks the gate.
/// let resolved = ResolvedCall::native("rm", Default::default());
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let request = CallRequest::new(ToolCall::new("1", "rm", Default::default()), resolved, ());
/// assert_eq!(service.call(request).await.unwrap().to_model_text(), "ran");
/// # });
/// ```
#[derive(Clone)]
pub struct ApprovalLayer {
    rules: ApprovalRules,
    gate: Arc<dyn ApprovalGate>,
    timeout: Duration,
    redactor: Redactor,
}

impl std::fmt::Debug for ApprovalLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalLayer")
            .field("rules", &self.rules)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ApprovalLayer {
    /// The layer of `rules`, with no gate (a call that needs approval is then denied), the
    /// default timeout and the default redactor.
    pub fn new(rules: ApprovalRules) -> Self {
        Self {
            rules,
            gate: Arc::new(NoGate),
            timeout: DEFAULT_APPROVAL_TIMEOUT,
            redactor: Redactor::new(),
        }
    }

    /// Sets the gate, and how long it may take to answer.
    #[must_use]
    pub fn gate(mut self, gate: Arc<dyn ApprovalGate>, timeout: Duration) -> Self {
        self.gate = gate;
        self.timeout = timeout;
        self
    }

    /// Sets the engine that scrubs prompts and the gate's reasons.
    #[must_use]
    pub fn redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }
}

impl<S> Layer<S> for ApprovalLayer {
    type Service = Approval<S>;

    fn layer(&self, inner: S) -> Approval<S> {
        Approval {
            layer: self.clone(),
            allowed_for_run: Mutex::new(HashSet::new()),
            inner,
        }
    }
}

/// The service of an [`ApprovalLayer`].
pub struct Approval<S> {
    layer: ApprovalLayer,
    /// Action refs approved for the rest of the run.
    allowed_for_run: Mutex<HashSet<String>>,
    inner: S,
}

impl<S> std::fmt::Debug for Approval<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approval")
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

impl<S> Approval<S> {
    /// Why `resolved` needs approval (`asked`: a layer before already decided it does), if it
    /// does and was not approved for the rest of the run.
    fn trigger(
        &self,
        resolved: &ResolvedCall,
        asked: Option<&ApprovalTrigger>,
    ) -> Option<ApprovalTrigger> {
        let trigger = match (asked, resolved.kind) {
            (Some(trigger), _) => Some(trigger.clone()),
            (None, CallKind::Meta) => None,
            (None, kind) => self.layer.rules.requires(
                resolved.server_identity.as_deref(),
                match kind {
                    CallKind::External => resolved.remote_tool.as_deref(),
                    CallKind::Native | CallKind::Meta => None,
                },
                &resolved.annotations,
            ),
        }?;
        let remembered = self
            .allowed_for_run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&resolved.action_ref);
        (!remembered).then_some(trigger)
    }

    /// Asks the gate about `resolved`, which needs approval by `trigger`; `Err` is the denial.
    async fn check(
        &self,
        resolved: &ResolvedCall,
        trigger: ApprovalTrigger,
    ) -> Result<(), ToolError> {
        let ApprovalLayer {
            gate,
            timeout,
            redactor,
            ..
        } = &self.layer;
        let remembered = || {
            self.allowed_for_run
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        let why = match ask(&**gate, request(resolved, &trigger, redactor), *timeout).await {
            Answer::Decided(ApprovalDecision::Approved) => return Ok(()),
            Answer::Decided(ApprovalDecision::ApprovedForRun) => {
                remembered().insert(resolved.action_ref.clone());
                return Ok(());
            }
            Answer::Decided(ApprovalDecision::Rejected { reason }) => {
                format!("it was refused: {}", redactor.redact_text(&reason))
            }
            Answer::Decided(ApprovalDecision::Failed { message }) => format!(
                "the approval gate failed: {}",
                redactor.redact_text(&message)
            ),
            Answer::TimedOut => format!(
                "the approval gate did not answer within {} s",
                timeout.as_secs_f64()
            ),
            Answer::Panicked => String::from("the approval gate panicked"),
        };
        Err(denied(
            resolved,
            format!("approval required by {trigger} was not given: {why}"),
        ))
    }
}

impl<T: Send + 'static, S: CallService<T>> CallService<T> for Approval<S> {
    /// A call that needs no approval is the inner service's own future (no future of this
    /// layer's around it).
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let Some(trigger) = self.trigger(&request.resolved, request.approval.as_ref()) else {
            return self.inner.call(request);
        };
        Box::pin(async move {
            self.check(&request.resolved, trigger).await?;
            self.inner.call(request).await
        })
    }
}

/// The most characters of the arguments a prompt shows (the metadata holds them all).
const PROMPT_ARGUMENT_CHARS: usize = 2000;

/// How the gate answered, including the ways it can fail to.
#[derive(Debug)]
enum Answer {
    Decided(ApprovalDecision),
    TimedOut,
    Panicked,
}

/// Asks `gate`, giving it at most `timeout`; a panic inside it is caught.
async fn ask(gate: &dyn ApprovalGate, request: ApprovalRequest, timeout: Duration) -> Answer {
    // The call itself is inside the guarded future, so a gate that panics before returning
    // its future is caught too.
    let asking = AssertUnwindSafe(async move { gate.request(request).await }).catch_unwind();
    match tokio::time::timeout(timeout, asking).await {
        Err(_) => Answer::TimedOut,
        Ok(Err(_panic)) => Answer::Panicked,
        Ok(Ok(decision)) => Answer::Decided(decision),
    }
}

/// The request for `call`: action ref `server__tool`, a prompt naming server, tool and the
/// (redacted) arguments, metadata `mcp_tool_name` and `mcp_arguments`.
fn request(call: &ResolvedCall, trigger: &ApprovalTrigger, redactor: &Redactor) -> ApprovalRequest {
    let arguments = redactor.redact_json(&Value::Object(call.arguments.clone()));
    let mut shown = arguments.to_string();
    if let Some((cut, _)) = shown.char_indices().nth(PROMPT_ARGUMENT_CHARS) {
        shown.truncate(cut);
        shown.push('…');
    }
    let tool = match (&call.reads, call.kind) {
        (Some(reads), _) => format!(
            "read of {} `{}` of MCP server `{}`",
            reads.what(),
            reads.target(),
            call.server.as_deref().unwrap_or_default()
        ),
        (None, CallKind::External) => {
            let server = call.server.as_deref().unwrap_or_default();
            let identity = match call.server_identity.as_deref() {
                Some(identity) if identity != server => format!(" (`{identity}`)"),
                _ => String::new(),
            };
            format!(
                "tool `{}` of MCP server `{server}`{identity}",
                call.remote_tool.as_deref().unwrap_or(&call.action_ref)
            )
        }
        (None, CallKind::Native | CallKind::Meta) => format!("tool `{}`", call.action_ref),
    };
    let prompt =
        format!("Allow the {tool} to run with arguments {shown}? (approval required by {trigger})");
    let mut metadata = JsonObject::new();
    metadata.insert("mcp_tool_name".into(), call.action_ref.clone().into());
    metadata.insert("mcp_arguments".into(), arguments);
    if let Some(server) = &call.server {
        metadata.insert("mcp_server".into(), server.clone().into());
    }
    if let Some(identity) = &call.server_identity {
        metadata.insert("mcp_server_identity".into(), identity.clone().into());
    }
    if let Some(remote) = &call.remote_tool {
        metadata.insert("mcp_remote_tool".into(), remote.clone().into());
    }
    metadata.insert("approval_rule".into(), trigger.to_string().into());
    ApprovalRequest::new(call.action_ref.clone(), prompt).with_metadata(metadata)
}

/// Used when no gate is configured: a call that needs approval is denied.
#[derive(Debug, Clone, Copy)]
pub(super) struct NoGate;

#[async_trait]
impl ApprovalGate for NoGate {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Failed {
            message: String::from("no approval gate is configured"),
        }
    }
}
