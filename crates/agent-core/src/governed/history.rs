//! The history layer: each call as it was asked, and its result as the caller got it, are
//! appended to the run's history.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tower_layer::Layer;

use crate::{History, Message, Role, ToolCall, ToolDispatcher, ToolError, ToolOutput};

/// Records every call and its result in `messages.jsonl` of a [`History`]: an assistant
/// message holding the call, then a tool message with the result's text (or the error's
/// cause chain). It wraps a whole dispatcher (the other layers work on resolved calls; the
/// history keeps what was asked, even a call that names no tool).
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{History, HistoryLayer, Redactor, ToolCall, ToolDispatcher, ToolError,
///     ToolOutput};
/// use async_trait::async_trait;
/// use tower_layer::Layer;
///
/// struct Clock;
/// #[async_trait]
/// impl ToolDispatcher for Clock {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("12:00"))
///     }
/// }
/// let dir = tempfile::tempdir().unwrap();
/// let history = Arc::new(History::create(dir.path(), Redactor::new()).unwrap());
/// let recorded = HistoryLayer::new(Arc::clone(&history)).layer(Clock);
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// recorded.dispatch(ToolCall::new("1", "now", Default::default())).await.unwrap();
/// # });
/// history.close().unwrap();
/// let lines = std::fs::read_to_string(dir.path().join("messages.jsonl")).unwrap();
/// assert_eq!(lines.lines().count(), 2);
/// assert!(lines.contains("12:00"));
/// ```
#[derive(Debug, Clone)]
pub struct HistoryLayer {
    history: Arc<History>,
}

impl HistoryLayer {
    /// The layer recording in `history`.
    pub fn new(history: Arc<History>) -> Self {
        Self { history }
    }
}

impl<D> Layer<D> for HistoryLayer {
    type Service = Recorded<D>;

    fn layer(&self, inner: D) -> Recorded<D> {
        Recorded {
            history: Some(Arc::clone(&self.history)),
            inner,
        }
    }
}

/// The service of a [`HistoryLayer`] (or, with no history, the wrapped dispatcher as it is).
#[derive(Debug)]
pub struct Recorded<D> {
    history: Option<Arc<History>>,
    inner: D,
}

impl<D> Recorded<D> {
    /// `inner`, recorded in `history` when there is one.
    pub(super) fn new(history: Option<Arc<History>>, inner: D) -> Self {
        Self { history, inner }
    }

    /// The wrapped dispatcher.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    fn record(history: &History, message: &Message) {
        // A failure is kept by the history and reported when it closes.
        let _ = history.append_message(message);
    }
}

impl<D: ToolDispatcher> ToolDispatcher for Recorded<D> {
    /// Without a history, a call is the inner dispatcher's own future.
    fn dispatch<'life0, 'async_trait>(
        &'life0 self,
        call: ToolCall,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let Some(history) = &self.history else {
            return self.inner.dispatch(call);
        };
        Box::pin(async move {
            let call_id = call.id.clone();
            let mut asked = Message::new(Role::Assistant, "");
            asked.tool_calls.push(call.clone());
            Self::record(history, &asked);
            let result = self.inner.dispatch(call).await;
            let text = match &result {
                Ok(output) => output.to_model_text(),
                Err(error) => crate::error_chain(error),
            };
            Self::record(history, &Message::tool_result(call_id, text));
            result
        })
    }
}
