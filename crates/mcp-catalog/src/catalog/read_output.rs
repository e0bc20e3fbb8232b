//! `mcp_read_output`: the tool of the lazy surface that reads the rest of a cut output by the
//! handle its marker names, served by the governed layer from its kept outputs.

use agent_core::{
    ContentPart, JsonObject, OutputError, OutputReader, OutputStore, ToolAnnotations,
    ToolDescriptor, ToolError, ToolOutput,
};
use serde_json::{Value, json};

use super::READ_OUTPUT_TOOL;

/// [`READ_OUTPUT_TOOL`] as the governed layer's [`OutputReader`]: give it to
/// [`GovernedLayer::output_reader`](agent_core::GovernedLayer::output_reader) and the layer
/// lists it and serves it from its [`OutputStore`].
///
/// Arguments: `handle` (required), `offset` in bytes (default 0) and `length` (default and
/// at most the store's [`chunk_limit`](OutputStore::chunk_limit)); no others. The answer is
/// the chunk, whole characters only, then a line saying where it ends and where to go on.
///
/// ```
/// use agent_core::{AsNative, GovernedLayer, OutputLimits, ToolCall, ToolDispatcher, ToolError,
///     ToolOutput};
/// use async_trait::async_trait;
/// use mcp_catalog::{READ_OUTPUT_TOOL, ReadOutput};
/// use serde_json::json;
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
///     .output_reader(ReadOutput)
///     .layer(AsNative::new(Logs));
/// let cut = governed.dispatch(ToolCall::from_json("1", "logs", json!({})).unwrap()).await.unwrap();
/// assert!(cut.to_model_text().contains("read the rest with mcp_read_output"));
/// let read = json!({"handle": "out_0", "offset": 4990});
/// let rest = governed.dispatch(ToolCall::from_json("2", READ_OUTPUT_TOOL, read).unwrap()).await;
/// assert_eq!(
///     rest.unwrap().to_model_text(),
///     "line\nline\n\n[bytes 4990..5000 of 5000 of output `out_0`; end of output]"
/// );
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOutput;

impl OutputReader for ReadOutput {
    fn name(&self) -> &str {
        READ_OUTPUT_TOOL
    }

    fn descriptor(&self, outputs: &OutputStore) -> ToolDescriptor {
        let chunk = outputs.chunk_limit();
        let schema = json!({
            "type": "object",
            "properties": {
                "handle": {
                    "type": "string",
                    "description": "The handle given in a cut output's marker."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Where to start, in bytes (default 0)."
                },
                "length": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": chunk,
                    "description": format!("How many bytes to read (default and at most {chunk}).")
                }
            },
            "required": ["handle"],
            "additionalProperties": false
        });
        let Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        let mut annotations = ToolAnnotations::read_only();
        annotations.open_world_hint = Some(false);
        ToolDescriptor::new(READ_OUTPUT_TOOL, schema)
            .with_description(
                "Read more of a tool output that was cut to fit: pass the handle and offset \
                 from its marker.",
            )
            .with_annotations(annotations)
    }

    fn read(&self, outputs: &OutputStore, arguments: &JsonObject) -> Result<ToolOutput, ToolError> {
        let invalid = |message: String| ToolError::InvalidArguments {
            server: None,
            tool: READ_OUTPUT_TOOL.to_owned(),
            message,
        };
        let handle = match arguments.get("handle") {
            Some(Value::String(h)) => h.as_str(),
            Some(other) => return Err(invalid(format!("`/handle`: {other} is not a string"))),
            None => return Err(invalid(String::from("`/handle` is required"))),
        };
        let number = |key: &str| match arguments.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(other) => Err(invalid(format!(
                "`/{key}`: {other} is not a non-negative integer"
            ))),
        };
        if let Some(key) = arguments
            .keys()
            .find(|k| !matches!(k.as_str(), "handle" | "offset" | "length"))
        {
            return Err(invalid(format!("unknown argument `{key}`")));
        }
        let offset = number("offset")?.unwrap_or(0);
        let length = number("length")?.map_or(outputs.chunk_limit(), |l| {
            usize::try_from(l).unwrap_or(usize::MAX)
        });
        let chunk = outputs.read(handle, offset, length).map_err(|e| match e {
            OutputError::Io { .. } => ToolError::Invocation {
                server: None,
                tool: READ_OUTPUT_TOOL.to_owned(),
                message: e.to_string(),
            },
            other => invalid(other.to_string()),
        })?;
        let next = if chunk.end == chunk.total {
            String::from("end of output")
        } else {
            format!("continue at offset {}", chunk.end)
        };
        let trailer = format!(
            "[bytes {}..{} of {} of output `{handle}`; {next}]",
            chunk.offset, chunk.end, chunk.total
        );
        Ok(ToolOutput::from_parts(vec![
            ContentPart::text(chunk.text),
            ContentPart::text(trailer),
        ]))
    }
}
