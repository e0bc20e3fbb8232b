//! The timeout layer: a call that runs longer than its timeout ends with
//! [`ToolError::Timeout`].

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tower_layer::Layer;

use super::{CallRequest, CallService};
use crate::{ToolError, ToolOutput};

/// Bounds each call by its own [`ResolvedCall::timeout`](super::ResolvedCall::timeout), else
/// by the layer's default (none: unbounded). Needs a Tokio runtime with its time driver.
///
/// ```
/// use std::time::Duration;
/// use agent_core::{CallRequest, CallService, ResolvedCall, TimeoutLayer, ToolCall, ToolError,
///     ToolOutput};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct Hangs;
/// #[async_trait]
/// impl CallService<()> for Hangs {
///     async fn call(&self, _: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         std::future::pending().await
///     }
/// }
/// let service = TimeoutLayer::new(Some(Duration::from_millis(10))).layer(Hangs);
/// let call = ToolCall::new("1", "wait", Default::default());
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let request = CallRequest::new(call, ResolvedCall::native("wait", Default::default()), ());
/// assert!(matches!(service.call(request).await, Err(ToolError::Timeout { .. })));
/// # });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TimeoutLayer {
    default: Option<Duration>,
}

impl TimeoutLayer {
    /// The layer whose calls without a timeout of their own get `default`.
    pub fn new(default: Option<Duration>) -> Self {
        Self { default }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            default: self.default,
            inner,
        }
    }
}

/// The service of a [`TimeoutLayer`].
#[derive(Debug)]
pub struct Timeout<S> {
    default: Option<Duration>,
    inner: S,
}

impl<T: Send + 'static, S: CallService<T>> CallService<T> for Timeout<S> {
    /// A call with no timeout is the inner service's own future (no future of this layer's
    /// around it).
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let Some(after) = request.resolved.timeout.or(self.default) else {
            return self.inner.call(request);
        };
        let resolved = std::sync::Arc::clone(&request.resolved);
        Box::pin(async move {
            tokio::time::timeout(after, self.inner.call(request))
                .await
                .unwrap_or_else(|_| {
                    Err(ToolError::Timeout {
                        server: resolved.server.clone(),
                        tool: resolved.action_ref.clone(),
                        after,
                    })
                })
        })
    }
}
