//! The session pool with in-memory servers: `shared = true` operator servers are
//! opened once per client and reused by its runs, checked before reuse (listed again only
//! when their tools may have changed), re-opened after a failure, closed by the client's
//! shutdown, and never shared for caller-supplied specs.
//! Opens are counted by the servers' connect counter, never by timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::{Event, EventKind, RunInput, Runner, ToolCall, ToolDispatcher, ToolError};
use mcp_client::{McpClient, McpRunner};
use mcp_config::{Config, ResolvedRun, RunOptions, ServerSpec, SpecOrigin, TransportSpec};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{Observations, TestServer, TestServerOptions, bounded, serve_in_memory};
use serde_json::json;

/// Collects events.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<Event>>);

impl agent_core::EventSink for Collect {
    fn emit(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

impl Collect {
    /// The messages of the `server_connected` events of `server`, in order.
    fn connected(&self, server: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.kind == EventKind::ServerConnected && e.server.as_deref() == Some(server))
            .map(|e| e.message.clone().unwrap_or_default())
            .collect()
    }
}

/// A client over two in-memory servers, `a` (`shared = true`) and `b` (private), counting
/// the connections each server accepts.
struct Fixture {
    client: McpClient,
    opens_a: Arc<AtomicUsize>,
    opens_b: Arc<AtomicUsize>,
    events: Arc<Collect>,
}

fn shared(name: &str) -> ServerSpec {
    let mut spec = spec(name);
    spec.shared = true;
    spec
}

fn counted(name: &str, opens: &Arc<AtomicUsize>, memory: InMemoryConnector) -> InMemoryConnector {
    let opens = Arc::clone(opens);
    memory.server(name, move || {
        opens.fetch_add(1, Ordering::SeqCst);
        serve_in_memory(TestServer::new(TestServerOptions::default()))
    })
}

fn fixture() -> Fixture {
    let opens_a = Arc::new(AtomicUsize::new(0));
    let opens_b = Arc::new(AtomicUsize::new(0));
    let memory = counted(
        "b",
        &opens_b,
        counted("a", &opens_a, InMemoryConnector::new()),
    );
    let events = Arc::new(Collect::default());
    let config = Config::new(vec![shared("a"), spec("b")]).expect("valid specs");
    let client = McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .events(events.clone())
        .close_grace(std::time::Duration::from_millis(300))
        .build();
    Fixture {
        client,
        opens_a,
        opens_b,
        events,
    }
}

fn input(state: &str) -> RunInput {
    RunInput::new(state, "use the servers")
}

async fn call(
    runner: &McpRunner,
    tool: &str,
    args: serde_json::Value,
) -> Result<String, ToolError> {
    let call = ToolCall::from_json(
        "1",
        "mcp_call_tool",
        json!({"tool_name": tool, "arguments": args}),
    )
    .unwrap();
    bounded(runner.dispatch(call))
        .await
        .map(|o| o.to_model_text())
}

/// Whether the run's session of `server` reads as closed.
fn closed(runner: &McpRunner, server: &str) -> bool {
    let session = runner.sessions().iter().find(|s| s.name() == server);
    session.expect("the run has the server").is_closed()
}

fn assert_names_server(error: &ToolError, server: &str) {
    match error {
        ToolError::Transport { server: s, .. } => assert_eq!(s.as_deref(), Some(server)),
        other => panic!("expected a transport error naming `{server}`, got {other:?}"),
    }
    let text = agent_core::error_chain(error);
    assert!(text.contains(&format!("`{server}`")), "{text}");
}

#[tokio::test]
async fn runs_share_one_session_of_a_shared_server_which_outlives_them() {
    let f = fixture();
    let first = bounded(f.client.open_runner(&input("1"))).await.unwrap();
    let second = bounded(f.client.open_runner(&input("2"))).await.unwrap();
    assert_eq!(f.opens_a.load(Ordering::SeqCst), 1, "one session of `a`");
    assert_eq!(f.opens_b.load(Ordering::SeqCst), 2, "`b` is each run's own");

    // Each run has its own catalog and layer over the one session.
    assert!(
        call(&first, "a__add", json!({"a": 2, "b": 3}))
            .await
            .unwrap()
            .contains('5')
    );
    assert!(
        call(&second, "a__add", json!({"a": 4, "b": 3}))
            .await
            .unwrap()
            .contains('7')
    );

    // A run's end leaves the shared session up for the others and for the next run.
    first.close().await;
    assert!(call(&second, "a__echo", json!({"n": 1})).await.is_ok());
    second.close().await;
    let third = bounded(f.client.open_runner(&input("3"))).await.unwrap();
    assert!(call(&third, "a__echo", json!({"n": 2})).await.is_ok());
    assert_eq!(f.opens_a.load(Ordering::SeqCst), 1);
    assert_eq!(f.client.shared_sessions_opened(), 1);
    let notes = f.events.connected("a");
    assert_eq!(notes.len(), 3);
    assert!(notes[0].ends_with("shared session, opened"), "{notes:?}");
    assert!(notes[1].ends_with("shared session, reused"), "{notes:?}");
    assert!(notes[2].ends_with("shared session, reused"), "{notes:?}");
    assert!(!f.events.connected("b")[0].contains("shared"));

    // The client's shutdown closes it: the run still open loses `a` (naming it), not `b`.
    bounded(f.client.shutdown()).await;
    let err = call(&third, "a__echo", json!({})).await.unwrap_err();
    assert_names_server(&err, "a");
    assert!(call(&third, "b__echo", json!({})).await.is_ok());
    third.close().await;

    // After the shutdown a run gets a private session of `a`, and is told so.
    let fourth = bounded(f.client.open_runner(&input("4"))).await.unwrap();
    assert_eq!(f.opens_a.load(Ordering::SeqCst), 2);
    assert!(call(&fourth, "a__echo", json!({})).await.is_ok());
    let notes = f.events.connected("a");
    assert!(notes[3].contains("shut down its session pool"), "{notes:?}");
    fourth.close().await;
    bounded(f.client.shutdown()).await; // idempotent
}

#[tokio::test]
async fn concurrent_first_opens_open_one_session() {
    let f = fixture();
    let runs = (0..8).map(|i| {
        let client = f.client.clone();
        async move { client.open_runner(&input(&format!("run-{i}"))).await }
    });
    let runners: Vec<McpRunner> = bounded(futures::future::join_all(runs))
        .await
        .into_iter()
        .map(|r| r.expect("the run opens"))
        .collect();
    assert_eq!(
        f.opens_a.load(Ordering::SeqCst),
        1,
        "one connect for eight runs"
    );
    assert_eq!(f.opens_b.load(Ordering::SeqCst), 8);
    let notes = f.events.connected("a");
    assert_eq!(
        notes.iter().filter(|n| n.ends_with("opened")).count(),
        1,
        "{notes:?}"
    );
    for runner in &runners {
        runner.close().await;
    }
    bounded(f.client.shutdown()).await;
}

#[tokio::test]
async fn a_shared_session_that_died_is_reopened_for_the_next_run() {
    let f = fixture();
    let first = bounded(f.client.open_runner(&input("1"))).await.unwrap();
    assert!(!closed(&first, "a"));
    // The server drops the connection during the call.
    let _ = call(&first, "a__crash", json!({})).await;
    let err = call(&first, "a__echo", json!({})).await.unwrap_err();
    assert_names_server(&err, "a");
    assert!(
        closed(&first, "a"),
        "the run's view tells the session is gone"
    );
    assert!(!closed(&first, "b"));

    // The next run's check finds it dead: a new session, which the next runs reuse.
    let second = bounded(f.client.open_runner(&input("2"))).await.unwrap();
    assert_eq!(f.opens_a.load(Ordering::SeqCst), 2);
    assert!(call(&second, "a__echo", json!({"n": 1})).await.is_ok());
    let notes = f.events.connected("a");
    assert!(
        notes[1].ends_with("re-opened after it failed its check"),
        "{notes:?}"
    );
    // The run that was using the dead session still fails on it, naming the server.
    let err = call(&first, "a__echo", json!({})).await.unwrap_err();
    assert_names_server(&err, "a");

    let third = bounded(f.client.open_runner(&input("3"))).await.unwrap();
    assert_eq!(f.opens_a.load(Ordering::SeqCst), 2);
    for runner in [first, second, third] {
        runner.close().await;
        assert!(closed(&runner, "b"), "closed with its run");
    }
    bounded(f.client.shutdown()).await;
    assert_eq!(f.client.shared_sessions_opened(), 2);
}

#[tokio::test]
async fn a_caller_supplied_spec_never_gets_a_pooled_session() {
    let f = fixture();
    // What a custom resolver may hand over: a caller's spec asking to be shared.
    let inline = || {
        let mut spec = shared("a");
        spec.origin = SpecOrigin::Inline;
        ResolvedRun::new(vec![spec], RunOptions::default())
    };
    let first = bounded(f.client.open_resolved(inline())).await.unwrap();
    let second = bounded(f.client.open_resolved(inline())).await.unwrap();
    assert_eq!(
        f.opens_a.load(Ordering::SeqCst),
        2,
        "a private session each"
    );
    assert_eq!(f.client.shared_sessions_opened(), 0);
    let notes = f.events.connected("a");
    assert!(
        notes.iter().all(|n| n
            .ends_with("`shared` ignored: a caller-supplied server always gets a private session")),
        "{notes:?}"
    );
    // Its run's close closes it.
    first.close().await;
    let closed = first.sessions()[0].list_tools();
    assert!(second.sessions()[0].list_tools().await.is_ok());
    assert!(
        bounded(closed).await.is_err(),
        "a private session closes with its run"
    );
    second.close().await;
}

#[tokio::test]
async fn specs_that_differ_in_a_secret_or_a_parameter_do_not_share() {
    let f = fixture();
    let run = |token: &str| {
        let mut spec = shared("a");
        if let TransportSpec::Custom(custom) = &mut spec.transport {
            custom.params.insert("token".into(), json!(token));
        }
        ResolvedRun::new(vec![spec], RunOptions::default())
    };
    let one = bounded(f.client.open_resolved(run("tok-1"))).await.unwrap();
    let again = bounded(f.client.open_resolved(run("tok-1"))).await.unwrap();
    let other = bounded(f.client.open_resolved(run("tok-2"))).await.unwrap();
    assert_eq!(f.opens_a.load(Ordering::SeqCst), 2);
    for runner in [one, again, other] {
        runner.close().await;
    }
    bounded(f.client.shutdown()).await;
}

#[tokio::test]
async fn a_tool_list_change_of_a_shared_session_reaches_every_run() {
    let f = fixture();
    let first = bounded(f.client.open_runner(&input("1"))).await.unwrap();
    let second = bounded(f.client.open_runner(&input("2"))).await.unwrap();
    let mut first_events = first.governed().subscribe();
    let mut second_events = second.governed().subscribe();
    let added = call(&first, "a__add_tool", json!({"name": "fresh"}))
        .await
        .unwrap();
    assert!(added.contains("true"), "{added}");
    for events in [&mut first_events, &mut second_events] {
        bounded(async {
            loop {
                let event = events.recv().await.expect("the run's events");
                if event.kind == EventKind::ToolsChanged && event.server.as_deref() == Some("a") {
                    return;
                }
            }
        })
        .await;
    }
    for runner in [&first, &second] {
        let names: Vec<String> = runner
            .catalog()
            .entries()
            .iter()
            .map(|t| t.id.clone())
            .collect();
        assert!(names.iter().any(|n| n == "a__fresh"), "{names:?}");
        assert!(call(runner, "a__fresh", json!({"x": 1})).await.is_ok());
    }
    // A later run lists the session's tools as they are now.
    let third = bounded(f.client.open_runner(&input("3"))).await.unwrap();
    assert!(third.catalog().entries().iter().any(|t| t.id == "a__fresh"));
    for runner in [first, second, third] {
        runner.close().await;
    }
    bounded(f.client.shutdown()).await;
}

/// A client over the shared in-memory server `a`, which declares `tools.listChanged` when
/// `list_changed`, and what the server observes.
fn observed_shared_client(list_changed: bool) -> (McpClient, Observations) {
    let seen = Observations::new();
    let observed = seen.clone();
    let memory = InMemoryConnector::new().server("a", move || {
        let options = TestServerOptions::default()
            .with_observations(observed.clone())
            .with_list_changed(list_changed);
        serve_in_memory(TestServer::new(options))
    });
    let config = Config::new(vec![shared("a")]).expect("valid specs");
    let client = McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build();
    (client, seen)
}

/// Three runs of `client`, opened one after another.
async fn three_runs(client: &McpClient) -> Vec<McpRunner> {
    let mut runs = Vec::new();
    for n in 0..3 {
        runs.push(
            bounded(client.open_runner(&input(&n.to_string())))
                .await
                .unwrap(),
        );
    }
    runs
}

/// Waits until a run reports on `events` that the tools of `server` changed.
async fn tools_changed(events: &mut agent_core::EventReceiver, server: &str) {
    bounded(async {
        loop {
            let event = events.recv().await.expect("the run's events");
            if event.kind == EventKind::ToolsChanged && event.server.as_deref() == Some(server) {
                return;
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_shared_session_is_listed_again_only_when_its_tools_may_have_changed() {
    let (client, seen) = observed_shared_client(true);
    let mut runs = three_runs(&client).await;
    // The server announces tool-list changes and sent none: the open's listing stands.
    assert_eq!(seen.snapshot().listings(), 1);
    assert!(runs.iter().all(|r| r.catalog().entries().len() > 1));

    // A change: every run lists again (each follows it in its catalog) ...
    let mut heard: Vec<_> = runs.iter().map(|r| r.governed().subscribe()).collect();
    let added = call(&runs[0], "a__add_tool", json!({"name": "fresh"}))
        .await
        .unwrap();
    assert!(added.contains("true"), "{added}");
    for events in &mut heard {
        tools_changed(events, "a").await;
    }
    let after_change = seen.snapshot().listings();
    assert_eq!(after_change, 4, "the three runs listed the changed tools");
    // ... and the next run takes a listing asked for after the change, without asking again,
    // nor does its watcher take the change it already has for news (a call gives it time to).
    let next = bounded(client.open_runner(&input("next"))).await.unwrap();
    assert!(next.catalog().entries().iter().any(|t| t.id == "a__fresh"));
    assert!(call(&next, "a__fresh", json!({"x": 1})).await.is_ok());
    assert_eq!(seen.snapshot().listings(), after_change);
    assert_eq!(
        *next.tools_changed().borrow(),
        0,
        "the new run re-listed nothing"
    );
    runs.push(next);
    for runner in runs {
        runner.close().await;
    }
    bounded(client.shutdown()).await;
}

#[tokio::test]
async fn a_shared_session_whose_server_does_not_announce_changes_is_listed_at_every_reuse() {
    let (client, seen) = observed_shared_client(false);
    let runs = three_runs(&client).await;
    // Nothing would say the tools changed: each run asks for them.
    assert_eq!(seen.snapshot().listings(), 3);
    for runner in runs {
        runner.close().await;
    }
    bounded(client.shutdown()).await;
}
