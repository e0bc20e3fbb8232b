//! Servers that misbehave: errors, never panics, and never a process left behind.

use crate::common;

use std::time::Duration;

use common::*;
use mcp_connector::Connector as _;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

#[tokio::test]
async fn a_crash_mid_call_is_a_transport_error() {
    let Started {
        handle,
        pid,
        client,
    } = start("crashy", &StdioServerArgs::new(Mode::Test)).await;
    let crashed = call(&client, "crash", json!({"code": 5})).await;
    assert!(crashed.is_err(), "{crashed:?}");

    bounded(handle.shutdown(Duration::from_secs(10))).await;
    let diagnostics = handle.diagnostics().unwrap();
    assert!(
        diagnostics.contains("crashing during a call"),
        "{diagnostics}"
    );
    assert!(
        diagnostics.ends_with("exited with status 5]"),
        "{diagnostics}"
    );
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn a_crash_is_seen_even_when_a_helper_holds_stdout_open() {
    let Started {
        handle,
        pid,
        client,
    } = start("leaky", &StdioServerArgs::new(Mode::Test)).await;
    let spawned = call(&client, "spawn_child", json!({"inherit_stdio": true}))
        .await
        .unwrap();
    let helper = spawned.structured_content.unwrap()["pid"].as_u64().unwrap() as u32;

    // The helper keeps the pipes open; the crash must still end the call (`call` is bounded).
    let crashed = call(&client, "crash", json!({})).await;
    assert!(crashed.is_err(), "{crashed:?}");
    assert_not_running(helper).await;

    bounded(handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn garbage_on_stdout_is_an_error() {
    let args = StdioServerArgs::new(Mode::GarbageOnStdout);
    let connection = bounded(connector().connect(&spec("garbled", &args)))
        .await
        .unwrap();
    let pid = connection.handle.pid().unwrap();
    let handshake = bounded(rmcp::serve_client((), connection.transport)).await;
    assert!(handshake.is_err(), "the handshake succeeded on garbage");

    bounded(connection.handle.shutdown(Duration::from_secs(10))).await;
    let diagnostics = connection.handle.diagnostics().unwrap();
    assert!(
        diagnostics.ends_with("exited with status 2]"),
        "{diagnostics}"
    );
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn log_lines_before_mcp_are_tolerated() {
    let args = StdioServerArgs::new(Mode::Test).with_stdout_noise();
    let Started {
        handle,
        pid,
        client,
    } = start("noisy", &args).await;
    let added = call(&client, "add", json!({"a": 1, "b": 2})).await.unwrap();
    assert_eq!(added.structured_content, Some(json!({"sum": 3.0})));
    bounded(client.cancel()).await.unwrap();
    bounded(handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn an_initialize_slower_than_the_timeout_leaves_no_process() {
    let args = StdioServerArgs::new(Mode::SlowInitialize);
    let spec = spec("slowpoke", &args);
    let (pid_tx, pid_rx) = tokio::sync::oneshot::channel();
    let connector = connector();
    // What an orchestration does: one future for connect + handshake, under a timeout.
    let attempt = tokio::time::timeout(Duration::from_millis(500), async {
        let connection = connector.connect(&spec).await.unwrap();
        let _ = pid_tx.send(connection.handle.pid().unwrap());
        let handle = connection.handle;
        let client = rmcp::serve_client((), connection.transport).await;
        (client, handle)
    })
    .await;
    assert!(attempt.is_err(), "the slow initialize finished in time");
    let pid = bounded(pid_rx).await.unwrap();
    assert_all_gone(pid).await;
}
