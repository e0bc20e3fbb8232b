//! Tool-call events of a real run: per call, `tool_call_started` before its end
//! event (`tool_call_finished`, `tool_call_failed` or — alone — `tool_call_denied`), naming the
//! real tool (`server__tool`) and the server's identity; the same for native tools; server and
//! tool events in one stream, to the sink and to subscribers.

use std::sync::Arc;

use agent_core::{
    CallOutcome, EventKind, Runner, ToolAnnotations, ToolCall, ToolDescriptor, ToolDispatcher,
    ToolError, ToolOutput,
};
use async_trait::async_trait;
use integration_tests::harness::{Harness, bounded};
use serde_json::json;

use crate::governed_support::{KIT_IDENTITY, call_direct, call_via, config, kinds, kit, of_call};

/// A native tool: `clock` tells the time, `broken` fails.
struct Natives;

#[async_trait]
impl ToolDispatcher for Natives {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        match call.name.as_str() {
            "clock" => Ok(ToolOutput::text("12:00")),
            _ => Err(ToolError::Invocation {
                server: None,
                tool: call.name,
                message: "the native tool broke".into(),
            }),
        }
    }
}

fn natives() -> Vec<ToolDescriptor> {
    vec![
        ToolDescriptor::new("clock", Default::default())
            .with_annotations(ToolAnnotations::read_only()),
        ToolDescriptor::new("broken", Default::default()),
    ]
}

#[tokio::test]
async fn each_call_is_started_before_it_ends_naming_the_real_tool_mcp_and_native() {
    let harness = Harness::new();
    let client = harness
        .builder(config(
            vec![kit("files")],
            json!({"deny": [{"server": "*", "tool": "env"}]}),
        ))
        .native_tools(natives(), Arc::new(Natives))
        .build();
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let mut subscribed = runner.governed().subscribe();
    let names: Vec<String> = agent_core::ToolCatalog::tools(&runner)
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        [
            "clock",
            "broken",
            "mcp_search_tools",
            "mcp_call_tool",
            "mcp_read_output"
        ]
    );

    call_via(&runner, "ok", "files__echo", json!({"a": 1}))
        .await
        .unwrap();
    call_via(&runner, "fails", "files__fail", json!({"message": "no"}))
        .await
        .unwrap_err();
    call_via(&runner, "denied", "files__env", json!({}))
        .await
        .unwrap_err();
    call_direct(&runner, "native", "clock", json!({}))
        .await
        .unwrap();
    call_direct(&runner, "native-fails", "broken", json!({}))
        .await
        .unwrap_err();

    let events = harness.events.all();
    // The server's event comes first, on the same stream.
    assert_eq!(events[0].kind, EventKind::ServerConnected, "{events:?}");

    let ok = of_call(&events, "ok");
    assert_eq!(
        kinds(&ok),
        [EventKind::ToolCallStarted, EventKind::ToolCallFinished]
    );
    for event in &ok {
        assert_eq!(event.tool.as_deref(), Some("files__echo"));
        assert_eq!(event.server.as_deref(), Some("files"));
        assert_eq!(event.server_identity.as_deref(), Some(KIT_IDENTITY));
    }
    assert_eq!(ok[1].outcome, Some(CallOutcome::Ok));
    assert_eq!(ok[0].input_bytes, Some(r#"{"a":1}"#.len() as u64));
    assert!(ok[1].duration.is_some() && ok[1].result_bytes.is_some());

    let fails = of_call(&events, "fails");
    assert_eq!(
        kinds(&fails),
        [EventKind::ToolCallStarted, EventKind::ToolCallFailed]
    );
    assert_eq!(fails[1].tool.as_deref(), Some("files__fail"));

    let denied = of_call(&events, "denied");
    assert_eq!(kinds(&denied), [EventKind::ToolCallDenied]);
    assert_eq!(denied[0].tool.as_deref(), Some("files__env"));
    assert_eq!(denied[0].server_identity.as_deref(), Some(KIT_IDENTITY));
    assert!(
        denied[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("policy.deny[0]")),
        "{denied:?}"
    );

    let native = of_call(&events, "native");
    assert_eq!(
        kinds(&native),
        [EventKind::ToolCallStarted, EventKind::ToolCallFinished]
    );
    assert_eq!(native[0].tool.as_deref(), Some("clock"));
    assert_eq!(native[0].server, None);
    assert_eq!(native[0].server_identity, None);
    let native_fails = of_call(&events, "native-fails");
    assert_eq!(
        kinds(&native_fails),
        [EventKind::ToolCallStarted, EventKind::ToolCallFailed]
    );

    // A subscriber sees the same tool events, in the same order.
    let mut seen = Vec::new();
    while let Ok(Some(event)) = subscribed.try_recv() {
        seen.push((event.call_id, event.kind));
    }
    let sunk: Vec<_> = events
        .iter()
        .filter(|e| e.call_id.is_some())
        .map(|e| (e.call_id.clone(), e.kind))
        .collect();
    assert_eq!(seen, sunk);

    runner.close().await;
    harness.assert_no_process_left().await;
}
