//! Runs of real servers through [`McpClient`]: the test kit's `mcp-test-server` over stdio (and
//! its HTTP server), a connector that remembers every process it spawned, events collected
//! for assertions, and the check that no process a test started outlives it.
//!
//! ```no_run
//! # async fn demo() {
//! use integration_tests::harness::{Harness, stdio_server};
//! use mcp_test_kit::stdio::{Mode, StdioServerArgs};
//!
//! let harness = Harness::new();
//! let client = harness.client(vec![stdio_server("kit", &StdioServerArgs::new(Mode::Test))]);
//! let runner = client.open_runner(&harness.input()).await.unwrap();
//! let out = harness.call(&runner, "kit__echo", serde_json::json!({"a": 1})).await;
//! assert!(out.is_ok());
//! agent_core::Runner::close(&runner).await;
//! harness.assert_no_process_left().await;
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::{
    Event, EventKind, EventSink, JsonObject, RunInput, ToolCall, ToolDispatcher, ToolError,
    ToolOutput,
};
use async_trait::async_trait;
use mcp_client::{Connectors, McpClient, McpClientBuilder};
use mcp_config::{Config, ServerSpec, StdioSpec, TransportKind, TransportSpec};
use mcp_connector::{ConnectError, Connection, Connector};
use mcp_test_kit::stdio::StdioServerArgs;
use mcp_transport_http::{HttpConnector, HttpOptions};
use mcp_transport_stdio::{StdioConnector, StdioOptions};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Every wait of these tests is bounded by this.
pub const LIMIT: Duration = Duration::from_secs(30);

/// How long a closing server gets to exit before SIGTERM, in the harness's clients.
pub const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// How long a server gets after SIGTERM before SIGKILL, in the harness's stdio connector.
pub const TERMINATE_GRACE: Duration = Duration::from_millis(300);

pub use mcp_test_kit::bounded;

/// A spec running the test kit's `mcp-test-server` with `args`.
pub fn stdio_server(name: &str, args: &StdioServerArgs) -> ServerSpec {
    stdio_command(
        name,
        &mcp_test_kit::stdio::binary().display().to_string(),
        args.to_args(),
    )
}

/// A spec running `command` with `args`.
pub fn stdio_command(name: &str, command: &str, args: Vec<String>) -> ServerSpec {
    ServerSpec::new(
        name,
        TransportSpec::Stdio(StdioSpec::new(command.to_owned(), args)),
    )
}

/// The pids of the servers a [`RecordingStdio`] spawned, by server name.
#[derive(Debug, Clone, Default)]
pub struct Spawned(Arc<Mutex<Vec<(String, u32)>>>);

impl Spawned {
    fn push(&self, server: &str, pid: u32) {
        self.lock().push((server.to_owned(), pid));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, u32)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every pid spawned so far.
    pub fn pids(&self) -> Vec<u32> {
        self.lock().iter().map(|(_, pid)| *pid).collect()
    }

    /// The pids spawned for `server` (one per connection attempt).
    pub fn pids_of(&self, server: &str) -> Vec<u32> {
        self.lock()
            .iter()
            .filter(|(name, _)| name == server)
            .map(|(_, pid)| *pid)
            .collect()
    }
}

/// The stdio connector, remembering the pid of every server it spawns — also of those whose
/// session never opens (a failed handshake, a connect timeout) — so a test can prove that none
/// of them survives.
#[derive(Debug, Clone)]
pub struct RecordingStdio {
    inner: StdioConnector,
    spawned: Spawned,
}

impl RecordingStdio {
    /// Wraps `inner`, recording into `spawned`.
    pub fn new(inner: StdioConnector, spawned: Spawned) -> Self {
        Self { inner, spawned }
    }
}

#[async_trait]
impl Connector for RecordingStdio {
    fn kind(&self) -> TransportKind {
        TransportKind::Stdio
    }

    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let connection = self.inner.connect(spec).await?;
        if let Some(pid) = connection.handle.pid() {
            self.spawned.push(&spec.name, pid);
        }
        Ok(connection)
    }
}

/// Collects every event, and forwards each to subscribers (so a test can await one).
#[derive(Debug, Default)]
pub struct Events {
    seen: Mutex<Vec<Event>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Event>>>,
}

impl Events {
    /// Every event so far.
    pub fn all(&self) -> Vec<Event> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The events of `kind` so far.
    pub fn of_kind(&self, kind: EventKind) -> Vec<Event> {
        self.all().into_iter().filter(|e| e.kind == kind).collect()
    }

    /// A channel receiving every later event.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tx);
        rx
    }
}

impl EventSink for Events {
    fn emit(&self, event: Event) {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|tx| tx.send(event.clone()).is_ok());
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }
}

/// Waits (at most [`LIMIT`]) for the first event of `rx` that `wanted` accepts.
pub async fn next_event(
    rx: &mut mpsc::UnboundedReceiver<Event>,
    wanted: impl Fn(&Event) -> bool,
) -> Event {
    let found = async {
        while let Some(event) = rx.recv().await {
            if wanted(&event) {
                return Some(event);
            }
        }
        None
    };
    tokio::time::timeout(LIMIT, found)
        .await
        .unwrap_or_else(|_| panic!("no such event within {LIMIT:?}"))
        .expect("the event channel closed")
}

/// One test's clients: the stdio connector that records pids, the HTTP connector, and the
/// events of every client it builds.
#[derive(Debug)]
pub struct Harness {
    /// The servers spawned through [`Harness::connectors`].
    pub spawned: Spawned,
    /// The events of every client built by this harness.
    pub events: Arc<Events>,
    connectors: Connectors,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A harness with stdio (short grace periods) and HTTP (few, quick SSE reconnections)
    /// connectors.
    pub fn new() -> Self {
        let spawned = Spawned::default();
        let stdio = StdioConnector::with_options(
            StdioOptions::default().with_terminate_grace(TERMINATE_GRACE),
        );
        // Few, quick SSE reconnections: a dead HTTP server is reported in well under a second.
        let http = HttpConnector::new(HttpOptions::default().with_sse_reconnect(
            2,
            Duration::from_millis(50),
            Duration::from_millis(200),
        ))
        .expect("the HTTP connector");
        let connectors = Connectors::new()
            .with(RecordingStdio::new(stdio, spawned.clone()))
            .with(http);
        Self {
            spawned,
            events: Arc::default(),
            connectors,
        }
    }

    /// The connectors: stdio (recording pids) and HTTP.
    pub fn connectors(&self) -> Connectors {
        self.connectors.clone()
    }

    /// A client builder over `config` with this harness's connectors, events and a short
    /// close grace ([`CLOSE_GRACE`]).
    pub fn builder(&self, config: Config) -> McpClientBuilder {
        self.builder_without_events(config)
            .events(self.events.clone())
    }

    /// [`Harness::builder`] without the collecting event sink.
    fn builder_without_events(&self, config: Config) -> McpClientBuilder {
        McpClient::builder(config)
            .connectors(self.connectors())
            .close_grace(CLOSE_GRACE)
    }

    /// A client over `specs` (validated as configuration) with [`Harness::builder`]'s settings.
    pub fn client(&self, specs: Vec<ServerSpec>) -> McpClient {
        self.builder(Config::new(specs).expect("valid specs"))
            .build()
    }

    /// A client over `specs` as a library user builds it by default: this harness's
    /// connectors and close grace, but no collecting event sink (which keeps every event, so
    /// it costs a benchmark memory and time per call that a run does not).
    pub fn client_without_events(&self, specs: Vec<ServerSpec>) -> McpClient {
        self.builder_without_events(Config::new(specs).expect("valid specs"))
            .build()
    }

    /// A run input selecting every configured server.
    pub fn input(&self) -> RunInput {
        RunInput::new("state-1", "use the test servers")
    }

    /// `mcp_call_tool` of `tool` (a `server__tool` name) with `arguments`, through `runner`.
    pub async fn call(
        &self,
        runner: &dyn ToolDispatcher,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        call_tool(runner, tool, arguments).await
    }

    /// Asserts that every server this harness spawned is gone with its process group
    /// (waiting at most 5 s).
    pub async fn assert_no_process_left(&self) {
        mcp_test_kit::procs::assert_gone(&self.spawned.pids()).await;
    }
}

/// `mcp_call_tool` of `tool` (a `server__tool` name) with `arguments`, through `runner`,
/// bounded by [`LIMIT`].
pub async fn call_tool(
    runner: &dyn ToolDispatcher,
    tool: &str,
    arguments: Value,
) -> Result<ToolOutput, ToolError> {
    let call = ToolCall::new(
        "call-1",
        mcp_catalog::CALL_TOOL,
        call_tool_input(tool, arguments),
    );
    bounded(runner.dispatch(call)).await
}

/// `mcp_call_tool`'s input for `tool` with `arguments`, which it holds as they are (`json!`
/// with an expression inside would serialize them again: a deep copy that a model's call,
/// parsed once, never pays).
pub fn call_tool_input(tool: &str, arguments: Value) -> JsonObject {
    let mut input = JsonObject::new();
    input.insert("tool_name".into(), Value::from(tool));
    input.insert("arguments".into(), arguments);
    input
}

/// `mcp_search_tools` for `query` (optionally on one server, with a limit): the model-facing
/// names found, best first.
pub async fn search(
    runner: &dyn ToolDispatcher,
    query: &str,
    server: Option<&str>,
    limit: usize,
) -> Vec<String> {
    let mut args = json!({"query": query, "limit": limit});
    if let Some(server) = server {
        args["server"] = json!(server);
    }
    let call = ToolCall::new("search-1", mcp_catalog::SEARCH_TOOL, object(args));
    let out = bounded(runner.dispatch(call))
        .await
        .unwrap_or_else(|e| panic!("search `{query}`: {e}"));
    let found = out.structured.expect("search results are structured");
    found["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// The JSON object `value` (which must be one).
pub fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not a JSON object: {other}"),
    }
}

/// The error and its sources, joined with `: `.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
