//! A transport from outside the library's crates: registered under its own kind, configured as
//! `transport = "<kind>"` with its own parameters, opened through `open_runner` with no change
//! to the configuration or the client. The connector here serves the test kit's server in
//! memory, with the server identity and tool count its parameters ask for.

use agent_core::{Runner, ToolCatalog};
use async_trait::async_trait;
use integration_tests::harness::{bounded, call_tool};
use mcp_client::McpClient;
use mcp_config::{Config, ServerSpec, TransportKind, TransportSpec};
use mcp_connector::{ConnectError, Connection, Connector, Connectors, NoHandle};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;

/// Opens `transport = "loopback"` servers: `identity` names the server, `count` adds that many
/// synthetic tools.
struct Loopback;

#[async_trait]
impl Connector for Loopback {
    fn kind(&self) -> TransportKind {
        TransportKind::Other("loopback".into())
    }

    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let TransportSpec::Custom(custom) = &spec.transport else {
            unreachable!("the registry hands this connector its own kind only")
        };
        let bad = |message: &str| ConnectError::Config {
            server: spec.name.clone(),
            message: message.into(),
        };
        let identity = custom.params.get("identity").and_then(|v| v.as_str());
        let tools = custom.params.get("count").and_then(|v| v.as_u64());
        let (Some(identity), Some(tools)) = (identity, tools) else {
            return Err(bad(
                "`identity` (a string) and `count` (a number) are required",
            ));
        };
        let options = TestServerOptions::default()
            .with_name(identity)
            .with_extra_tools(tools as usize);
        let (read, write) = tokio::io::split(serve_in_memory(TestServer::new(options)));
        Ok(Connection::new(
            AsyncRwTransport::new_client(read, write),
            NoHandle,
        ))
    }
}

fn config(servers: serde_json::Value) -> Config {
    Config::from_env_vars([("MCP_AGENT__SERVERS", servers.to_string())]).expect("valid config")
}

#[tokio::test]
async fn a_registered_custom_transport_runs_through_open_runner() {
    let config = config(json!([
        {"name": "loop", "transport": "loopback", "identity": "acme/loop", "count": 3}
    ]));
    let client = McpClient::builder(config)
        .connectors(Connectors::new().with(Loopback))
        .build();
    let runner = bounded(client.open_runner(&agent_core::RunInput::new("s", "i")))
        .await
        .expect("the run opens");
    assert_eq!(
        runner.sessions()[0].identity().name.as_deref(),
        Some("acme/loop")
    );
    let names: Vec<String> = runner
        .catalog()
        .entries()
        .iter()
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("loop__")).count(),
        names.len()
    );
    assert!(names.iter().any(|n| n == "loop__echo"), "{names:?}");
    let output = bounded(call_tool(&runner, "loop__echo", json!({"text": "hi"})))
        .await
        .expect("the call succeeds");
    assert!(output.to_model_text().contains("hi"));
    assert_eq!(
        runner.tools().len(),
        3,
        "the lazy surface and mcp_read_output"
    );
    runner.close().await;
}

#[tokio::test]
async fn a_kind_with_no_connector_is_refused_naming_what_is_registered() {
    let config = config(json!([{"name": "bus", "transport": "message_bus", "topic": "t"}]));
    let client = McpClient::builder(config)
        .connectors(Connectors::new().with(Loopback))
        .build();
    let Err(err) = bounded(client.open_runner(&agent_core::RunInput::new("s", "i"))).await else {
        panic!("no connector for message_bus, yet the run opened");
    };
    let text = integration_tests::harness::chain(&err);
    assert!(
        text.contains("server `bus` uses the message_bus transport, for which no connector is registered (registered: loopback)"),
        "{text}"
    );
}

#[tokio::test]
async fn its_connector_checks_its_own_parameters() {
    let config = config(json!([{"name": "loop", "transport": "loopback", "identity": 7}]));
    let client = McpClient::builder(config)
        .connectors(Connectors::new().with(Loopback))
        .build();
    let Err(err) = bounded(client.open_runner(&agent_core::RunInput::new("s", "i"))).await else {
        panic!("bad parameters, yet the run opened");
    };
    let text = integration_tests::harness::chain(&err);
    assert!(
        text.contains("server `loop`: `identity` (a string)"),
        "{text}"
    );
}
