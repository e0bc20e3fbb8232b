//! The seam for the tool that reads kept outputs: the layer keeps a cut output's whole text in
//! its [`OutputStore`]; what a model calls to read the rest is given to the layer.

use crate::{JsonObject, OutputStore, ToolDescriptor, ToolError, ToolOutput};

/// A tool that reads the outputs a [`Governed`](super::Governed) layer kept: the rest of a cut
/// output or error text, by the handle its marker names.
///
/// Given to [`GovernedLayer::output_reader`](super::GovernedLayer::output_reader), it is
/// listed after the wrapped side's tools (unless that side has a tool of the same name) and
/// served by the layer itself: without identity rules, policy or approval (it reads outputs
/// of calls that were already allowed), with events, the output limit and history like any
/// call. The markers of cut outputs name it.
///
/// ```
/// use agent_core::{
///     AsNative, GovernedLayer, JsonObject, OutputLimits, OutputReader, OutputStore, ToolCall,
///     ToolDescriptor, ToolDispatcher, ToolError, ToolOutput,
/// };
/// use async_trait::async_trait;
/// use serde_json::json;
///
/// /// Reads a kept output from its start.
/// struct Rest;
/// impl OutputReader for Rest {
///     fn name(&self) -> &str {
///         "rest"
///     }
///     fn descriptor(&self, _outputs: &OutputStore) -> ToolDescriptor {
///         ToolDescriptor::new("rest", JsonObject::new())
///     }
///     fn read(&self, outputs: &OutputStore, arguments: &JsonObject) -> Result<ToolOutput, ToolError> {
///         let handle = arguments.get("handle").and_then(|h| h.as_str()).unwrap_or_default();
///         let chunk = outputs.read(handle, 0, outputs.chunk_limit()).map_err(|e| {
///             ToolError::InvalidArguments { server: None, tool: "rest".into(), message: e.to_string() }
///         })?;
///         Ok(ToolOutput::text(chunk.text))
///     }
/// }
///
/// struct Logs;
/// #[async_trait]
/// impl ToolDispatcher for Logs {
///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text("line\n".repeat(1000)))
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let governed = GovernedLayer::new()
///     .output_limits(OutputLimits::default().with_max_output_bytes(1024))
///     .output_reader(Rest)
///     .layer(AsNative::new(Logs));
/// let cut = governed.dispatch(ToolCall::from_json("1", "logs", json!({})).unwrap()).await.unwrap();
/// assert!(cut.to_model_text().contains(r#"read the rest with rest {"handle": "out_0""#));
/// let call = ToolCall::from_json("2", "rest", json!({"handle": "out_0"})).unwrap();
/// assert!(governed.dispatch(call).await.unwrap().to_model_text().starts_with("line\n"));
/// # });
/// ```
pub trait OutputReader: Send + Sync + 'static {
    /// The tool's name, as the model calls it and the markers of cut outputs name it.
    fn name(&self) -> &str;

    /// The tool's descriptor for the model's tool list, given the store it reads (whose
    /// [`chunk_limit`](OutputStore::chunk_limit) bounds one read).
    fn descriptor(&self, outputs: &OutputStore) -> ToolDescriptor;

    /// Serves one call of the tool from `outputs`.
    ///
    /// # Errors
    ///
    /// The tool's error as the model reads it: arguments it cannot use, a handle that is
    /// unknown, expired or dropped, a kept file that could not be read.
    fn read(&self, outputs: &OutputStore, arguments: &JsonObject) -> Result<ToolOutput, ToolError>;
}
