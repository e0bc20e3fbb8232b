//! `open_runner` over several real stdio servers: the lazy surface, search across servers,
//! calls, 1,000 paginated tools, each server's identity, the runner factory, and close leaving
//! no process behind.

use agent_core::{EventKind, Runner, RunnerFactory, ToolCatalog};
use integration_tests::harness::{Harness, bounded, call_tool, search, stdio_server};
use integration_tests::procs::{group_of, running};
use mcp_catalog::SearchRequest;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

/// The built-in tools of the test server.
const BUILT_IN: &[&str] = &[
    "echo",
    "add",
    "slow",
    "fail",
    "env",
    "stderr",
    "content",
    "huge",
    "crash",
    "add_tool",
    "remove_tool",
    "spawn_child",
    "observations",
];

#[tokio::test]
async fn several_servers_behind_the_lazy_surface() {
    let harness = Harness::new();
    let servers = ["alpha", "beta", "gamma"];
    let client = harness.client(
        servers
            .iter()
            .map(|name| stdio_server(name, &StdioServerArgs::new(Mode::Test)))
            .collect(),
    );
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    // The model sees three tools, however many the servers have.
    let names: Vec<String> = runner.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        ["mcp_search_tools", "mcp_call_tool", "mcp_read_output"]
    );
    assert_eq!(runner.catalog().len(), servers.len() * BUILT_IN.len());

    // One session per server, in configuration order, each its own process group, each with
    // the identity the server gave in `initialize`.
    let sessions = runner.sessions();
    assert_eq!(
        sessions.iter().map(|s| s.name()).collect::<Vec<_>>(),
        servers
    );
    let mut pids = Vec::new();
    for session in sessions {
        let pid = session.pid().expect("a stdio session has a pid");
        assert!(running(pid));
        assert_eq!(
            group_of(pid),
            Some(pid),
            "{} leads its group",
            session.name()
        );
        pids.push(pid);
        let identity = session.identity();
        assert_eq!(identity.name.as_deref(), Some("mcp-test-kit"));
        assert_eq!(identity.version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        assert!(!identity.protocol_version.is_empty());
        assert_eq!(
            identity.instructions.as_deref(),
            Some("A test server: every tool exercises one client path.")
        );
        assert!(
            identity.capabilities.get("tools").is_some(),
            "{}",
            identity.capabilities
        );
    }
    // The connector spawned exactly these processes.
    let mut recorded = harness.spawned.pids();
    recorded.sort_unstable();
    pids.sort_unstable();
    assert_eq!(recorded, pids);
    assert_eq!(
        harness.events.of_kind(EventKind::ServerConnected).len(),
        servers.len()
    );

    // Search finds each server's tools, under `server__tool` names.
    for server in servers {
        let found = search(&runner, "echo arguments", Some(server), 5).await;
        assert_eq!(
            found.first().map(String::as_str),
            Some(&*format!("{server}__echo"))
        );
        let all = search(&runner, "", Some(server), 50).await;
        let mut expected: Vec<String> = BUILT_IN.iter().map(|t| format!("{server}__{t}")).collect();
        let mut listed = all.clone();
        expected.sort();
        listed.sort();
        assert_eq!(listed, expected);
    }
    let anywhere = search(&runner, "adds two numbers", None, 10).await;
    for server in servers {
        assert!(anywhere.contains(&format!("{server}__add")), "{anywhere:?}");
    }

    // `mcp_call_tool` reaches the right server and returns its arguments unchanged.
    for server in servers {
        let args = json!({"server": server, "nested": {"list": [1, 2, 3]}, "text": "héllo"});
        let out = call_tool(&runner, &format!("{server}__echo"), args.clone())
            .await
            .unwrap();
        assert_eq!(out.structured, Some(args));
    }
    let sum = call_tool(&runner, "beta__add", json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert_eq!(sum.structured, Some(json!({"sum": 42.0})));

    // Close: every server and its whole process group is gone, and calls are refused.
    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
    let after = call_tool(&runner, "alpha__echo", json!({})).await;
    assert!(after.is_err(), "{after:?}");
}

#[tokio::test]
async fn a_thousand_paginated_tools_are_all_listed() {
    let harness = Harness::new();
    // 1,000 synthetic tools served 100 a page, plus the built-in ones.
    let client = harness.client(vec![stdio_server(
        "many",
        &StdioServerArgs::new(Mode::Paginated),
    )]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    let catalog = runner.catalog();
    assert_eq!(catalog.len(), 1_000 + BUILT_IN.len());
    for i in 0..1_000 {
        let name = format!("many__tool_{i:04}");
        assert!(catalog.lookup(&name).is_some(), "{name} missing");
    }
    let all = catalog.search(&SearchRequest::new("")).unwrap();
    assert_eq!(all.total, 1_000 + BUILT_IN.len());

    // The last page's tools are callable like any other.
    let out = call_tool(&runner, "many__tool_0999", json!({"x": 1}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"x": 1})));

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn the_client_is_a_runner_factory() {
    let harness = Harness::new();
    let client = harness.client(vec![
        stdio_server("one", &StdioServerArgs::new(Mode::Test)),
        stdio_server("two", &StdioServerArgs::new(Mode::Test)),
    ]);
    let factory: &dyn RunnerFactory = &client;

    let scope = bounded(factory.open(&harness.input())).await.unwrap();
    let out = call_tool(&*scope, "one__echo", json!({"via": "factory"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"via": "factory"})));
    assert_eq!(harness.spawned.pids().len(), 2);
    bounded(scope.close()).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn the_facade_connectors_open_stdio_servers() {
    // The facade's registry (every transport compiled in), with the default grace periods.
    let connectors = mcp_agent::connectors().unwrap();
    let spec = stdio_server("kit", &StdioServerArgs::new(Mode::Test));
    let client = mcp_client::McpClient::builder(mcp_config::Config::new(vec![spec]).unwrap())
        .connectors(connectors)
        .build();
    let runner = bounded(client.open_runner(&Harness::new().input()))
        .await
        .unwrap();
    let pid = runner.sessions()[0].pid().unwrap();
    let out = call_tool(&runner, "kit__echo", json!({"ok": true}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"ok": true})));
    bounded(runner.close()).await;
    integration_tests::procs::assert_gone(&[pid]).await;
}
