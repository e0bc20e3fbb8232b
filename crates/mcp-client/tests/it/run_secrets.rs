//! What a run must never write down: a custom transport's secret parameters (those whose name
//! says so: `password`, `api_key`, `token`…) and tokens its transport obtains at run time (as
//! an OAuth hook does, reported to the run's redactor through
//! `ConnectionHandle::report_secrets_to`), whether they come back in a tool's result, in a
//! tool's error text or in the call's own arguments.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use agent_core::{EVENTS_FILE, MESSAGES_FILE, RunInput, ToolCall, ToolDispatcher};
use async_trait::async_trait;
use mcp_client::McpClient;
use mcp_config::{
    Config, CustomSpec, REDACTED, Secret, SecretSink, ServerSpec, TransportKind, TransportSpec,
};
use mcp_connector::testing::{IN_MEMORY, InMemoryConnector};
use mcp_connector::{ConnectError, Connection, ConnectionHandle, Connector, Connectors};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use serde_json::json;

/// A custom transport's parameter: a password among ordinary settings.
const PARAM_SECRET: &str = "custom-param-password-5d2e";
/// What an OAuth server issued while the run went on.
const ACCESS_TOKEN: &str = "oauth-access-token-8b41c0";
const REFRESH_TOKEN: &str = "oauth-refresh-token-77aa";

#[tokio::test]
async fn custom_params_and_run_time_tokens_never_reach_events_messages_or_the_model() {
    let custom = CustomSpec::new(IN_MEMORY)
        .with_param("queue", json!({"password": PARAM_SECRET, "port": 5672}))
        .with_param("host", "queue.internal.example");
    let spec = ServerSpec::new("kit", TransportSpec::Custom(custom));
    let memory = InMemoryConnector::new().server("kit", || {
        serve_in_memory(TestServer::new(TestServerOptions::default()))
    });
    let issuer = Issuer::default();
    let connector = Issuing {
        inner: memory,
        issuer: issuer.clone(),
    };
    let client = McpClient::builder(Config::new(vec![spec]).expect("a valid spec"))
        .connectors(Connectors::new().with(connector))
        .build();
    let dir = Scratch::new();
    let runner = client
        .open_runner_with_history(&RunInput::new("s", "i"), &dir.0)
        .await
        .expect("the run opens");
    // Tokens the transport obtains after the run opened.
    assert_eq!(
        issuer.issue(&[ACCESS_TOKEN, REFRESH_TOKEN]),
        1,
        "the run's sink"
    );

    let everything = format!("{PARAM_SECRET} {ACCESS_TOKEN} {REFRESH_TOKEN}");
    // In the arguments, and echoed back in the result.
    let echoed = runner
        .dispatch(ToolCall::from_json("c1", "kit__echo", json!({"note": everything})).unwrap())
        .await
        .expect("echo runs");
    let seen = serde_json::to_string(&echoed).unwrap();
    for secret in [PARAM_SECRET, ACCESS_TOKEN, REFRESH_TOKEN] {
        assert!(!seen.contains(secret), "the model saw a secret: {seen}");
    }
    assert!(seen.contains(REDACTED), "{seen}");
    // In a server's error text.
    let failed = runner
        .dispatch(ToolCall::from_json("c2", "kit__fail", json!({"message": everything})).unwrap())
        .await
        .expect_err("the tool fails");
    let said = agent_core::error_chain(&failed);
    for secret in [PARAM_SECRET, ACCESS_TOKEN, REFRESH_TOKEN] {
        assert!(!said.contains(secret), "the error told a secret: {said}");
    }
    runner.shutdown().await.expect("the history is written");

    for file in [EVENTS_FILE, MESSAGES_FILE] {
        let text = std::fs::read_to_string(dir.0.join(file)).unwrap();
        assert!(
            text.contains("kit__echo"),
            "{file} recorded the call: {text}"
        );
        for secret in [PARAM_SECRET, ACCESS_TOKEN, REFRESH_TOKEN] {
            assert!(!text.contains(secret), "{file} holds a secret: {text}");
        }
    }
    let messages = std::fs::read_to_string(dir.0.join(MESSAGES_FILE)).unwrap();
    assert!(messages.contains(REDACTED), "{messages}");
}

/// Obtains tokens at run time and reports them to the sinks the client gave its handles.
#[derive(Clone, Default)]
struct Issuer(Arc<Mutex<Vec<Weak<dyn SecretSink>>>>);

impl Issuer {
    /// Reports `tokens`; how many live sinks were told.
    fn issue(&self, tokens: &[&str]) -> usize {
        let sinks: Vec<_> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for sink in &sinks {
            tokens.iter().for_each(|t| sink.learn(&Secret::new(*t)));
        }
        sinks.len()
    }
}

/// The in-memory connector with a handle that obtains tokens.
struct Issuing {
    inner: InMemoryConnector,
    issuer: Issuer,
}

#[async_trait]
impl Connector for Issuing {
    fn kind(&self) -> TransportKind {
        self.inner.kind()
    }

    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let Connection { transport, handle } = self.inner.connect(spec).await?;
        let handle = Box::new(IssuingHandle {
            inner: handle,
            issuer: self.issuer.clone(),
        });
        Ok(Connection { transport, handle })
    }
}

#[derive(Debug)]
struct IssuingHandle {
    inner: Box<dyn ConnectionHandle>,
    issuer: Issuer,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Issuer")
    }
}

#[async_trait]
impl ConnectionHandle for IssuingHandle {
    async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown(grace).await;
    }

    fn report_secrets_to(&self, sink: &Arc<dyn SecretSink>) {
        self.issuer.0.lock().unwrap().push(Arc::downgrade(sink));
    }
}

#[test]
fn the_secret_parameters_of_a_custom_transport_are_secrets_of_its_spec() {
    let custom = CustomSpec::new("queue")
        .with_param("queue", json!({"password": PARAM_SECRET, "port": 5672}))
        .with_param("nodes", json!([{"dsn": "amqp://u:p@mq-1.internal"}]))
        .with_param("apiKey", "custom-api-key-0c9d")
        .with_param("hosts", json!(["mq-1.internal.example"]))
        .with_param("identity", "acme/queue");
    let spec = ServerSpec::new("q", TransportSpec::Custom(custom));
    let mut values: Vec<String> = spec
        .secret_values()
        .iter()
        .map(|s| s.expose().to_owned())
        .collect();
    values.sort();
    assert_eq!(
        values,
        [
            "amqp://u:p@mq-1.internal",
            "custom-api-key-0c9d",
            PARAM_SECRET
        ]
    );
}

/// A directory of this test's own, removed at the end.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "mcp-client-secrets-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
