//! What the model sees of a run's servers beyond tools, with the test kit's server offering
//! resources and prompts (in memory): `mcp_search_tools` finds them with their kind, `mcp_read`
//! reads them through the governed layer (a `[policy]` denial names the rule, events name what
//! was read), a resource link says how to follow it, and the run's system prompt carries each
//! server's instructions, bounded and scrubbed.

use agent_core::{EventKind, IdentityRules, Rule, RunInput, ToolCall, ToolCatalog, ToolDispatcher};
use mcp_client::{MAX_SERVER_INSTRUCTIONS_BYTES, McpClient, McpRunner};
use mcp_config::{Config, PolicyConfig};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use serde_json::{Value, json};

/// A run of `docs` (identity `acme/docs`, resources and prompts) and `plain` (tools only),
/// under `policy`; `docs` gives `instructions` when set and is configured with
/// `instructions = show`.
async fn run(policy: PolicyConfig, instructions: Option<String>, show: bool) -> McpRunner {
    let memory = InMemoryConnector::new()
        .server("docs", move || {
            let mut options = TestServerOptions::default()
                .with_name("acme/docs")
                .with_features(true);
            if let Some(text) = &instructions {
                options = options.with_instructions(text.clone());
            }
            serve_in_memory(TestServer::new(options))
        })
        .server("plain", || {
            serve_in_memory(TestServer::new(
                TestServerOptions::default().with_name("acme/plain"),
            ))
        });
    let mut docs = spec("docs");
    docs.instructions = show;
    let config = Config::new(vec![docs, spec("plain")])
        .expect("valid specs")
        .with_policy(policy);
    McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens")
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args.as_object().unwrap().clone())
}

async fn search(runner: &McpRunner, query: &str) -> Value {
    let out = runner
        .dispatch(call(
            "s",
            "mcp_search_tools",
            json!({"query": query, "limit": 50}),
        ))
        .await
        .unwrap();
    out.structured.unwrap()
}

#[tokio::test]
async fn resources_templates_and_prompts_are_searched_with_the_tools_and_read() {
    let runner = run(PolicyConfig::default(), None, true).await;
    let names: Vec<String> = runner.tools().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"mcp_read".to_owned()), "{names:?}");

    let found = search(&runner, "greet someone").await;
    assert_eq!(found["tools"][0]["kind"], "prompt", "{found}");
    assert_eq!(
        found["tools"][0]["read_with"],
        json!({"server": "docs", "prompt": "greet"})
    );
    let found = search(&runner, "hello").await;
    assert_eq!(found["tools"][0]["kind"], "resource", "{found}");
    assert_eq!(found["tools"][0]["uri"], "test://text/hello");
    let found = search(&runner, "item").await;
    assert!(
        found["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["kind"] == "resource_template" && t["uri"] == "test://items/{id}"),
        "{found}"
    );
    // Nothing hostile is shown: no control character in any result.
    let all = search(&runner, "").await.to_string();
    assert!(
        !all.contains("\\u001b") && !all.contains("bad\\u0007uri"),
        "{all}"
    );

    let hello = runner
        .dispatch(call(
            "1",
            "mcp_read",
            json!({"server": "docs", "uri": "test://text/hello"}),
        ))
        .await
        .unwrap();
    assert_eq!(
        hello.to_model_text(),
        "[test://text/hello (text/plain)]\nhello"
    );
    let item = runner
        .dispatch(call(
            "2",
            "mcp_read",
            json!({"server": "docs", "uri": "test://items/7"}),
        ))
        .await
        .unwrap();
    assert!(item.to_model_text().ends_with("test://items/7"));
    let greet = runner
        .dispatch(call(
            "3",
            "mcp_read",
            json!({"server": "docs", "prompt": "greet", "arguments": {"name": "Ada"}}),
        ))
        .await
        .unwrap();
    assert_eq!(greet.to_model_text(), "[user] Hello, Ada!");

    // Errors name the server, what was read and the limit.
    let err = runner
        .dispatch(call(
            "4",
            "mcp_read",
            json!({"server": "docs", "prompt": "greet"}),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("docs") && err.contains("greet") && err.contains("name"),
        "{err}"
    );
    let err = runner
        .dispatch(call(
            "5",
            "mcp_read",
            json!({"server": "docs", "uri": "test://huge"}),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("test://huge") && err.contains(&mcp_client::MAX_RESOURCE_BYTES.to_string()),
        "{err}"
    );
    // A server that declared no resources offers none.
    let err = runner
        .dispatch(call(
            "6",
            "mcp_read",
            json!({"server": "plain", "uri": "test://text/hello"}),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("server `plain` offers no resources"), "{err}");
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_read_the_policy_refuses_is_denied_naming_the_rule_and_evented() {
    let policy = PolicyConfig::default()
        .with_identity(IdentityRules::default().deny(Rule::resource("acme/*", "test://text/*")));
    let runner = run(policy, None, true).await;
    let mut events = runner.governed().subscribe();
    // Hidden from search…
    let found = search(&runner, "hello").await.to_string();
    assert!(!found.contains("test://text/hello"), "{found}");
    // …and denied when read, naming the rule and the URI.
    let err = runner
        .dispatch(call(
            "1",
            "mcp_read",
            json!({"server": "docs", "uri": "test://text/hello"}),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, agent_core::ToolError::Denied { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("policy.deny[0]") && text.contains("test://text/hello"),
        "{text}"
    );
    let ok = runner
        .dispatch(call(
            "2",
            "mcp_read",
            json!({"server": "docs", "uri": "test://blob/ok"}),
        ))
        .await;
    assert!(ok.is_ok(), "{ok:?}");

    let mut seen = Vec::new();
    while let Ok(Some(event)) = events.try_recv() {
        seen.push(event);
    }
    let denied: Vec<_> = seen
        .iter()
        .filter(|e| e.kind == EventKind::ToolCallDenied)
        .collect();
    assert_eq!(denied.len(), 1, "{seen:?}");
    assert_eq!(denied[0].tool.as_deref(), Some("mcp_read"));
    assert_eq!(denied[0].server.as_deref(), Some("docs"));
    assert_eq!(denied[0].server_identity.as_deref(), Some("acme/docs"));
    assert_eq!(denied[0].target.as_deref(), Some("test://text/hello"));
    let finished: Vec<_> = seen
        .iter()
        .filter(|e| e.kind == EventKind::ToolCallFinished && e.tool.as_deref() == Some("mcp_read"))
        .collect();
    assert_eq!(finished.len(), 1, "{seen:?}");
    assert_eq!(finished[0].target.as_deref(), Some("test://blob/ok"));
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_resource_link_in_a_tool_result_names_the_server_and_uri_to_read() {
    let runner = run(PolicyConfig::default(), None, true).await;
    let out = runner
        .dispatch(call(
            "1",
            "mcp_call_tool",
            json!({"tool_name": "docs__content", "arguments": {}}),
        ))
        .await
        .unwrap()
        .to_model_text();
    assert!(
        out.contains(r#"read with mcp_read {"server":"docs","uri":"test://resources/linked.txt"}"#),
        "{out}"
    );
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn instructions_reach_the_system_prompt_bounded_scrubbed_and_attributed() {
    // 5 MB of instructions, with control characters.
    let mut huge = String::from("Use the docs server.\u{1b}[2J\n");
    huge.push_str(&"y".repeat(5 * 1024 * 1024));
    let runner = run(PolicyConfig::default(), Some(huge.clone()), true).await;
    let addendum = runner.system_prompt_addendum().expect("an addendum");
    assert!(addendum.contains("MCP server `docs`"), "{addendum}");
    assert!(addendum.contains("Use the docs server."), "{addendum}");
    assert!(!addendum.contains('\u{1b}'));
    assert!(
        addendum.len() <= MAX_SERVER_INSTRUCTIONS_BYTES + 4096,
        "{} bytes",
        addendum.len()
    );
    assert!(addendum.contains('…'), "cut");
    // The tools-only server's own instructions are there too, attributed to it.
    assert!(addendum.contains("MCP server `plain`"), "{addendum}");
    runner.shutdown().await.unwrap();

    // `instructions = false` leaves a server's out.
    let runner = run(PolicyConfig::default(), Some("Secret sauce.".into()), false).await;
    let addendum = runner.system_prompt_addendum().unwrap_or_default();
    assert!(!addendum.contains("Secret sauce."), "{addendum}");
    assert!(!addendum.contains("`docs`"), "{addendum}");
    runner.shutdown().await.unwrap();
}
