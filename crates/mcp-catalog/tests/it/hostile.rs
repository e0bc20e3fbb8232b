//! What a hostile server lists cannot hurt the catalog: names out of bounds or with terminal
//! escapes leave their tool out (with a diagnostic naming server and tool), descriptions and
//! titles are cut and cleaned, oversized and over-deep schemas are refused, and a search costs
//! a bounded amount of work whatever the query.

use std::sync::Arc;

use agent_core::{CallResolver, JsonObject, ToolCall, ToolCatalog, ToolError};
use mcp_catalog::eval::{index_tools, synthetic_tools};
use mcp_catalog::search::{MAX_QUERY_CHARS, MAX_QUERY_TERMS, SearchIndex, ToolText};
use mcp_catalog::testing::{Behavior, FakeServer, tool};
use mcp_catalog::{
    Catalog, CatalogConfig, Exposure, SearchRequest, ServerTools, SkipReason, ToolLimits,
};
use serde_json::{Value, json};

fn server(tools: Vec<rmcp::model::Tool>) -> ServerTools {
    let mut fake = FakeServer::new();
    for t in tools {
        fake = fake.with_tool(t, Behavior::Echo);
    }
    Arc::new(fake).into_server("evil")
}

fn fine(name: &str) -> rmcp::model::Tool {
    tool(name, "A fine tool.", json!({"type": "object"}))
}

/// A schema of `depth` nested objects.
fn nested(depth: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 1..depth {
        schema = json!({"type": "array", "items": schema});
    }
    schema
}

#[test]
fn escape_laden_and_oversized_names_leave_their_tool_out_with_a_diagnostic() {
    let escapes = "\u{1b}[31mred\r\nINJECTED\u{7}";
    let long = "n".repeat(10 * 1024);
    let override_ = "safe\u{202e}txt.exe";
    let catalog = Catalog::new(CatalogConfig::default().with_exposure(Exposure::Eager));
    catalog
        .add_server(server(vec![
            fine("ok"),
            fine(escapes),
            fine(&long),
            fine(override_),
            fine(&"m".repeat(128)),
        ]))
        .expect("the server's good tools join");

    let shown: Vec<String> = catalog.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown.contains(&"evil__ok".to_owned()));
    assert!(shown.iter().all(|n| !n.contains('\u{1b}') && n.len() <= 64));

    let skipped = catalog.skipped_tools("evil");
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert_eq!(skipped[0].reason, SkipReason::NameCharacters);
    assert_eq!(skipped[0].tool, "\\u{1b}[31mred\\u{d}\\u{a}INJECTED\\u{7}");
    let message = skipped[0].to_string();
    assert!(message.contains("server `evil`"), "{message}");
    assert!(
        !message.contains('\u{1b}') && !message.contains('\r'),
        "{message}"
    );

    assert_eq!(
        skipped[1].reason,
        SkipReason::NameTooLong {
            chars: 10 * 1024,
            limit: 128
        }
    );
    assert!(
        skipped[1].tool.chars().count() <= 129,
        "the diagnostic is cut"
    );
    assert!(skipped[1].to_string().contains("limit of 128"));
    assert_eq!(skipped[2].reason, SkipReason::NameCharacters);
}

#[test]
fn descriptions_and_titles_are_cut_and_lose_control_characters() {
    let mut t = tool(
        "verbose",
        &format!(
            "line one\n\tline two\u{1b}]0;pwned\u{7}\r{}",
            "x".repeat(100_000)
        ),
        json!({"type": "object"}),
    );
    t.title = Some(format!("Title\u{1b}[2J{}", "t".repeat(1_000)));
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.add_server(server(vec![t])).unwrap();

    let found = catalog.lookup("evil__verbose").expect("the tool");
    let description = found.description().unwrap();
    assert!(description.len() <= 4 * 1024, "{}", description.len());
    assert!(description.starts_with("line one\n\tline two]0;pwned"));
    assert!(description.ends_with('…'));
    assert!(
        !description
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    );
    let title = found.annotations().title.as_deref().unwrap();
    assert!(
        title.len() <= 256 && title.starts_with("Title[2J"),
        "{title}"
    );
}

#[test]
fn oversized_and_over_deep_schemas_leave_their_tool_out() {
    let big = json!({"type": "object", "description": "d".repeat(70 * 1024)});
    let mut with_output = fine("deep_output");
    with_output.output_schema = Some(Arc::new(obj(nested(40))));
    let catalog = Catalog::new(CatalogConfig::default());
    catalog
        .add_server(server(vec![
            fine("ok"),
            tool("big", "Big schema.", big),
            tool("deep", "Deep schema.", nested(33)),
            tool("deep_enough", "Deep, within bounds.", nested(32)),
            with_output,
        ]))
        .unwrap();

    let reasons: Vec<(String, SkipReason)> = catalog
        .skipped_tools("evil")
        .into_iter()
        .map(|s| (s.tool, s.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "big".to_owned(),
                SkipReason::SchemaTooLarge {
                    which: "input",
                    limit: 64 * 1024
                }
            ),
            (
                "deep".to_owned(),
                SkipReason::SchemaTooDeep {
                    which: "input",
                    limit: 32
                }
            ),
            (
                "deep_output".to_owned(),
                SkipReason::SchemaTooDeep {
                    which: "output",
                    limit: 32
                }
            ),
        ]
    );
    assert!(catalog.lookup("evil__deep_enough").is_some());
    assert_eq!(catalog.len(), 2);
}

#[test]
fn an_empty_or_repeated_name_leaves_that_tool_out_not_the_server() {
    let catalog = Catalog::new(CatalogConfig::default().with_exposure(Exposure::Eager));
    catalog
        .add_server(server(vec![
            fine("ok"),
            fine("twin"),
            fine(""),
            tool(
                "twin",
                "Another tool of the same name.",
                json!({"type": "object"}),
            ),
            fine("also_ok"),
        ]))
        .expect("the server's good tools join");
    let mut shown: Vec<String> = catalog.tools().into_iter().map(|t| t.name).collect();
    shown.sort();
    assert_eq!(shown, ["evil__also_ok", "evil__ok"]);
    let skipped: Vec<String> = catalog
        .skipped_tools("evil")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        skipped,
        [
            "server `evil`: tool `twin` left out: its name is listed 2 times",
            "server `evil`: tool `` left out: its name is empty",
        ]
    );
    // A re-listing without the repeat brings the tool back.
    catalog
        .replace_tools("evil", &[fine("ok"), fine("twin")])
        .unwrap();
    assert!(catalog.lookup("evil__twin").is_some());
    assert!(catalog.skipped_tools("evil").is_empty());
}

#[tokio::test]
async fn a_schema_that_does_not_compile_refuses_the_call_with_the_reason() {
    let fake = Arc::new(
        FakeServer::new()
            .with_tool(
                tool(
                    "broken",
                    "A schema no validator takes.",
                    json!({"type": 12}),
                ),
                Behavior::Echo,
            )
            .with_tool(
                tool(
                    "remote",
                    "A schema needing a remote document.",
                    json!({"$ref": "https://schemas.example.com/args.json"}),
                ),
                Behavior::Echo,
            ),
    );
    let catalog = Catalog::new(CatalogConfig::default().with_exposure(Exposure::Eager));
    catalog
        .add_server(fake.clone().into_server("evil"))
        .unwrap();
    for name in ["evil__broken", "evil__remote"] {
        let mut call = ToolCall::new("1", name, obj(json!({"text": "hi"})));
        let (resolved, target) = CallResolver::resolve(&catalog, &mut call).unwrap();
        call.arguments = resolved.arguments;
        let err = catalog
            .dispatch_resolved(agent_core::testing::ungoverned_permit(), call, target)
            .await
            .expect_err("refused");
        let ToolError::Configuration {
            server,
            tool,
            message,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(server.as_deref(), Some("evil"));
        assert_eq!(tool, name);
        assert!(
            message.starts_with("the server's input schema does not compile (")
                && message.ends_with("the call is refused"),
            "{message}"
        );
    }
    assert!(fake.calls().is_empty(), "nothing reached the server");
}

#[test]
fn the_limits_are_configurable_and_a_relisting_reports_afresh() {
    let mut limits = ToolLimits::default();
    limits.max_name_chars = 4;
    let catalog = Catalog::new(CatalogConfig::default().with_tool_limits(limits));
    catalog
        .add_server(server(vec![fine("ok"), fine("toolong")]))
        .unwrap();
    assert_eq!(catalog.skipped_tools("evil").len(), 1);
    catalog.replace_tools("evil", &[fine("ok")]).unwrap();
    assert!(catalog.skipped_tools("evil").is_empty());
}

fn obj(v: Value) -> JsonObject {
    v.as_object().expect("an object").clone()
}

#[tokio::test]
async fn a_query_over_the_length_limit_is_refused_naming_the_limit() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.add_server(server(vec![fine("ok")])).unwrap();
    let query = "find ".repeat(108 * 1024 / 5);
    let mut call = ToolCall::new("1", "mcp_search_tools", obj(json!({"query": query})));
    let (resolved, target) = CallResolver::resolve(&catalog, &mut call).unwrap();
    call.arguments = resolved.arguments;
    let err = catalog
        .dispatch_resolved(agent_core::testing::ungoverned_permit(), call, target)
        .await
        .expect_err("refused");
    let ToolError::InvalidArguments { message, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(
        message.contains(&format!("limit of {MAX_QUERY_CHARS} characters")),
        "{message}"
    );
    // At the limit, a query is searched.
    let at_limit = "x".repeat(MAX_QUERY_CHARS);
    assert!(catalog.search(&SearchRequest::new(at_limit)).is_ok());
    // The model is told in the schema too.
    let search = catalog.tool("mcp_search_tools").unwrap();
    assert_eq!(
        search.input_schema["properties"]["query"]["maxLength"],
        json!(MAX_QUERY_CHARS)
    );
}

#[test]
fn the_index_reads_a_bounded_part_of_any_query() {
    let tools = synthetic_tools(2_000, 42);
    let mut index = SearchIndex::default();
    index_tools(&mut index, &tools);
    index.replace_server(
        "target",
        [ToolText::new("target__zebra", "target", "zebra").with_description(Some("zebra"))],
    );

    // A word past the first MAX_QUERY_TERMS distinct words takes no part.
    let letter = |i: usize| char::from(b'a' + (i % 26) as u8);
    let filler: Vec<String> = (0..MAX_QUERY_TERMS)
        .map(|i| format!("qq{}{}x", letter(i / 26), letter(i)))
        .collect();
    let late = format!("{} zebra", filler.join(" "));
    assert!(index.search(&late, None, 10).hits.is_empty());
    let early = format!("zebra {}", filler.join(" "));
    assert_eq!(&*index.search(&early, None, 10).hits[0].id, "target__zebra");

    // Past MAX_QUERY_CHARS characters nothing is read: behind 108 KB of stopwords, the one
    // word that matters is not seen, and the query ranks as its head does (listing every tool).
    let huge = format!("{}zebra", "the ".repeat(27 * 1024));
    let head: String = huge.chars().take(MAX_QUERY_CHARS).collect();
    let found = index.search(&huge, None, 10);
    assert_eq!(found, index.search(&head, None, 10));
    assert_eq!(found.total, index.len());
    assert_eq!(
        &*index.search("the the zebra", None, 10).hits[0].id,
        "target__zebra"
    );
}
