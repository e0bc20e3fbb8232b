//! History of a real run: `messages.jsonl` and `events.jsonl` under the history
//! root or a given directory; a directory that cannot be written fails the run before any
//! server is contacted, naming the path; a secret of the run's specs — inside tool arguments,
//! echoed in a server's error text — appears in no event and in neither file.

use std::sync::Arc;

use agent_core::{
    ApprovalDecision, EVENTS_FILE, History, MESSAGES_FILE, RunInput, Runner, error_chain,
};
use integration_tests::harness::{Harness, bounded};
use mcp_client::ClientError;
use mcp_config::{HttpSpec, Secret, SecretSource, ServerSpec, TransportSpec};
use mcp_test_kit::{TestServerOptions, serve_http};
use serde_json::json;

use crate::governed_support::{ScriptedGate, call_via, config, kit};

const ENV_SECRET: &str = "sk-env-Qm4Xr8Tz2Lw6";
const BEARER: &str = "bearer-Vb7Nc1Pk9Hs3";

#[tokio::test]
async fn a_run_writes_messages_and_events_under_the_history_root() {
    let root = tempfile::tempdir().unwrap();
    let harness = Harness::new();
    let client = harness
        .builder(config(vec![kit("files")], json!({})))
        .history_root(root.path())
        .build();
    let input = RunInput::new("conversation/7", "use the test server");
    let runner = bounded(client.open_runner(&input)).await.unwrap();
    call_via(&runner, "1", "files__echo", json!({"a": 1}))
        .await
        .unwrap();
    bounded(runner.shutdown()).await.unwrap();

    // The run id is sanitised into one directory name.
    let dirs: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let name = dirs[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with("conversation_7-"), "{name}");
    assert!(dirs[0].join(MESSAGES_FILE).is_file());
    assert!(dirs[0].join(EVENTS_FILE).is_file());

    let read = History::read(&dirs[0]).unwrap();
    let kinds: Vec<&str> = read
        .events
        .records
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "server_connected",
            "tool_call_started",
            "tool_call_finished"
        ]
    );
    assert_eq!(read.events.records[1]["tool"], "files__echo");
    // The call as the model made it, then its result as the model saw it.
    assert_eq!(
        read.messages.records.len(),
        2,
        "{:?}",
        read.messages.records
    );
    let asked = serde_json::to_string(&read.messages.records[0]).unwrap();
    assert!(asked.contains("files__echo"), "{asked}");

    // A run recorded directly in a directory of its own.
    let dir = root.path().join("direct");
    let runner = bounded(client.open_runner_with_history(&input, &dir))
        .await
        .unwrap();
    runner.close().await;
    assert!(dir.join(EVENTS_FILE).is_file() && dir.join(MESSAGES_FILE).is_file());
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn an_unwritable_history_directory_fails_the_run_before_any_server_is_contacted() {
    let root = tempfile::tempdir().unwrap();
    // A directory inside a regular file can never be made, whoever runs the test.
    let file = root.path().join("not-a-directory");
    std::fs::write(&file, "x").unwrap();
    let dir = file.join("history");
    let harness = Harness::new();
    let client = harness
        .builder(config(vec![kit("files")], json!({})))
        .build();
    let err = bounded(client.open_runner_with_history(&harness.input(), &dir))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::History(_)), "{err:?}");
    let told = error_chain(&err);
    assert!(told.contains(&dir.display().to_string()), "{told}");
    assert!(harness.spawned.pids().is_empty(), "a server was started");

    // The same through the history root.
    let client = harness
        .builder(config(vec![kit("files")], json!({})))
        .history_root(&file)
        .build();
    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    assert!(
        error_chain(&err).contains(&file.display().to_string()),
        "{err}"
    );
    assert!(harness.spawned.pids().is_empty(), "a server was started");
}

#[tokio::test]
async fn a_secret_in_tool_arguments_or_a_servers_error_text_is_in_no_event_and_no_history_file() {
    let http = serve_http(TestServerOptions::default().with_name("kit-over-http"))
        .await
        .unwrap();
    let mut stdio = kit("local");
    if let TransportSpec::Stdio(spec) = &mut stdio.transport {
        spec.env.insert("API_KEY".into(), Secret::new(ENV_SECRET));
    }
    let mut remote = ServerSpec::new(
        "remote",
        TransportSpec::StreamableHttp(HttpSpec::new(http.url().parse().unwrap())),
    );
    remote.auth.bearer = Some(SecretSource::Inline(Secret::new(BEARER)));
    // Approval is asked for every call, so the prompt sees the arguments too.
    let gate = ScriptedGate::new(std::iter::repeat_n(ApprovalDecision::Approved, 10));
    let asking = Arc::clone(&gate);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("session");
    let harness = Harness::new();
    let client = harness
        .builder(config(
            vec![stdio, remote],
            json!({"approve": [{"server": "*", "tool": "*"}]}),
        ))
        .govern(move |layer| layer.approval_gate(asking))
        .build();
    let runner = bounded(client.open_runner_with_history(&harness.input(), &dir))
        .await
        .unwrap();

    for (id, server, secret) in [("1", "local", ENV_SECRET), ("2", "remote", BEARER)] {
        // In the arguments of a call that succeeds (and echoes them)…
        let out = call_via(
            &runner,
            id,
            &format!("{server}__echo"),
            json!({"note": format!("the key is {secret}")}),
        )
        .await
        .unwrap();
        assert!(!format!("{out:?}").contains(secret));
        // …and of one whose error text the server builds from them.
        let err = call_via(
            &runner,
            id,
            &format!("{server}__fail"),
            json!({"message": format!("rejected {secret}")}),
        )
        .await
        .unwrap_err();
        assert!(!error_chain(&err).contains(secret), "{err}");
    }
    bounded(runner.shutdown()).await.unwrap();

    let events: String = harness
        .events
        .all()
        .iter()
        .map(|e| format!("{e:?}\n{}\n", serde_json::to_string(e).unwrap()))
        .collect();
    let prompts = format!("{:?}", gate.asked());
    let messages = std::fs::read_to_string(dir.join(MESSAGES_FILE)).unwrap();
    let recorded = std::fs::read_to_string(dir.join(EVENTS_FILE)).unwrap();
    assert!(messages.contains("[REDACTED]"), "{messages}");
    assert!(recorded.contains("tool_call_failed"), "{recorded}");
    for secret in [ENV_SECRET, BEARER] {
        assert!(
            !events.contains(secret),
            "an event shows {secret}: {events}"
        );
        assert!(
            !prompts.contains(secret),
            "a prompt shows {secret}: {prompts}"
        );
        assert!(!messages.contains(secret), "messages.jsonl shows {secret}");
        assert!(!recorded.contains(secret), "events.jsonl shows {secret}");
    }
    harness.assert_no_process_left().await;
}
