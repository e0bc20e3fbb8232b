//! The policy layer: the run's [`ToolPolicy`] is asked before every call and told the outcome
//! of every call that ran.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tower_layer::Layer;

use super::{CallRequest, CallService, denied};
use crate::{ApprovalTrigger, PolicyDecision, Redactor, ToolError, ToolOutput, ToolPolicy};

/// Asks the [`ToolPolicy`] about each call: allowed, refused (with its reason, redacted), or
/// allowed only with approval (which the approval layer below then asks for). A call that ran
/// is reported to the policy's `after_call`.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{CallInfo, CallRequest, CallService, PolicyDecision, PolicyLayer, Redactor,
///     ResolvedCall, ToolCall, ToolError, ToolOutput, ToolPolicy};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct NoShell;
/// impl ToolPolicy for NoShell {
///     fn before_call(&self, call: &CallInfo<'_>) -> PolicyDecision {
///         match call.tool {
///             "shell" => PolicyDecision::Deny { reason: "no shell".into() },
///             _ => PolicyDecision::Allow,
///         }
///     }
/// }
/// struct Ran;
/// #[async_trait]
/// impl CallService<()> for Ran {
///     async fn call(&self, _: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("ran"))
///     }
/// }
/// let service = PolicyLayer::new(Arc::new(NoShell), Redactor::new()).layer(Ran);
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let call = ToolCall::new("1", "shell", Default::default());
/// let request = CallRequest::new(call, ResolvedCall::native("shell", Default::default()), ());
/// assert!(matches!(service.call(request).await, Err(ToolError::Denied { .. })));
/// # });
/// ```
#[derive(Clone)]
pub struct PolicyLayer {
    policy: Arc<dyn ToolPolicy>,
    redactor: Redactor,
}

impl std::fmt::Debug for PolicyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyLayer").finish_non_exhaustive()
    }
}

impl PolicyLayer {
    /// The layer of `policy`; a refusal's reason is scrubbed with `redactor`.
    pub fn new(policy: Arc<dyn ToolPolicy>, redactor: Redactor) -> Self {
        Self { policy, redactor }
    }
}

impl<S> Layer<S> for PolicyLayer {
    type Service = Policy<S>;

    fn layer(&self, inner: S) -> Policy<S> {
        Policy {
            layer: self.clone(),
            inner,
        }
    }
}

/// The service of a [`PolicyLayer`].
pub struct Policy<S> {
    layer: PolicyLayer,
    inner: S,
}

impl<S> std::fmt::Debug for Policy<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy").finish_non_exhaustive()
    }
}

impl<T: Send + 'static, S: CallService<T>> CallService<T> for Policy<S> {
    /// An allowed call under a policy that does not observe outcomes is the inner service's
    /// own future (no future of this layer's around it).
    fn call<'life0, 'async_trait>(
        &'life0 self,
        mut request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let PolicyLayer { policy, redactor } = &self.layer;
        match policy.before_call(&request.resolved.call_info()) {
            PolicyDecision::Allow => {}
            PolicyDecision::RequireApproval => request.approval = Some(ApprovalTrigger::Policy),
            PolicyDecision::Deny { reason } => {
                let reason = format!(
                    "the tool policy refused it: {}",
                    redactor.redact_text(&reason)
                );
                let denied = denied(&request.resolved, reason);
                return Box::pin(std::future::ready(Err(denied)));
            }
        }
        if !policy.observes_outcomes() {
            return self.inner.call(request);
        }
        let resolved = Arc::clone(&request.resolved);
        let trace = request.trace.clone();
        Box::pin(async move {
            let outcome = self.inner.call(request).await;
            if trace.started().is_some() {
                policy.after_call(&resolved.call_info(), &outcome);
            }
            outcome
        })
    }
}
