//! A server that echoes a secret of the run (at the session level): whatever it
//! sends back — a tool result's text and structured content, an `isError` result, a JSON-RPC
//! error, a failed `initialize` or `tools/list`, its `instructions` — the run's errors, events,
//! skipped-server causes and the model's tool results never show a secret value the run's
//! specs hold. Over stdio too: a real server whose environment holds `API_KEY`.

use crate::in_memory;

use std::sync::Arc;
use std::time::Duration;

use agent_core::{Event, RunInput, Runner, ToolError};
use in_memory::{InMemory, builder, builder_for, spec};
use integration_tests::harness::{Events, Harness, bounded, call_tool, chain, stdio_server};
use mcp_client::ClientError;
use mcp_config::{Config, PartialFailure, Secret, TransportSpec};
use mcp_test_kit::hostile::{HostileOptions, HostileServer, Pages};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

const SECRET: &str = "sk-live-Zq8Wm3Rt6Yp1";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn echoing(options: HostileOptions) -> HostileServer {
    HostileServer::new(options.with_echo(SECRET))
}

/// Every way the events can be shown.
fn shown(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| format!("{e:?}\n{}\n", serde_json::to_string(e).unwrap()))
        .collect()
}

#[track_caller]
fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the secret: {text}");
}

#[tokio::test]
async fn results_and_call_errors_that_echo_the_secret_show_it_nowhere() {
    let events = Arc::new(Events::default());
    let server = echoing(HostileOptions::new(Pages::Fixed(Vec::new())));
    let client = builder(
        vec![spec("echo", &[("API_KEY", SECRET)], CONNECT_TIMEOUT)],
        InMemory::new(server),
        events.clone(),
    )
    .build();
    let runner = bounded(client.open_runner(&RunInput::new("s", "q")))
        .await
        .expect("the server opens");

    // A result: its text and its structured content.
    let out = call_tool(&runner, "echo__leak", json!({})).await.unwrap();
    assert_hidden("the result", &format!("{out:?}"));
    assert_eq!(
        out.structured,
        Some(json!({"key": "[REDACTED]", "nested": ["[REDACTED]"]}))
    );
    assert!(format!("{:?}", out.content).contains("the key is [REDACTED]"));

    // An `isError` result and a JSON-RPC error (whose data held the secret too).
    for tool in ["echo__leak_is_error", "echo__leak_rpc_error"] {
        let err = call_tool(&runner, tool, json!({})).await.unwrap_err();
        assert_hidden(tool, &chain(&err));
        assert_hidden(tool, &format!("{err:?}"));
        let ToolError::Invocation { message, .. } = &err else {
            panic!("{tool}: {err:?}");
        };
        assert!(message.contains("[REDACTED]"), "{tool}: {message}");
    }
    runner.close().await;
    assert_hidden("the events", &shown(&events.all()));
}

#[tokio::test]
async fn a_failed_handshake_or_listing_that_echoes_the_secret_shows_it_nowhere() {
    for (what, options) in [
        (
            "initialize",
            HostileOptions::new(Pages::Fixed(Vec::new())).with_fail_initialize(),
        ),
        (
            "tools/list",
            HostileOptions::new(Pages::Fixed(Vec::new())).with_fail_list(),
        ),
    ] {
        let secret_spec = || spec("echo", &[("API_KEY", SECRET)], CONNECT_TIMEOUT);
        // fail_fast: the run's error.
        let events = Arc::new(Events::default());
        let client = builder(
            vec![secret_spec()],
            InMemory::new(echoing(options.clone())),
            events.clone(),
        )
        .build();
        let Err(err) = bounded(client.open_runner(&RunInput::new("s", "q"))).await else {
            panic!("{what}: the run must fail");
        };
        let text = chain(&err);
        assert!(text.contains("bad key [REDACTED]"), "{what}: {text}");
        assert_hidden(what, &text);
        assert_hidden(what, &format!("{err:?}"));
        assert!(matches!(err, ClientError::Server(_)), "{what}: {err:?}");
        assert_hidden(what, &shown(&events.all()));

        // skip_unavailable: the skipped server's cause.
        let events = Arc::new(Events::default());
        let config = Config::new(vec![secret_spec()])
            .unwrap()
            .with_partial_failure(PartialFailure::SkipUnavailable);
        let client = builder_for(config, InMemory::new(echoing(options)), events.clone()).build();
        let runner = bounded(client.open_runner(&RunInput::new("s", "q")))
            .await
            .expect("the run goes on without it");
        let skipped = &runner.skipped()[0];
        assert_hidden(what, &chain(&skipped.error));
        assert_hidden(what, &format!("{:?}", skipped.error));
        assert_hidden(what, &shown(&events.all()));
        runner.close().await;
    }
}

#[tokio::test]
async fn the_servers_identity_and_tool_names_never_hold_the_secret() {
    let events = Arc::new(Events::default());
    let leaky = mcp_test_kit::hostile::tool(format!("key_{SECRET}"), format!("Uses {SECRET}."));
    let options = HostileOptions::new(Pages::Fixed(vec![leaky]))
        .with_server_info(format!("srv {SECRET}"), "1.0")
        .with_instructions(format!("Authenticate with {SECRET}."));
    let client = builder(
        vec![spec("echo", &[("API_KEY", SECRET)], CONNECT_TIMEOUT)],
        InMemory::new(echoing(options)),
        events.clone(),
    )
    .build();
    let runner = bounded(client.open_runner(&RunInput::new("s", "q")))
        .await
        .unwrap();
    let identity = runner.sessions()[0].identity();
    assert_hidden("the identity", &format!("{identity:?}"));
    assert_eq!(
        identity.instructions.as_deref(),
        Some("Authenticate with [REDACTED].")
    );
    // The tool named after the secret is left out, and said so without the secret.
    let names: Vec<String> = runner
        .catalog()
        .entries()
        .iter()
        .map(|t| t.id.clone())
        .collect();
    assert_hidden("the catalog", &format!("{names:?}"));
    let connected = shown(&events.all());
    assert!(connected.contains("holds a secret value"), "{connected}");
    assert_hidden("the events", &connected);
    for tool in runner.catalog().entries() {
        assert_hidden("a description", &format!("{:?}", tool.descriptor()));
    }
    runner.close().await;
}

#[tokio::test]
async fn a_stdio_server_echoing_its_environment_shows_no_secret() {
    let harness = Harness::new();
    let mut spec = stdio_server("kit", &StdioServerArgs::new(Mode::Test));
    if let TransportSpec::Stdio(stdio) = &mut spec.transport {
        stdio.env.insert("API_KEY".into(), Secret::new(SECRET));
    }
    let client = harness.client(vec![spec]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    let out = call_tool(&runner, "kit__env", json!({"names": ["API_KEY"]}))
        .await
        .unwrap();
    assert_eq!(
        out.structured,
        Some(json!({"env": {"API_KEY": "[REDACTED]"}}))
    );
    assert_hidden("the result", &format!("{out:?}"));

    let err = call_tool(
        &runner,
        "kit__fail",
        json!({"message": format!("bad key {SECRET}")}),
    )
    .await
    .unwrap_err();
    assert_hidden("the failure", &chain(&err));
    assert!(chain(&err).contains("bad key [REDACTED]"), "{err}");

    bounded(runner.close()).await;
    assert_hidden("the events", &shown(&harness.events.all()));
    harness.assert_no_process_left().await;
}
