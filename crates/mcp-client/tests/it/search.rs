//! `[search]` through the client (feature `embed`): the model's `mcp_search_tools` ranks by
//! meaning with vectors from an OpenAI-compatible endpoint played by the test, a tool a server
//! adds later (`notifications/tools/list_changed`) is embedded and found, and a query the
//! endpoint never answers gives the lexical ranking with a `search_warning` event on the run's
//! bus. A local model (`embedder = { local = … }`) opens through the builder's loader: the
//! loader's model ranks, its error fails the open naming it, and no loader names the feature.
#![cfg(feature = "embed")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_core::{EventKind, RunInput, Runner, ToolCall, ToolDispatcher};
use mcp_catalog::search::{EmbedError, EmbedKind, Embedder};
use mcp_client::{ClientError, McpClient, SearchSetupError};
use mcp_config::{Config, EmbedderConfig, SearchConfig};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
use serde_json::{Value, json};

/// Two concepts: voting ("tally", "ballot") and anything else. A query naming `stall` is
/// never answered.
fn vector(text: &str) -> Vec<f32> {
    if text.contains("tally") || text.contains("ballot") {
        vec![1.0, 0.0]
    } else {
        vec![0.0, 1.0]
    }
}

/// An `/v1/embeddings` endpoint on std threads; its base URL.
fn endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64).flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

fn answer(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let texts: Vec<String> = request["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if texts.iter().any(|t| t.contains("stall")) {
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"index": i, "embedding": vector(&t.to_lowercase())}))
        .collect();
    let text = json!({ "data": data }).to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn client(timeout: Duration) -> McpClient {
    let search = SearchConfig::new(EmbedderConfig::OpenAi {
        base_url: endpoint(),
        model: "votes".into(),
        api_key_env: None,
    })
    .with_timeout(timeout);
    builder(search).build()
}

/// A client of one in-memory test server, `a`, with `search`.
fn builder(search: SearchConfig) -> mcp_client::McpClientBuilder {
    let memory = InMemoryConnector::new().server("a", || {
        serve_in_memory(TestServer::new(TestServerOptions::default()))
    });
    let config = Config::new(vec![spec("a")]).expect("valid specs");
    McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .search(Some(search))
}

/// A run of `client` finds by meaning a tool its server adds: `tally_votes`, for "count the
/// ballots".
async fn finds_a_tool_added_later(client: McpClient) {
    let runner = client.open_runner(&RunInput::new("s", "i")).await.unwrap();
    add_tally_votes(&runner).await;
    let found = search(&runner, "count the ballots").await;
    assert_eq!(found[0], "a__tally_votes", "{found:?}");
    runner.close().await;
}

/// Adds the tool `a__tally_votes` to the run's server and waits for the run to list it.
async fn add_tally_votes(runner: &mcp_client::McpRunner) {
    let mut events = runner.governed().subscribe();
    let add = json!({"tool_name": "a__add_tool", "arguments": {"name": "tally_votes"}});
    let call = ToolCall::from_json("1", "mcp_call_tool", add).unwrap();
    runner.dispatch(call).await.unwrap();
    // The server's list_changed re-lists its tools: wait for that event, not for time.
    tokio::time::timeout(Duration::from_secs(10), async {
        while events.recv().await.unwrap().kind != EventKind::ToolsChanged {}
    })
    .await
    .expect("tools_changed");
}

async fn search(runner: &mcp_client::McpRunner, query: &str) -> Vec<String> {
    let call = ToolCall::from_json("s", "mcp_search_tools", json!({ "query": query })).unwrap();
    let out = runner.dispatch(call).await.unwrap();
    out.structured.unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_tool_added_later_is_embedded_and_found_by_meaning() {
    finds_a_tool_added_later(client(Duration::from_secs(10))).await;
}

#[tokio::test]
async fn a_query_never_answered_gives_words_and_a_warning_event() {
    let runner = client(Duration::from_millis(400))
        .open_runner(&RunInput::new("s", "i"))
        .await
        .unwrap();
    let mut events = runner.governed().subscribe();
    let lexical: Vec<String> = runner
        .catalog()
        .search(&mcp_catalog::SearchRequest::new("adds two numbers stall"))
        .unwrap()
        .tools
        .iter()
        .map(|t| t.model_name().to_owned())
        .collect();
    let found = search(&runner, "adds two numbers stall").await;
    assert_eq!(found, lexical);
    assert_eq!(found[0], "a__add");
    let warning = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = events.recv().await.unwrap();
            if event.kind == EventKind::SearchWarning {
                return event;
            }
        }
    })
    .await
    .expect("a search_warning event");
    let message = warning.message.unwrap_or_default();
    assert!(message.contains("no answer within 400 ms"), "{message}");
    runner.close().await;
}

/// A "local model" whose vectors are [`vector`]'s, opened from any folder named `votes`.
#[derive(Debug)]
struct Votes;

#[async_trait::async_trait]
impl Embedder for Votes {
    fn model_id(&self) -> &str {
        "votes@local"
    }

    fn dimension(&self) -> usize {
        2
    }

    async fn embed(&self, texts: &[String], _: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| vector(&t.to_lowercase())).collect())
    }
}

fn open_votes(dir: &Path) -> Result<Arc<dyn Embedder>, Box<dyn std::error::Error + Send + Sync>> {
    if dir.ends_with("votes") {
        Ok(Arc::new(Votes))
    } else {
        Err(format!("the model folder {} has no config.json", dir.display()).into())
    }
}

fn local_client(dir: &str) -> mcp_client::McpClientBuilder {
    builder(SearchConfig::new(EmbedderConfig::Local {
        path: PathBuf::from(dir),
    }))
}

#[tokio::test]
async fn a_registered_local_model_ranks_by_meaning() {
    finds_a_tool_added_later(local_client("models/votes").local_model(open_votes).build()).await;
}

/// Why opening a run of `client` fails: it must, with a `[search]` setup error.
async fn setup_error(client: McpClient) -> SearchSetupError {
    let Err(err) = client.open_runner(&RunInput::new("s", "i")).await else {
        panic!("the open succeeded");
    };
    let ClientError::Config(cause) = &err else {
        panic!("{err}");
    };
    cause
        .downcast_ref::<SearchSetupError>()
        .expect("a search setup error")
        .clone()
}

#[tokio::test]
async fn a_local_model_that_fails_to_load_fails_the_open_naming_why() {
    let setup = setup_error(
        local_client("models/missing")
            .local_model(open_votes)
            .build(),
    )
    .await;
    assert!(matches!(setup, SearchSetupError::Load { .. }), "{setup}");
    assert!(
        setup
            .to_string()
            .contains("models/missing has no config.json"),
        "{setup}"
    );
}

/// Without `embed-local` and no loader given, a local model is refused naming the feature.
#[cfg(not(feature = "embed-local"))]
#[tokio::test]
async fn a_local_model_without_a_loader_is_refused_naming_the_feature() {
    let setup = setup_error(local_client("models/votes").build()).await;
    assert!(
        matches!(
            setup,
            SearchSetupError::NotBuilt {
                feature: "embed-local",
                ..
            }
        ),
        "{setup}"
    );
}
