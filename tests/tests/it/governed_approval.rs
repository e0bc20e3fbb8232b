//! Approval on real servers: the gate is asked about the real tool behind
//! `mcp_call_tool` (`server__tool`, metadata `mcp_tool_name` and `mcp_arguments`); it may
//! allow once, deny, or allow for the rest of the run; a gate that panics, hangs or fails
//! denies, and the run goes on. Annotation rules select calls by the tool's hints.

use std::sync::Arc;
use std::time::Duration;

use agent_core::{ApprovalDecision, EventKind, Runner};
use integration_tests::harness::{Harness, bounded};
use serde_json::json;

use crate::governed_support::{
    FaultyGate, KIT_IDENTITY, ScriptedGate, call_direct, call_via, config, denial, kit,
};

#[tokio::test]
async fn approval_is_asked_about_the_real_tool_once_denied_or_for_the_run() {
    let harness = Harness::new();
    let gate = ScriptedGate::new([
        ApprovalDecision::Approved,
        ApprovalDecision::Rejected {
            reason: "not now".into(),
        },
        ApprovalDecision::ApprovedForRun,
    ]);
    let asking = Arc::clone(&gate);
    let client = harness
        .builder(config(
            vec![kit("files")],
            json!({"approve": [{"server": KIT_IDENTITY, "tool": "echo"}]}),
        ))
        .govern(move |layer| layer.approval_gate(asking))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    // Allowed once: asked about `files__echo`, not `mcp_call_tool`.
    let out = call_via(&runner, "1", "files__echo", json!({"text": "hi"})).await;
    assert_eq!(out.unwrap().structured, Some(json!({"text": "hi"})));
    let asked = gate.asked();
    assert_eq!(asked.len(), 1);
    let request = &asked[0];
    assert_eq!(request.action_ref, "files__echo");
    assert_eq!(request.metadata["mcp_tool_name"], "files__echo");
    assert_eq!(request.metadata["mcp_arguments"], json!({"text": "hi"}));
    assert!(request.prompt.contains("`echo`"), "{}", request.prompt);
    assert!(request.prompt.contains("`files`"), "{}", request.prompt);
    assert!(
        request.prompt.contains("policy.approve[0]"),
        "{}",
        request.prompt
    );

    // Denied: the model reads a tool error naming the rule, and the run goes on.
    let reason = denial(call_via(&runner, "2", "files__echo", json!({})).await);
    assert!(reason.contains("policy.approve[0]"), "{reason}");
    assert!(reason.contains("not now"), "{reason}");

    // Allowed for the run: asked once more, then never again for this tool.
    for id in ["3", "4", "5"] {
        call_via(&runner, id, "files__echo", json!({"n": id}))
            .await
            .unwrap();
    }
    // A first-class call of the same tool is the same tool.
    call_direct(&runner, "6", "files__echo", json!({}))
        .await
        .unwrap();
    assert_eq!(gate.asked().len(), 3);
    // A tool no rule selects is not asked about.
    call_via(&runner, "7", "files__add", json!({"a": 1, "b": 1}))
        .await
        .unwrap();
    assert_eq!(gate.asked().len(), 3);
    assert_eq!(harness.events.of_kind(EventKind::ToolCallDenied).len(), 1);

    runner.close().await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_gate_that_panics_hangs_or_fails_denies_and_the_run_goes_on() {
    for (gate, expected) in [
        (FaultyGate::Panics, "the approval gate panicked"),
        (FaultyGate::Hangs, "did not answer within"),
        (FaultyGate::Fails, "the approval service is down"),
    ] {
        let harness = Harness::new();
        let client = harness
            .builder(config(
                vec![kit("files")],
                json!({"approve": [{"server": "*", "tool": "echo"}]}),
            ))
            .govern(move |layer| {
                layer
                    .approval_gate(Arc::new(gate))
                    .approval_timeout(Duration::from_millis(200))
            })
            .build();
        let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

        let reason = denial(call_via(&runner, "1", "files__echo", json!({})).await);
        assert!(reason.contains(expected), "{gate:?}: {reason}");
        assert!(reason.contains("policy.approve[0]"), "{gate:?}: {reason}");
        // The run goes on: the next call works, and the gate is asked again (and denies again).
        let out = call_via(&runner, "2", "files__add", json!({"a": 1, "b": 2})).await;
        assert_eq!(
            out.unwrap().structured,
            Some(json!({"sum": 3.0})),
            "{gate:?}"
        );
        let again = denial(call_via(&runner, "3", "files__echo", json!({})).await);
        assert!(again.contains(expected), "{gate:?}: {again}");

        runner.close().await;
        harness.assert_no_process_left().await;
    }
}

#[tokio::test]
async fn approve_destructive_selects_a_tool_without_hints_but_not_a_read_only_one() {
    let harness = Harness::new();
    let gate = ScriptedGate::new([]);
    let asking = Arc::clone(&gate);
    let client = harness
        .builder(config(
            vec![kit("files")],
            json!({"approve_destructive": true}),
        ))
        .govern(move |layer| layer.approval_gate(asking))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    // `echo` declares no hints: by the MCP defaults it may be destructive.
    let reason = denial(call_via(&runner, "1", "files__echo", json!({})).await);
    assert!(reason.contains("`policy.approve_destructive`"), "{reason}");
    assert_eq!(gate.asked().len(), 1);
    assert_eq!(gate.asked()[0].metadata["mcp_tool_name"], "files__echo");
    // `add` declares `readOnlyHint: true`: it runs unasked.
    let out = call_via(&runner, "2", "files__add", json!({"a": 2, "b": 2})).await;
    assert_eq!(out.unwrap().structured, Some(json!({"sum": 4.0})));
    assert_eq!(gate.asked().len(), 1);

    runner.close().await;
    harness.assert_no_process_left().await;
}
