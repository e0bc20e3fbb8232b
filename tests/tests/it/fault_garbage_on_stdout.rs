//! A server that writes garbage on stdout: opening it fails with an error naming the server
//! (no panic, no hang), and its process is gone.

use agent_core::Runner;
use integration_tests::harness::{Harness, bounded, call_tool, chain, stdio_server};
use mcp_client::{ClientError, SessionError};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

#[tokio::test]
async fn garbage_instead_of_a_handshake_is_an_error() {
    let harness = Harness::new();
    let client = harness.client(vec![stdio_server(
        "noisy",
        &StdioServerArgs::new(Mode::GarbageOnStdout),
    )]);
    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::Server(SessionError::Initialize { server, .. }) if server == "noisy"),
        "{err:?}"
    );
    let text = chain(&err);
    assert!(text.contains("server `noisy`"), "{text}");
    // The server's stderr tail says what happened.
    assert!(text.contains("wrote garbage on stdout"), "{text}");
    assert!(text.contains("exited with status 2"), "{text}");
    assert_eq!(harness.spawned.pids_of("noisy").len(), 1);
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn non_json_lines_before_the_handshake_are_skipped() {
    let harness = Harness::new();
    let client = harness.client(vec![stdio_server(
        "chatty",
        &StdioServerArgs::new(Mode::Test).with_stdout_noise(),
    )]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let out = call_tool(&runner, "chatty__echo", json!({"heard": true}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"heard": true})));
    // The noise lines got no reply: the server's stderr (it notes any error without an id
    // it receives) says nothing of one.
    let diagnostics = runner.sessions()[0].diagnostics().unwrap_or_default();
    assert!(
        !diagnostics.contains("error without id"),
        "the client answered the server's noise: {diagnostics}"
    );
    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}
