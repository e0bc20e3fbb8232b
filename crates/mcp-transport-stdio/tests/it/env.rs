//! The child's environment. One test in its own process: it sets a variable in the parent.

use crate::common;

use std::time::Duration;

use common::*;
use mcp_config::Secret;
use mcp_connector::Connector as _;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use mcp_transport_stdio::SAFE_ENV_VARS;
use serde_json::{Value, json};

const PARENT_SECRET: &str = "MCP_STDIO_TEST_PARENT_SECRET";

#[test]
fn only_the_safe_set_and_declared_variables_reach_the_child() {
    // SAFETY: this test binary has this one test, and no other thread reads or writes the
    // environment while it is set (the runtime starts afterwards).
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(PARENT_SECRET, "parent-secret-value");
    }
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        check_declared_only().await;
        check_inherit_all().await;
    });
}

async fn child_env(inherit_env: bool) -> (serde_json::Map<String, Value>, Option<String>) {
    let mut spec = spec("envy", &StdioServerArgs::new(Mode::Test));
    let mcp_config::TransportSpec::Stdio(stdio) = &mut spec.transport else {
        unreachable!()
    };
    stdio
        .env
        .insert("DECLARED_TOKEN".into(), Secret::new("declared-token-value"));
    stdio.inherit_env = inherit_env;

    let connection = bounded(connector().connect(&spec)).await.unwrap();
    let pid = connection.handle.pid().unwrap();
    let client = bounded(rmcp::serve_client((), connection.transport))
        .await
        .unwrap();
    let result = call(&client, "env", json!({})).await.unwrap();
    let env = result.structured_content.unwrap()["env"]
        .as_object()
        .unwrap()
        .clone();
    // The server prints the declared secret; diagnostics must not.
    call(
        &client,
        "stderr",
        json!({"text": "token=declared-token-value"}),
    )
    .await
    .unwrap();
    bounded(client.cancel()).await.unwrap();
    bounded(connection.handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(pid).await;
    (env, connection.handle.diagnostics())
}

async fn check_declared_only() {
    let (env, diagnostics) = child_env(false).await;
    assert_eq!(
        env.get("DECLARED_TOKEN"),
        Some(&json!("declared-token-value"))
    );
    assert!(!env.contains_key(PARENT_SECRET), "{env:?}");
    assert!(env.contains_key("PATH"));
    for name in env.keys() {
        assert!(
            name == "DECLARED_TOKEN" || SAFE_ENV_VARS.contains(&name.as_str()),
            "`{name}` reached the child"
        );
    }
    let diagnostics = diagnostics.unwrap();
    assert!(diagnostics.contains("token=[REDACTED]"), "{diagnostics}");
    assert!(
        !diagnostics.contains("declared-token-value"),
        "{diagnostics}"
    );
}

async fn check_inherit_all() {
    let (env, _) = child_env(true).await;
    assert_eq!(env.get(PARENT_SECRET), Some(&json!("parent-secret-value")));
    assert_eq!(
        env.get("DECLARED_TOKEN"),
        Some(&json!("declared-token-value"))
    );
}
