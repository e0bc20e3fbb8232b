//! The downstream client of a per-session server (`OpenTools::open_for`'s `Downstream`): a
//! 2025-11-25 client that declared elicitation is asked (over HTTP, on the stream of the call
//! in flight) and its answer comes back; a mode it did not declare, a client without the
//! capability and a 2026-07-28 client are declined without being asked; a client that never
//! answers makes `elicit` fail within its bound, and the session goes on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_client::{ElicitationHandler, McpRunner, OpenOptions};
use mcp_serve::{
    Downstream, HttpOptions, HttpServer, OpenError, OpenTools, SessionTools, ToolServer,
};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{LIMIT, bounded, call_through, object, output_text};

/// One session's `ask` tool: sends the client the `request` argument through the session's
/// `Downstream` (as from the upstream `from`, when given), waiting at most `bound_ms`, and
/// returns its answer. With `hold`, it asks nothing and ends once `release` is notified (it
/// notifies `holding` first). Its calls' origin is their `origin` argument.
struct Asking {
    downstream: Downstream,
    gates: Gates,
}

/// What holding calls wait for and say.
#[derive(Clone, Default)]
struct Gates {
    holding: Arc<Notify>,
    release: Arc<Notify>,
}

impl ToolCatalog for Asking {
    fn tools(&self) -> Vec<ToolDescriptor> {
        vec![ToolDescriptor::new(
            "ask",
            object(json!({"type": "object"})),
        )]
    }
}

#[async_trait]
impl ToolDispatcher for Asking {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        if call.arguments.get("hold").is_some() {
            self.gates.holding.notify_one();
            self.gates.release.notified().await;
            return Ok(ToolOutput::structured(json!({"held": true})));
        }
        let request = serde_json::from_value(call.arguments["request"].clone()).unwrap();
        let bound_ms = call.arguments.get("bound_ms").and_then(Value::as_u64);
        let bound = Duration::from_millis(bound_ms.unwrap_or(30_000));
        let answer = match call.arguments.get("from").and_then(Value::as_str) {
            Some(from) => self.downstream.elicit_from(from, request, bound).await,
            None => self.downstream.elicit(request, bound).await,
        };
        // Completions asked for as `[origin, elicitation id]` pairs: whether each was sent.
        let mut completed = Vec::new();
        if let Some(pairs) = call.arguments.get("complete").and_then(Value::as_array) {
            for pair in pairs {
                let (origin, id) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
                completed.push(self.downstream.complete_from(origin, id).await);
            }
        }
        match answer {
            Ok(answer) => {
                let mut answer = serde_json::to_value(answer).unwrap();
                if !completed.is_empty() {
                    answer["completed"] = json!(completed);
                }
                Ok(ToolOutput::structured(answer))
            }
            Err(e) => Err(ToolError::Invocation {
                server: None,
                tool: call.name,
                message: e.to_string(),
            }),
        }
    }
}

impl SessionTools for Asking {
    fn origin(&self, call: &ToolCall) -> Option<String> {
        let origin = call.arguments.get("origin")?.as_str()?;
        Some(origin.to_owned())
    }
}

/// Opens [`Asking`] over each session's downstream.
#[derive(Default)]
struct Opener(Gates);

#[async_trait]
impl OpenTools for Opener {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.open_for(Downstream::none()).await
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        Ok(Arc::new(Asking {
            downstream,
            gates: self.0.clone(),
        }))
    }
}

/// What the downstream client answers.
enum Reply {
    Accept(Value),
    Never,
}

/// The downstream client's handler: counts what it is asked.
pub(crate) struct Person {
    reply: Reply,
    asked: AtomicUsize,
    messages: Mutex<Vec<String>>,
    /// The URL requests it was told are complete, and a signal for each.
    completed: Mutex<Vec<String>>,
    completion: Notify,
}

impl Person {
    fn new(reply: Reply) -> Arc<Self> {
        Arc::new(Self {
            reply,
            asked: AtomicUsize::new(0),
            messages: Mutex::default(),
            completed: Mutex::default(),
            completion: Notify::new(),
        })
    }
}

#[async_trait]
impl ElicitationHandler for Person {
    async fn elicit(&self, _server: &str, request: ElicitRequestParams) -> ElicitResult {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        self.messages.lock().unwrap().push(message);
        match &self.reply {
            Reply::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            Reply::Never => std::future::pending().await,
        }
    }

    async fn completed(&self, _server: &str, elicitation_id: &str) {
        self.completed
            .lock()
            .unwrap()
            .push(elicitation_id.to_owned());
        self.completion.notify_one();
    }
}

async fn serve() -> HttpServer {
    ToolServer::per_session(Arc::new(Opener::default()))
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP")
}

/// An `mcp_client` run on `url`: a 2025-11-25 session (`discover` off) or a 2026-07-28
/// client, its elicitations answered by `person` when given (then it declares the
/// capability, form and URL).
pub(crate) async fn downstream(
    url: &url::Url,
    discover: bool,
    person: Option<Arc<Person>>,
) -> McpRunner {
    use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
    let mut spec = ServerSpec::new(
        "gw",
        TransportSpec::StreamableHttp(HttpSpec::new(url.clone())),
    );
    spec.connect_timeout = Some(LIMIT);
    let config = mcp_config::Config::new(vec![spec.clone()]).expect("a valid spec");
    let connector =
        mcp_transport_http::HttpConnector::new(mcp_transport_http::HttpOptions::default())
            .expect("the HTTP connector");
    let client = mcp_client::McpClient::builder(config)
        .connectors(mcp_client::Connectors::new().with(connector))
        .discover(discover)
        .build();
    let mut options = OpenOptions::new();
    if let Some(person) = person {
        options = options.with_elicitation(person);
    }
    let run = mcp_config::ResolvedRun::new(vec![spec], mcp_config::RunOptions::default());
    bounded(
        "open the downstream run",
        client.open_resolved_with(run, options),
    )
    .await
    .unwrap_or_else(|e| panic!("open: {}", agent_core::error_chain(&e)))
}

fn form() -> Value {
    json!({
        "mode": "form", "message": "your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    })
}

fn url_mode() -> Value {
    json!({
        "mode": "url", "message": "sign in", "url": "https://example.com/login",
        "elicitationId": "e-1",
    })
}

async fn ask(runner: &McpRunner, request: Value, bound_ms: u64) -> Result<Value, ToolError> {
    let output = call_through(
        runner,
        "ask",
        json!({"request": request, "bound_ms": bound_ms}),
    )
    .await?;
    let text = output_text(&output);
    Ok(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
}

#[tokio::test]
async fn a_session_client_that_declared_elicitation_is_asked_and_answers() {
    let server = serve().await;
    let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
    let runner = downstream(server.url(), false, Some(person.clone())).await;

    let answer = ask(&runner, form(), 30_000).await.unwrap();
    assert_eq!(answer["action"], "accept", "{answer}");
    assert_eq!(answer["content"], json!({"name": "Ada"}));
    assert_eq!(*person.messages.lock().unwrap(), ["your name?"]);

    // Three at once: each is asked and answered.
    let many = futures::future::join_all((0..3).map(|_| ask(&runner, form(), 30_000))).await;
    for answer in many {
        assert_eq!(answer.unwrap()["content"]["name"], "Ada");
    }
    assert_eq!(person.asked.load(Ordering::SeqCst), 4);
    runner.shutdown().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn clients_that_cannot_be_asked_are_declined_without_being_asked() {
    let server = serve().await;

    // No capability declared (no handler).
    let runner = downstream(server.url(), false, None).await;
    assert_eq!(
        ask(&runner, form(), 30_000).await.unwrap()["action"],
        "decline"
    );
    runner.shutdown().await.unwrap();

    // A 2026-07-28 client: no server-to-client requests, whatever it declares.
    let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
    let runner = downstream(server.url(), true, Some(person.clone())).await;
    assert_eq!(
        ask(&runner, form(), 30_000).await.unwrap()["action"],
        "decline"
    );
    runner.shutdown().await.unwrap();
    assert_eq!(person.asked.load(Ordering::SeqCst), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_answers_fails_the_request_within_its_bound() {
    let server = serve().await;
    let person = Person::new(Reply::Never);
    let runner = downstream(server.url(), false, Some(person.clone())).await;

    let started = Instant::now();
    let error = ask(&runner, form(), 300).await.unwrap_err();
    let text = agent_core::error_chain(&error);
    assert!(text.contains("did not answer within 300 ms"), "{text}");
    assert!(started.elapsed() < LIMIT, "{:?}", started.elapsed());
    assert_eq!(person.asked.load(Ordering::SeqCst), 1);

    // The session goes on: the next request is asked too.
    let error = ask(&runner, url_mode(), 300).await.unwrap_err();
    assert!(agent_core::error_chain(&error).contains("did not answer"));
    assert_eq!(person.asked.load(Ordering::SeqCst), 2);
    runner.shutdown().await.unwrap();
    server.shutdown().await;
}

/// An rmcp client declaring form elicitation only, accepting with `{"name": "Ada"}`.
struct FormOnly(Arc<AtomicUsize>);

impl rmcp::ClientHandler for FormOnly {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{ClientCapabilities, ElicitationCapability, FormElicitationCapability};
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::new());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("form-only", "1"),
        )
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"})))
    }
}

#[tokio::test]
async fn only_the_modes_the_client_declared_are_asked() {
    use rmcp::ServiceExt as _;
    let request: ElicitRequestParams = serde_json::from_value(url_mode()).unwrap();
    assert!(!Downstream::none().can_elicit(&request));

    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn(
        ToolServer::per_session(Arc::new(Opener::default())).serve_transport(server_end),
    );
    let asked = Arc::new(AtomicUsize::new(0));
    let client = bounded("initialize", FormOnly(asked.clone()).serve(client_end))
        .await
        .expect("initialize");
    let session = bounded("serve", serving).await.unwrap().expect("serve");
    let call = |request: Value| {
        let params = rmcp::model::CallToolRequestParams::new("ask")
            .with_arguments(object(json!({"request": request})));
        bounded("tools/call", client.call_tool(params))
    };
    let url_answer = call(url_mode()).await.unwrap();
    assert_eq!(url_answer.structured_content.unwrap()["action"], "decline");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "a URL request is never sent"
    );
    let form_answer = call(form()).await.unwrap();
    assert_eq!(
        form_answer.structured_content.unwrap()["content"]["name"],
        "Ada"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    drop(client);
    bounded("shutdown", session.shutdown(LIMIT)).await;
}

/// The messages of one streamable HTTP answer, read as they come: those of its event stream,
/// or the one of its JSON body.
struct Events {
    body: hyper::body::Incoming,
    buffer: String,
    /// The answer is one JSON body, not read yet.
    json: bool,
}

impl Events {
    /// The next JSON-RPC message on the stream (`None` once it ends).
    async fn next(&mut self) -> Option<Value> {
        use http_body_util::BodyExt as _;
        if std::mem::take(&mut self.json) {
            let bytes = (&mut self.body)
                .collect()
                .await
                .expect("the JSON body")
                .to_bytes();
            return Some(serde_json::from_slice(&bytes).expect("one JSON-RPC message"));
        }
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                    return Some(message);
                }
                continue;
            }
            let frame = self.body.frame().await?.expect("a frame");
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    /// The next message that is a request (`elicitation/create`) or a response.
    async fn next_request_or_response(&mut self) -> Value {
        loop {
            let message = bounded("the next message", self.next())
                .await
                .expect("the stream ended first");
            if message.get("id").is_some() {
                return message;
            }
        }
    }
}

/// One raw 2025-11-25 session over HTTP with a client that declared form elicitation.
struct RawSession {
    url: String,
    id: String,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Full<bytes::Bytes>,
    >,
}

impl RawSession {
    async fn open(url: &url::Url) -> Self {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let mut session = Self {
            url: url.to_string(),
            id: String::new(),
            client,
        };
        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "raw", "version": "0"}
            }
        });
        let (headers, mut events) = session.post(&initialize).await;
        session.id = headers["mcp-session-id"].to_str().unwrap().to_owned();
        let answer = events.next_request_or_response().await;
        assert_eq!(answer["id"], 1, "{answer}");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        session.post(&initialized).await;
        session
    }

    /// Posts `message` and returns the answer's headers and event stream.
    async fn post(&self, message: &Value) -> (http::HeaderMap, Events) {
        let mut request = http::Request::post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if !self.id.is_empty() {
            request = request
                .header("mcp-session-id", &self.id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let request = request
            .body(http_body_util::Full::new(bytes::Bytes::from(
                message.to_string(),
            )))
            .unwrap();
        let response = bounded("a POST", self.client.request(request))
            .await
            .expect("an HTTP answer");
        assert!(response.status().is_success(), "{}", response.status());
        let (parts, body) = response.into_parts();
        let json = parts
            .headers
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        let events = Events {
            body,
            buffer: String::new(),
            json,
        };
        (parts.headers, events)
    }

    async fn call(&self, id: u64, arguments: Value) -> Events {
        let call = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "ask", "arguments": arguments},
        });
        self.post(&call).await.1
    }
}

#[tokio::test]
async fn an_elicitation_rides_the_stream_of_the_call_to_the_server_that_asked() {
    let gates = Gates::default();
    let server = ToolServer::per_session(Arc::new(Opener(gates.clone())))
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP");
    let session = RawSession::open(server.url()).await;

    // A long call to upstream x, in flight first…
    let mut to_x = session.call(2, json!({"hold": true, "origin": "x"})).await;
    bounded("the held call", gates.holding.notified()).await;
    // …then a call to upstream y, which asks.
    let mut to_y = session
        .call(3, json!({"origin": "y", "from": "y", "request": form()}))
        .await;

    let asked = tokio::select! {
        message = to_y.next_request_or_response() => message,
        message = to_x.next_request_or_response() => {
            panic!("the request came on the stream of the call to x: {message}")
        }
    };
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "your name?");
    let answer = json!({
        "jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"name": "Ada"}},
    });
    session.post(&answer).await;
    let result = to_y.next_request_or_response().await;
    assert_eq!(result["id"], 3, "{result}");
    assert_eq!(
        result["result"]["structuredContent"]["content"]["name"], "Ada",
        "{result}"
    );

    // A request from an upstream no call in flight goes to rides the newest call.
    let mut newest = session
        .call(4, json!({"origin": "y", "from": "z", "request": form()}))
        .await;
    let asked = tokio::select! {
        message = newest.next_request_or_response() => message,
        message = to_x.next_request_or_response() => {
            panic!("the request came on the stream of the oldest call: {message}")
        }
    };
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let decline = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}});
    session.post(&decline).await;
    assert_eq!(newest.next_request_or_response().await["id"], 4);

    gates.release.notify_one();
    let held = to_x.next_request_or_response().await;
    assert_eq!(held["result"]["structuredContent"]["held"], true, "{held}");
    server.shutdown().await;
}

/// An rmcp client declaring form elicitation that never answers: it reports each request it
/// is asked, and each one cancelled.
struct Waiting {
    asked: tokio::sync::mpsc::UnboundedSender<rmcp::model::RequestId>,
    cancelled: tokio::sync::mpsc::UnboundedSender<rmcp::model::RequestId>,
}

impl rmcp::ClientHandler for Waiting {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        FormOnly(Arc::default()).get_info()
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let _ = self.asked.send(context.id.clone());
        context.ct.cancelled().await;
        let _ = self.cancelled.send(context.id);
        Ok(ElicitResult::new(ElicitationAction::Cancel))
    }
}

#[tokio::test]
async fn an_elicitation_is_cancelled_when_the_call_that_asked_is_cancelled() {
    use rmcp::ServiceExt as _;
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn(
        ToolServer::per_session(Arc::new(Opener::default())).serve_transport(server_end),
    );
    let (asked_tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
    let (cancelled_tx, mut cancelled) = tokio::sync::mpsc::unbounded_channel();
    let handler = Waiting {
        asked: asked_tx,
        cancelled: cancelled_tx,
    };
    let client = bounded("initialize", handler.serve(client_end))
        .await
        .expect("initialize");
    let session = bounded("serve", serving).await.unwrap().expect("serve");

    let params = rmcp::model::CallToolRequestParams::new("ask")
        .with_arguments(object(json!({"request": form(), "bound_ms": 600_000})));
    let call = bounded(
        "tools/call",
        client.send_request_with_option(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        ),
    )
    .await
    .expect("sent");
    let elicitation = bounded("the elicitation", asked.recv()).await.unwrap();

    // The client gives up on the call: its elicitation is cancelled too, long before its
    // own bound.
    call.cancel(Some("the user went away".to_owned()))
        .await
        .expect("cancel");
    let gone = bounded("the elicitation's cancellation", cancelled.recv())
        .await
        .unwrap();
    assert_eq!(gone, elicitation);
    drop(client);
    bounded("shutdown", session.shutdown(LIMIT)).await;
}

#[tokio::test]
async fn hostile_texts_are_cleaned_and_a_hostile_url_is_declined_unasked() {
    let server = serve().await;
    let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
    let runner = downstream(server.url(), false, Some(person.clone())).await;

    let hostile = json!({
        "mode": "form",
        "message": format!("\u{1b}[2Jpay\u{9b}1m\r\nnow\t{}", "x".repeat(100_000)),
        "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "title": "N\u{7}ame", "description": "\u{1b}]8;;https://evil\u{7}click"},
        }},
    });
    let answer = ask(&runner, hostile, 30_000).await.unwrap();
    assert_eq!(answer["action"], "accept", "{answer}");
    let message = person.messages.lock().unwrap()[0].clone();
    assert!(
        message.starts_with("[2Jpay1m\nnow\t"),
        "{:?}",
        &message[..20]
    );
    assert!(message.len() <= 4096 + '…'.len_utf8(), "{}", message.len());
    assert!(
        !message
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    );

    for url in ["javascript:alert(1)", "https://example.com/\u{1b}[2J"] {
        let request = json!({
            "mode": "url", "message": "sign in", "url": url, "elicitationId": "e-2",
        });
        let answer = ask(&runner, request, 30_000).await.unwrap();
        assert_eq!(answer["action"], "decline", "{url:?}: {answer}");
    }
    assert_eq!(
        person.asked.load(Ordering::SeqCst),
        1,
        "a hostile URL is never sent"
    );
    runner.shutdown().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn a_url_request_is_completed_once_and_only_for_its_origin() {
    let server = serve().await;
    let person = Person::new(Reply::Accept(json!({})));
    let runner = downstream(server.url(), false, Some(person.clone())).await;
    let arguments = json!({
        "request": url_mode(),
        "from": "y",
        "complete": [["z", "e-1"], ["y", "other"], ["y", "e-1"], ["y", "e-1"]],
    });
    let output = call_through(&runner, "ask", arguments).await.unwrap();
    let answer: Value = serde_json::from_str(&output_text(&output)).unwrap();
    assert_eq!(answer["action"], "accept", "{answer}");
    // Another origin's, an unknown id, then the request itself, and only once.
    assert_eq!(answer["completed"], json!([false, false, true, false]));
    bounded("the completion", person.completion.notified()).await;
    assert_eq!(*person.completed.lock().unwrap(), ["e-1"]);
    runner.shutdown().await.unwrap();
    server.shutdown().await;
}
