//! A server that dies during a call: the call fails with a transport error naming the server,
//! promptly (not at the call timeout), while another server's calls still succeed.

use std::time::{Duration, Instant};

use agent_core::{Runner, ToolError};
use integration_tests::harness::{Harness, bounded, call_tool, chain, stdio_server};
use integration_tests::procs::{eventually, live_members, running};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

#[tokio::test]
async fn a_crash_fails_its_call_and_spares_the_other_servers() {
    let harness = Harness::new();
    let client = harness.client(vec![
        stdio_server("crashy", &StdioServerArgs::new(Mode::Test)),
        stdio_server("steady", &StdioServerArgs::new(Mode::Test)),
    ]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let crashy = runner.sessions()[0].pid().unwrap();
    let steady = runner.sessions()[1].pid().unwrap();

    // A call on the steady server is in flight while the other server crashes.
    let started = Instant::now();
    let (crashed, slow) = tokio::join!(
        call_tool(&runner, "crashy__crash", json!({"code": 7})),
        call_tool(&runner, "steady__slow", json!({"ms": 300})),
    );
    let err = crashed.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the crash took {:?} to surface (the call timeout is 60 s)",
        started.elapsed()
    );
    match &err {
        ToolError::Transport { server, tool, .. } => {
            assert_eq!(server.as_deref(), Some("crashy"));
            assert_eq!(tool, "crashy__crash");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    let text = chain(&err);
    assert!(text.contains("server `crashy`"), "{text}");
    assert_eq!(slow.unwrap().structured, Some(json!({"slept_ms": 300})));

    // The crashed server no longer runs (the transport reaps it when the session closes,
    // holding its group id until then); a later call on it fails at once, the other works.
    assert!(
        eventually(Duration::from_secs(5), || !running(crashy)
            && live_members(crashy).is_empty())
        .await,
        "the crashed server {crashy} still runs"
    );
    let again = call_tool(&runner, "crashy__echo", json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(&again, ToolError::Transport { server: Some(s), .. } if s == "crashy"),
        "{again:?}"
    );
    let out = call_tool(&runner, "steady__echo", json!({"n": 1}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"n": 1})));
    assert!(running(steady));

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}
