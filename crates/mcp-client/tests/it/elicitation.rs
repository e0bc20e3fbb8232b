//! Elicitation handlers per run: a run opened with its own handler answers its private
//! sessions' requests through it, while other runs of the same client use the client's
//! handler (or decline without one), and pooled `shared = true` sessions keep the client's.
//! The test kit's `ask` tool sends the request and returns the answer it got.

use std::sync::Arc;

use agent_core::{Runner, ToolCall, ToolDispatcher};
use async_trait::async_trait;
use mcp_client::{ElicitationHandler, McpClient, McpRunner, OpenOptions};
use mcp_config::{Config, ServerSpec};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{TestServer, TestServerOptions, bounded, serve_in_memory};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Value, json};

/// Accepts every request with `{"name": <its name>}`, and records which server asked.
struct Answer {
    name: &'static str,
    asked_by: std::sync::Mutex<Vec<String>>,
}

impl Answer {
    fn new(name: &'static str) -> Arc<Self> {
        Arc::new(Self {
            name,
            asked_by: Default::default(),
        })
    }

    fn asked_by(&self) -> Vec<String> {
        self.asked_by.lock().unwrap().clone()
    }
}

#[async_trait]
impl ElicitationHandler for Answer {
    async fn elicit(&self, server: &str, _request: ElicitRequestParams) -> ElicitResult {
        self.asked_by.lock().unwrap().push(server.to_owned());
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": self.name}))
    }
}

/// A client over `shared` (`shared = true`) and `own` (private), both listing `ask`.
fn client(handler: Option<Arc<Answer>>) -> McpClient {
    let ask = || serve_in_memory(TestServer::new(TestServerOptions::default().with_ask(true)));
    let memory = InMemoryConnector::new()
        .server("shared", ask)
        .server("own", ask);
    let mut shared: ServerSpec = spec("shared");
    shared.shared = true;
    let config = Config::new(vec![shared, spec("own")]).expect("valid specs");
    let mut builder = McpClient::builder(config).connectors(Connectors::new().with(memory));
    if let Some(handler) = handler {
        builder = builder.elicitation(handler);
    }
    builder.build()
}

/// The answer `server`'s `ask` got: its `action` and `content`.
async fn ask(runner: &McpRunner, server: &str) -> Value {
    let request = json!({
        "mode": "form",
        "message": "your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    });
    let call = ToolCall::from_json(
        "1",
        "mcp_call_tool",
        json!({"tool_name": format!("{server}__ask"), "arguments": {"request": request}}),
    )
    .unwrap();
    let output = bounded(runner.dispatch(call)).await.expect("the call runs");
    let text = output.to_model_text();
    let start = text
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in {text}"));
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn input(state: &str) -> agent_core::RunInput {
    agent_core::RunInput::new(state, "ask")
}

#[tokio::test]
async fn a_run_s_own_handler_answers_its_private_sessions_only() {
    let at_client = Answer::new("client");
    let at_run = Answer::new("run");
    let client = client(Some(at_client.clone()));
    let own = OpenOptions::new().with_elicitation(at_run.clone());
    let first = bounded(client.open_runner_with(&input("1"), own))
        .await
        .unwrap();
    let second = bounded(client.open_runner(&input("2"))).await.unwrap();

    // The run's private session asks the run's handler; the other run's asks the client's.
    let answer = ask(&first, "own").await;
    assert_eq!(answer["action"], "accept", "{answer}");
    assert_eq!(answer["content"], json!({"name": "run"}));
    let answer = ask(&second, "own").await;
    assert_eq!(answer["content"], json!({"name": "client"}), "{answer}");

    // The pooled session, opened by the first run, keeps the client's handler for both.
    assert_eq!(ask(&first, "shared").await["content"]["name"], "client");
    assert_eq!(ask(&second, "shared").await["content"]["name"], "client");
    assert_eq!(at_run.asked_by(), ["own"]);
    assert_eq!(at_client.asked_by(), ["own", "shared", "shared"]);

    first.close().await;
    second.close().await;
    bounded(client.shutdown()).await;
}

#[tokio::test]
async fn without_a_client_handler_only_the_run_with_its_own_is_answered() {
    let at_run = Answer::new("run");
    let client = client(None);
    let own = OpenOptions::new().with_elicitation(at_run.clone());
    let first = bounded(client.open_runner_with(&input("1"), own))
        .await
        .unwrap();
    let second = bounded(client.open_runner(&input("2"))).await.unwrap();

    assert_eq!(ask(&first, "own").await["action"], "accept");
    assert_eq!(ask(&second, "own").await["action"], "decline");
    // The pooled session declares nothing and declines, for the run with a handler too.
    assert_eq!(ask(&first, "shared").await["action"], "decline");
    assert_eq!(at_run.asked_by(), ["own"]);

    first.close().await;
    second.close().await;
    bounded(client.shutdown()).await;
}

#[tokio::test]
async fn open_resolved_with_takes_the_run_s_handler_and_history() {
    let at_run = Answer::new("run");
    let client = client(None);
    let dir = std::env::temp_dir().join(format!("mcp-client-elicit-{}", std::process::id()));
    let run = mcp_config::ResolvedRun::new(vec![spec("own")], Default::default());
    let options = OpenOptions::new()
        .with_elicitation(at_run.clone())
        .with_history(dir.join("run"));
    let runner = bounded(client.open_resolved_with(run, options))
        .await
        .unwrap();
    assert_eq!(ask(&runner, "own").await["content"]["name"], "run");
    bounded(runner.shutdown()).await.unwrap();
    let events = std::fs::read_to_string(dir.join("run/events.jsonl")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(events.contains("own__ask"), "{events}");
}

/// Never answers; reports on `dropped` when its request is given up (its future dropped).
struct NeverAnswers {
    dropped: tokio::sync::mpsc::UnboundedSender<String>,
}

/// Sends `server` on its channel when dropped.
struct ReportDrop(tokio::sync::mpsc::UnboundedSender<String>, String);

impl Drop for ReportDrop {
    fn drop(&mut self) {
        let _ = self.0.send(self.1.clone());
    }
}

#[async_trait]
impl ElicitationHandler for NeverAnswers {
    async fn elicit(&self, server: &str, _request: ElicitRequestParams) -> ElicitResult {
        let _report = ReportDrop(self.dropped.clone(), server.to_owned());
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_request_the_server_cancels_stops_the_handler() {
    let (dropped, mut gone) = tokio::sync::mpsc::unbounded_channel();
    let client = client(None);
    let own = OpenOptions::new().with_elicitation(Arc::new(NeverAnswers { dropped }));
    let runner = bounded(client.open_runner_with(&input("1"), own))
        .await
        .unwrap();
    let request = json!({
        "mode": "form",
        "message": "your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    });
    // The server gives up on its request after 200 ms and cancels it.
    let call = ToolCall::from_json(
        "1",
        "mcp_call_tool",
        json!({"tool_name": "own__ask", "arguments": {"request": request, "timeout_ms": 200}}),
    )
    .unwrap();
    let outcome = bounded(runner.dispatch(call)).await;
    let text = match outcome {
        Ok(output) => output.to_model_text(),
        Err(e) => agent_core::error_chain(&e),
    };
    assert!(text.contains("elicitation failed"), "{text}");
    // The handler stops too (its answer could reach nobody).
    assert_eq!(bounded(gone.recv()).await.as_deref(), Some("own"));
    runner.close().await;
    bounded(client.shutdown()).await;
}
