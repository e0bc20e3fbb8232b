//! A run that ends without closing its runner — dropped, its task aborted, its task panicking,
//! or cancelled while opening — still leaves no server process behind.

use std::time::Duration;

use integration_tests::harness::{Harness, bounded, call_tool, stdio_server};
use integration_tests::procs::running;
use mcp_client::McpRunner;
use mcp_config::ServerSpec;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;
use tokio::sync::oneshot;

fn servers() -> Vec<ServerSpec> {
    vec![
        stdio_server("one", &StdioServerArgs::new(Mode::Test)),
        stdio_server("two", &StdioServerArgs::new(Mode::Test)),
    ]
}

fn pids_of(runner: &McpRunner) -> Vec<u32> {
    runner.sessions().iter().filter_map(|s| s.pid()).collect()
}

#[tokio::test]
async fn dropping_the_runner_without_closing_it() {
    let harness = Harness::new();
    let client = harness.client(servers());
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let pids = pids_of(&runner);
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&p| running(p)));
    drop(runner);
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn aborting_the_task_that_holds_the_runner() {
    let harness = Harness::new();
    let (client, input) = (harness.client(servers()), harness.input());
    let (opened, rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let runner = client.open_runner(&input).await.expect("open");
        let _ = opened.send(pids_of(&runner));
        // A long call is in flight when the task is aborted.
        let _ = call_tool(&runner, "one__slow", json!({"ms": 600_000})).await;
    });
    let pids = bounded(rx).await.unwrap();
    assert!(pids.iter().all(|&p| running(p)));
    task.abort();
    let joined = bounded(task).await;
    assert!(joined.unwrap_err().is_cancelled());
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_panic_in_the_task_that_holds_the_runner() {
    let harness = Harness::new();
    let (client, input) = (harness.client(servers()), harness.input());
    let (opened, rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let runner = client.open_runner(&input).await.expect("open");
        let _ = opened.send(pids_of(&runner));
        let out = call_tool(&runner, "two__echo", json!({"then": "panic"})).await;
        assert!(out.is_ok());
        panic!("the agent's code panicked while holding the runner");
    });
    let pids = bounded(rx).await.unwrap();
    assert_eq!(pids.len(), 2);
    let joined = bounded(task).await;
    assert!(joined.unwrap_err().is_panic());
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn cancelling_open_runner_while_servers_connect() {
    let harness = Harness::new();
    // One server answers at once, the other would take 30 s to initialize.
    let client = harness.client(vec![
        stdio_server("quick", &StdioServerArgs::new(Mode::Test)),
        stdio_server(
            "slow",
            &StdioServerArgs::new(Mode::SlowInitialize).with_init_delay(Duration::from_secs(30)),
        ),
    ]);
    let input = harness.input();
    let open = tokio::spawn(async move { client.open_runner(&input).await.map(|_| ()) });
    // Wait until both servers were spawned, then cancel the opening.
    let spawned = harness.spawned.clone();
    let both =
        integration_tests::procs::eventually(Duration::from_secs(10), || spawned.pids().len() == 2)
            .await;
    assert!(both, "spawned {:?}", harness.spawned.pids());
    open.abort();
    assert!(bounded(open).await.unwrap_err().is_cancelled());
    harness.assert_no_process_left().await;
}
