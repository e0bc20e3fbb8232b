//! `shared = true` stdio servers with real child processes: the runs of one client
//! use one process, which outlives them and ends with the client's shutdown; a killed one is
//! re-opened for the next run; concurrent first opens spawn one process; a caller-supplied
//! spec asking to be shared gets a private one. Processes are counted by the harness's
//! recording connector, never by timing.

use std::time::Duration;

use agent_core::{EventKind, Runner, ToolError};
use integration_tests::harness::{Harness, bounded, call_tool, chain, stdio_server};
use integration_tests::procs::{eventually, live_members, running};
use mcp_client::McpRunner;
use mcp_config::{Config, McpSelection, ServerSpec};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

fn shared(name: &str) -> ServerSpec {
    let mut spec = stdio_server(name, &StdioServerArgs::new(Mode::Test));
    spec.shared = true;
    spec
}

fn pid(runner: &McpRunner, index: usize) -> u32 {
    runner.sessions()[index].pid().expect("a child process")
}

/// The messages of the `server_connected` events of `server`, in order.
fn connected(harness: &Harness, server: &str) -> Vec<String> {
    harness
        .events
        .of_kind(EventKind::ServerConnected)
        .into_iter()
        .filter(|e| e.server.as_deref() == Some(server))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

fn assert_names_server(error: &ToolError, server: &str) {
    assert!(
        matches!(error, ToolError::Transport { server: Some(s), .. } if s == server),
        "{error:?}"
    );
    let text = chain(error);
    assert!(text.contains(&format!("server `{server}`")), "{text}");
}

#[tokio::test]
async fn runs_share_one_process_which_the_clients_shutdown_ends() {
    let harness = Harness::new();
    let own = stdio_server("own", &StdioServerArgs::new(Mode::Test));
    let client = harness.client(vec![shared("pooled"), own]);

    let first = bounded(client.open_runner(&harness.input())).await.unwrap();
    let second = bounded(client.open_runner(&harness.input())).await.unwrap();
    assert_eq!(harness.spawned.pids_of("pooled").len(), 1, "one process");
    assert_eq!(harness.spawned.pids_of("own").len(), 2, "one per run");
    let pooled = pid(&first, 0);
    assert_eq!(pid(&second, 0), pooled);
    for runner in [&first, &second] {
        let out = call_tool(runner, "pooled__add", json!({"a": 1, "b": 2}))
            .await
            .unwrap();
        assert!(out.to_model_text().contains('3'));
    }

    // The runs end; their own servers go, the shared one stays up for the next run.
    let own_pids = harness.spawned.pids_of("own");
    first.close().await;
    second.close().await;
    mcp_test_kit::procs::assert_gone(&own_pids).await;
    assert!(running(pooled), "the shared server outlives the runs");
    let third = bounded(client.open_runner(&harness.input())).await.unwrap();
    assert_eq!(pid(&third, 0), pooled);
    assert_eq!(harness.spawned.pids_of("pooled").len(), 1);
    assert!(call_tool(&third, "pooled__echo", json!({})).await.is_ok());
    third.close().await;
    assert!(running(pooled));
    assert_eq!(client.shared_sessions_opened(), 1);

    // The client's shutdown ends it: no child is left.
    bounded(client.shutdown()).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_killed_shared_server_is_reopened_for_the_next_run() {
    let harness = Harness::new();
    let client = harness.client(vec![shared("pooled")]);
    let first = bounded(client.open_runner(&harness.input())).await.unwrap();
    let killed = pid(&first, 0);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(killed).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || !running(killed)).await,
        "the killed server {killed} still runs"
    );

    // The run using it sees a clear error naming the server.
    let err = call_tool(&first, "pooled__echo", json!({}))
        .await
        .unwrap_err();
    assert_names_server(&err, "pooled");

    // The next run's check finds it dead and opens a new process.
    let second = bounded(client.open_runner(&harness.input())).await.unwrap();
    let fresh = pid(&second, 0);
    assert_ne!(fresh, killed);
    assert_eq!(harness.spawned.pids_of("pooled"), [killed, fresh]);
    assert!(
        call_tool(&second, "pooled__echo", json!({"n": 1}))
            .await
            .is_ok()
    );
    let notes = connected(&harness, "pooled");
    assert!(
        notes[1].ends_with("re-opened after it failed its check"),
        "{notes:?}"
    );
    let err = call_tool(&first, "pooled__echo", json!({}))
        .await
        .unwrap_err();
    assert_names_server(&err, "pooled");

    first.close().await;
    second.close().await;
    assert!(running(fresh));
    bounded(client.shutdown()).await;
    harness.assert_no_process_left().await;
    assert!(live_members(fresh).is_empty());
}

#[tokio::test]
async fn concurrent_first_opens_spawn_exactly_one_process() {
    let harness = Harness::new();
    let client = harness.client(vec![shared("pooled")]);
    let inputs: Vec<_> = (0..6).map(|_| harness.input()).collect();
    let runs = inputs.iter().map(|input| client.open_runner(input));
    let runners: Vec<McpRunner> = bounded(futures::future::join_all(runs))
        .await
        .into_iter()
        .map(|r| r.expect("the run opens"))
        .collect();
    assert_eq!(harness.spawned.pids_of("pooled").len(), 1);
    let pooled = pid(&runners[0], 0);
    assert!(runners.iter().all(|r| pid(r, 0) == pooled));
    for runner in &runners {
        runner.close().await;
    }
    assert!(running(pooled));
    bounded(client.shutdown()).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_caller_supplied_server_asking_to_be_shared_gets_a_private_process() {
    let harness = Harness::new();
    let mut config = Config::new(vec![]).unwrap();
    config.inline.allow_stdio = true; // the operator lets callers start stdio servers
    let client = harness.builder(config).build();
    let binary = mcp_test_kit::stdio::binary().display().to_string();
    let input = || {
        harness.input().with_meta(
            "mcp",
            McpSelection::none().inline(json!({
                "name": "mine", "command": binary, "shared": true,
            })),
        )
    };
    let first = bounded(client.open_runner(&input())).await.unwrap();
    let second = bounded(client.open_runner(&input())).await.unwrap();
    assert_eq!(harness.spawned.pids_of("mine").len(), 2, "a process each");
    assert_ne!(pid(&first, 0), pid(&second, 0));
    assert_eq!(client.shared_sessions_opened(), 0);
    let notes = connected(&harness, "mine");
    assert_eq!(notes.len(), 2);
    for note in &notes {
        assert!(
            note.ends_with(
                "`shared` ignored: a caller-supplied server always gets a private session"
            ),
            "{note}"
        );
    }
    // Each closes with its run, without the client's shutdown.
    first.close().await;
    second.close().await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_client_dropped_without_shutdown_leaves_no_shared_process() {
    let harness = Harness::new();
    let client = harness.client(vec![shared("pooled")]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let pooled = pid(&runner, 0);
    runner.close().await;
    drop(runner);
    assert!(running(pooled), "the run's end leaves it up");
    // The last owner gone, the session goes, and its process group with it.
    drop(client);
    harness.assert_no_process_left().await;
}
