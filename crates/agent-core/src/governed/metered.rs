//! The metrics layer: every call counted once by its server, tool and outcome, and the calls
//! that ran timed, through the `metrics` facade (see [`crate::telemetry`]).

use async_trait::async_trait;
use tower_layer::Layer;

use super::{CallRequest, CallService, CallTrace};
use crate::telemetry::{self, CallLabels, CallOutcomeLabel};
use crate::{CallOutcome, ToolError, ToolOutput};

/// Counts each call in [`TOOL_CALLS`](telemetry::TOOL_CALLS) once, when it ends (refused,
/// failed, answered, or abandoned by its caller: `cancelled`), under its server's key, its
/// tool's name on that server (the name asked for, when it resolved to no tool) and its
/// outcome; a call that ran is also timed in
/// [`TOOL_CALL_DURATION`](telemetry::TOOL_CALL_DURATION). Label values are bounded
/// ([`telemetry::server_label`], [`telemetry::tool_label`]). Without a recorder installed the
/// counts go nowhere.
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

#[async_trait]
impl<T: Send + 'static, S: CallService<T>> CallService<T> for Metrics<S> {
    async fn call(&self, request: CallRequest<T>) -> Result<ToolOutput, ToolError> {
        let resolved = &request.resolved;
        let CallLabels { server, tool, .. } = match &resolved.labels {
            Some(labels) => labels.clone(),
            None => CallLabels::of(
                resolved.server.as_deref(),
                resolved
                    .remote_tool
                    .as_deref()
                    .unwrap_or(&resolved.action_ref),
            ),
        };
        let mut count = Count {
            tool,
            server,
            trace: request.trace.clone(),
            outcome: None,
        };
        let outcome = self.inner.call(request).await;
        count.outcome = Some(match &outcome {
            Ok(_) => CallOutcomeLabel::Ok,
            Err(error) => CallOutcomeLabel::of(CallOutcome::of_error(error)),
        });
        outcome
    }
}

/// Counts one call when dropped: with its outcome when it ended, `cancelled` when the call was
/// dropped before.
struct Count {
    server: metrics::SharedString,
    tool: metrics::SharedString,
    trace: CallTrace,
    outcome: Option<CallOutcomeLabel>,
}

impl Drop for Count {
    fn drop(&mut self) {
        let outcome = self.outcome.unwrap_or(CallOutcomeLabel::Cancelled);
        metrics::counter!(
            telemetry::TOOL_CALLS,
            "server" => self.server.clone(),
            "tool" => self.tool.clone(),
            "outcome" => outcome.as_str(),
        )
        .increment(1);
        if let Some(started) = self.trace.started() {
            metrics::histogram!(telemetry::TOOL_CALL_DURATION, "server" => self.server.clone())
                .record(started.elapsed().as_secs_f64());
        }
    }
}
