//! The identity layer: a call of an external tool passes only if the identity rules allow the
//! tool on its server's self-declared identity.

use async_trait::async_trait;
use tower_layer::Layer;

use super::{CallKind, CallRequest, CallService, ReadSubject, denied};
use crate::{IdentityRules, ToolError, ToolOutput};

/// Refuses calls the [`IdentityRules`] deny (`[policy] allow` / `deny`). Native tools and the
/// tool surface's own tools have no server, so the rules do not apply to them. A read of a
/// resource or prompt ([`ResolvedCall::reads`](super::ResolvedCall::reads)) is decided by the
/// `resource` / `prompt` rules.
///
/// ```
/// use agent_core::{CallRequest, CallService, IdentityLayer, IdentityRules, ResolvedCall, Rule,
///     ToolCall, ToolError, ToolOutput};
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
/// let rules = IdentityRules::default().deny(Rule::new("*", "delete_*"));
/// let service = IdentityLayer::new(rules).layer(Ran);
/// let call = ToolCall::new("1", "fs__delete_all", Default::default());
/// let resolved = ResolvedCall::external("fs__delete_all", "fs", "delete_all", Default::default());
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let refused = service.call(CallRequest::new(call, resolved, ())).await.unwrap_err();
/// assert!(matches!(refused, ToolError::Denied { .. }));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct IdentityLayer {
    rules: IdentityRules,
}

impl IdentityLayer {
    /// The layer of `rules`.
    pub fn new(rules: IdentityRules) -> Self {
        Self { rules }
    }
}

impl<S> Layer<S> for IdentityLayer {
    type Service = Identity<S>;

    fn layer(&self, inner: S) -> Identity<S> {
        Identity {
            rules: self.rules.clone(),
            inner,
        }
    }
}

/// The service of an [`IdentityLayer`].
#[derive(Debug)]
pub struct Identity<S> {
    rules: IdentityRules,
    inner: S,
}

#[async_trait]
impl<T: Send + 'static, S: CallService<T>> CallService<T> for Identity<S> {
    async fn call(&self, request: CallRequest<T>) -> Result<ToolOutput, ToolError> {
        let resolved = &request.resolved;
        if let Some(reads) = &resolved.reads {
            let identity = resolved.server_identity.as_deref();
            let decision = match reads {
                ReadSubject::Resource(uri) => self.rules.allows_resource(identity, uri),
                ReadSubject::Prompt(name) => self.rules.allows_prompt(identity, name),
                ReadSubject::Skill(name) => self.rules.allows_skill(identity, name),
            };
            if let Err(denial) = decision {
                let reason = format!("{} `{}`: {denial}", reads.what(), reads.target());
                return Err(denied(resolved, reason));
            }
        } else if resolved.kind == CallKind::External
            && let Some(remote) = resolved.remote_tool.as_deref()
            && let Err(denial) = self
                .rules
                .allows(resolved.server_identity.as_deref(), remote)
        {
            return Err(denied(resolved, denial.to_string()));
        }
        self.inner.call(request).await
    }
}
