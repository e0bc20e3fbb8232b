//! A small HTTP server on 127.0.0.1 for the transport's tests: an rmcp streamable HTTP server
//! (or a scripted handler) behind a layer that records every request.
#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::request::Parts;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The bound on every test.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(20);

#[allow(unused_imports)]
pub use mcp_test_kit::bounded;

/// Response bodies of the test server.
pub type Body = BoxBody<Bytes, Infallible>;

/// Answers one request (head and whole body).
pub type Handler = Arc<dyn Fn(Parts, Bytes) -> BoxFuture<'static, Response<Body>> + Send + Sync>;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// HTTP method.
    pub method: Method,
    /// HTTP version.
    pub version: http::Version,
    /// Request headers.
    pub headers: HeaderMap,
    /// The JSON-RPC method of a POST body, if any.
    pub rpc: Option<String>,
    /// The status of the response.
    pub status: StatusCode,
    /// The `Content-Type` of the response.
    pub response_type: Option<String>,
}

impl Seen {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A running server; dropped, it stops (the accept loop and every connection).
pub struct Server {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: url::Url,
    log: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    /// POSTs whose JSON-RPC method is `rpc`.
    pub fn count_rpc(&self, rpc: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.rpc.as_deref() == Some(rpc))
            .count()
    }

    /// Requests with HTTP method `method`.
    pub fn count_method(&self, method: &Method) -> usize {
        self.seen().iter().filter(|s| s.method == *method).count()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// A spec for this server.
    pub fn spec(&self, name: &str) -> ServerSpec {
        ServerSpec::new(
            name,
            TransportSpec::StreamableHttp(HttpSpec::new(self.url.clone())),
        )
    }
}

/// Serves `handler` on an ephemeral port of 127.0.0.1 (HTTP/1.1 and h2c).
pub async fn serve(handler: Handler) -> Server {
    serve_with(handler, None).await
}

/// Serves `handler` over TLS (HTTP/1.1 and HTTP/2 by ALPN) with `tls`.
pub async fn serve_tls(handler: Handler, tls: tokio_rustls::TlsAcceptor) -> Server {
    serve_with(handler, Some(tls)).await
}

async fn serve_with(handler: Handler, tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(AtomicUsize::new(0));
    let (task_log, task_connections) = (log.clone(), connections.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let _ = stream.set_nodelay(true);
            task_connections.fetch_add(1, Ordering::SeqCst);
            let (handler, log, tls) = (handler.clone(), task_log.clone(), tls.clone());
            conns.spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (handler, log) = (handler.clone(), log.clone());
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let rpc = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
                                v.get("method").and_then(Value::as_str).map(str::to_owned)
                            });
                            let (method, headers, version) =
                                (parts.method.clone(), parts.headers.clone(), parts.version);
                            let response = handler(parts, body).await;
                            log.lock().unwrap().push(Seen {
                                method,
                                version,
                                headers,
                                rpc,
                                status: response.status(),
                                response_type: response
                                    .headers()
                                    .get("content-type")
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_owned),
                            });
                            Ok::<_, Infallible>(response)
                        }
                    });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                match tls {
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                    Some(tls) => {
                        let Ok(stream) = tls.accept(stream).await else {
                            return;
                        };
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
            });
        }
    });
    Server {
        url: format!("{scheme}://{addr}/mcp").parse().unwrap(),
        log,
        connections,
        task,
    }
}

/// A body of `text`.
pub fn body(text: impl Into<Bytes>) -> Body {
    Full::new(text.into()).boxed()
}

/// A response with `status`, `content_type` and `text`.
pub fn respond(status: StatusCode, content_type: &str, text: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(body(text))
        .unwrap()
}

/// How the rmcp server answers POSTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sessions (`Mcp-Session-Id`), responses as SSE streams.
    SessionSse,
    /// No sessions, plain JSON responses.
    StatelessJson,
    /// rmcp's default configuration: responses as SSE streams, no legacy sessions.
    DefaultSse,
}

/// An rmcp streamable HTTP server of [`Echo`], with its session manager (to forget sessions).
pub struct RmcpServer {
    /// The rmcp service.
    pub service: Arc<StreamableHttpService<Echo, LocalSessionManager>>,
    /// Its sessions.
    pub sessions: Arc<LocalSessionManager>,
}

impl RmcpServer {
    /// A server in `mode`.
    pub fn new(mode: Mode) -> Self {
        let sessions = Arc::new(LocalSessionManager::default());
        let mut config = StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_legacy_session_mode(mode == Mode::SessionSse)
            .with_json_response(mode == Mode::StatelessJson);
        config.sse_retry = None;
        let service = StreamableHttpService::new(|| Ok(Echo), sessions.clone(), config);
        Self {
            service: Arc::new(service),
            sessions,
        }
    }

    /// Answers one request through rmcp.
    pub fn handle(&self, parts: Parts, body: Bytes) -> BoxFuture<'static, Response<Body>> {
        let service = self.service.clone();
        Box::pin(async move {
            service
                .handle(Request::from_parts(parts, Full::new(body)))
                .await
        })
    }

    /// A handler answering every request through rmcp.
    pub fn handler(self: &Arc<Self>) -> Handler {
        let this = self.clone();
        Arc::new(move |parts, body| this.handle(parts, body))
    }

    /// Forgets every session, as a restarted server would.
    pub async fn forget_sessions(&self) {
        self.sessions.sessions.write().await.clear();
    }
}

/// A server with two tools: `echo {text}` and `big {bytes}` (a text of that many bytes).
#[derive(Debug, Clone, Copy)]
pub struct Echo;

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = |prop: &str, ty: &str| {
            object(json!({
                "type": "object",
                "properties": { prop: { "type": ty } },
                "required": [prop]
            }))
        };
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("echo", "Returns the text.", schema("text", "string")),
            Tool::new(
                "big",
                "Returns that many bytes.",
                schema("bytes", "integer"),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = match request.name.as_ref() {
            "echo" => args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            "big" => "x".repeat(args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// `echo` call parameters.
pub fn echo(text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("echo").with_arguments(object(json!({ "text": text })))
}

/// `big` call parameters.
pub fn big(bytes: usize) -> CallToolRequestParams {
    CallToolRequestParams::new("big").with_arguments(object(json!({ "bytes": bytes })))
}

/// The text of a tool result.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// A JSON-RPC message as an `application/json` response.
pub fn json_answer(message: &Value) -> Response<Body> {
    respond(StatusCode::OK, "application/json", message.to_string())
}

/// A JSON-RPC message as the one event of a `text/event-stream` response.
pub fn sse_answer(message: &Value) -> Response<Body> {
    respond(
        StatusCode::OK,
        "text/event-stream",
        format!("data: {message}\n\n"),
    )
}

/// A response that sends `prefix` and then neither more nor its end: only the client can
/// end it.
pub fn stalling(content_type: &str, prefix: impl Into<Bytes>) -> Response<Body> {
    use futures::StreamExt as _;
    let first = futures::stream::iter([Ok(hyper::body::Frame::data(prefix.into()))]);
    let body = http_body_util::StreamBody::new(first.chain(futures::stream::pending()));
    Response::builder()
        .header("content-type", content_type)
        .body(BodyExt::boxed(body))
        .unwrap()
}

/// The answer of a scripted server to one JSON-RPC request (`None`: the default answer).
pub type Script = Arc<dyn Fn(&Parts, &Value) -> Option<Response<Body>> + Send + Sync>;

/// A minimal stateless MCP server that answers with plain JSON: `initialize` succeeds,
/// notifications are accepted, GET is 405, DELETE 200, `tools/list` lists `echo` and
/// `tools/call` echoes its `text`; `script` is asked first for every POST (with the request
/// head and its JSON-RPC message).
pub fn scripted(script: Script) -> Handler {
    Arc::new(move |parts: Parts, body: Bytes| {
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = match parts.method {
            Method::GET => respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", ""),
            Method::DELETE => respond(StatusCode::OK, "text/plain", ""),
            _ => script(&parts, &message).unwrap_or_else(|| default_answer(&message)),
        };
        Box::pin(std::future::ready(answer))
    })
}

fn default_answer(message: &Value) -> Response<Body> {
    let id = message["id"].clone();
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "scripted", "version": "1" }
        }),
        "tools/list" => json!({
            "tools": [{
                "name": "echo",
                "description": "Returns the text.",
                "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } }
            }]
        }),
        "tools/call" => json!({
            "content": [{ "type": "text", "text": message["params"]["arguments"]["text"] }]
        }),
        _ if id.is_null() => return respond(StatusCode::ACCEPTED, "text/plain", ""),
        _ => json!({}),
    };
    json_answer(&json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}
