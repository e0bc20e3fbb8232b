//! What the tests share: a catalog of native tools that records what reaches it, in-memory
//! and HTTP servers of it, an `mcp_client` session to a served endpoint, and raw HTTP
//! requests for the checks in front of rmcp.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::{
    ContentPart, ToolAnnotations, ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError,
    ToolOutput,
};
use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mcp_serve::{Exposure, HttpOptions, HttpServer, ToolServer};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// Every wait of these tests is bounded by this.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

/// `future`, or a panic naming what did not finish within [`LIMIT`].
pub(crate) async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within {LIMIT:?}"))
}

/// A JSON object from a `json!` literal.
pub(crate) fn object(value: Value) -> agent_core::JsonObject {
    value.as_object().cloned().expect("an object")
}

/// Native tools, one per result shape, and a record of every call that reached them.
///
/// - `mapping` → structured `{"sum": a + b}`; `scalar` → structured `a + b`;
///   `text` → text parts; `string` → structured string; `parts` → an image part and
///   structured `{"n": 1}`; `fail` → a tool error; `boom` → a transport error with a cause;
/// - `gate` waits until [`Tools::open_gate`] (and says it started on `started`);
/// - `reader` is annotated read-only; `hidden` is never exposed by the tests.
#[derive(Default)]
pub(crate) struct Tools {
    calls: AtomicUsize,
    seen: Mutex<Vec<ToolCall>>,
    gate: Notify,
    started: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

impl Tools {
    /// How many calls reached the dispatcher.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The calls that reached the dispatcher.
    pub(crate) fn seen(&self) -> Vec<ToolCall> {
        self.seen.lock().unwrap().clone()
    }

    /// A channel told the id of each `gate` call once it runs.
    pub(crate) fn on_gate(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.started.lock().unwrap() = Some(tx);
        rx
    }

    /// Lets every waiting and later `gate` call finish.
    pub(crate) fn open_gate(&self) {
        self.gate.notify_waiters();
        self.gate.notify_one();
    }
}

impl ToolCatalog for Tools {
    fn tools(&self) -> Vec<ToolDescriptor> {
        let numbers = object(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        }));
        let any = || object(json!({"type": "object"}));
        vec![
            ToolDescriptor::new("mapping", numbers.clone()).with_description("Sums, as a mapping."),
            ToolDescriptor::new("scalar", numbers)
                .with_description("Sums, as a number.")
                .with_output_schema(object(json!({"type": "number"}))),
            ToolDescriptor::new("text", any()),
            ToolDescriptor::new("string", any()),
            ToolDescriptor::new("parts", any()),
            ToolDescriptor::new("fail", any()),
            ToolDescriptor::new("boom", any()),
            ToolDescriptor::new("gate", any()),
            ToolDescriptor::new("reader", any()).with_annotations(ToolAnnotations::read_only()),
            ToolDescriptor::new("hidden", any()),
        ]
    }
}

#[async_trait]
impl ToolDispatcher for Tools {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(call.clone());
        let n = |k: &str| call.arguments.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let tool = call.name.clone();
        match tool.as_str() {
            "mapping" => Ok(ToolOutput::structured(json!({"sum": n("a") + n("b")}))),
            "scalar" => Ok(ToolOutput::structured(json!(n("a") + n("b")))),
            "text" => Ok(ToolOutput::from_parts(vec![
                ContentPart::text("one"),
                ContentPart::text("two"),
            ])),
            "string" => Ok(ToolOutput::structured(json!("héllo"))),
            "parts" => {
                let mut out = ToolOutput::from_parts(vec![ContentPart::Image {
                    data: "AAAA".into(),
                    mime_type: "image/png".into(),
                }]);
                out.structured = Some(json!({"n": 1}));
                Ok(out)
            }
            "fail" => Err(ToolError::Invocation {
                server: None,
                tool,
                message: "it broke".into(),
            }),
            "boom" => Err(ToolError::Transport {
                server: Some("upstream".into()),
                tool,
                source: "the connection was reset".into(),
            }),
            "gate" => {
                let waiting = self.gate.notified();
                if let Some(tx) = self.started.lock().unwrap().as_ref() {
                    let _ = tx.send(call.id.clone());
                }
                waiting.await;
                Ok(ToolOutput::structured(json!({"gate": "passed"})))
            }
            "reader" | "hidden" => Ok(ToolOutput::text(format!("{tool} ran"))),
            _ => Err(ToolError::unknown_tool(tool, Vec::new())),
        }
    }
}

/// The exposure most tests use: every tool but `hidden`.
pub(crate) fn all_but_hidden() -> Exposure {
    Exposure::only([
        "mapping", "scalar", "text", "string", "parts", "fail", "boom", "gate", "reader",
    ])
}

/// Serves `tools` over HTTP on 127.0.0.1 with `options`.
pub(crate) async fn serve_http(
    tools: &Arc<Tools>,
    exposure: Exposure,
    options: HttpOptions,
) -> HttpServer {
    ToolServer::new(tools.clone(), exposure)
        .name("served", "1.2.3")
        .serve_http(options.with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP")
}

/// An rmcp client session to `server` over an in-memory pipe.
pub(crate) async fn in_memory(
    server: ToolServer,
) -> (RunningService<RoleClient, ()>, mcp_serve::SessionServer) {
    use rmcp::ServiceExt as _;
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn(server.serve_transport(server_end));
    let client = bounded("client initialize", ().serve(client_end))
        .await
        .expect("client initialize");
    let session = bounded("server initialize", serving)
        .await
        .unwrap()
        .expect("server initialize");
    (client, session)
}

/// Calls `tool` with `arguments` through an rmcp client.
pub(crate) async fn rmcp_call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> Result<rmcp::model::CallToolResult, rmcp::ServiceError> {
    let params =
        rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments));
    bounded("tools/call", client.call_tool(params)).await
}

/// The text of every text block of `result`, joined by newlines.
pub(crate) fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The JSON-RPC messages the body carries, in order: the `data` of each event of an event
    /// stream (empty ones skipped), or the body itself when it is not a stream.
    pub(crate) fn messages(&self) -> Vec<Value> {
        let data: Vec<&str> = (self.body.lines())
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .filter(|data| !data.is_empty())
            .collect();
        if data.is_empty() {
            return vec![self.json()];
        }
        let parse = |data: &str| {
            serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
        };
        data.into_iter().map(parse).collect()
    }
}

/// Sends one request to `url` and reads the whole answer (event streams too: the request
/// must be one whose stream ends).
pub(crate) async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(body.into())).unwrap();
    bounded(&format!("{method} {url}"), async {
        let response = client.request(request).await.expect("an HTTP answer");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the body").to_bytes();
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    })
    .await
}

/// The headers of a streamable HTTP POST.
pub(crate) const POST_HEADERS: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
];

/// A 2025-11-25 `initialize` request body.
pub(crate) fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    })
    .to_string()
}

/// A sessionless (2026-07-28) `tools/call` of `tool` with `arguments`, its `_meta` carrying
/// `meta` besides the revision's own keys, sent with `extra` headers besides the revision's.
pub(crate) async fn stateless_call(
    url: &str,
    tool: &str,
    arguments: Value,
    meta: Value,
    extra: &[(&str, &str)],
) -> Answer {
    let mut params = json!({
        "name": tool, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    });
    if let Value::Object(meta) = meta {
        params["_meta"].as_object_mut().unwrap().extend(meta);
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    headers.extend([
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ]);
    headers.extend(extra);
    send("POST", url, &headers, body.to_string()).await
}

/// An `mcp_client` runner with one session to the endpoint at `url`, sending `token` as
/// bearer token when given.
pub(crate) async fn mcp_client_http(url: &url::Url, token: Option<&str>) -> mcp_client::McpRunner {
    use mcp_config::{HttpSpec, Secret, ServerSpec, TransportSpec};
    let mut http = HttpSpec::new(url.clone());
    if let Some(token) = token {
        http.headers.insert(
            "Authorization".into(),
            Secret::new(format!("Bearer {token}")),
        );
    }
    let spec = ServerSpec::new("served", TransportSpec::StreamableHttp(http));
    let connector =
        mcp_transport_http::HttpConnector::new(mcp_transport_http::HttpOptions::default())
            .expect("the HTTP connector");
    open_runner(spec, mcp_client::Connectors::new().with(connector)).await
}

/// An `mcp_client` runner with one session to the demo binary over stdio.
pub(crate) async fn mcp_client_stdio() -> mcp_client::McpRunner {
    use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
    let spec = ServerSpec::new(
        "demo",
        TransportSpec::Stdio(StdioSpec::new(
            env!("CARGO_BIN_EXE_mcp-serve-demo").to_owned(),
            vec!["stdio".to_owned()],
        )),
    );
    let connector = mcp_transport_stdio::StdioConnector::new();
    open_runner(spec, mcp_client::Connectors::new().with(connector)).await
}

/// Calls `tool` of the runner's one server as a model's call does: `server__tool` through the
/// run's governed layer (the only way to a run's tools), bounded.
pub(crate) async fn call_through(
    runner: &mcp_client::McpRunner,
    tool: &str,
    args: Value,
) -> Result<agent_core::ToolOutput, agent_core::ToolError> {
    let server = runner.sessions()[0].name().to_owned();
    let call = agent_core::ToolCall::new(
        format!("call-{tool}"),
        format!("{server}__{tool}"),
        object(args),
    );
    bounded(tool, agent_core::ToolDispatcher::dispatch(runner, call)).await
}

/// The text parts of a tool output, joined by newlines.
pub(crate) fn output_text(output: &agent_core::ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|part| match part {
            agent_core::ContentPart::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) async fn open_runner(
    mut spec: mcp_config::ServerSpec,
    connectors: mcp_client::Connectors,
) -> mcp_client::McpRunner {
    spec.connect_timeout = Some(LIMIT);
    let config = mcp_config::Config::new(vec![spec.clone()]).expect("a valid spec");
    let client = mcp_client::McpClient::builder(config)
        .connectors(connectors)
        .build();
    let mut options = mcp_config::RunOptions::default();
    options.connect_timeout = LIMIT;
    let run = mcp_config::ResolvedRun::new(vec![spec], options);
    bounded("open the runner", client.open_resolved(run))
        .await
        .unwrap_or_else(|e| panic!("open: {}", agent_core::error_chain(&e)))
}
