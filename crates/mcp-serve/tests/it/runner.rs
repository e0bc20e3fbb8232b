//! An `mcp_client::McpRunner` served: its lazy surface (`mcp_search_tools`, `mcp_call_tool`)
//! reaches a downstream client, and every call goes through the runner's governed layer to
//! the upstream server (the demo binary over stdio).

use std::sync::Arc;

use mcp_serve::{Exposure, ToolServer};
use serde_json::json;

use crate::support::{in_memory, mcp_client_stdio, rmcp_call, text_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_is_served_through_its_governed_layer() {
    let runner = Arc::new(mcp_client_stdio().await);
    let exposure = Exposure::only(["mcp_search_tools", "mcp_call_tool"]);
    let (client, session) = in_memory(ToolServer::new(runner.clone(), exposure)).await;

    let listed = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["mcp_search_tools", "mcp_call_tool"]);

    let found = rmcp_call(&client, "mcp_search_tools", json!({"query": "add numbers"}))
        .await
        .unwrap();
    assert!(text_of(&found).contains("demo__add"), "{}", text_of(&found));

    let added = rmcp_call(
        &client,
        "mcp_call_tool",
        json!({"tool_name": "demo__add", "arguments": {"a": 20, "b": 22}}),
    )
    .await
    .unwrap();
    assert_ne!(added.is_error, Some(true), "{}", text_of(&added));
    assert_eq!(added.structured_content, Some(json!({"result": 42.0})));

    // Upstream's refusal comes back as a tool error naming the tool.
    let refused = rmcp_call(
        &client,
        "mcp_call_tool",
        json!({"tool_name": "demo__secret", "arguments": {}}),
    )
    .await
    .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text_of(&refused).contains("secret"),
        "{}",
        text_of(&refused)
    );

    drop(client);
    session.shutdown(std::time::Duration::from_secs(5)).await;
    agent_core::Runner::close(runner.as_ref()).await;
}
