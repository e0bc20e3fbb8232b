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

use crate::support::{LIMIT, bounded, call_through, object, output_text};

/// One session's `ask` tool: sends the client the `request` argument through the session's
/// `Downstream`, waiting at most `bound_ms`, and returns its answer.
struct Asking(Downstream);

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
        let request = serde_json::from_value(call.arguments["request"].clone()).unwrap();
        let bound_ms = call.arguments.get("bound_ms").and_then(Value::as_u64);
        let bound = Duration::from_millis(bound_ms.unwrap_or(30_000));
        match self.0.elicit(request, bound).await {
            Ok(answer) => Ok(ToolOutput::structured(
                serde_json::to_value(answer).unwrap(),
            )),
            Err(e) => Err(ToolError::Invocation {
                server: None,
                tool: call.name,
                message: e.to_string(),
            }),
        }
    }
}

impl SessionTools for Asking {}

/// Opens [`Asking`] over each session's downstream.
struct Opener;

#[async_trait]
impl OpenTools for Opener {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.open_for(Downstream::none()).await
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        Ok(Arc::new(Asking(downstream)))
    }
}

/// What the downstream client answers.
enum Reply {
    Accept(Value),
    Never,
}

/// The downstream client's handler: counts what it is asked.
struct Person {
    reply: Reply,
    asked: AtomicUsize,
    messages: Mutex<Vec<String>>,
}

impl Person {
    fn new(reply: Reply) -> Arc<Self> {
        Arc::new(Self {
            reply,
            asked: AtomicUsize::new(0),
            messages: Mutex::default(),
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
}

async fn serve() -> HttpServer {
    ToolServer::per_session(Arc::new(Opener))
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP")
}

/// An `mcp_client` run on `url`: a 2025-11-25 session (`discover` off) or a 2026-07-28
/// client, its elicitations answered by `person` when given (then it declares the
/// capability, form and URL).
async fn downstream(url: &url::Url, discover: bool, person: Option<Arc<Person>>) -> McpRunner {
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
    let serving =
        tokio::spawn(ToolServer::per_session(Arc::new(Opener)).serve_transport(server_end));
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
