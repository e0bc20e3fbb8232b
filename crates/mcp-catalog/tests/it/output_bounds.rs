//! The output limit on error texts, and the bound on spilled outputs, through the governed
//! layer serving [`ReadOutput`]: a tool failing with a 12 MB text reaches the model, the events
//! and the history cut to `max_output_bytes`, the rest readable with `mcp_read_output`; a hundred 10 MB outputs
//! leave at most `max_spill_bytes` on disk, the oldest dropped with a reading that says why.

use std::path::Path;

use agent_core::{
    AsNative, DEFAULT_MAX_OUTPUT_BYTES, EventKind, GovernedLayer, History, OutputLimits, Redactor,
    ToolCall, ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use mcp_catalog::{READ_OUTPUT_TOOL, ReadOutput};
use serde_json::json;

const FLOOD: usize = 12_000_000;

/// Fails every call with a `FLOOD`-byte text (as a server's `isError` result arrives), or,
/// for `transport`, with a transport error whose cause is that text.
struct Flood;

fn flood_text() -> String {
    let mut text = "e".repeat(FLOOD - 4);
    text.push_str("tail");
    text
}

#[async_trait]
impl ToolDispatcher for Flood {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        if call.name == "transport" {
            return Err(ToolError::Transport {
                server: Some("up".into()),
                tool: call.name,
                source: flood_text().into(),
            });
        }
        Err(ToolError::Invocation {
            server: Some("up".into()),
            tool: call.name,
            message: flood_text(),
        })
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[tokio::test]
async fn a_12_mb_error_text_reaches_the_model_events_and_history_cut_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let history = History::create(dir.path().join("h"), Redactor::new()).unwrap();
    let governed = GovernedLayer::new()
        .output_limits(OutputLimits::default().with_spill_dir(dir.path()))
        .history(history)
        .output_reader(ReadOutput)
        .layer(AsNative::new(Flood));
    let mut events = governed.subscribe();

    let call = ToolCall::from_json("1", "fail", json!({})).unwrap();
    let error = governed.dispatch(call).await.unwrap_err();
    let text = agent_core::error_chain(&error);
    eprintln!("a 12 MB error text: the model reads {} B", text.len());
    assert!(matches!(error, ToolError::Invocation { .. }), "{error:?}");
    assert!(text.len() <= DEFAULT_MAX_OUTPUT_BYTES, "{} B", text.len());
    assert!(
        text.starts_with("tool `fail` on server `up` failed: eeee"),
        "{}",
        &text[..100]
    );
    assert!(
        text.contains(&format!("of {FLOOD} bytes")),
        "{}",
        tail(&text)
    );
    assert!(text.contains(READ_OUTPUT_TOOL), "{}", tail(&text));

    assert_eq!(
        events.recv().await.unwrap().kind,
        EventKind::ToolCallStarted
    );
    let failed = events.recv().await.unwrap();
    assert_eq!(failed.kind, EventKind::ToolCallFailed);
    assert!(failed.message.as_ref().unwrap().len() <= DEFAULT_MAX_OUTPUT_BYTES);
    assert_eq!(failed.output_bytes, Some(text.len() as u64));
    assert!(failed.result_bytes.unwrap() > FLOOD as u64, "{failed:?}");
    let handle = failed.output_handle.clone().expect("a handle");

    // The rest of the text, as the model would read it.
    let read = ToolCall::from_json(
        "2",
        READ_OUTPUT_TOOL,
        json!({"handle": handle, "offset": FLOOD - 6}),
    )
    .unwrap();
    let rest = governed.dispatch(read).await.unwrap().to_model_text();
    assert!(rest.starts_with("eetail\n"), "{rest}");
    assert!(rest.contains("end of output"), "{rest}");

    // A transport error whose cause is the flood: cut the same way.
    let call = ToolCall::from_json("3", "transport", json!({})).unwrap();
    let error = governed.dispatch(call).await.unwrap_err();
    let text = agent_core::error_chain(&error);
    assert!(matches!(error, ToolError::Transport { .. }), "{error:?}");
    assert!(text.len() <= DEFAULT_MAX_OUTPUT_BYTES, "{} B", text.len());
    assert!(text.contains(READ_OUTPUT_TOOL), "{}", tail(&text));

    governed.shutdown().unwrap();
    let messages = size(&dir.path().join("h").join(agent_core::MESSAGES_FILE));
    let events = size(&dir.path().join("h").join(agent_core::EVENTS_FILE));
    eprintln!("a 12 MB error text: messages.jsonl {messages} B, events.jsonl {events} B");
    let bound = 3 * DEFAULT_MAX_OUTPUT_BYTES as u64;
    assert!(messages <= bound, "messages.jsonl {messages} B");
    assert!(events <= bound, "events.jsonl {events} B");
}

fn tail(text: &str) -> &str {
    &text[text.len().saturating_sub(300)..]
}

/// Answers every call with a 10 MB text.
struct Big;

const BIG: usize = 10_000_000;

#[async_trait]
impl ToolDispatcher for Big {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!(
            "{}{}",
            call.id,
            "b".repeat(BIG - call.id.len())
        )))
    }
}

/// Bytes of the files under `dir`, recursively.
fn du(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| {
                let path = e.path();
                if path.is_dir() {
                    du(&path)
                } else {
                    size(&path)
                }
            })
            .sum()
    })
}

#[tokio::test]
async fn a_hundred_10_mb_outputs_keep_the_spill_directory_under_max_spill_bytes() {
    let spill = tempfile::tempdir().unwrap();
    let limits = OutputLimits::default().with_spill_dir(spill.path());
    let limit = 256 << 20;
    let governed = GovernedLayer::new()
        .output_limits(limits)
        .output_reader(ReadOutput)
        .layer(AsNative::new(Big));
    let mut most = 0;
    for i in 0..100 {
        let call = ToolCall::from_json(format!("{i}"), "big", json!({})).unwrap();
        let out = governed.dispatch(call).await.unwrap().to_model_text();
        assert!(out.len() <= DEFAULT_MAX_OUTPUT_BYTES);
        most = most.max(du(spill.path()));
    }
    eprintln!("100 x 10 MB outputs: the spill directory held at most {most} B");
    assert!(most <= limit, "{most} B spilled");

    // The newest is readable; the oldest was dropped, and reading it says why.
    let read = |id: &str, handle: &str| {
        ToolCall::from_json(id, READ_OUTPUT_TOOL, json!({"handle": handle, "length": 2})).unwrap()
    };
    let newest = governed.dispatch(read("r1", "out_99")).await.unwrap();
    assert!(newest.to_model_text().starts_with("99"));
    let oldest = governed.dispatch(read("r2", "out_0")).await.unwrap_err();
    let said = oldest.to_string();
    assert!(said.contains("max_spill_bytes"), "{said}");
    assert!(said.contains(&limit.to_string()), "{said}");

    governed.shutdown().unwrap();
    assert_eq!(du(spill.path()), 0);
    assert_eq!(std::fs::read_dir(spill.path()).unwrap().count(), 0);
}
