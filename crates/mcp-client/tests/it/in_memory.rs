//! The client on its own, with in-memory servers: open a run, list, call, close — no process,
//! no socket.

use agent_core::{RunInput, Runner, ToolCall, ToolCatalog, ToolDispatcher};
use mcp_client::McpClient;
use mcp_config::Config;
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use serde_json::json;

fn client() -> McpClient {
    let memory = InMemoryConnector::new()
        .server("a", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default().with_name("acme/a"),
            ))
        })
        .server("b", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default()
                    .with_name("acme/b")
                    .with_extra_tools(5),
            ))
        });
    let config = Config::new(vec![spec("a"), spec("b")]).expect("valid specs");
    McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
}

#[tokio::test]
async fn a_run_of_in_memory_servers_lists_calls_and_closes() {
    let runner = client()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    let identities: Vec<_> = runner
        .sessions()
        .iter()
        .map(|s| s.identity().name.clone().unwrap_or_default())
        .collect();
    assert_eq!(identities, ["acme/a", "acme/b"]);
    let b_tools = runner
        .catalog()
        .entries()
        .iter()
        .filter(|t| t.server == "b")
        .count();
    let a_tools = runner.catalog().len() - b_tools;
    assert_eq!(b_tools, a_tools + 5);
    // One tool by name is the one the list shows.
    for name in [
        "mcp_search_tools",
        "mcp_call_tool",
        "mcp_read_output",
        "a__add",
    ] {
        let listed = runner.tools().into_iter().find(|t| t.name == name);
        assert_eq!(runner.tool(name), listed, "{name}");
    }

    let call = ToolCall::from_json(
        "1",
        "mcp_call_tool",
        json!({"tool_name": "a__add", "arguments": {"a": 2, "b": 3}}),
    )
    .unwrap();
    let output = runner.dispatch(call).await.expect("the call succeeds");
    assert!(
        output.to_model_text().contains('5'),
        "{}",
        output.to_model_text()
    );

    runner.close().await;
    assert!(runner.tools().is_empty(), "a closed run shows no tools");
    assert_eq!(runner.tool("mcp_call_tool"), None, "nor any tool by name");
}

#[tokio::test]
async fn a_spec_without_its_own_connect_timeout_gets_the_runs_for_its_whole_session() {
    // A custom resolver may hand over specs without a connect timeout: the run's is decided
    // once, at open, and the session (its re-listing, its transport's OAuth renewal) reads it
    // from the spec.
    let mut options = mcp_config::RunOptions::default();
    options.connect_timeout = std::time::Duration::from_millis(2500);
    let run = mcp_config::ResolvedRun::new(vec![spec("a")], options);
    assert_eq!(run.servers[0].connect_timeout, None);
    let runner = client().open_resolved(run).await.expect("the run opens");
    assert_eq!(
        runner.sessions()[0].spec().connect_timeout,
        Some(std::time::Duration::from_millis(2500))
    );
    runner.close().await;
}
