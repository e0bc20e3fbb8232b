//! The output limit on a real server: `[policy] max_output_bytes` bounds what the
//! model sees; a larger result is cut at a character boundary with a marker, and the rest is
//! read through `mcp_read_output`.

use agent_core::{CallOutcome, EventKind, Runner, ToolCatalog};
use integration_tests::harness::{Harness, bounded};
use mcp_catalog::READ_OUTPUT_TOOL;
use serde_json::json;

use crate::governed_support::{call_direct, call_via, config, kit, text_of};

const LIMIT: usize = 2048;

#[tokio::test]
async fn results_at_and_over_the_limit_and_the_rest_read_back() {
    let harness = Harness::new();
    let client = harness
        .builder(config(
            vec![kit("files")],
            json!({"max_output_bytes": LIMIT}),
        ))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    assert!(runner.tools().iter().any(|t| t.name == READ_OUTPUT_TOOL));

    // Exactly at the limit: whole.
    let at = call_via(&runner, "at", "files__huge", json!({"bytes": LIMIT}))
        .await
        .unwrap();
    assert_eq!(at.to_model_text().len(), LIMIT);
    assert!(!at.to_model_text().contains("[output cut"));

    // One byte over: cut, with a marker giving the full size and a handle.
    let over = call_via(&runner, "over", "files__huge", json!({"bytes": LIMIT + 1}))
        .await
        .unwrap();
    let shown = over.to_model_text();
    assert!(shown.len() <= LIMIT, "{} bytes shown", shown.len());
    assert!(shown.contains("[output cut"), "{shown}");
    assert!(
        shown.contains(&format!("of {} bytes", LIMIT + 1)),
        "{shown}"
    );
    let finished = harness
        .events
        .of_kind(EventKind::ToolCallFinished)
        .into_iter()
        .find(|e| e.call_id.as_deref() == Some("over"))
        .unwrap();
    assert_eq!(finished.outcome, Some(CallOutcome::Truncated));
    assert_eq!(finished.result_bytes, Some(LIMIT as u64 + 1));
    assert!(finished.output_handle.is_some());

    // A three-byte character at the cut: only whole characters are shown, and the rest read
    // back through `mcp_read_output` gives the whole result.
    let full = "€".repeat(5000);
    let cut = call_via(
        &runner,
        "euro",
        "files__huge",
        json!({"bytes": full.len(), "unit": "€"}),
    )
    .await
    .unwrap();
    let head = text_of(&cut.content[0]).to_owned();
    assert!(!head.is_empty() && head.chars().all(|c| c == '€'), "{head}");
    let handle = harness
        .events
        .of_kind(EventKind::ToolCallFinished)
        .into_iter()
        .find(|e| e.call_id.as_deref() == Some("euro"))
        .and_then(|e| e.output_handle)
        .expect("a handle");
    let mut whole = head.clone();
    for step in 0.. {
        assert!(step < 100, "the reads never ended");
        let chunk = call_direct(
            &runner,
            &format!("read-{step}"),
            READ_OUTPUT_TOOL,
            json!({"handle": handle, "offset": whole.len()}),
        )
        .await
        .unwrap();
        assert!(chunk.to_model_text().len() <= LIMIT);
        whole.push_str(text_of(&chunk.content[0]));
        if text_of(&chunk.content[1]).contains("end of output") {
            break;
        }
    }
    assert_eq!(whole, full);

    // An unknown handle is a clear error.
    let err = call_direct(
        &runner,
        "unknown",
        READ_OUTPUT_TOOL,
        json!({"handle": "out_999"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("unknown output handle `out_999`"),
        "{err}"
    );

    runner.close().await;
    // Once the run has ended, its kept outputs are gone: the handle has expired.
    let expired = runner
        .governed()
        .outputs()
        .read(&handle, 0, 10)
        .unwrap_err();
    assert!(expired.to_string().contains("expired"), "{expired}");
    harness.assert_no_process_left().await;
}
