//! The workspace's own client (`mcp_client`) on served tools: over stdio (the demo binary,
//! spawned by the stdio connector) and over streamable HTTP (a server in this process).

use std::sync::Arc;

use mcp_serve::HttpOptions;
use serde_json::{Value, json};

use crate::support::{
    Tools, all_but_hidden, bounded, call_through, mcp_client_http, mcp_client_stdio, output_text,
    serve_http,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_demo_binary_lists_and_calls() {
    let runner = mcp_client_stdio().await;
    let session = runner.sessions()[0].clone();
    let identity = session.identity();
    assert_eq!(identity.name.as_deref(), Some("mcp-serve-demo"));
    assert_eq!(
        identity.instructions.as_deref(),
        Some("Demo tools served by mcp-serve.")
    );
    let pid = session.pid().expect("a stdio server has a pid");

    let tools = bounded("tools/list", session.list_tools()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "add", "greet", "fail"]);

    // Every call through the run's governed layer, as a model's calls go.
    let call = |tool: &'static str, args: Value| {
        let runner = &runner;
        async move {
            call_through(runner, tool, args)
                .await
                .unwrap_or_else(|e| panic!("{tool}: {e}"))
        }
    };
    let echo = call("echo", json!({"x": [1, "two"]})).await;
    assert_eq!(echo.structured, Some(json!({"x": [1, "two"]})));
    let add = call("add", json!({"a": 40, "b": 2})).await;
    assert_eq!(add.structured, Some(json!({"result": 42.0})));
    assert_eq!(output_text(&add), "42.0");
    let greet = call("greet", json!({"name": "Ada"})).await;
    assert_eq!(output_text(&greet), "Hello, Ada!");
    let fail = call_through(&runner, "fail", json!({"message": "nope"}))
        .await
        .expect_err("a tool error");
    assert!(
        fail.to_string().contains("tool `fail` failed: nope"),
        "{fail}"
    );
    assert!(
        call_through(&runner, "secret", json!({})).await.is_err(),
        "a tool that is not exposed cannot be called"
    );

    agent_core::Runner::close(&runner).await;
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z ")),
        "the demo server exits when its stdin closes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_the_runner_lists_and_calls_through_its_catalog() {
    let tools = Arc::new(Tools::default());
    let server = serve_http(&tools, all_but_hidden(), HttpOptions::default()).await;
    let runner = mcp_client_http(server.url(), None).await;
    let session = runner.sessions()[0].clone();
    assert_eq!(session.identity().name.as_deref(), Some("served"));
    let listed = bounded("tools/list", session.list_tools()).await.unwrap();
    assert_eq!(listed.len(), 9);
    assert!(listed.iter().all(|t| t.name != "hidden"));

    // Through the runner's governed surface, as a model would call it.
    let call = agent_core::ToolCall::from_json(
        "c1",
        "mcp_call_tool",
        json!({"tool_name": "served__mapping", "arguments": {"a": 2, "b": 5}}),
    )
    .unwrap();
    let out = bounded(
        "mcp_call_tool",
        agent_core::ToolDispatcher::dispatch(&runner, call),
    )
    .await
    .unwrap();
    assert_eq!(out.structured, Some(json!({"sum": 7.0})));
    assert_eq!(tools.seen()[0].name, "mapping");

    // Several calls at once on one session, each through the governed layer.
    let calls = (0..8).map(|i| {
        let runner = &runner;
        async move {
            call_through(runner, "scalar", json!({"a": i, "b": 1}))
                .await
                .unwrap()
                .structured
        }
    });
    let results = bounded("8 calls", futures::future::join_all(calls)).await;
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(result, Some(json!({"result": i as f64 + 1.0})));
    }
    agent_core::Runner::close(&runner).await;
    server.shutdown().await;
}
