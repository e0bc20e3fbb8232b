//! A 50 MB tool result through the governed layer: the model sees at most the limit, the rest
//! is readable, and the process's memory does not keep it. Alone in its test binary, so the
//! process's memory figures are this test's own.

#![cfg(target_os = "linux")]

use agent_core::{
    AsNative, DEFAULT_MAX_OUTPUT_BYTES, GovernedLayer, OutputLimits, ToolCall, ToolDispatcher,
    ToolError, ToolOutput,
};
use async_trait::async_trait;
use serde_json::json;

const SIZE: usize = 50 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// `VmRSS` and `VmHWM` (peak) of this process, in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Huge;

#[async_trait]
impl ToolDispatcher for Huge {
    async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
        let mut text = "h".repeat(SIZE - 3);
        text.push_str("end");
        Ok(ToolOutput::text(text))
    }
}

#[tokio::test]
async fn a_50_mb_result_is_cut_kept_on_disk_and_not_in_memory() {
    let spill = tempfile::tempdir().unwrap();
    let governed = GovernedLayer::new()
        .output_limits(OutputLimits::default().with_spill_dir(spill.path()))
        .layer(AsNative::new(Huge));
    let (before, _) = memory();

    let call = ToolCall::from_json("1", "huge", json!({})).unwrap();
    let out = governed.dispatch(call).await.unwrap();
    let text = out.to_model_text();
    assert!(text.len() <= DEFAULT_MAX_OUTPUT_BYTES, "{}", text.len());
    assert!(
        text.contains(&format!("of {SIZE} bytes")),
        "{}",
        &text[text.len() - 200..]
    );

    let (after, peak) = memory();
    assert_eq!(
        governed.outputs().memory_bytes(),
        0,
        "spilled, not kept in memory"
    );
    assert!(
        after < before + 8 * MIB,
        "the result stayed in memory: {} MiB more",
        (after - before) / MIB
    );
    // While it passes through: the result and its text, not more copies.
    assert!(
        peak < before + 3 * SIZE as u64,
        "peak {} MiB over {} MiB",
        peak / MIB,
        before / MIB
    );

    let tail = governed
        .outputs()
        .read("out_0", SIZE as u64 - 5, 100)
        .unwrap();
    assert_eq!(tail.text, "hhend");

    governed.shutdown().unwrap();
    assert_eq!(
        std::fs::read_dir(spill.path()).unwrap().count(),
        0,
        "the spill directory is gone"
    );
}
