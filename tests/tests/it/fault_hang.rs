//! A call that hangs: a timeout error naming the server within the call timeout + 1 s, and the
//! server receives `notifications/cancelled` for it; the session stays usable.

use std::time::{Duration, Instant};

use agent_core::{Runner, ToolError};
use integration_tests::harness::{Harness, bounded, call_tool, stdio_server};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use mcp_test_kit::{Event, RecordFile};
use serde_json::json;

const CALL_TIMEOUT: Duration = Duration::from_millis(700);

#[tokio::test]
async fn a_hung_call_times_out_and_is_cancelled_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let record = RecordFile::new(dir.path().join("record.jsonl"));
    let harness = Harness::new();
    let mut spec = stdio_server(
        "hung",
        &StdioServerArgs::new(Mode::Test).with_record(record.path()),
    );
    spec.call_timeout = CALL_TIMEOUT;
    let client = harness.client(vec![spec]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    let started = Instant::now();
    let err = call_tool(&runner, "hung__slow", json!({"ms": 600_000}))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        took >= CALL_TIMEOUT && took < CALL_TIMEOUT + Duration::from_secs(1),
        "the timeout took {took:?}"
    );
    match &err {
        ToolError::Timeout {
            server,
            tool,
            after,
        } => {
            assert_eq!(server.as_deref(), Some("hung"));
            assert_eq!(tool, "hung__slow");
            assert_eq!(*after, CALL_TIMEOUT);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(err.to_string().contains("`hung`"), "{err}");

    // The server saw the call and then its cancellation, for the same request.
    let seen = record
        .wait_for_cancelled(1, Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("no notifications/cancelled: {:?}", record.snapshot()));
    let call_id = seen
        .events
        .iter()
        .find_map(|e| match e {
            Event::Call {
                tool, request_id, ..
            } if tool == "slow" => Some(request_id.clone()),
            _ => None,
        })
        .expect("the server recorded the call");
    assert_eq!(seen.cancelled(), [call_id.as_str()]);

    // The session is still usable.
    let out = call_tool(&runner, "hung__echo", json!({"after": "timeout"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"after": "timeout"})));

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}
