//! The result mapping (`call_result`) over a real MCP session (rmcp client, in memory): each
//! result shape of the dispatcher as the client receives it, and the tool definitions it lists.

use std::sync::Arc;

use mcp_serve::ToolServer;
use serde_json::{Value, json};

use crate::support::{Tools, all_but_hidden, in_memory, rmcp_call, text_of};

#[tokio::test]
async fn a_mapping_is_structured_content_plus_its_text() {
    let tools = Arc::new(Tools::default());
    let (client, _session) = in_memory(ToolServer::new(tools.clone(), all_but_hidden())).await;
    let result = rmcp_call(&client, "mapping", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"sum": 3.0})));
    assert_eq!(text_of(&result), r#"{"sum":3.0}"#);
    assert_ne!(result.is_error, Some(true));
    // The arguments reached the dispatcher unchanged, under the tool's own name.
    let seen = tools.seen();
    assert_eq!(seen[0].name, "mapping");
    assert_eq!(
        Value::Object(seen[0].arguments.clone()),
        json!({"a": 1, "b": 2})
    );
}

#[tokio::test]
async fn a_scalar_is_wrapped_as_result() {
    let tools = Arc::new(Tools::default());
    let (client, _session) = in_memory(ToolServer::new(tools, all_but_hidden())).await;
    let result = rmcp_call(&client, "scalar", json!({"a": 40, "b": 2}))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"result": 42.0})));
    assert_eq!(text_of(&result), "42.0");

    let string = rmcp_call(&client, "string", json!({})).await.unwrap();
    assert_eq!(string.structured_content, Some(json!({"result": "héllo"})));
    assert_eq!(text_of(&string), "héllo");
}

#[tokio::test]
async fn content_parts_pass_with_their_types() {
    let tools = Arc::new(Tools::default());
    let (client, _session) = in_memory(ToolServer::new(tools, all_but_hidden())).await;
    let text = rmcp_call(&client, "text", json!({})).await.unwrap();
    assert_eq!(text.structured_content, None);
    assert_eq!(text_of(&text), "one\ntwo");

    // Structured output beside parts of its own: the parts are the content.
    let parts = rmcp_call(&client, "parts", json!({})).await.unwrap();
    assert_eq!(parts.structured_content, Some(json!({"n": 1})));
    assert_eq!(parts.content.len(), 1);
    assert!(parts.content[0].as_image().is_some());
}

#[tokio::test]
async fn an_error_is_is_error_with_its_text() {
    let tools = Arc::new(Tools::default());
    let (client, _session) = in_memory(ToolServer::new(tools, all_but_hidden())).await;
    let failed = rmcp_call(&client, "fail", json!({})).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text_of(&failed), "tool `fail` failed: it broke");

    // A cause is told once, after the error it explains.
    let boom = rmcp_call(&client, "boom", json!({})).await.unwrap();
    assert_eq!(boom.is_error, Some(true));
    assert_eq!(
        text_of(&boom),
        "transport error calling tool `boom` on server `upstream`: the connection was reset"
    );
}

#[tokio::test]
async fn tools_are_listed_with_schemas_hints_and_identity() {
    let tools = Arc::new(Tools::default());
    let server = ToolServer::new(tools, all_but_hidden())
        .name("served", "1.2.3")
        .instructions("Test tools.");
    let (client, _session) = in_memory(server).await;
    let info = client.peer_info().expect("the initialize result");
    let identity = info.server_info.as_ref().expect("serverInfo");
    assert_eq!(identity.name, "served");
    assert_eq!(identity.version, "1.2.3");
    assert_eq!(info.instructions.as_deref(), Some("Test tools."));

    let listed = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "mapping", "scalar", "text", "string", "parts", "fail", "boom", "gate", "reader"
        ]
    );
    let scalar = &listed[1];
    assert_eq!(scalar.description.as_deref(), Some("Sums, as a number."));
    let output = Value::Object((**scalar.output_schema.as_ref().unwrap()).clone());
    assert_eq!(
        output,
        json!({"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]})
    );
    let reader = &listed[8];
    assert_eq!(
        reader.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
}
