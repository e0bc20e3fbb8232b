//! A run with a server that cannot open: `fail_fast` fails the run naming it and leaves no
//! process; `skip_unavailable` goes on with the others and reports the skipped server with
//! its cause, as runner info and as a `ServerFailed` event.

use std::time::Duration;

use agent_core::{EventKind, RunInput, Runner};
use integration_tests::harness::{
    Harness, bounded, call_tool, chain, search, stdio_command, stdio_server,
};
use mcp_client::{ClientError, SessionError};
use mcp_config::{Config, PartialFailure, ServerSpec};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

/// A server whose command does not exist.
fn missing(name: &str) -> ServerSpec {
    stdio_command(name, "/nonexistent/mcp-server-of-nobody", Vec::new())
}

fn good(name: &str) -> ServerSpec {
    stdio_server(name, &StdioServerArgs::new(Mode::Test))
}

#[tokio::test]
async fn fail_fast_names_the_server_and_leaves_no_process() {
    let harness = Harness::new();
    let config = Config::new(vec![good("first"), missing("broken"), good("last")])
        .unwrap()
        .with_partial_failure(PartialFailure::FailFast);
    let client = harness.builder(config).build();

    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::Server(SessionError::Connect(e)) if e.server() == "broken"),
        "{err:?}"
    );
    let text = chain(&err);
    assert!(text.contains("server `broken`"), "{text}");
    assert!(text.contains("/nonexistent/mcp-server-of-nobody"), "{text}");

    let failed = harness.events.of_kind(EventKind::ServerFailed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].server.as_deref(), Some("broken"));
    // The other servers were started alongside it; none of them is left.
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn fail_fast_closes_servers_that_had_already_opened() {
    let harness = Harness::new();
    // `late` fails only when its connect timeout expires, long after the others opened.
    let mut late = stdio_server(
        "late",
        &StdioServerArgs::new(Mode::SlowInitialize).with_init_delay(Duration::from_secs(20)),
    );
    late.connect_timeout = Some(Duration::from_millis(1_500));
    let config = Config::new(vec![good("a"), late, good("b")])
        .unwrap()
        .with_partial_failure(PartialFailure::FailFast);
    let client = harness.builder(config).build();

    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::Server(SessionError::ConnectTimeout { server, .. }) if server == "late"),
        "{err:?}"
    );
    // Every server was spawned (they connect in parallel), and none is left.
    for server in ["a", "late", "b"] {
        assert_eq!(harness.spawned.pids_of(server).len(), 1, "{server}");
    }
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn skip_unavailable_goes_on_and_reports_the_cause() {
    let harness = Harness::new();
    let config = Config::new(vec![good("first"), missing("broken"), good("last")])
        .unwrap()
        .with_partial_failure(PartialFailure::SkipUnavailable);
    let client = harness.builder(config).build();

    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let open: Vec<&str> = runner.sessions().iter().map(|s| s.name()).collect();
    assert_eq!(open, ["first", "last"]);

    let skipped = runner.skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].server, "broken");
    let cause = chain(&skipped[0].error);
    assert!(cause.contains("server `broken`"), "{cause}");
    assert!(
        cause.contains("/nonexistent/mcp-server-of-nobody"),
        "{cause}"
    );

    let failed = harness.events.of_kind(EventKind::ServerFailed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].server.as_deref(), Some("broken"));
    assert!(
        failed[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("broken")),
        "{failed:?}"
    );
    let connected = harness.events.of_kind(EventKind::ServerConnected);
    let mut names: Vec<_> = connected.iter().filter_map(|e| e.server.clone()).collect();
    names.sort();
    assert_eq!(names, ["first", "last"]);

    // The run works with the others; the skipped server has no tools.
    let out = call_tool(&runner, "last__echo", json!({"still": "working"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"still": "working"})));
    assert!(!search(&runner, "echo", Some("first"), 5).await.is_empty());
    assert!(call_tool(&runner, "broken__echo", json!({})).await.is_err());

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_run_can_choose_skip_unavailable_itself() {
    let harness = Harness::new();
    // The operator says fail_fast; this run overrides it in its metadata.
    let config = Config::new(vec![missing("broken"), good("fine")]).unwrap();
    let client = harness.builder(config).build();
    let metadata = json!({"mcp": {"partial_failure": "skip_unavailable"}});
    let input = RunInput::new("state-2", "go on without it")
        .with_metadata(integration_tests::harness::object(metadata));

    let runner = bounded(client.open_runner(&input)).await.unwrap();
    assert_eq!(runner.skipped()[0].server, "broken");
    assert_eq!(runner.sessions()[0].name(), "fine");
    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}
