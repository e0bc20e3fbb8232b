//! The metrics layer: every call counted once by its server, tool and outcome, and the calls
//! that ran timed, through the `metrics` facade (see [`crate::telemetry`]).

use std::future::Future;
use std::pin::Pin;

use metrics::{Level, Metadata};
use tower_layer::Layer;

use super::{CallRequest, CallService, CallTrace};
use crate::telemetry::{CallLabels, CallOutcomeLabel};
use crate::{CallOutcome, ToolError, ToolOutput};

/// Counts each call in [`TOOL_CALLS`](crate::telemetry::TOOL_CALLS) once, when it ends (refused,
/// failed, answered, or abandoned by its caller: `cancelled`), under its server's key, its
/// tool's name on that server (the name asked for, when it resolved to no tool) and its
/// outcome; a call that ran is also timed in
/// [`TOOL_CALL_DURATION`](crate::telemetry::TOOL_CALL_DURATION). Label values are bounded
/// ([`crate::telemetry::server_label`], [`crate::telemetry::tool_label`]). Without a recorder
/// installed the counts go nowhere.
///
/// ```
/// use agent_core::{CallRequest, CallService, MetricsLayer, ResolvedCall, ToolCall, ToolError,
///     ToolOutput};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct Ran;
/// #[async_trait]
/// impl CallService<()> for Ran {
///     async fn call(&self, request: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         request.trace.start();
///         Ok(ToolOutput::text("ran"))
///     }
/// }
/// let service = MetricsLayer.layer(Ran);
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let call = ToolCall::new("1", "fs__read", Default::default());
/// let resolved = ResolvedCall::external("fs__read", "fs", "read", Default::default());
/// // Counted as mcp_tool_calls_total{server="fs",tool="read",outcome="ok"} by the recorder.
/// service.call(CallRequest::new(call, resolved, ())).await.unwrap();
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsLayer;

impl<S> Layer<S> for MetricsLayer {
    type Service = Metrics<S>;

    fn layer(&self, inner: S) -> Metrics<S> {
        Metrics { inner }
    }
}

/// The service of a [`MetricsLayer`].
#[derive(Debug)]
pub struct Metrics<S> {
    inner: S,
}

impl<T: Send + 'static, S: CallService<T>> CallService<T> for Metrics<S> {
    /// Nothing below this layer runs before the call's future is first polled: a future dropped
    /// unpolled runs no policy and is counted nowhere. Its future holds the request, the inner
    /// future (boxed) and the count: well under a kilobyte.
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let resolved = &request.resolved;
        let labels = match &resolved.labels {
            Some(labels) => labels.clone(),
            None => CallLabels::of(
                resolved.server.as_deref(),
                resolved
                    .remote_tool
                    .as_deref()
                    .unwrap_or(&resolved.action_ref),
            ),
        };
        Box::pin(async move {
            let mut count = Count {
                labels,
                trace: request.trace.clone(),
                outcome: None,
            };
            let outcome = self.inner.call(request).await;
            count.outcome = Some(match &outcome {
                Ok(_) => CallOutcomeLabel::Ok,
                Err(error) => CallOutcomeLabel::of(CallOutcome::of_error(error)),
            });
            outcome
        })
    }
}

/// The metrics' own target and level, as the `metrics` macros would give them here.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Counts its call when dropped: with the outcome once there is one, else as cancelled.
struct Count {
    /// The call's labels, which keep the metric keys made of them.
    labels: CallLabels,
    trace: CallTrace,
    outcome: Option<CallOutcomeLabel>,
}

impl Drop for Count {
    fn drop(&mut self) {
        let outcome = self.outcome.unwrap_or(CallOutcomeLabel::Cancelled);
        let started = self.trace.started();
        metrics::with_recorder(|recorder| {
            recorder
                .register_counter(self.labels.calls_key(outcome), &METADATA)
                .increment(1);
            if let Some(started) = started {
                recorder
                    .register_histogram(self.labels.duration_key(), &METADATA)
                    .record(started.elapsed().as_secs_f64());
            }
        });
    }
}
