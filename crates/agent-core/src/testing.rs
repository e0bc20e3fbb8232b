//! For tests only (feature `testing`): what a test of a [`CallResolver`](crate::CallResolver)
//! needs to drive it without a [`Governed`](crate::Governed) layer.
//!
//! An application never enables this feature: a permit made here runs a resolver's call with
//! no identity rule, policy, approval, output limit, event or history.

use crate::Permit;

/// A [`Permit`] made outside the governed layer, so that a test can call
/// [`CallResolver::dispatch_resolved`](crate::CallResolver::dispatch_resolved) on the resolver
/// under test. Nothing is checked or recorded for the call it runs.
///
/// ```
/// use agent_core::{AsNative, CallResolver, ToolCall, ToolDispatcher, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// struct Clock;
/// #[async_trait]
/// impl ToolDispatcher for Clock {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("12:00"))
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let tools = AsNative::new(Clock);
/// let mut call = ToolCall::new("1", "now", Default::default());
/// let (resolved, target) = tools.resolve(&mut call).unwrap();
/// // As the layer's innermost service does: the call runs on the resolved call's arguments.
/// call.arguments = resolved.arguments;
/// let permit = agent_core::testing::ungoverned_permit();
/// assert!(tools.dispatch_resolved(permit, call, target).await.is_ok());
/// # });
/// ```
pub fn ungoverned_permit() -> Permit {
    Permit::new()
}
