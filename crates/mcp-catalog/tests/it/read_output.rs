//! `mcp_read_output` on a store: its arguments, its chunks and the line after them, its
//! schema. Through a layer: `output_bounds.rs`.

use agent_core::{OutputLimits, OutputReader, OutputStore, ToolError, ToolOutput};
use mcp_catalog::{READ_OUTPUT_TOOL, ReadOutput};
use serde_json::{Value, json};

const MAX: usize = 4096;

fn store() -> OutputStore {
    OutputStore::new(OutputLimits::default().with_max_output_bytes(MAX))
}

#[test]
fn read_output_checks_its_arguments_and_says_where_to_go_on() {
    let store = store();
    let handle = store
        .limit(ToolOutput::text("r".repeat(3 * MAX)))
        .handle
        .unwrap();
    let args = |v: Value| v.as_object().unwrap().clone();
    let out = ReadOutput
        .read(
            &store,
            &args(json!({"handle": handle, "offset": 10, "length": 5})),
        )
        .unwrap();
    assert_eq!(
        out.to_model_text(),
        format!(
            "rrrrr\n[bytes 10..15 of {} of output `{handle}`; continue at offset 15]",
            3 * MAX
        )
    );
    let out = ReadOutput
        .read(
            &store,
            &args(json!({"handle": handle, "offset": 3 * MAX - 2})),
        )
        .unwrap();
    assert!(out.to_model_text().ends_with("; end of output]"));
    // A read never returns more than the model may see.
    let out = ReadOutput
        .read(&store, &args(json!({"handle": handle, "length": 10 * MAX})))
        .unwrap();
    assert!(out.to_model_text().len() <= MAX);

    for (bad, says) in [
        (json!({}), "`/handle` is required"),
        (json!({"handle": 3}), "`/handle`: 3 is not a string"),
        (json!({"handle": handle, "offset": -1}), "`/offset`"),
        (json!({"handle": handle, "length": "x"}), "`/length`"),
        (
            json!({"handle": handle, "extra": 1}),
            "unknown argument `extra`",
        ),
        (
            json!({"handle": "out_77"}),
            "unknown output handle `out_77`",
        ),
    ] {
        let err = ReadOutput.read(&store, &args(bad.clone())).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { .. }), "{bad}");
        assert!(err.to_string().contains(says), "{bad}: {err}");
        assert!(err.to_string().contains(READ_OUTPUT_TOOL), "{err}");
    }
    let descriptor = ReadOutput.descriptor(&store);
    assert_eq!(descriptor.name, READ_OUTPUT_TOOL);
    assert_eq!(descriptor.annotations.read_only_hint, Some(true));
    let schema = descriptor.input_schema;
    assert_eq!(schema["required"], json!(["handle"]));
    assert_eq!(
        schema["properties"]["length"]["maximum"],
        json!(store.chunk_limit())
    );
}
