//! Resources, prompts, completions and instructions of a run's servers, with in-memory test
//! servers: listed, read and got within bounds, governed by `[policy]`, hostile input cut or
//! refused, an update flood coalesced.

use std::collections::BTreeMap;
use std::time::Duration;

use agent_core::{
    CallOutcome, Event, EventKind, IdentityRules, Rule, RunInput, ToolCall, ToolDispatcher,
};
use mcp_client::{FeatureError, MAX_INSTRUCTIONS_BYTES, MAX_RESOURCE_BYTES, McpClient, McpRunner};
use mcp_config::{Config, PolicyConfig};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{Observations, TestServer, TestServerOptions, serve_in_memory};
use rmcp::model::{Reference, ResourceContents};
use serde_json::json;

/// A run of server `docs` (identity `acme/docs`) offering resources and prompts, under
/// `policy`, with `instructions` when given.
async fn run(policy: PolicyConfig, instructions: Option<String>) -> (McpRunner, Observations) {
    let observations = Observations::new();
    let seen = observations.clone();
    let memory = InMemoryConnector::new().server("docs", move || {
        let mut options = TestServerOptions::default()
            .with_name("acme/docs")
            .with_features(true)
            .with_observations(seen.clone());
        if let Some(text) = &instructions {
            options = options.with_instructions(text.clone());
        }
        serve_in_memory(TestServer::new(options))
    });
    let config = Config::new(vec![spec("docs")])
        .expect("valid specs")
        .with_policy(policy);
    let runner = McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    (runner, observations)
}

fn text_of(contents: &[ResourceContents]) -> &str {
    match &contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text,
        other => panic!("not a text: {other:?}"),
    }
}

#[tokio::test]
async fn resources_and_templates_are_listed_clean_and_read() {
    let (runner, _) = run(PolicyConfig::default(), None).await;
    let listed = runner.list_resources("docs").await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    // The URI with a control character and the overlong one are left out.
    assert_eq!(
        uris,
        [
            "test://text/hello",
            "test://blob/ok",
            "test://blob/bad",
            "test://huge",
            "test://hostile"
        ]
    );
    let hostile = &listed[4];
    assert!(
        !hostile.name.chars().any(char::is_control),
        "{:?}",
        hostile.name
    );
    let description = hostile.description.as_deref().unwrap();
    assert!(description.len() <= mcp_client::MAX_FEATURE_DESCRIPTION_BYTES);
    assert!(!description.contains('\0'));

    let templates = runner.list_resource_templates("docs").await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "test://items/{id}");

    let hello = runner
        .read_resource("docs", "test://text/hello")
        .await
        .unwrap();
    assert_eq!(text_of(&hello), "hello");
    let item = runner
        .read_resource("docs", "test://items/7")
        .await
        .unwrap();
    assert_eq!(text_of(&item), "test://items/7");
    let blob = runner
        .read_resource("docs", "test://blob/ok")
        .await
        .unwrap();
    assert!(
        matches!(&blob[0], ResourceContents::BlobResourceContents { blob, .. } if blob == "AAEC")
    );
    // The content's own URI, chosen by the server, is cleaned.
    let hostile = runner
        .read_resource("docs", "test://hostile")
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { uri, .. } = &hostile[0] else {
        panic!("{hostile:?}")
    };
    assert!(!uri.chars().any(char::is_control), "{uri:?}");

    let names = runner
        .complete("docs", Reference::for_prompt("greet"), "name", "al")
        .await
        .unwrap();
    assert_eq!(names.values, ["alice", "albert"]);
    // The values already chosen reach the server, which completes by them.
    let chosen = [("greeting".to_owned(), "Hola".to_owned())]
        .into_iter()
        .collect();
    let names = runner
        .complete_in_context("docs", Reference::for_prompt("greet"), "name", "a", chosen)
        .await
        .unwrap();
    assert_eq!(names.values, ["alba", "ana"]);
    let ids = runner
        .complete(
            "docs",
            Reference::for_resource("test://items/{id}"),
            "id",
            "1",
        )
        .await
        .unwrap();
    assert_eq!(ids.values, ["1", "10"]);

    let unknown = runner.read_resource("nope", "test://x").await.unwrap_err();
    assert!(
        matches!(unknown, FeatureError::UnknownServer { .. }),
        "{unknown}"
    );
    let bad = runner
        .read_resource("docs", "test://a\u{7}b")
        .await
        .unwrap_err();
    assert!(matches!(bad, FeatureError::InvalidUri { .. }), "{bad}");
}

#[tokio::test]
async fn a_huge_resource_and_a_blob_that_is_not_base64_are_refused_by_name() {
    let (runner, _) = run(PolicyConfig::default(), None).await;
    let huge = runner
        .read_resource("docs", "test://huge")
        .await
        .unwrap_err();
    assert!(matches!(huge, FeatureError::TooLarge { .. }), "{huge}");
    let text = huge.to_string();
    for part in ["`docs`", "test://huge", &MAX_RESOURCE_BYTES.to_string()] {
        assert!(text.contains(part), "{text} names {part}");
    }
    let bad = runner
        .read_resource("docs", "test://blob/bad")
        .await
        .unwrap_err();
    assert!(matches!(bad, FeatureError::NotBase64 { .. }), "{bad}");
    assert!(bad.to_string().contains("test://blob/bad"), "{bad}");
    // The run goes on.
    assert!(
        runner
            .read_resource("docs", "test://text/hello")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn prompts_are_got_with_arguments_and_missing_ones_are_named_before_sending() {
    let (runner, observations) = run(PolicyConfig::default(), None).await;
    let prompts = runner.list_prompts("docs").await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["greet"],
        "the prompt with a control character is left out"
    );

    let args: BTreeMap<String, String> = [("name".to_owned(), "Ada".to_owned())].into();
    let got = runner.get_prompt("docs", "greet", args).await.unwrap();
    let text = serde_json::to_string(&got.messages).unwrap();
    assert!(text.contains("Hello, Ada!"), "{text}");

    let missing = runner
        .get_prompt("docs", "greet", BTreeMap::new())
        .await
        .unwrap_err();
    match &missing {
        FeatureError::MissingArguments { missing, .. } => assert_eq!(missing, &["name"]),
        other => panic!("{other}"),
    }
    assert!(missing.to_string().contains("name"), "{missing}");
    let unknown = runner
        .get_prompt("docs", "nope", BTreeMap::new())
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, FeatureError::UnknownPrompt { .. }),
        "{unknown}"
    );
    assert_eq!(
        observations.snapshot().requests_of("prompts/get"),
        1,
        "only the complete request was sent"
    );
}

#[tokio::test]
async fn instructions_of_5_mb_are_cut() {
    let long = "i".repeat(5 << 20);
    let (runner, _) = run(PolicyConfig::default(), Some(long)).await;
    let instructions = runner.instructions("docs").unwrap();
    assert!(
        instructions.len() <= MAX_INSTRUCTIONS_BYTES,
        "{}",
        instructions.len()
    );
    assert!(instructions.ends_with('…'));
    assert_eq!(runner.instructions("nope"), None);
}

async fn next_of(events: &mut agent_core::EventReceiver, kind: EventKind) -> Event {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = events.recv().await.expect("the bus is open");
            if event.kind == kind {
                return event;
            }
        }
    })
    .await
    .expect("the event within 10 s")
}

#[tokio::test]
async fn policy_rules_govern_resources_and_prompts_with_events() {
    let rules = IdentityRules::default()
        .allow(Rule::new("acme/*", "*"))
        .allow(Rule::resource("acme/docs", "test://text/*"))
        .allow(Rule::prompt("acme/*", "greet"))
        .deny(Rule::resource("*", "test://text/secret*"));
    let (runner, observations) = run(PolicyConfig::default().with_identity(rules), None).await;
    let mut events = runner.governed().subscribe();

    let uris: Vec<String> = runner
        .list_resources("docs")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert_eq!(
        uris,
        ["test://text/hello"],
        "listings hide what the rules refuse"
    );

    runner
        .read_resource("docs", "test://text/hello")
        .await
        .unwrap();
    let read = next_of(&mut events, EventKind::ResourceRead).await;
    assert_eq!(read.outcome, Some(CallOutcome::Ok));
    assert_eq!(read.target.as_deref(), Some("test://text/hello"));
    assert_eq!(read.server_identity.as_deref(), Some("acme/docs"));
    assert_eq!(read.output_bytes, Some(5));

    let denied = runner
        .read_resource("docs", "test://blob/ok")
        .await
        .unwrap_err();
    assert!(matches!(denied, FeatureError::Denied { .. }), "{denied}");
    assert!(denied.to_string().contains("policy.allow"), "{denied}");
    let event = next_of(&mut events, EventKind::ResourceRead).await;
    assert_eq!(event.outcome, Some(CallOutcome::Denied));
    assert_eq!(event.target.as_deref(), Some("test://blob/ok"));

    let secret = runner
        .read_resource("docs", "test://text/secret.txt")
        .await
        .unwrap_err();
    assert!(secret.to_string().contains("policy.deny[0]"), "{secret}");
    let sub = runner
        .subscribe_resource("docs", "test://blob/ok")
        .await
        .unwrap_err();
    assert!(matches!(sub, FeatureError::Denied { .. }), "{sub}");
    assert_eq!(
        observations.snapshot().requests_of("resources/subscribe"),
        0
    );

    let args: BTreeMap<String, String> = [("name".to_owned(), "Ada".to_owned())].into();
    runner.get_prompt("docs", "greet", args).await.unwrap();
    let got = next_of(&mut events, EventKind::PromptGot).await;
    assert_eq!(got.outcome, Some(CallOutcome::Ok));
    assert_eq!(got.target.as_deref(), Some("greet"));

    // Completions follow the rules of what they complete.
    let refused = runner
        .complete(
            "docs",
            Reference::for_resource("test://items/{id}"),
            "id",
            "1",
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, FeatureError::Denied { .. }), "{refused}");
}

/// The number of notifications an update event stands for (its message starts with it).
fn count_of(event: &Event) -> u64 {
    let message = event.message.as_deref().unwrap_or_default();
    message
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count in {message:?}"))
}

#[tokio::test]
async fn an_update_flood_is_coalesced_into_few_events_and_the_run_keeps_working() {
    let (runner, observations) = run(PolicyConfig::default(), None).await;
    let mut events = runner.governed().subscribe();
    runner
        .subscribe_resource("docs", "test://text/hello")
        .await
        .unwrap();
    assert_eq!(
        observations.snapshot().requests_of("resources/subscribe"),
        1
    );

    let flood = |uri: &str, count: u64| {
        ToolCall::from_json(
            "1",
            "mcp_call_tool",
            json!({"tool_name": "docs__flood_updates", "arguments": {"uri": uri, "count": count}}),
        )
        .unwrap()
    };
    // Updates of a resource the run did not subscribe to are ignored.
    runner.dispatch(flood("test://blob/ok", 500)).await.unwrap();
    const FLOOD: u64 = 5_000;
    runner
        .dispatch(flood("test://text/hello", FLOOD))
        .await
        .unwrap();

    let mut told = 0;
    let mut update_events = 0;
    while told < FLOOD {
        let event = next_of(&mut events, EventKind::ResourceUpdated).await;
        assert_eq!(
            event.target.as_deref(),
            Some("test://text/hello"),
            "{event:?}"
        );
        assert_eq!(event.server.as_deref(), Some("docs"));
        told += count_of(&event);
        update_events += 1;
    }
    assert_eq!(told, FLOOD, "every notification is counted once");
    assert!(
        update_events < FLOOD / 10,
        "{update_events} events for {FLOOD} notifications"
    );

    // The run keeps working.
    let sum = ToolCall::from_json(
        "2",
        "mcp_call_tool",
        json!({"tool_name": "docs__add", "arguments": {"a": 2, "b": 3}}),
    )
    .unwrap();
    assert!(
        runner
            .dispatch(sum)
            .await
            .unwrap()
            .to_model_text()
            .contains('5')
    );

    runner
        .unsubscribe_resource("docs", "test://text/hello")
        .await
        .unwrap();
    assert_eq!(
        observations.snapshot().requests_of("resources/unsubscribe"),
        1
    );
}

#[tokio::test]
async fn a_spec_s_roots_answer_the_server_s_roots_list() {
    let memory = InMemoryConnector::new()
        .server("docs", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default().with_features(true),
            ))
        })
        .server("bare", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default().with_features(true),
            ))
        });
    let mut docs = spec("docs");
    docs.roots = vec!["file:///srv/data".to_owned(), "file:///srv/more".to_owned()];
    let config = Config::new(vec![docs, spec("bare")]).expect("valid specs");
    let runner = McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    let roots = |server: &str| {
        ToolCall::from_json(
            "1",
            "mcp_call_tool",
            json!({"tool_name": format!("{server}__roots"), "arguments": {}}),
        )
        .unwrap()
    };
    let answer = runner
        .dispatch(roots("docs"))
        .await
        .unwrap()
        .to_model_text();
    assert!(
        answer.contains("file:///srv/data") && answer.contains("file:///srv/more"),
        "{answer}"
    );
    let capabilities = runner.sessions()[1].identity().capabilities.clone();
    assert!(
        capabilities.get("roots").is_none(),
        "servers declare no roots"
    );
    // Without roots the client declares none; a server asking anyway gets an empty list.
    let bare = runner.dispatch(roots("bare")).await;
    let text = format!("{bare:?}");
    assert!(!text.contains("file://"), "{text}");
}

#[tokio::test]
async fn reads_and_denials_reach_the_run_s_history() {
    let memory = InMemoryConnector::new().server("docs", || {
        serve_in_memory(TestServer::new(
            TestServerOptions::default()
                .with_name("acme/docs")
                .with_features(true),
        ))
    });
    let policy = PolicyConfig::default()
        .with_identity(IdentityRules::default().deny(Rule::resource("*", "test://blob/*")));
    let config = Config::new(vec![spec("docs")])
        .expect("valid specs")
        .with_policy(policy);
    let root = super::governed::Scratch::new();
    let runner = McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
        .open_runner_with_history(&RunInput::new("s", "i"), root.path())
        .await
        .expect("the run opens");
    runner
        .read_resource("docs", "test://text/hello")
        .await
        .unwrap();
    runner
        .read_resource("docs", "test://blob/ok")
        .await
        .unwrap_err();
    runner.shutdown().await.unwrap();
    let events = std::fs::read_to_string(root.path().join("events.jsonl")).unwrap();
    let reads: Vec<(String, String)> = events
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|e| e["kind"] == "resource_read")
        .map(|e| {
            (
                e["target"].as_str().unwrap_or_default().to_owned(),
                e["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        reads,
        [
            ("test://text/hello".to_owned(), "ok".to_owned()),
            ("test://blob/ok".to_owned(), "denied".to_owned())
        ],
        "{events}"
    );
}

#[tokio::test]
async fn a_second_subscription_to_a_uri_sends_nothing_and_keeps_the_first() {
    let (runner, observations) = run(PolicyConfig::default(), None).await;
    for _ in 0..2 {
        runner
            .subscribe_resource("docs", "test://text/hello")
            .await
            .unwrap();
    }
    assert_eq!(
        observations.snapshot().requests_of("resources/subscribe"),
        1
    );
    runner
        .unsubscribe_resource("docs", "test://text/hello")
        .await
        .unwrap();
    assert_eq!(
        observations.snapshot().requests_of("resources/unsubscribe"),
        1
    );
}

#[tokio::test]
async fn a_shared_session_is_unsubscribed_when_the_last_run_holding_a_uri_closes() {
    let observations = Observations::new();
    let seen = observations.clone();
    let memory = InMemoryConnector::new().server("docs", move || {
        serve_in_memory(TestServer::new(
            TestServerOptions::default()
                .with_features(true)
                .with_observations(seen.clone()),
        ))
    });
    let mut shared = spec("docs");
    shared.shared = true;
    let client = McpClient::builder(Config::new(vec![shared]).expect("valid specs"))
        .connectors(Connectors::new().with(memory))
        .build();
    let first = client.open_runner(&RunInput::new("s", "1")).await.unwrap();
    let second = client.open_runner(&RunInput::new("s", "2")).await.unwrap();
    first
        .subscribe_resource("docs", "test://text/hello")
        .await
        .unwrap();
    second
        .subscribe_resource("docs", "test://text/hello")
        .await
        .unwrap();
    second
        .subscribe_resource("docs", "test://blob/ok")
        .await
        .unwrap();

    // The second run still holds `hello`: closing the first tells the server nothing.
    first.shutdown().await.unwrap();
    assert_eq!(
        observations.snapshot().requests_of("resources/unsubscribe"),
        0
    );
    // The last run holding them closes: the session stays open in the pool, so the server
    // is told of both.
    second.shutdown().await.unwrap();
    assert_eq!(
        observations.snapshot().requests_of("resources/unsubscribe"),
        2
    );
}
