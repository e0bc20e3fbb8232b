//! `mcp-agent serve` forwards an upstream server's elicitation requests to the downstream
//! client that made the call: the test kit's `ask` tool (upstream) sends the request it is
//! given and returns the answer it got, so each test reads what the upstream saw. The
//! downstream client is `mcp_client` over HTTP, as a 2025-11-25 session (server-to-client
//! requests) or a 2026-07-28 client (none: declined), or raw HTTP where the stream a request
//! arrives on matters (each server's on the stream of the call to it). Also: a request ends
//! with its call, hostile texts are cleaned, a URL request's completion follows it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcp_agent::{
    Config, ElicitationHandler, McpClient, McpRunner, OpenOptions, ServerSpec, ToolCall,
    config::{HttpSpec, ResolvedRun, RunOptions, TransportSpec},
    error_chain,
    prelude::ToolDispatcher,
    rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction},
};
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, LIMIT, kit_config_with, post_streaming, request};

/// What the downstream person answers.
enum Reply {
    Accept(Value),
    Never,
}

/// The downstream client's elicitation handler, counting what it is asked.
struct Person {
    reply: Reply,
    asked: AtomicUsize,
    /// The messages it was shown.
    messages: std::sync::Mutex<Vec<String>>,
    /// Notified when a request it never answered was cancelled (its future dropped).
    cancelled: Arc<tokio::sync::Notify>,
    /// The URL requests it was told are complete, and a signal for each.
    completed: std::sync::Mutex<Vec<String>>,
    completion: tokio::sync::Notify,
}

/// Notifies its `Notify` when dropped.
struct NotifyOnDrop(Arc<tokio::sync::Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

impl Person {
    fn new(reply: Reply) -> Arc<Self> {
        Arc::new(Self {
            reply,
            asked: AtomicUsize::new(0),
            messages: Default::default(),
            cancelled: Arc::default(),
            completed: Default::default(),
            completion: tokio::sync::Notify::new(),
        })
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ElicitationHandler for Person {
    async fn elicit(&self, _server: &str, request: ElicitRequestParams) -> ElicitResult {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if let ElicitRequestParams::FormElicitationParams { message, .. }
        | ElicitRequestParams::UrlElicitationParams { message, .. } = &request
        {
            self.messages.lock().unwrap().push(message.clone());
        }
        match &self.reply {
            Reply::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            Reply::Never => {
                let _cancelled = NotifyOnDrop(self.cancelled.clone());
                std::future::pending().await
            }
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

/// A gateway in front of the kit server with `ask`, exposing `expose`, the kit's calls
/// bounded by `call_timeout_seconds`.
fn gateway(expose: &str, call_timeout_seconds: u64) -> (tempfile::TempDir, Gateway) {
    gateway_with(
        expose,
        &format!("call_timeout_seconds = {call_timeout_seconds}"),
    )
}

/// [`gateway`] with `lines` added to the kit server's entry.
fn gateway_with(expose: &str, lines: &str) -> (tempfile::TempDir, Gateway) {
    let (dir, file, _record) = kit_config_with(&format!("expose = {expose:?}"), &["--ask"]);
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "\n\n[serve]",
        &format!("\n{lines}\n\n[serve]"),
        1,
    );
    std::fs::write(&file, text).unwrap();
    let gateway = Gateway::start(&file, &[]);
    (dir, gateway)
}

/// A downstream run on the gateway: a session (`discover` off) or a 2026-07-28 client,
/// answering elicitations with `person` when given (then it declares form and URL).
async fn downstream(gateway: &Gateway, discover: bool, person: Option<Arc<Person>>) -> McpRunner {
    let url = gateway.url.parse().unwrap();
    let mut spec = ServerSpec::new("gw", TransportSpec::StreamableHttp(HttpSpec::new(url)));
    spec.connect_timeout = Some(LIMIT);
    spec.call_timeout = LIMIT;
    let client = McpClient::builder(Config::new(vec![spec.clone()]).unwrap())
        .connectors(mcp_agent::connectors().unwrap())
        .discover(discover)
        .build();
    let mut options = OpenOptions::new();
    if let Some(person) = person {
        options = options.with_elicitation(person);
    }
    let run = ResolvedRun::new(vec![spec], RunOptions::default());
    tokio::time::timeout(LIMIT, client.open_resolved_with(run, options))
        .await
        .expect("opened in time")
        .unwrap_or_else(|e| panic!("open: {}", error_chain(&e)))
}

fn form() -> Value {
    json!({
        "mode": "form", "message": "your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    })
}

/// Calls the gateway's `tool` with `arguments`: the result's text, or the error's chain.
async fn call(runner: &McpRunner, tool: &str, arguments: Value) -> Result<String, String> {
    let call = ToolCall::new(
        "c",
        format!("gw__{tool}"),
        arguments.as_object().unwrap().clone(),
    );
    match tokio::time::timeout(LIMIT, runner.dispatch(call))
        .await
        .expect("answered in time")
    {
        Ok(output) => Ok(output.to_model_text()),
        Err(e) => Err(error_chain(&e)),
    }
}

/// The answer the upstream `ask` got, through `kit__ask` (eager) or `mcp_call_tool` (lazy).
async fn ask(runner: &McpRunner, lazy: bool, request: Value) -> Value {
    let text = if lazy {
        let arguments = json!({"tool_name": "kit__ask", "arguments": {"request": request}});
        call(runner, "mcp_call_tool", arguments).await
    } else {
        call(runner, "kit__ask", json!({"request": request})).await
    };
    let text = text.unwrap_or_else(|e| panic!("the call failed: {e}"));
    let start = text
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in {text}"));
    let mut answers = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    answers
        .next()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_answer_reaches_the_upstream_eager_and_lazy() {
    for (expose, lazy) in [("eager", false), ("lazy", true)] {
        let (_dir, gateway) = gateway(expose, 30);
        let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
        let runner = downstream(&gateway, false, Some(person.clone())).await;
        let answer = ask(&runner, lazy, form()).await;
        assert_eq!(answer["action"], "accept", "{expose}: {answer}");
        assert_eq!(answer["content"], json!({"name": "Ada"}), "{expose}");
        assert_eq!(person.asked(), 1, "{expose}");
        runner.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cannot_be_asked_makes_the_upstream_see_a_decline() {
    let (_dir, gateway) = gateway("eager", 30);
    // A session without the capability.
    let runner = downstream(&gateway, false, None).await;
    assert_eq!(ask(&runner, false, form()).await["action"], "decline");
    runner.shutdown().await.unwrap();
    // A 2026-07-28 client, which gets no server-to-client requests whatever it declares.
    let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
    let runner = downstream(&gateway, true, Some(person.clone())).await;
    assert_eq!(ask(&runner, false, form()).await["action"], "decline");
    assert_eq!(person.asked(), 0);
    runner.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_answers_ends_the_call_within_the_server_s_call_timeout() {
    let (_dir, mut gateway) = gateway("eager", 2);
    let person = Person::new(Reply::Never);
    let runner = downstream(&gateway, false, Some(person.clone())).await;
    let started = Instant::now();
    let error = call(&runner, "kit__ask", json!({"request": form()}))
        .await
        .expect_err("the call fails");
    let took = started.elapsed();
    assert!(error.contains("on server `kit` timed out"), "{error}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(20),
        "{took:?}"
    );
    assert_eq!(person.asked(), 1);
    // The request downstream ends with the call: the client is told it was cancelled.
    tokio::time::timeout(LIMIT, person.cancelled.notified())
        .await
        .expect("the downstream request was cancelled");

    // The gateway and the session go on.
    assert!(gateway.is_running());
    let echoed = call(&runner, "kit__echo", json!({"n": 7})).await.unwrap();
    assert!(echoed.contains('7'), "{echoed}");
    runner.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_of_the_gateway_never_reaches_the_downstream_client() {
    const SECRET: &str = "kit-env-secret-5d1e9a77";
    let (_dir, gateway) = gateway_with("eager", &format!("env = {{ KIT_TOKEN = {SECRET:?} }}"));
    let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
    let runner = downstream(&gateway, false, Some(person.clone())).await;
    let mut request = form();
    request["message"] = json!(format!("the gateway's token is {SECRET}; your name?"));
    assert_eq!(ask(&runner, false, request).await["action"], "accept");
    let messages = person.messages.lock().unwrap().clone();
    assert_eq!(messages, ["the gateway's token is [REDACTED]; your name?"]);
    runner.shutdown().await.unwrap();
}

/// The official Python SDK's client (mcp-serve's test client) through the gateway: its report
/// of the calls on stdin. With `accept`, it declares elicitation and accepts with that content.
fn python_through(python: &str, args: &[&str], accept: Option<Value>, calls: &Value) -> Value {
    use std::io::Write as _;
    let client = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../mcp-serve/tests/peers/client.py"
    );
    let mut command = std::process::Command::new(python);
    command.arg(client).args(args);
    if let Some(content) = accept {
        command.env("GW_ELICIT", content.to_string());
    }
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the Python client");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(calls.to_string().as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not a report ({e}): {stdout}"))
}

#[test]
fn the_python_sdk_is_asked_through_the_gateway_over_stdio_and_http() {
    let Some(python) = crate::cli_serve::python() else {
        return;
    };
    let calls = json!({"kit__ask": {"request": form()}});
    let accept = Some(json!({"name": "Grace"}));

    // Over stdio, eager: the SDK's answer reaches the upstream; without a callback, declined.
    let (_dir, file, _record) = kit_config_with("", &["--ask"]);
    let file = file.to_string_lossy().into_owned();
    let gateway = env!("CARGO_BIN_EXE_mcp-agent");
    let args = [
        "legacy", "stdio", gateway, "serve", "--stdio", "--expose", "eager", "--file", &file,
    ];
    let report = python_through(&python, &args, accept.clone(), &calls);
    let answer = &report["calls"]["kit__ask"]["structured"];
    assert_eq!(answer["action"], "accept", "{report}");
    assert_eq!(answer["content"], json!({"name": "Grace"}), "{report}");
    let report = python_through(&python, &args, None, &calls);
    assert_eq!(
        report["calls"]["kit__ask"]["structured"]["action"], "decline",
        "{report}"
    );

    // Over HTTP, lazy: through `mcp_call_tool`.
    let (_dir, gateway) = gateway_with("lazy", "");
    let calls =
        json!({"mcp_call_tool": {"tool_name": "kit__ask", "arguments": {"request": form()}}});
    let report = python_through(&python, &["legacy", "http", &gateway.url], accept, &calls);
    let text = report["calls"]["mcp_call_tool"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("\"Grace\""), "{report}");
}

/// A raw 2025-11-25 session on the gateway, declaring form elicitation: its id.
fn raw_session(addr: &str) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    });
    let (status, head, body) = request(addr, "POST", &[], initialize.to_string().as_bytes());
    assert_eq!(status, 200, "{head}{body}");
    let id = head
        .lines()
        .find_map(|line| line.strip_prefix("mcp-session-id:"))
        .unwrap_or_else(|| panic!("no session id: {head}"))
        .trim()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, ..) = request(
        addr,
        "POST",
        &session_headers(&id),
        initialized.to_string().as_bytes(),
    );
    assert_eq!(status, 202);
    id
}

fn session_headers(id: &str) -> [(&str, &str); 2] {
    [
        ("mcp-session-id", id),
        ("mcp-protocol-version", "2025-11-25"),
    ]
}

/// The next message on `stream` that has an id (a request or a response).
fn next_with_id(stream: &std::sync::mpsc::Receiver<Value>) -> Option<Value> {
    loop {
        match stream.recv_timeout(LIMIT) {
            Ok(message) if message.get("id").is_some() => return Some(message),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

#[test]
fn an_elicitation_rides_the_stream_of_the_call_to_the_server_that_asked() {
    rides_the_stream_of_its_call("eager");
    rides_the_stream_of_its_call("lazy");
}

/// Two upstream servers with `ask`, x and y, behind a gateway exposing `expose`: each one's
/// requests arrive on the stream of the downstream call to it, whichever call is oldest or
/// newest.
fn rides_the_stream_of_its_call(expose: &str) {
    let (dir, file, _record) = kit_config_with(&format!("expose = {expose:?}"), &["--ask"]);
    let text = std::fs::read_to_string(&file).unwrap();
    let (kit, serve) = text.split_once("\n[serve]").unwrap();
    let both = format!(
        "{}\n{}\n[serve]{serve}",
        kit.replacen("name = \"kit\"", "name = \"x\"", 1),
        kit.replacen("name = \"kit\"", "name = \"y\"", 1),
    );
    let file = dir.path().join("two.toml");
    std::fs::write(&file, both).unwrap();
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    let id = raw_session(&addr);
    let headers = session_headers(&id);
    let ask = |message: &str| {
        let mut request = form();
        request["message"] = json!(message);
        request
    };
    let call = |n: u64, tool: &str, arguments: Value| {
        let (tool, arguments) = match expose {
            "lazy" => (
                "mcp_call_tool",
                json!({"tool_name": tool, "arguments": arguments}),
            ),
            _ => (tool, arguments),
        };
        let body = json!({
            "jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        post_streaming(&addr, &headers, &body.to_string())
    };
    let answer = |id: &Value, name: &str| {
        let body = json!({
            "jsonrpc": "2.0", "id": id,
            "result": {"action": "accept", "content": {"name": name}},
        });
        let (status, ..) = request(&addr, "POST", &headers, body.to_string().as_bytes());
        assert_eq!(status, 202);
    };
    let asked = |stream: &std::sync::mpsc::Receiver<Value>, message: &str| {
        let asked = next_with_id(stream)
            .unwrap_or_else(|| panic!("`{message}` did not come on the stream expected"));
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        assert_eq!(asked["params"]["message"], message, "{asked}");
        asked
    };

    // A call to x, whose own request arrives on its stream and is left unanswered: x's call
    // stays in flight, the oldest.
    let to_x = call(2, "x__ask", json!({"request": ask("x asks")}));
    let x_asks = asked(&to_x, "x asks");
    // Then a call to y: y's request arrives on the stream of the call to y, not the oldest.
    let to_y = call(
        3,
        "y__ask",
        json!({"request": ask("y asks"), "then": ask("y asks again")}),
    );
    let y_asks = asked(&to_y, "y asks");
    // A newer call to x, in flight too.
    let to_x_again = call(4, "x__ask", json!({"request": ask("x asks again")}));
    let x_asks_again = asked(&to_x_again, "x asks again");
    // y asks again: on the stream of the call to y still, not the newest call's.
    answer(&y_asks["id"], "ignored");
    let y_asks_again = asked(&to_y, "y asks again");
    assert!(to_x.try_recv().is_err() && to_x_again.try_recv().is_err());

    answer(&y_asks_again["id"], "Yan");
    let result = next_with_id(&to_y).expect("y's result");
    assert_eq!(result["id"], 3, "{result}");
    assert!(
        result["result"]["content"].to_string().contains("Yan"),
        "{result}"
    );
    for (asked, stream) in [(&x_asks, &to_x), (&x_asks_again, &to_x_again)] {
        answer(&asked["id"], "Xia");
        let result = next_with_id(stream).expect("x's result");
        assert!(
            result["result"]["content"].to_string().contains("Xia"),
            "{result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_request_s_completion_reaches_the_client_that_was_sent_it() {
    let (_dir, gateway) = gateway("eager", 30);
    let person = Person::new(Reply::Accept(json!({})));
    let runner = downstream(&gateway, false, Some(person.clone())).await;
    let request = json!({
        "mode": "url", "message": "sign in", "url": "https://example.com/login",
        "elicitationId": "e-9",
    });
    let text = call(
        &runner,
        "kit__ask",
        json!({"request": request, "complete": true}),
    )
    .await
    .unwrap();
    assert!(text.contains("accept"), "{text}");
    tokio::time::timeout(LIMIT, person.completion.notified())
        .await
        .expect("the completion reached the client");
    assert_eq!(*person.completed.lock().unwrap(), ["e-9"]);
    runner.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_upstream_request_is_cleaned_or_declined_before_the_client_sees_it() {
    let (_dir, gateway) = gateway("eager", 30);
    let person = Person::new(Reply::Accept(json!({"name": "Ada"})));
    let runner = downstream(&gateway, false, Some(person.clone())).await;
    let mut request = form();
    request["message"] = json!(format!(
        "\u{1b}[2J\u{1b}]8;;https://evil\u{7}click\u{9b}0m\r\nhere\t{}",
        "x".repeat(60_000)
    ));
    assert_eq!(ask(&runner, false, request).await["action"], "accept");
    let message = person.messages.lock().unwrap()[0].clone();
    assert!(
        message.starts_with("[2J]8;;https://evilclick0m\nhere\t"),
        "{:?}",
        &message[..40]
    );
    assert!(message.len() <= 4096 + '…'.len_utf8(), "{}", message.len());

    // A URL that is not http(s), or that holds control characters: declined, never shown.
    for url in ["javascript:alert(1)", "https://example.com/\u{1b}[2J"] {
        let request = json!({
            "mode": "url", "message": "sign in", "url": url, "elicitationId": "e-3",
        });
        assert_eq!(
            ask(&runner, false, request).await["action"],
            "decline",
            "{url:?}"
        );
    }
    assert_eq!(person.asked(), 1);
    runner.shutdown().await.unwrap();
}
