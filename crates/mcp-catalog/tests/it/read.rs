//! `mcp_read` and the kinds of `mcp_search_tools`, with in-memory fake servers behind the
//! governed layer: reads resolved, decided by the `[policy]` resource / prompt rules, cut like
//! any output; resources, templates and prompts searched with the tools, bounded and cleaned;
//! resource links followed.

use std::sync::Arc;

use agent_core::{
    CallKind, CallResolver, EventKind, GovernedLayer, IdentityRules, OutputLimits, ReadSubject,
    Rule, ToolCall, ToolCatalog, ToolDispatcher, ToolError,
};
use mcp_catalog::testing::FakeServer;
use mcp_catalog::{
    Catalog, CatalogConfig, FeatureLimits, READ_OUTPUT_TOOL, READ_TOOL, ReadOutput, ReadRequest,
    SearchRequest, ServerFeatures, ServerTools,
};
use rmcp::model::{Prompt, PromptArgument, Resource, ResourceTemplate};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args.as_object().unwrap().clone())
}

/// A catalog of server `docs` (identity `acme/docs`): the fake's tools, two resources, a
/// template and a prompt, readable as given.
fn catalog(config: CatalogConfig) -> (Catalog, Arc<FakeServer>) {
    let fake = Arc::new(
        FakeServer::everything()
            .with_readable("file:///guide/install.md", "run the installer")
            .with_readable("file:///big.log", &"x".repeat(100_000))
            .with_readable("review", "Review this change."),
    );
    let catalog = Catalog::new(config);
    catalog
        .add_server(ServerTools::new("docs", fake.clone(), fake.tools()).with_identity("acme/docs"))
        .unwrap();
    let offered = ServerFeatures::default()
        .with_resources(vec![
            Resource::new("file:///guide/install.md", "installation guide")
                .with_description("How to install the product"),
            Resource::new("file:///big.log", "server log"),
        ])
        .with_templates(vec![ResourceTemplate::new(
            "file:///tickets/{id}",
            "ticket",
        )])
        .with_prompts(vec![Prompt::new(
            "review",
            Some("Review a code change for bugs"),
            Some(vec![PromptArgument::new("language").with_required(true)]),
        )]);
    catalog.set_features("docs", offered).unwrap();
    (catalog, fake)
}

#[tokio::test]
async fn mcp_read_is_shown_only_when_a_server_offers_reads() {
    let fake = Arc::new(FakeServer::everything());
    let plain = Catalog::new(CatalogConfig::default());
    plain.add_server(fake.clone().into_server("demo")).unwrap();
    let names: Vec<String> = plain.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["mcp_search_tools", "mcp_call_tool"]);
    // Not offered: a call of it is an unknown tool.
    let err = plain
        .resolve(&call(
            "1",
            READ_TOOL,
            json!({"server": "demo", "uri": "a://b"}),
        ))
        .unwrap_err();
    assert!(matches!(err, ToolError::UnknownTool { .. }), "{err}");

    let (catalog, _) = catalog(CatalogConfig::default());
    let names: Vec<String> = catalog.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["mcp_search_tools", "mcp_call_tool", READ_TOOL]);
    let read = catalog.tool(READ_TOOL).unwrap();
    assert_eq!(read.input_schema["required"], json!(["server"]));
    assert_eq!(read.annotations.read_only_hint, Some(true));
    assert!(
        catalog
            .tool("mcp_search_tools")
            .unwrap()
            .description
            .unwrap()
            .contains("mcp_read"),
        "the search tool says other kinds are found"
    );
}

#[tokio::test]
async fn a_read_resolves_to_its_server_and_subject_and_reads_through_the_layer() {
    let (catalog, fake) = catalog(CatalogConfig::default());
    let read = call(
        "1",
        READ_TOOL,
        json!({"server": "docs", "uri": "file:///guide/install.md"}),
    );
    let (resolved, _) = CallResolver::resolve(&catalog, &mut read.clone()).unwrap();
    assert_eq!(resolved.kind, CallKind::External);
    assert_eq!(resolved.action_ref, READ_TOOL);
    assert_eq!(resolved.server.as_deref(), Some("docs"));
    assert_eq!(resolved.server_identity.as_deref(), Some("acme/docs"));
    assert_eq!(
        resolved.reads,
        Some(ReadSubject::Resource("file:///guide/install.md".into()))
    );

    let governed = GovernedLayer::new().layer(catalog);
    let mut events = governed.subscribe();
    let out = governed.dispatch(read).await.unwrap();
    assert_eq!(
        out.to_model_text(),
        "[file:///guide/install.md (text/plain)]\nrun the installer"
    );
    let prompt = call(
        "2",
        READ_TOOL,
        json!({"server": "docs", "prompt": "review", "arguments": {"language": "rust"}}),
    );
    let out = governed.dispatch(prompt).await.unwrap();
    assert_eq!(
        out.to_model_text(),
        "[user] Review this change.\nlanguage=rust"
    );
    assert_eq!(
        fake.reads()[1],
        ReadRequest::Prompt {
            name: "review".into(),
            arguments: [("language".to_owned(), "rust".to_owned())].into()
        }
    );
    // The events name the read's target.
    let started = events.recv().await.unwrap();
    assert_eq!(started.kind, EventKind::ToolCallStarted);
    assert_eq!(started.tool.as_deref(), Some(READ_TOOL));
    assert_eq!(started.server.as_deref(), Some("docs"));
    assert_eq!(started.target.as_deref(), Some("file:///guide/install.md"));
    // A server's error names the server and what was read.
    let missing = call(
        "3",
        READ_TOOL,
        json!({"server": "docs", "uri": "file:///nope"}),
    );
    let err = governed.dispatch(missing).await.unwrap_err().to_string();
    assert!(
        err.contains("`docs`") && err.contains("file:///nope"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_reads_are_refused_naming_the_server_and_the_limit() {
    let (catalog, _) = catalog(CatalogConfig::default());
    let long = format!("file:///{}", "a".repeat(3000));
    for (args, says) in [
        (json!({"uri": "file:///a"}), "`/server` is required"),
        (
            json!({"server": "nope", "uri": "file:///a"}),
            "unknown server `nope`; the servers are: docs",
        ),
        (json!({"server": "docs"}), "exactly one of"),
        (
            json!({"server": "docs", "uri": "file:///a", "prompt": "review"}),
            "exactly one of",
        ),
        (
            json!({"server": "docs", "uri": long}),
            "longer than 2048 bytes",
        ),
        (
            json!({"server": "docs", "uri": "file:///a\u{1b}[2J"}),
            "control characters",
        ),
        (
            json!({"server": "docs", "uri": "file:///a", "arguments": {}}),
            "go with `prompt` only",
        ),
        (
            json!({"server": "docs", "prompt": "review", "arguments": {"a": [1]}}),
            "`/arguments/a`: not a string",
        ),
        (
            json!({"server": "docs", "prompt": "review", "arguments": {"": "x"}}),
            "the name `` is empty",
        ),
        (
            json!({"server": "docs", "prompt": "review", "arguments": {"a\u{1b}[2Jb": "x"}}),
            "holds control characters",
        ),
        (
            json!({"server": "docs", "prompt": "review", "arguments": {"n".repeat(70_000): "x"}}),
            "longer than 65536 bytes (the limit)",
        ),
        (
            json!({"server": "docs", "uri": "file:///a", "extra": 1}),
            "unknown argument `extra`",
        ),
    ] {
        let err = catalog
            .resolve(&call("1", READ_TOOL, args.clone()))
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { .. }),
            "{args}: {err}"
        );
        assert!(err.to_string().contains(says), "{args}: {err}");
    }
    // Skills are not offered by this server: a clear error naming it.
    let err = catalog
        .resolve(&call(
            "2",
            READ_TOOL,
            json!({"server": "docs", "skill": "pdf"}),
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("server `docs` offers no skills to read"),
        "{err}"
    );
}

#[tokio::test]
async fn the_resource_and_prompt_rules_decide_a_read_naming_the_rule() {
    let rules = IdentityRules::default()
        .deny(Rule::resource("acme/*", "file:///big*"))
        .deny(Rule::prompt("*", "review"));
    let (catalog, fake) = catalog(CatalogConfig::default().with_identity_rules(rules.clone()));
    let governed = GovernedLayer::new().identity_rules(rules).layer(catalog);
    let mut events = governed.subscribe();
    let read = call(
        "1",
        READ_TOOL,
        json!({"server": "docs", "uri": "file:///big.log"}),
    );
    let err = governed.dispatch(read).await.unwrap_err();
    assert!(matches!(err, ToolError::Denied { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("policy.deny[0]"), "{text}");
    assert!(text.contains("resource `file:///big.log`"), "{text}");
    let denied = events.recv().await.unwrap();
    assert_eq!(denied.kind, EventKind::ToolCallDenied);
    assert_eq!(denied.target.as_deref(), Some("file:///big.log"));

    let prompt = call(
        "2",
        READ_TOOL,
        json!({"server": "docs", "prompt": "review"}),
    );
    let text = governed.dispatch(prompt).await.unwrap_err().to_string();
    assert!(
        text.contains("policy.deny[1]") && text.contains("prompt `review`"),
        "{text}"
    );
    assert!(fake.reads().is_empty(), "nothing denied reached the server");

    // What the rules refuse is not searched either.
    let found = governed
        .inner()
        .search(&SearchRequest::new("server log"))
        .unwrap();
    assert!(
        !found.to_json().to_string().contains("file:///big.log"),
        "{}",
        found.to_json()
    );
}

#[tokio::test]
async fn a_long_read_is_cut_like_any_output_and_the_rest_is_read_with_mcp_read_output() {
    let (catalog, _) = catalog(CatalogConfig::default());
    let governed = GovernedLayer::new()
        .output_limits(OutputLimits::default().with_max_output_bytes(4096))
        .output_reader(ReadOutput)
        .layer(catalog);
    let read = call(
        "1",
        READ_TOOL,
        json!({"server": "docs", "uri": "file:///big.log"}),
    );
    let out = governed.dispatch(read).await.unwrap().to_model_text();
    assert!(out.len() <= 4096, "{}", out.len());
    assert!(out.contains(READ_OUTPUT_TOOL), "{out}");
    let rest = call(
        "2",
        READ_OUTPUT_TOOL,
        json!({"handle": "out_0", "offset": 50_000}),
    );
    let rest = governed.dispatch(rest).await.unwrap().to_model_text();
    assert!(rest.starts_with("xxxx"), "{rest}");
}

#[test]
fn search_ranks_every_kind_together_each_saying_its_kind() {
    let (catalog, _) = catalog(CatalogConfig::default());
    let found = catalog
        .search(&SearchRequest::new("installation guide"))
        .unwrap()
        .to_json();
    let best = &found["tools"][0];
    assert_eq!(best["kind"], "resource", "{found}");
    assert_eq!(best["server"], "docs");
    assert_eq!(
        best["read_with"],
        json!({"server": "docs", "uri": "file:///guide/install.md"})
    );

    let found = catalog
        .search(&SearchRequest::new("review code change"))
        .unwrap()
        .to_json();
    let best = &found["tools"][0];
    assert_eq!(best["kind"], "prompt", "{found}");
    assert_eq!(best["arguments"][0]["name"], "language");
    assert_eq!(best["arguments"][0]["required"], true);

    let found = catalog
        .search(&SearchRequest::new("ticket"))
        .unwrap()
        .to_json();
    assert_eq!(found["tools"][0]["kind"], "resource_template", "{found}");
    assert_eq!(found["tools"][0]["uri"], "file:///tickets/{id}");

    // Tools keep their shape, plus their kind, and still win their own queries.
    let found = catalog
        .search(&SearchRequest::new("echo the input text"))
        .unwrap()
        .to_json();
    let best = &found["tools"][0];
    assert_eq!(best["kind"], "tool");
    assert_eq!(best["name"], "docs__echo");
    assert!(best["input_schema"].is_object());

    // The server filter and the limit hold for every kind.
    let found = catalog
        .search(&SearchRequest::new("installation guide").with_limit(1))
        .unwrap();
    assert_eq!(found.to_json()["count"], 1);
    assert!(found.total >= 1);
}

#[test]
fn listings_are_bounded_per_server_and_cleaned() {
    let limits = FeatureLimits::default().with_max_per_kind(3);
    let fake = Arc::new(FakeServer::new());
    let catalog = Catalog::new(CatalogConfig::default().with_feature_limits(limits));
    catalog.add_server(fake.into_server("evil")).unwrap();
    let mut resources: Vec<Resource> = (0..10)
        .map(|i| Resource::new(format!("mem://r{i}"), format!("r{i}")))
        .collect();
    resources.insert(0, Resource::new("mem://esc\u{1b}[2J", "escape in the URI"));
    resources.insert(
        1,
        Resource::new("mem://hostile", "evil\u{1b}[31mname")
            .with_description(format!("line\u{0}one {}", "d".repeat(100_000))),
    );
    let prompts = vec![
        Prompt::new("bad\u{7}name", Some("left out"), None),
        Prompt::new("fine", Some("kept"), None),
    ];
    catalog
        .set_features(
            "evil",
            ServerFeatures::default()
                .with_resources(resources)
                .with_prompts(prompts),
        )
        .unwrap();
    let features = catalog.features("evil");
    let uris: Vec<&str> = features.iter().filter_map(|f| f.uri.as_deref()).collect();
    assert_eq!(
        uris,
        ["mem://hostile", "mem://r0", "mem://r1"],
        "at most 3, the bad URI left out"
    );
    let hostile = &features[0];
    assert!(
        !hostile.name.chars().any(char::is_control),
        "{:?}",
        hostile.name
    );
    let description = hostile.description.as_deref().unwrap();
    assert!(description.len() <= 1024 && !description.contains('\0'));
    let names: Vec<&str> = features
        .iter()
        .filter(|f| f.uri.is_none())
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["fine"]);
    // An unknown server is refused; removing the server drops its features.
    assert!(
        catalog
            .set_features("ghost", ServerFeatures::default())
            .is_err()
    );
    assert!(catalog.remove_server("evil"));
    assert!(catalog.features("evil").is_empty());
    assert!(!catalog.offers_reads());
}

#[tokio::test]
async fn a_resource_link_in_a_tool_result_says_how_to_read_it() {
    let (catalog, _) = catalog(CatalogConfig::default());
    let governed = GovernedLayer::new().layer(catalog);
    let link = call(
        "1",
        "mcp_call_tool",
        json!({"tool_name": "docs__resource_link", "arguments": {}}),
    );
    let out = governed.dispatch(link).await.unwrap().to_model_text();
    assert!(
        out.contains(r#"read with mcp_read {"server":"docs","uri":"file:///tmp/report.txt"}"#),
        "{out}"
    );

    // A server that offers no resources gets no such line.
    let fake = Arc::new(FakeServer::everything());
    let plain = Catalog::new(CatalogConfig::default());
    plain.add_server(fake.into_server("demo")).unwrap();
    let out = GovernedLayer::new()
        .layer(plain)
        .dispatch(call(
            "1",
            "mcp_call_tool",
            json!({"tool_name": "demo__resource_link", "arguments": {}}),
        ))
        .await
        .unwrap()
        .to_model_text();
    assert!(!out.contains(READ_TOOL), "{out}");
}
