//! Exposure is opt-in: a tool not exposed is neither listed nor callable, and a
//! call of it never reaches the dispatcher. Also the per-session bound on calls in flight and
//! tool-list change notifications.

use std::sync::Arc;

use mcp_serve::{Exposure, ToolListChanges, ToolServer};
use rmcp::model::ErrorCode;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::json;
use tokio::sync::mpsc;

use crate::support::{Tools, bounded, in_memory, rmcp_call, text_of};

fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn an_explicit_list_serves_only_its_tools() {
    let tools = Arc::new(Tools::default());
    let exposure = Exposure::only(["mapping", "no-such-tool"]);
    let (client, _session) = in_memory(ToolServer::new(tools.clone(), exposure)).await;
    assert_eq!(names(&client.list_all_tools().await.unwrap()), ["mapping"]);

    for tool in ["hidden", "scalar", "no-such-tool"] {
        let err = rmcp_call(&client, tool, json!({})).await.unwrap_err();
        let rmcp::ServiceError::McpError(data) = err else {
            panic!("{tool}: not a JSON-RPC error: {err}");
        };
        assert_eq!(data.code, ErrorCode::INVALID_PARAMS, "{tool}");
        assert_eq!(data.message, format!("unknown tool `{tool}`"));
    }
    assert_eq!(tools.calls(), 0, "nothing reached the dispatcher");
    rmcp_call(&client, "mapping", json!({})).await.unwrap();
    assert_eq!(tools.calls(), 1);
}

#[tokio::test]
async fn read_only_serves_only_tools_annotated_read_only() {
    let tools = Arc::new(Tools::default());
    let (client, _session) = in_memory(ToolServer::new(tools.clone(), Exposure::read_only())).await;
    assert_eq!(names(&client.list_all_tools().await.unwrap()), ["reader"]);
    assert!(rmcp_call(&client, "hidden", json!({})).await.is_err());
    assert_eq!(tools.calls(), 0);
    let out = rmcp_call(&client, "reader", json!({})).await.unwrap();
    assert_eq!(text_of(&out), "reader ran");
}

#[tokio::test]
async fn a_hostile_tool_name_is_cut_and_escaped_in_the_error() {
    let tools = Arc::new(Tools::default());
    let (client, _session) = in_memory(ToolServer::new(tools, Exposure::read_only())).await;
    let name = format!("\u{1b}[31m{}", "x".repeat(10_000));
    let err = rmcp_call(&client, &name, json!({})).await.unwrap_err();
    let rmcp::ServiceError::McpError(data) = err else {
        panic!("not a JSON-RPC error");
    };
    assert!(data.message.len() < 300, "{}", data.message.len());
    assert!(!data.message.contains('\u{1b}'));
}

#[tokio::test]
async fn calls_beyond_the_session_bound_are_refused_and_not_run() {
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let server = ToolServer::new(tools.clone(), Exposure::only(["gate"])).max_calls_per_session(1);
    let (client, _session) = in_memory(server).await;
    let client = Arc::new(client);
    let first = tokio::spawn({
        let client = client.clone();
        async move { rmcp_call(&client, "gate", json!({})).await }
    });
    bounded("the first call runs", started.recv())
        .await
        .unwrap();

    let second = rmcp_call(&client, "gate", json!({})).await.unwrap();
    assert_eq!(second.is_error, Some(true));
    assert_eq!(
        text_of(&second),
        "too many calls in flight on this session (at most 1); `gate` was not run"
    );
    assert_eq!(tools.calls(), 1);

    tools.open_gate();
    let first = bounded("the first call ends", first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.structured_content, Some(json!({"gate": "passed"})));
}

#[tokio::test]
async fn calls_beyond_the_server_bound_are_refused_and_not_run() {
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let server = ToolServer::new(tools.clone(), Exposure::only(["gate"])).max_calls(1);
    let (client, _session) = in_memory(server).await;
    let client = Arc::new(client);
    let first = tokio::spawn({
        let client = client.clone();
        async move { rmcp_call(&client, "gate", json!({})).await }
    });
    bounded("the first call runs", started.recv())
        .await
        .unwrap();
    let second = rmcp_call(&client, "gate", json!({})).await.unwrap();
    assert_eq!(
        text_of(&second),
        "too many calls in flight on this server (at most 1); `gate` was not run"
    );
    assert_eq!(tools.calls(), 1);
    tools.open_gate();
    bounded("the first call ends", first)
        .await
        .unwrap()
        .unwrap();
}

struct Watcher(mpsc::UnboundedSender<()>);

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

#[tokio::test]
async fn tool_list_changes_reach_the_session() {
    let tools = Arc::new(Tools::default());
    let changes = ToolListChanges::new();
    let server = ToolServer::new(tools, Exposure::read_only()).list_changes(changes.clone());
    let (server_end, client_end) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(server.serve_transport(server_end));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = bounded("initialize", Watcher(tx).serve(client_end))
        .await
        .unwrap();
    let _session = bounded("serve", serving).await.unwrap().unwrap();
    let info = client.peer_info().unwrap();
    let listed = info.capabilities.tools.as_ref().unwrap().list_changed;
    assert_eq!(listed, Some(true));

    changes.notify();
    bounded("the first notification", rx.recv()).await.unwrap();
    changes.notify();
    bounded("the second notification", rx.recv()).await.unwrap();
}
