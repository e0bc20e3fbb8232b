//! `notifications/tools/list_changed`: the runner re-lists the server's tools, emits
//! `ToolsChanged` (and moves `McpRunner::tools_changed`), and later searches and calls see the
//! new list.

use agent_core::{Event, EventKind, Runner, ToolError};
use integration_tests::harness::{Harness, bounded, call_tool, next_event, search, stdio_server};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

fn tools_changed(server: &'static str) -> impl Fn(&Event) -> bool {
    move |e: &Event| e.kind == EventKind::ToolsChanged && e.server.as_deref() == Some(server)
}

#[tokio::test]
async fn a_new_tool_is_found_after_the_server_announces_it() {
    let harness = Harness::new();
    let mut events = harness.events.subscribe();
    let client = harness.client(vec![
        stdio_server("kit", &StdioServerArgs::new(Mode::Test)),
        stdio_server("other", &StdioServerArgs::new(Mode::Test)),
    ]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let before = runner.catalog().len();
    let mut relisted = runner.tools_changed();
    assert!(
        search(&runner, "select:kit__weather_report", None, 5)
            .await
            .is_empty()
    );

    let added = call_tool(&runner, "kit__add_tool", json!({"name": "weather_report"}))
        .await
        .unwrap();
    assert_eq!(added.structured, Some(json!({"changed": true})));
    let event = next_event(&mut events, tools_changed("kit")).await;
    assert_eq!(event.message.as_deref(), Some("14 tools"), "{event:?}");
    // The re-listing is announced once the catalog has it.
    bounded(relisted.changed()).await.expect("the run goes on");
    assert_eq!(*relisted.borrow_and_update(), 1);

    assert_eq!(runner.catalog().len(), before + 1);
    let found = search(&runner, "select:kit__weather_report", None, 5).await;
    assert_eq!(found, ["kit__weather_report"]);
    let ranked = search(&runner, "weather report", None, 5).await;
    assert_eq!(
        ranked.first().map(String::as_str),
        Some("kit__weather_report")
    );
    let out = call_tool(&runner, "kit__weather_report", json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"city": "Oslo"})));

    // Removing it is seen the same way.
    call_tool(
        &runner,
        "kit__remove_tool",
        json!({"name": "weather_report"}),
    )
    .await
    .unwrap();
    next_event(&mut events, tools_changed("kit")).await;
    bounded(relisted.changed()).await.expect("the run goes on");
    assert_eq!(runner.catalog().len(), before);
    let gone = call_tool(&runner, "kit__weather_report", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(gone, ToolError::UnknownTool { .. }), "{gone:?}");
    // The other server never changed.
    assert!(
        harness
            .events
            .of_kind(EventKind::ToolsChanged)
            .iter()
            .all(|e| e.server.as_deref() == Some("kit"))
    );

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}
