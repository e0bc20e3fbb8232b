//! Identity rules on real servers: `[policy]` `allow` / `deny` match the server's
//! `serverInfo.name`, never its configuration key; a refused tool is neither shown nor run,
//! and a call to one is denied naming the rule. Pinned and promoted tools are governed like
//! any call.

use std::sync::Arc;

use agent_core::{ApprovalDecision, EventKind, Runner, ToolCatalog};
use integration_tests::harness::{Harness, bounded, search};
use serde_json::json;

use crate::governed_support::{
    KIT_IDENTITY, ScriptedGate, call_direct, call_via, config, denial, kit,
};

#[tokio::test]
async fn an_allowlist_that_matches_nothing_denies_every_call_naming_the_rule_and_shows_no_tool() {
    let harness = Harness::new();
    let client = harness
        .builder(config(
            vec![kit("files")],
            json!({"allow": [{"server": "someone-else/*", "tool": "*"}]}),
        ))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    let names: Vec<String> = runner.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        ["mcp_search_tools", "mcp_call_tool", "mcp_read_output"]
    );
    assert!(search(&runner, "", None, 50).await.is_empty());
    assert!(search(&runner, "echo", None, 50).await.is_empty());

    for (id, result) in [
        (
            "1",
            call_via(&runner, "1", "files__echo", json!({"a": 1})).await,
        ),
        (
            "2",
            call_via(&runner, "2", "files__add", json!({"a": 1, "b": 2})).await,
        ),
        (
            "3",
            call_direct(&runner, "3", "files__echo", json!({})).await,
        ),
    ] {
        let reason = denial(result);
        assert!(reason.contains("`policy.allow`"), "{id}: {reason}");
        assert!(reason.contains(KIT_IDENTITY), "{id}: {reason}");
    }
    let denied = harness.events.of_kind(EventKind::ToolCallDenied);
    assert_eq!(denied.len(), 3, "{denied:?}");
    assert_eq!(denied[0].tool.as_deref(), Some("files__echo"));
    assert_eq!(denied[0].server_identity.as_deref(), Some(KIT_IDENTITY));
    // None of them ran: the only calls that started are the searches.
    let started = harness.events.of_kind(EventKind::ToolCallStarted);
    assert!(
        started
            .iter()
            .all(|e| e.tool.as_deref() == Some("mcp_search_tools")),
        "{started:?}"
    );

    runner.close().await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn two_config_keys_whose_servers_claim_the_same_identity_get_the_same_rules() {
    let harness = Harness::new();
    let client = harness
        .builder(config(
            vec![kit("alpha"), kit("beta")],
            json!({
                "allow": [{"server": KIT_IDENTITY}],
                "deny": [{"server": KIT_IDENTITY, "tool": "fail"}]
            }),
        ))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    for session in runner.sessions() {
        assert_eq!(session.identity().name.as_deref(), Some(KIT_IDENTITY));
    }

    let shown = search(&runner, "", None, 50).await;
    for key in ["alpha", "beta"] {
        assert!(shown.contains(&format!("{key}__echo")), "{shown:?}");
        assert!(!shown.contains(&format!("{key}__fail")), "{shown:?}");
        let reason = denial(call_via(&runner, key, &format!("{key}__fail"), json!({})).await);
        assert!(reason.contains("`policy.deny[0]`"), "{key}: {reason}");
        let out = call_via(&runner, key, &format!("{key}__echo"), json!({"k": key}))
            .await
            .unwrap();
        assert_eq!(out.structured, Some(json!({"k": key})));
    }

    runner.close().await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn deny_wins_over_allow() {
    let harness = Harness::new();
    let client = harness
        .builder(config(
            vec![kit("files")],
            json!({
                "allow": [{"server": "*", "tool": "*"}],
                "deny": [{"server": "mcp-*", "tool": "echo"}]
            }),
        ))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    let reason = denial(call_via(&runner, "1", "files__echo", json!({})).await);
    assert!(
        reason.contains(r#"`policy.deny[0]` { server = "mcp-*", tool = "echo" }"#),
        "{reason}"
    );
    assert!(
        search(&runner, "select:files__echo", None, 5)
            .await
            .is_empty()
    );
    let out = call_via(&runner, "2", "files__add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"sum": 5.0})));

    runner.close().await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn pinned_and_promoted_tools_are_governed_like_any_call() {
    let harness = Harness::new();
    let mut files = kit("files");
    files.tools.pinned = vec!["echo".into(), "add".into()];
    let gate = ScriptedGate::new([ApprovalDecision::Rejected {
        reason: "no sums today".into(),
    }]);
    let asking = Arc::clone(&gate);
    let client = harness
        .builder(config(
            vec![files],
            json!({
                "deny": [{"server": "*", "tool": "echo"}],
                "approve": [{"server": "*", "tool": "add"}]
            }),
        ))
        .govern(move |layer| layer.approval_gate(asking))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let names = || -> Vec<String> { runner.tools().into_iter().map(|t| t.name).collect() };

    // Pinned: `add` is shown, `echo` — denied — is not; calling either is governed.
    assert!(names().contains(&"files__add".to_owned()), "{:?}", names());
    assert!(
        !names().contains(&"files__echo".to_owned()),
        "{:?}",
        names()
    );
    let reason = denial(call_direct(&runner, "1", "files__add", json!({"a": 1, "b": 2})).await);
    assert!(reason.contains("no sums today"), "{reason}");
    assert_eq!(gate.asked()[0].action_ref, "files__add");
    let reason = denial(call_direct(&runner, "2", "files__echo", json!({})).await);
    assert!(reason.contains("`policy.deny[0]`"), "{reason}");

    // Promoted through a search: shown, and its calls are evented under the real tool.
    let promote = json!({"query": "select:files__env", "promote": true});
    call_direct(&runner, "3", "mcp_search_tools", promote)
        .await
        .unwrap();
    assert!(names().contains(&"files__env".to_owned()), "{:?}", names());
    call_direct(&runner, "4", "files__env", json!({"names": ["HOME"]}))
        .await
        .unwrap();
    let finished = harness.events.of_kind(EventKind::ToolCallFinished);
    assert!(
        finished
            .iter()
            .any(|e| e.call_id.as_deref() == Some("4") && e.tool.as_deref() == Some("files__env")),
        "{finished:?}"
    );

    runner.close().await;
    harness.assert_no_process_left().await;
}
