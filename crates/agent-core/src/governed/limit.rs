//! The output-limit layer: what a call returns, a result or an error's text, is cut to the
//! run's output limit; the whole is kept in the run's [`OutputStore`](crate::OutputStore) under a handle.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tower_layer::Layer;

use super::{CallRequest, CallService, CallTrace, Shown};
use crate::{OutputStore, RunContext, ToolError, ToolOutput};

/// Cuts every result and error to the limits of the run's [`OutputStore`](crate::OutputStore)
/// and tells the [`CallTrace`](super::CallTrace) what it kept.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{CallRequest, CallService, OutputLimitLayer, OutputLimits, ResolvedCall,
///     RunContext, ToolCall, ToolError, ToolOutput};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct Big;
/// #[async_trait]
/// impl CallService<()> for Big {
///     async fn call(&self, _: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("x".repeat(10_000)))
///     }
/// }
/// let context = Arc::new(RunContext::builder()
///     .output_limits(OutputLimits::default().with_max_output_bytes(1024))
///     .build());
/// let service = OutputLimitLayer::new(Arc::clone(&context)).layer(Big);
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let call = ToolCall::new("1", "big", Default::default());
/// let request = CallRequest::new(call, ResolvedCall::native("big", Default::default()), ());
/// let trace = request.trace.clone();
/// assert!(service.call(request).await.unwrap().to_model_text().len() <= 1024);
/// assert_eq!(trace.shown().unwrap().full_bytes, 10_000);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct OutputLimitLayer {
    context: Arc<RunContext>,
}

impl OutputLimitLayer {
    /// The layer keeping outputs in `context`'s store.
    pub fn new(context: Arc<RunContext>) -> Self {
        Self { context }
    }
}

impl<S> Layer<S> for OutputLimitLayer {
    type Service = OutputLimit<S>;

    fn layer(&self, inner: S) -> OutputLimit<S> {
        OutputLimit {
            context: Arc::clone(&self.context),
            inner,
        }
    }
}

/// The service of an [`OutputLimitLayer`].
#[derive(Debug)]
pub struct OutputLimit<S> {
    context: Arc<RunContext>,
    inner: S,
}

impl<T: Send + 'static, S: CallService<T>> CallService<T> for OutputLimit<S> {
    /// The future returned holds only the inner one, the store and the trace, not the request.
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let trace = request.trace.clone();
        Box::pin(limited(
            self.inner.call(request),
            self.context.outputs(),
            trace,
        ))
    }
}

/// Awaits `call`, then applies the output limit of `outputs` to what it returns, telling
/// `trace` what was kept.
async fn limited<F>(
    call: F,
    outputs: &OutputStore,
    trace: CallTrace,
) -> Result<ToolOutput, ToolError>
where
    F: Future<Output = Result<ToolOutput, ToolError>>,
{
    match call.await {
        Ok(output) => {
            let limited = outputs.limit(output);
            trace.set_shown(Shown {
                shown_bytes: limited.shown_bytes,
                full_bytes: limited.full_bytes,
                handle: limited.handle,
            });
            Ok(limited.output)
        }
        Err(error) => {
            let limited = outputs.limit_error(error);
            trace.set_shown(Shown {
                shown_bytes: limited.shown_bytes,
                full_bytes: limited.full_bytes,
                handle: limited.handle,
            });
            Err(limited.error)
        }
    }
}
