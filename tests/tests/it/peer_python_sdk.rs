//! A server on the official Python MCP SDK (`peers/python/server.py`), over stdio and
//! over streamable HTTP, through the workspace's connectors and `mcp-client`'s runner and session layer: connect, list, call, structured
//! content, tool errors, resources (listed, templated, read) and prompts (listed, got, refused
//! without their required argument).
//!
//! Needs the peers of `cargo xtask peers` (see `integration_tests::peers`): fails without them
//! under `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`, skips with a note otherwise.

use std::collections::BTreeMap;

use integration_tests::peers::{self, HttpPeer, PeerSession, text_of};
use mcp_client::FeatureError;
use rmcp::model::ResourceContents;
use serde_json::json;

/// What every transport must show of the Python SDK server.
async fn check(session: &PeerSession) {
    let identity = session.identity();
    assert_eq!(identity.name.as_deref(), Some("py-peer"));
    assert_eq!(
        identity.instructions.as_deref(),
        Some("A test peer on the official Python MCP SDK.")
    );

    // The peers negotiate down to the newest revision they know with a handshake.
    assert_eq!(identity.protocol_version, "2025-11-25");

    let tools = session.list_tools().await;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add", "echo", "fail", "weather"]);
    let weather_tool = tools.iter().find(|t| t.name == "weather").unwrap();
    let schema = weather_tool.output_schema.as_ref().expect("outputSchema");
    assert_eq!(
        schema.get("required"),
        Some(&json!(["city", "temperature", "conditions"]))
    );

    let echo = session.call("echo", json!({"message": "héllo"})).await;
    assert_eq!(text_of(&echo), "Echo: héllo");

    let add = session.call("add", json!({"a": 40, "b": 2})).await;
    assert_eq!(add.structured_content, Some(json!({"result": 42})));
    assert_eq!(text_of(&add), "42");

    let weather = session.call("weather", json!({"city": "Oslo"})).await;
    assert_ne!(weather.is_error, Some(true));
    assert_eq!(
        weather.structured_content,
        Some(json!({"city": "Oslo", "temperature": 7.0, "conditions": "Light rain"}))
    );

    let failed = session.call("fail", json!({"message": "boom"})).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(
        text_of(&failed).contains("boom"),
        "tool error text: {}",
        text_of(&failed)
    );

    check_resources(session).await;
    check_prompts(session).await;
}

/// The SDK's resource, its template, and reads of both.
async fn check_resources(session: &PeerSession) {
    let session = session.session();
    let resources = session.list_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["info://about"]);
    assert_eq!(resources[0].mime_type.as_deref(), Some("text/plain"));

    let templates = session
        .list_resource_templates()
        .await
        .expect("resources/templates/list");
    let patterns: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(patterns, ["note://{name}"]);

    let text = |contents: &[ResourceContents]| match contents {
        [ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("one text content expected: {other:?}"),
    };
    let about = session.read_resource("info://about").await.expect("read");
    assert_eq!(
        text(&about),
        "py-peer: a test peer on the official Python MCP SDK"
    );
    let note = session
        .read_resource("note://groceries")
        .await
        .expect("read");
    assert_eq!(text(&note), "Note groceries");
}

/// The SDK's prompt: its arguments as declared, a get with and without its optional one, and
/// a get without its required one refused before anything is sent.
async fn check_prompts(session: &PeerSession) {
    let session = session.session();
    let prompts = session.list_prompts().await.expect("prompts/list");
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "review");
    let arguments: Vec<(&str, Option<bool>)> = prompts[0]
        .arguments
        .iter()
        .flatten()
        .map(|a| (a.name.as_str(), a.required))
        .collect();
    assert_eq!(arguments, [("code", Some(true)), ("language", Some(false))]);

    let text = |arguments: BTreeMap<String, String>| async move {
        let got = session.get_prompt("review", arguments).await.expect("get");
        match &got.messages[..] {
            [message] => match message.content.as_text() {
                Some(text) => text.text.clone(),
                None => panic!("a text message expected: {message:?}"),
            },
            other => panic!("one message expected: {other:?}"),
        }
    };
    let code = |extra: &[(&str, &str)]| {
        [("code", "fn main() {}")]
            .iter()
            .chain(extra)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(text(code(&[])).await, "Review this rust code: fn main() {}");
    assert_eq!(
        text(code(&[("language", "python")])).await,
        "Review this python code: fn main() {}"
    );

    let missing = session
        .get_prompt("review", BTreeMap::new())
        .await
        .expect_err("the required argument is missing");
    assert!(
        matches!(missing, FeatureError::MissingArguments { .. }),
        "{missing:?}"
    );
    assert!(missing.to_string().contains("code"), "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio() {
    if let Some(spec) = peers::python_stdio_spec() {
        peers::check_over_stdio(spec, "the Python server", check).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_streamable_http() {
    if let Some(server) = HttpPeer::python().await {
        peers::check_over_http(server, "the Python server", check).await;
    }
}
