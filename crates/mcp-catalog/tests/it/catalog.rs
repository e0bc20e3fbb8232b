//! The catalog end to end, over in-memory fake servers.

use std::sync::Arc;

use agent_core::{
    CallKind, CallResolver, ContentPart, IdentityRules, JsonObject, ResourceContents, Rule,
    ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use mcp_catalog::testing::{Behavior, FakeServer, tool};
use mcp_catalog::{
    CallTarget, Catalog, CatalogConfig, CatalogError, Exposure, SearchRequest, ServerTools,
};
use serde_json::{Value, json};

fn obj(v: Value) -> JsonObject {
    v.as_object().expect("an object").clone()
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall::new("call-1", name, obj(args))
}

fn everything() -> (Arc<FakeServer>, Catalog) {
    let fake = Arc::new(FakeServer::everything());
    let catalog = Catalog::new(CatalogConfig::default());
    catalog
        .add_server(fake.clone().into_server("demo"))
        .unwrap();
    (fake, catalog)
}

/// A server with `n` tools named `tool_000`… about numbered widget reports.
fn numbered(n: usize) -> Arc<FakeServer> {
    let mut fake = FakeServer::new();
    for i in 0..n {
        fake = fake.with_tool(
            tool(
                &format!("tool_{i:03}"),
                &format!("Report number {i} about widgets"),
                json!({"type": "object"}),
            ),
            Behavior::Echo,
        );
    }
    Arc::new(fake)
}

/// Runs a call through the catalog's side of the governed layer (no rules, with the test-only
/// permit): resolve, then dispatch what it resolved with the resolved call's arguments, as
/// the layer's innermost service does.
async fn run(catalog: &Catalog, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
    let mut call = call(name, args);
    let (resolved, target) = CallResolver::resolve(catalog, &mut call)?;
    call.arguments = resolved.arguments;
    catalog
        .dispatch_resolved(agent_core::testing::ungoverned_permit(), call, target)
        .await
}

async fn search(catalog: &Catalog, args: Value) -> Value {
    run(catalog, "mcp_search_tools", args)
        .await
        .expect("search succeeds")
        .structured
        .expect("structured output")
}

fn names(found: &Value) -> Vec<String> {
    found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn shown(catalog: &Catalog) -> Vec<String> {
    catalog.tools().into_iter().map(|t| t.name).collect()
}

#[tokio::test]
async fn search_output_has_the_specified_shape() {
    let (_, catalog) = everything();
    let found = search(&catalog, json!({"query": "echo text back"})).await;
    let keys: Vec<&String> = found.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tools", "count", "total"]);
    let first = &found["tools"][0];
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["name", "description", "input_schema", "kind"]);
    assert_eq!(first["name"], "demo__echo");
    assert_eq!(first["description"], "Echo the input text back unchanged");
    assert_eq!(first["input_schema"]["required"], json!(["text"]));
    assert_eq!(found["count"], found["tools"].as_array().unwrap().len());
}

#[tokio::test]
async fn limit_defaults_to_10_and_is_capped_at_50() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.add_server(numbered(80).into_server("w")).unwrap();
    for (args, count) in [
        (json!({"query": "widgets report"}), 10),
        (json!({"query": "widgets report", "limit": 3}), 3),
        (json!({"query": "widgets report", "limit": 500}), 50),
        (json!({"query": "widgets report", "limit": 0}), 1),
        (json!({"query": ""}), 10),
    ] {
        let found = search(&catalog, args.clone()).await;
        assert_eq!(found["count"], count, "{args}");
        assert_eq!(
            found["total"], 80,
            "{args}: total counts matches before the limit"
        );
    }
}

#[tokio::test]
async fn empty_query_lists_every_tool_in_a_stable_order() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.add_server(numbered(12).into_server("w")).unwrap();
    let found = search(&catalog, json!({"query": "  ", "limit": 50})).await;
    let expected: Vec<String> = (0..12).map(|i| format!("w__tool_{i:03}")).collect();
    assert_eq!(names(&found), expected);
    assert_eq!(found["total"], 12);
}

#[tokio::test]
async fn multi_word_queries_rank_in_any_order() {
    let fake = Arc::new(
        FakeServer::new()
            .with_tool(
                tool(
                    "create_issue",
                    "Create a new issue in a GitHub repository",
                    json!({"type": "object", "properties": {"title": {"type": "string"}}}),
                ),
                Behavior::Echo,
            )
            .with_tool(
                tool(
                    "list_repos",
                    "List repositories of a user",
                    json!({"type": "object"}),
                ),
                Behavior::Echo,
            )
            .with_tool(
                tool(
                    "search_code",
                    "Search code across GitHub",
                    json!({"type": "object"}),
                ),
                Behavior::Echo,
            ),
    );
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.add_server(fake.into_server("github")).unwrap();
    for query in ["issue github", "github issue", "create an issue", "issues"] {
        let found = search(&catalog, json!({"query": query})).await;
        assert_eq!(names(&found)[0], "github__create_issue", "{query}");
    }
}

#[tokio::test]
async fn select_fetches_tools_by_name_in_the_order_given() {
    let (_, catalog) = everything();
    let found = search(
        &catalog,
        json!({"query": "select:demo__image, demo__echo,demo__nope,echo"}),
    )
    .await;
    assert_eq!(names(&found), ["demo__image", "demo__echo"]);
    assert_eq!(found["total"], 2);
    assert_eq!(found["not_found"], json!(["demo__nope"]));
}

#[tokio::test]
async fn server_filter_keeps_one_server_and_rejects_unknown_ones() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog
        .add_server(Arc::new(FakeServer::everything()).into_server("alpha"))
        .unwrap();
    catalog
        .add_server(Arc::new(FakeServer::everything()).into_server("beta"))
        .unwrap();
    let found = search(&catalog, json!({"query": "echo", "server": "beta"})).await;
    assert!(names(&found).iter().all(|n| n.starts_with("beta__")));
    assert_eq!(names(&found)[0], "beta__echo");
    let err = run(
        &catalog,
        "mcp_search_tools",
        json!({"query": "x", "server": "gamma"}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid arguments for tool `mcp_search_tools`: unknown server `gamma`; the servers are: alpha, beta"
    );
}

#[test]
fn ties_do_not_depend_on_the_order_servers_were_added() {
    let order = |keys: &[&str]| {
        let catalog = Catalog::new(CatalogConfig::default());
        for key in keys {
            catalog
                .add_server(Arc::new(FakeServer::everything()).into_server(key))
                .unwrap();
        }
        let found = catalog
            .search(&SearchRequest::new("echo text").with_limit(50))
            .unwrap();
        found.tools.iter().map(|t| t.id.clone()).collect::<Vec<_>>()
    };
    let forward = order(&["a", "b", "c"]);
    assert_eq!(forward, order(&["c", "a", "b"]));
    assert_eq!(&forward[..3], ["a__echo", "b__echo", "c__echo"]);
}

#[tokio::test]
async fn call_tool_forwards_the_argument_object_unchanged() {
    let (fake, catalog) = everything();
    let args = json!({"text": "hi", "args": [1, 2], "kwargs": {"z": 1, "a": 2}, "tool_name": "x"});
    let out = run(
        &catalog,
        "mcp_call_tool",
        json!({"tool_name": "demo__echo", "arguments": args}),
    )
    .await
    .unwrap();
    assert_eq!(out.structured, Some(args.clone()));
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "echo");
    // Same keys, in the same order, with the same values.
    assert_eq!(
        serde_json::to_string(&calls[0].1).unwrap(),
        serde_json::to_string(&args).unwrap()
    );
}

#[tokio::test]
async fn arguments_given_as_a_json_string_are_accepted() {
    let (fake, catalog) = everything();
    run(
        &catalog,
        "mcp_call_tool",
        json!({"tool_name": "demo__echo", "arguments": "{\"text\": \"hi\"}"}),
    )
    .await
    .unwrap();
    assert_eq!(fake.calls()[0].1, obj(json!({"text": "hi"})));
}

#[tokio::test]
async fn invalid_arguments_are_refused_before_sending_with_the_field_and_why() {
    let (fake, catalog) = everything();
    for (args, expected) in [
        (
            json!({}),
            "invalid arguments for tool `demo__echo` on server `demo`: `(root)`: \"text\" is a required property",
        ),
        (
            json!({"text": 5}),
            "invalid arguments for tool `demo__echo` on server `demo`: `/text`: 5 is not of type \"string\"",
        ),
    ] {
        let err = run(
            &catalog,
            "mcp_call_tool",
            json!({"tool_name": "demo__echo", "arguments": args}),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
        assert_eq!(err.to_string(), expected);
    }
    assert!(fake.calls().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn malformed_call_tool_input_is_explained() {
    let (_, catalog) = everything();
    for (input, expected) in [
        (json!({}), "`(root)`: \"tool_name\" is a required property"),
        (json!({"tool_name": 3}), "`/tool_name`: 3 is not a string"),
        (
            json!({"tool_name": "demo__echo", "arguments": [1]}),
            "`/arguments`: [1] is not an object of the tool's arguments",
        ),
    ] {
        let err = run(&catalog, "mcp_call_tool", input.clone())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("invalid arguments for tool `mcp_call_tool`: {expected}"),
            "{input}"
        );
    }
}

#[tokio::test]
async fn unknown_tools_get_up_to_three_close_matches() {
    let (_, catalog) = everything();
    let err = run(
        &catalog,
        "mcp_call_tool",
        json!({"tool_name": "demo__ecko", "arguments": {}}),
    )
    .await
    .unwrap_err();
    match &err {
        ToolError::UnknownTool { tool, suggestions } => {
            assert_eq!(tool, "demo__ecko");
            assert_eq!(suggestions.first().map(String::as_str), Some("demo__echo"));
            assert!(suggestions.len() <= 3);
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = run(&catalog, "demo__resorce_link", json!({}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("did you mean `demo__resource_link`"),
        "{err}"
    );
}

async fn call_demo(catalog: &Catalog, name: &str) -> Result<ToolOutput, ToolError> {
    run(
        catalog,
        "mcp_call_tool",
        json!({"tool_name": name, "arguments": {}}),
    )
    .await
}

#[tokio::test]
async fn every_result_kind_is_normalised() {
    let (_, catalog) = everything();
    let image = call_demo(&catalog, "demo__image").await.unwrap();
    assert_eq!(
        image.content,
        [ContentPart::Image {
            data: "iVBORw0KGgo=".into(),
            mime_type: "image/png".into()
        }]
    );
    assert!(matches!(
        &call_demo(&catalog, "demo__audio").await.unwrap().content[..],
        [ContentPart::Audio { mime_type, .. }] if mime_type == "audio/wav"
    ));
    assert!(matches!(
        &call_demo(&catalog, "demo__resource").await.unwrap().content[..],
        [ContentPart::Resource { resource: ResourceContents::Text { text, .. } }] if text == "file contents"
    ));
    assert!(matches!(
        &call_demo(&catalog, "demo__resource_link").await.unwrap().content[..],
        [ContentPart::ResourceLink { uri, name, .. }]
            if uri == "file:///tmp/report.txt" && name == "report.txt"
    ));
    let structured = call_demo(&catalog, "demo__structured").await.unwrap();
    assert_eq!(structured.structured, Some(json!({"temp": 21})));
    assert_eq!(structured.to_model_text(), r#"{"temp":21}"#);
    let mixed = call_demo(&catalog, "demo__mixed").await.unwrap();
    assert_eq!(mixed.content.len(), 3);
    assert!(mixed.to_model_text().starts_with("see attached\n"));
}

#[tokio::test]
async fn failures_carry_the_servers_text_and_names() {
    let (_, catalog) = everything();
    let e = call_demo(&catalog, "demo__fail").await.unwrap_err();
    assert!(matches!(e, ToolError::Invocation { .. }));
    assert_eq!(
        e.to_string(),
        "tool `demo__fail` on server `demo` failed: something went wrong"
    );
    let e = call_demo(&catalog, "demo__rpc_error").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "tool `demo__rpc_error` on server `demo` failed: internal error (JSON-RPC error -32603)"
    );
    let e = call_demo(&catalog, "demo__timeout").await.unwrap_err();
    assert!(matches!(e, ToolError::Timeout { .. }));
    assert_eq!(
        e.to_string(),
        "tool `demo__timeout` on server `demo` timed out after 1.0 s"
    );
    let e = call_demo(&catalog, "demo__closed").await.unwrap_err();
    assert!(matches!(e, ToolError::Transport { .. }));
    assert_eq!(e.server(), Some("demo"));
    let source = std::error::Error::source(&e).expect("a cause");
    assert_eq!(source.to_string(), "the session is closed");
}

#[test]
fn names_are_sanitised_and_collisions_name_both_tools() {
    let catalog = Catalog::new(CatalogConfig::default());
    let fake = Arc::new(
        FakeServer::new()
            .with_tool(
                tool("math.factorial", "Factorial", json!({"type": "object"})),
                Behavior::Echo,
            )
            .with_tool(
                tool("날씨 조회", "Weather lookup", json!({"type": "object"})),
                Behavior::Echo,
            )
            .with_tool(
                tool(&"long_name_".repeat(10), "Long", json!({"type": "object"})),
                Behavior::Echo,
            ),
    );
    catalog.add_server(fake.into_server("s")).unwrap();
    let mut listed: Vec<String> = catalog
        .search(&SearchRequest::new("").with_limit(50))
        .unwrap()
        .tools
        .iter()
        .map(|t| t.model_name().to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed.len(), 3);
    for name in &listed {
        assert!(name.len() <= 64, "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name}"
        );
    }
    assert!(listed.contains(&"s__math-factorial".to_owned()));
    // The external name stays as the server spells it, and both names find the tool.
    let t = catalog.lookup("s__math-factorial").unwrap();
    assert_eq!(t.id, "s__math.factorial");
    assert_eq!(t.remote_name, "math.factorial");
    assert_eq!(catalog.lookup("s__math.factorial").unwrap().id, t.id);
    // A unicode tool is found by its words and called by its model-facing name.
    let found = catalog.search(&SearchRequest::new("날씨")).unwrap();
    assert_eq!(found.tools[0].remote_name, "날씨 조회");

    // `a.b` and `a-b` would both be shown as `s2__a-b`.
    let clash = Arc::new(
        FakeServer::new()
            .with_tool(tool("a.b", "", json!({"type": "object"})), Behavior::Echo)
            .with_tool(tool("a-b", "", json!({"type": "object"})), Behavior::Echo),
    );
    assert_eq!(
        catalog.add_server(clash.into_server("s2")).unwrap_err(),
        CatalogError::NameCollision {
            name: "s2__a-b".into(),
            existing: "s2__a.b".into(),
            incoming: "s2__a-b".into(),
        }
    );
    assert_eq!(catalog.servers(), ["s"], "a failed add changes nothing");

    // Across servers: server `x.y` tool `z` and server `x-y` tool `z`.
    let one = Arc::new(FakeServer::new().with_tool(tool("z", "", json!({})), Behavior::Echo));
    let two = Arc::new(FakeServer::new().with_tool(tool("z", "", json!({})), Behavior::Echo));
    catalog.add_server(one.into_server("x.y")).unwrap();
    let err = catalog.add_server(two.into_server("x-y")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool `x-y__z` would be shown to the model as `x-y__z`, which tool `x.y__z` already has"
    );

    // A tool listed twice is left out, not the server (see `hostile.rs`).
    let twice = Arc::new(
        FakeServer::new()
            .with_tool(tool("t", "", json!({})), Behavior::Echo)
            .with_tool(tool("t", "", json!({})), Behavior::Echo),
    );
    catalog.add_server(twice.into_server("d")).unwrap();
    assert_eq!(catalog.skipped_tools("d").len(), 1);
}

struct Natives;

#[async_trait]
impl ToolDispatcher for Natives {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("native {}", call.name)))
    }
}

#[tokio::test]
async fn native_tools_are_shown_run_and_protected_from_collisions() {
    let natives = vec![
        ToolDescriptor::new("calculator", JsonObject::new()),
        ToolDescriptor::new("demo__echo", JsonObject::new()),
    ];
    let catalog =
        Catalog::with_native_tools(CatalogConfig::default(), natives, Arc::new(Natives)).unwrap();
    assert_eq!(
        shown(&catalog),
        [
            "calculator",
            "demo__echo",
            "mcp_search_tools",
            "mcp_call_tool"
        ]
    );
    let out = run(&catalog, "calculator", json!({})).await.unwrap();
    assert_eq!(out.to_model_text(), "native calculator");
    let err = catalog
        .add_server(Arc::new(FakeServer::everything()).into_server("demo"))
        .unwrap_err();
    assert_eq!(
        err,
        CatalogError::NameCollision {
            name: "demo__echo".into(),
            existing: "native tool `demo__echo`".into(),
            incoming: "demo__echo".into(),
        }
    );
    assert!(
        Catalog::with_native_tools(
            CatalogConfig::default(),
            vec![ToolDescriptor::new("mcp_call_tool", JsonObject::new())],
            Arc::new(Natives)
        )
        .is_err()
    );
}

#[test]
fn lazy_is_the_default_and_eager_keeps_schemas_byte_for_byte() {
    let raw = r#"{"type":"object","required":["zeta","alpha"],"properties":{"zeta":{"type":"string","description":"last first"},"alpha":{"type":"integer","minimum":1000}},"additionalProperties":false}"#;
    let listed: rmcp::model::Tool = serde_json::from_value(json!({
        "name": "ordered",
        "description": "A tool with an unusual key order",
        "inputSchema": serde_json::from_str::<Value>(raw).unwrap(),
    }))
    .unwrap();
    let fake = Arc::new(FakeServer::new().with_tool(listed, Behavior::Echo));

    let lazy = Catalog::new(CatalogConfig::default());
    lazy.add_server(fake.clone().into_server("s")).unwrap();
    assert_eq!(shown(&lazy), ["mcp_search_tools", "mcp_call_tool"]);

    let eager = Catalog::new(CatalogConfig::default().with_exposure(Exposure::Eager));
    eager.add_server(fake.into_server("s")).unwrap();
    let tools = eager.tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "s__ordered");
    assert_eq!(serde_json::to_string(&tools[0].input_schema).unwrap(), raw);
}

#[test]
fn auto_is_eager_below_the_thresholds_and_lazy_above() {
    let small = Exposure::Auto {
        max_tools: 5,
        max_schema_bytes: 10_000,
    };
    let catalog = Catalog::new(CatalogConfig::default().with_exposure(small));
    catalog.add_server(numbered(5).into_server("a")).unwrap();
    assert!(catalog.is_eager());
    assert_eq!(catalog.tools().len(), 5);
    catalog.add_server(numbered(1).into_server("b")).unwrap();
    assert!(!catalog.is_eager(), "6 tools > 5");
    assert_eq!(catalog.tools().len(), 2);

    let tiny_bytes = Exposure::Auto {
        max_tools: 100,
        max_schema_bytes: 20,
    };
    let catalog = Catalog::new(CatalogConfig::default().with_exposure(tiny_bytes));
    catalog.add_server(numbered(2).into_server("a")).unwrap();
    assert!(!catalog.is_eager(), "two schemas of 17 bytes > 20");
}

#[tokio::test]
async fn pinned_tools_are_always_shown_and_callable() {
    let config = CatalogConfig::default().with_pinned(["demo__echo", "absent__x"]);
    let catalog = Catalog::new(config);
    catalog
        .add_server(Arc::new(FakeServer::everything()).into_server("demo"))
        .unwrap();
    assert_eq!(
        shown(&catalog),
        ["mcp_search_tools", "mcp_call_tool", "demo__echo"]
    );
    let out = run(&catalog, "demo__echo", json!({"text": "direct"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"text": "direct"})));
}

#[tokio::test]
async fn a_found_tool_can_be_promoted_for_the_rest_of_the_run() {
    let catalog = Catalog::new(CatalogConfig::default().with_max_promoted(2));
    catalog
        .add_server(Arc::new(FakeServer::everything()).into_server("demo"))
        .unwrap();
    let found = search(
        &catalog,
        json!({"query": "tiny png image", "limit": 1, "promote": true}),
    )
    .await;
    assert_eq!(found["promoted"], json!(["demo__image"]));
    assert_eq!(
        shown(&catalog),
        ["mcp_search_tools", "mcp_call_tool", "demo__image"]
    );
    // Promoting again is a no-op; the limit holds.
    catalog.promote("demo__image").unwrap();
    catalog.promote("demo__audio").unwrap();
    assert_eq!(
        catalog.promote("demo__echo").unwrap_err(),
        CatalogError::PromotionLimit {
            tool: "demo__echo".into(),
            limit: 2
        }
    );
    assert_eq!(catalog.tools().len(), 4);
    assert!(matches!(
        catalog.promote("demo__nothing"),
        Err(CatalogError::UnknownTool { .. })
    ));
}

#[test]
fn a_tools_change_reindexes_one_server_only() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog
        .add_server(Arc::new(FakeServer::everything()).into_server("demo"))
        .unwrap();
    catalog.add_server(numbered(3).into_server("w")).unwrap();
    catalog.promote("demo__image").unwrap();
    catalog.promote("demo__audio").unwrap();

    // `demo` now lists a new tool and no longer lists `image`.
    let changed = vec![
        tool(
            "translate",
            "Translate text between languages",
            json!({"type": "object"}),
        ),
        tool(
            "audio",
            "Return a short audio clip",
            json!({"type": "object"}),
        ),
    ];
    catalog.replace_tools("demo", &changed).unwrap();

    let found = catalog
        .search(&SearchRequest::new("translate language"))
        .unwrap();
    assert_eq!(found.tools[0].id, "demo__translate");
    assert!(
        catalog
            .search(&SearchRequest::new("tiny png"))
            .unwrap()
            .tools
            .is_empty()
    );
    assert!(catalog.lookup("demo__image").is_none());
    // The other server is untouched.
    let found = catalog
        .search(&SearchRequest::new("widgets report"))
        .unwrap();
    assert_eq!(found.total, 3);
    // Promotions of tools that still exist survive.
    assert_eq!(
        shown(&catalog),
        ["mcp_search_tools", "mcp_call_tool", "demo__audio"]
    );
    assert_eq!(catalog.len(), 5);

    assert!(catalog.remove_server("w"));
    assert_eq!(
        catalog
            .search(&SearchRequest::new("widgets"))
            .unwrap()
            .total,
        0
    );
    assert!(matches!(
        catalog.replace_tools("w", &[]),
        Err(CatalogError::InvalidServer { .. })
    ));
}

#[test]
fn resolve_names_the_real_tool_for_policy_and_approval() {
    let catalog = Catalog::new(CatalogConfig::default());
    let listed: rmcp::model::Tool = serde_json::from_value(json!({
        "name": "delete_file",
        "description": "Delete a file",
        "inputSchema": {"type": "object"},
        "annotations": {"destructiveHint": true, "title": "Delete"}
    }))
    .unwrap();
    let fake = Arc::new(FakeServer::new().with_tool(listed, Behavior::Echo));
    catalog
        .add_server(
            ServerTools::new("fs", fake.clone(), fake.tools()).with_identity("filesystem-server"),
        )
        .unwrap();
    let target = catalog
        .resolve(&call(
            "mcp_call_tool",
            json!({"tool_name": "fs__delete_file", "arguments": {"path": "/tmp/x"}}),
        ))
        .unwrap();
    let CallTarget::Mcp(resolved) = target else {
        panic!("an MCP tool")
    };
    assert!(resolved.via_call_tool);

    // What the governed layer decides on: the real tool behind `mcp_call_tool`.
    let (real, _) = CallResolver::resolve(
        &catalog,
        &mut call(
            "mcp_call_tool",
            json!({"tool_name": "fs__delete_file", "arguments": {"path": "/tmp/x"}}),
        ),
    )
    .unwrap();
    assert_eq!(real.kind, CallKind::External);
    assert_eq!(real.action_ref, "fs__delete_file");
    assert_eq!(real.server.as_deref(), Some("fs"));
    assert_eq!(real.server_identity.as_deref(), Some("filesystem-server"));
    assert_eq!(real.remote_tool.as_deref(), Some("delete_file"));
    assert_eq!(real.annotations.destructive_hint, Some(true));
    assert_eq!(real.arguments, obj(json!({"path": "/tmp/x"})));
    let info = real.call_info();
    assert_eq!(info.tool, "fs__delete_file");
    assert_eq!(info.remote_tool, Some("delete_file"));

    assert!(matches!(
        catalog
            .resolve(&call("mcp_search_tools", json!({})))
            .unwrap(),
        CallTarget::Search
    ));
    let (meta, _) =
        CallResolver::resolve(&catalog, &mut call("mcp_search_tools", json!({}))).unwrap();
    assert_eq!(meta.kind, CallKind::Meta);
}

/// A catalog of the `everything` fake twice: `a` (identity `acme/files`) and `b` (identity
/// `other`), with `rules`.
fn two_servers(rules: IdentityRules, exposure: Exposure) -> Catalog {
    let catalog = Catalog::new(
        CatalogConfig::default()
            .with_exposure(exposure)
            .with_identity_rules(rules),
    );
    for (key, identity) in [("a", "acme/files"), ("b", "other")] {
        let fake = Arc::new(FakeServer::everything());
        catalog
            .add_server(ServerTools::new(key, fake.clone(), fake.tools()).with_identity(identity))
            .unwrap();
    }
    catalog
}

fn tool_names(tools: &[ToolDescriptor]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn an_allowlist_that_matches_nothing_hides_every_tool_but_calls_still_resolve() {
    let rules = IdentityRules::default().allow(Rule::new("nobody", "*"));
    let catalog = two_servers(rules.clone(), Exposure::Lazy);
    assert_eq!(
        tool_names(&catalog.tools()),
        ["mcp_search_tools", "mcp_call_tool"]
    );
    let found = search(&catalog, json!({"query": "echo"})).await;
    assert_eq!(found["count"], 0, "{found}");
    let listed = search(&catalog, json!({"query": ""})).await;
    assert_eq!(listed["total"], 0, "{listed}");
    let selected = search(&catalog, json!({"query": "select:a__echo"})).await;
    assert_eq!(selected["not_found"], json!(["a__echo"]));
    assert!(catalog.promote("a__echo").is_err());
    assert!(
        catalog
            .tool("mcp_search_tools")
            .unwrap()
            .description
            .unwrap()
            .contains("(0 tools;")
    );
    // Eager shows none of them either.
    let eager = two_servers(rules, Exposure::Eager);
    assert!(eager.tools().is_empty(), "{:?}", tool_names(&eager.tools()));

    // A call still resolves to the real tool, for the layer to deny naming the rule…
    let (resolved, _) = CallResolver::resolve(
        &catalog,
        &mut call(
            "mcp_call_tool",
            json!({"tool_name": "a__echo", "arguments": {}}),
        ),
    )
    .unwrap();
    assert_eq!(resolved.server_identity.as_deref(), Some("acme/files"));
    // …and a typo's suggestions never name a hidden tool.
    let err = CallResolver::resolve(&catalog, &mut call("a__ecoh", json!({}))).unwrap_err();
    assert!(!err.to_string().contains("a__echo"), "{err}");
    assert!(catalog.entries().iter().all(|t| t.is_hidden()));
}

#[tokio::test]
async fn identity_rules_hide_by_server_identity_and_a_denied_tool_alone() {
    let rules = IdentityRules::default()
        .allow(Rule::new("acme/*", "*"))
        .deny(Rule::new("*", "fail"));
    let catalog = two_servers(rules, Exposure::Lazy);
    let found = search(&catalog, json!({"query": "", "limit": 50})).await;
    let shown: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(shown.iter().all(|n| n.starts_with("a__")), "{shown:?}");
    assert!(shown.contains(&"a__echo"), "{shown:?}");
    assert!(!shown.contains(&"a__fail"), "{shown:?}");
    assert!(catalog.promote("a__echo").is_ok());
    assert!(catalog.promote("b__echo").is_err());
    assert!(catalog.promote("a__fail").is_err());
    assert!(tool_names(&catalog.tools()).contains(&"a__echo"));
}

#[test]
fn the_search_tool_describes_the_servers() {
    let (_, catalog) = everything();
    let search = catalog.tool("mcp_search_tools").unwrap();
    let description = search.description.unwrap();
    assert!(
        description.contains("11 tools; servers: demo"),
        "{description}"
    );
    assert_eq!(search.input_schema["required"], json!(["query"]));
    assert_eq!(search.annotations.read_only_hint, Some(true));
    let call = catalog.tool("mcp_call_tool").unwrap();
    assert_eq!(
        call.input_schema["required"],
        json!(["tool_name", "arguments"])
    );
}

/// `tool(name)` is what `tools()` lists under that name, for every name a catalog holds (shown,
/// pinned, promoted, hidden, unknown, the meta tools), lazy and eager.
#[test]
fn one_tool_by_name_is_what_the_list_shows_under_that_name() {
    let rules = IdentityRules::default().deny(Rule::new("*", "fail"));
    for exposure in [Exposure::Lazy, Exposure::Eager] {
        let catalog = Catalog::new(
            CatalogConfig::default()
                .with_exposure(exposure)
                .with_identity_rules(rules.clone())
                .with_pinned(["a__echo"]),
        );
        for key in ["a", "b"] {
            let fake = Arc::new(FakeServer::everything());
            catalog
                .add_server(ServerTools::new(key, fake.clone(), fake.tools()))
                .unwrap();
        }
        if exposure == Exposure::Lazy {
            catalog.promote("b__image").unwrap();
        }
        let mut names: Vec<String> = catalog
            .entries()
            .iter()
            .map(|t| t.model_name().to_owned())
            .collect();
        names.extend(
            ["mcp_search_tools", "mcp_call_tool", "nothing__here", "echo"].map(String::from),
        );
        let listed = catalog.tools();
        for name in &names {
            let expected = listed.iter().find(|t| &t.name == name);
            assert_eq!(catalog.tool(name).as_ref(), expected, "{exposure:?} {name}");
        }
        assert!(catalog.tool("a__fail").is_none(), "a hidden tool");
    }
}
