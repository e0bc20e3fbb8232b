//! A server that ignores stdin closing and SIGTERM: closing the runner waits the grace period,
//! then SIGTERM, then kills it; nothing of its group is left.

use std::time::{Duration, Instant};

use agent_core::Runner;
use integration_tests::harness::{
    CLOSE_GRACE, Harness, TERMINATE_GRACE, bounded, call_tool, stdio_server,
};
use integration_tests::procs::running;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

#[tokio::test]
async fn a_stubborn_server_is_killed_after_the_grace_periods() {
    let harness = Harness::new();
    let client = harness.client(vec![stdio_server(
        "stubborn",
        &StdioServerArgs::new(Mode::IgnoresStdinClose),
    )]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let pid = runner.sessions()[0].pid().unwrap();
    // It also leaves a grandchild in its process group.
    let child = call_tool(&runner, "stubborn__spawn_child", json!({"seconds": 600}))
        .await
        .unwrap();
    let grandchild = u32::try_from(child.structured.unwrap()["pid"].as_u64().unwrap()).unwrap();
    assert!(running(grandchild));

    let started = Instant::now();
    bounded(runner.close()).await;
    let took = started.elapsed();
    assert!(
        took >= CLOSE_GRACE + TERMINATE_GRACE,
        "closed after {took:?}: the server was not given its grace periods"
    );
    assert!(
        took < CLOSE_GRACE + TERMINATE_GRACE + Duration::from_secs(5),
        "{took:?}"
    );
    let diagnostics = runner.sessions()[0].diagnostics().unwrap_or_default();
    assert!(diagnostics.contains("staying up anyway"), "{diagnostics}");
    assert!(diagnostics.contains("killed by SIGKILL"), "{diagnostics}");
    harness.assert_no_process_left().await;
    assert!(!running(grandchild));
    assert!(!running(pid));
}

#[tokio::test]
async fn a_well_behaved_server_exits_within_the_grace_period() {
    let harness = Harness::new();
    let client = harness.client(vec![stdio_server(
        "polite",
        &StdioServerArgs::new(Mode::Test),
    )]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    bounded(runner.close()).await;
    // It exited on its own when its stdin closed: no signal was needed.
    let diagnostics = runner.sessions()[0].diagnostics().unwrap_or_default();
    assert!(
        diagnostics.contains("exited with status 0"),
        "{diagnostics}"
    );
    harness.assert_no_process_left().await;
}
