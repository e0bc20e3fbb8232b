//! The client's governed layer with in-memory servers: the configuration's `[policy]` and
//! `govern` set its rules (and the catalog hides what they refuse), native tools join the same
//! layer, and histories go under the history root, one directory per run id.

use std::sync::Arc;

use agent_core::{
    EventKind, IdentityRules, Rule, RunInput, Runner, ToolCall, ToolCatalog, ToolDescriptor,
    ToolDispatcher, ToolError, ToolOutput,
};
use mcp_client::{ClientError, McpClient, McpClientBuilder};
use mcp_config::{Config, PolicyConfig};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use serde_json::json;

/// Servers `a` (identity `acme/a`) and `b` (identity `other/b`) under `policy`.
fn builder(policy: PolicyConfig) -> McpClientBuilder {
    let memory = InMemoryConnector::new()
        .server("a", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default().with_name("acme/a"),
            ))
        })
        .server("b", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default().with_name("other/b"),
            ))
        });
    let config = Config::new(vec![spec("a"), spec("b")])
        .expect("valid specs")
        .with_policy(policy);
    McpClient::builder(config).connectors(Connectors::new().with(memory))
}

fn input() -> RunInput {
    RunInput::new("s", "i")
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::from_json("1", name, args).unwrap()
}

fn shown(runner: &mcp_client::McpRunner) -> Vec<String> {
    runner
        .catalog()
        .search(&mcp_catalog::SearchRequest::new("").with_limit(50))
        .unwrap()
        .tools
        .iter()
        .map(|t| t.model_name().to_owned())
        .collect()
}

#[tokio::test]
async fn the_configured_policy_hides_and_denies_by_server_identity() {
    let policy = PolicyConfig::default()
        .with_identity(IdentityRules::default().allow(Rule::new("acme/*", "*")));
    let runner = builder(policy).build().open_runner(&input()).await.unwrap();
    let names = shown(&runner);
    assert!(names.iter().all(|n| n.starts_with("a__")), "{names:?}");
    assert!(names.contains(&"a__echo".to_owned()));

    let err = runner
        .dispatch(call(
            "mcp_call_tool",
            json!({"tool_name": "b__echo", "arguments": {}}),
        ))
        .await
        .unwrap_err();
    let ToolError::Denied { tool, reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(tool, "b__echo");
    assert!(
        reason.contains("`policy.allow`") && reason.contains("other/b"),
        "{reason}"
    );
    runner.close().await;
}

#[tokio::test]
async fn rules_set_through_govern_also_hide_tools() {
    let runner = builder(PolicyConfig::default())
        .govern(|layer| {
            layer.identity_rules(IdentityRules::default().deny(Rule::new("other/*", "*")))
        })
        .build()
        .open_runner(&input())
        .await
        .unwrap();
    let names = shown(&runner);
    assert!(!names.iter().any(|n| n.starts_with("b__")), "{names:?}");
    assert!(names.contains(&"a__add".to_owned()), "{names:?}");
    runner.close().await;
}

/// A native tool that says hello.
struct Hello;

#[async_trait::async_trait]
impl ToolDispatcher for Hello {
    async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("hello"))
    }
}

#[tokio::test]
async fn native_tools_share_the_surface_and_the_layer_and_colliding_names_fail_the_open() {
    let events = Arc::new(Collect::default());
    let runner = builder(PolicyConfig::default())
        .native_tools(
            vec![ToolDescriptor::new("hello", Default::default())],
            Arc::new(Hello),
        )
        .events(events.clone())
        .build()
        .open_runner(&input())
        .await
        .unwrap();
    assert_eq!(runner.tools()[0].name, "hello");
    let out = runner.dispatch(call("hello", json!({}))).await.unwrap();
    assert_eq!(out.to_model_text(), "hello");
    let kinds: Vec<_> = events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.tool.as_deref() == Some("hello"))
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [EventKind::ToolCallStarted, EventKind::ToolCallFinished]
    );
    runner.close().await;

    let twice = vec![
        ToolDescriptor::new("mcp_call_tool", Default::default()),
        ToolDescriptor::new("hello", Default::default()),
    ];
    let err = builder(PolicyConfig::default())
        .native_tools(twice, Arc::new(Hello))
        .build()
        .open_runner(&input())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::NativeTools(_)), "{err:?}");
    assert!(
        agent_core::error_chain(&err).contains("mcp_call_tool"),
        "{err}"
    );
}

#[tokio::test]
async fn each_run_records_under_the_history_root_in_a_directory_of_its_id() {
    let root = Scratch::new();
    let client = builder(PolicyConfig::default())
        .history_root(root.path())
        .build();
    for id in ["plain-id.1", "a/b", "a_b", "..", ""] {
        let runner = client.open_runner(&RunInput::new(id, "i")).await.unwrap();
        runner.shutdown().await.unwrap();
    }
    let mut dirs: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs.len(),
        5,
        "every id has a directory of its own: {dirs:?}"
    );
    assert!(dirs.contains(&"plain-id.1".to_owned()), "{dirs:?}");
    assert!(dirs.contains(&"a_b".to_owned()), "{dirs:?}");
    for dir in &dirs {
        assert!(
            !dir.is_empty() && dir != ".." && !dir.contains('/'),
            "{dir}"
        );
        assert!(
            root.path().join(dir).join("events.jsonl").is_file(),
            "{dir}"
        );
    }
}

/// Collects events.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<agent_core::Event>>);

impl agent_core::EventSink for Collect {
    fn emit(&self, event: agent_core::Event) {
        self.0.lock().unwrap().push(event);
    }
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub(super) struct Scratch(std::path::PathBuf);

impl Scratch {
    pub(super) fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "mcp-client-history-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub(super) fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn rules_naming_a_principal_apply_to_its_runs_alone_and_its_history_is_kept_apart() {
    let root = Scratch::new();
    let policy = PolicyConfig::default()
        .with_identity(IdentityRules::default().deny(Rule::new("other/*", "*").for_subject("bob")));
    let client = builder(policy).history_root(root.path()).build();
    let run = input();
    let open = |principal: Option<&str>| {
        let mut options = mcp_client::OpenOptions::new();
        if let Some(subject) = principal {
            options = options.with_principal(agent_core::Principal::new(subject));
        }
        client.open_runner_with(&run, options)
    };
    let echo = || call("b__echo", json!({"text": "hi"}));
    for (principal, sees_b) in [(Some("alice"), true), (Some("bob"), false), (None, true)] {
        let runner = open(principal).await.unwrap();
        let on_b = shown(&runner).iter().any(|t| t.starts_with("b__"));
        assert_eq!(on_b, sees_b, "{principal:?}: {:?}", shown(&runner));
        let called = runner.dispatch(echo()).await;
        assert_eq!(called.is_ok(), sees_b, "{principal:?}: {called:?}");
        runner.shutdown().await.unwrap();
    }
    // Each principal's runs under a directory of its own, each event saying whom it was for.
    for (dir, subject) in [
        ("principal-alice/s", Some("alice")),
        ("principal-bob/s", Some("bob")),
        ("s", None),
    ] {
        let events = std::fs::read_to_string(root.path().join(dir).join("events.jsonl")).unwrap();
        assert!(!events.is_empty(), "{dir}");
        for line in events.lines() {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(event["principal"].as_str(), subject, "{dir}: {line}");
        }
    }
}
