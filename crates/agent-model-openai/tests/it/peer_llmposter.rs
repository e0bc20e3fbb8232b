//! Against a third-party OpenAI-compatible server: `llmposter` (crates.io, installed by
//! `cargo xtask peers`, found through `MCP_AGENT_PEER_LLMPOSTER`), serving fixtures this test
//! writes: a tool-call turn whole and streamed, parallel calls, 429s with `Retry-After`, a
//! lasting 500, a stream truncated, a connection dropped, a corrupt body, a stalled stream, a
//! slow answer, an echoed key and an unknown model. Without the peer the test is skipped, unless
//! `CI=true` or `MCP_AGENT_REQUIRE_PEERS=1`, when it fails.

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use agent_core::{Message, Model, ModelRequest, Role, ToolCall, ToolDescriptor};
use agent_model_openai::{OpenAiConfig, OpenAiModel, RetryPolicy, Timeouts};
use serde_json::json;

const VARIABLE: &str = "MCP_AGENT_PEER_LLMPOSTER";
const KEY: &str = "sk-peer-test-key-0123456789";

const FIXTURES: &str = r#"
fixtures:
  - match: { model: "no-such-model" }
    priority: 10
    error: { status: 404, message: "The model `no-such-model` does not exist" }

  - match: { user_message: "weather whole" }
    scenario: { name: whole, required_state: "", set_state: called }
    response: { tool_calls: [ { name: weather, arguments: { city: Paris } } ] }
  - match: { user_message: "weather whole" }
    scenario: { name: whole, required_state: called }
    response: { content: "Sunny in Paris." }
  - match: { user_message: "weather stream" }
    scenario: { name: stream, required_state: "", set_state: called }
    response: { tool_calls: [ { name: weather, arguments: { city: Paris } } ] }
  - match: { user_message: "weather stream" }
    scenario: { name: stream, required_state: called }
    response: { content: "Sunny in Paris, 21 degrees, light wind." }
    streaming: { chunk_size: 6 }

  - match: { user_message: "two cities" }
    response:
      tool_calls:
        - { name: weather, arguments: { city: Paris } }
        - { name: weather, arguments: { city: Oslo } }

  - match: { user_message: "rate limited" }
    scenario: { name: limited, required_state: "", set_state: once }
    error: { status: 429, message: "Rate limit exceeded", headers: { retry-after: "0" } }
  - match: { user_message: "rate limited" }
    scenario: { name: limited, required_state: once, set_state: twice }
    error: { status: 429, message: "Rate limit exceeded", headers: { retry-after: "0" } }
  - match: { user_message: "rate limited" }
    scenario: { name: limited, required_state: twice }
    response: { content: "After the wait." }

  - match: { user_message: "always failing" }
    error: { status: 500, message: "upstream exploded" }

  - match: { user_message: "cut short" }
    response: { content: "This answer will never arrive whole, it is far too long." }
    streaming: { chunk_size: 5 }
    failure: { truncate_after_frames: 3 }

  - match: { user_message: "dropped" }
    scenario: { name: dropped, required_state: "", set_state: dropped }
    response: { content: "never seen" }
    streaming: { latency: 2000 }
    failure: { disconnect_after_ms: 100 }
  - match: { user_message: "dropped" }
    scenario: { name: dropped, required_state: dropped }
    response: { content: "Second time lucky." }

  - match: { user_message: "garbled" }
    response: { content: "x" }
    failure: { corrupt_body: true }

  - match: { user_message: "stalled" }
    response: { content: "slow words arrive one by one" }
    streaming: { latency: 5000, chunk_size: 4 }

  - match: { user_message: "slow" }
    response: { content: "late" }
    failure: { latency_ms: 5000 }

  - match: { user_message: "bad key" }
    error: { status: 401, message: "Incorrect API key provided: sk-peer-test-key-0123456789" }
"#;

/// The server, killed and reaped on drop.
struct Llmposter {
    child: Child,
    base_url: String,
    _fixtures: tempfile::TempDir,
}

impl Drop for Llmposter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Llmposter {
    /// The peer, or `None` (skipped) when it is not installed and not required.
    async fn start() -> Option<Self> {
        let Some(executable) = std::env::var_os(VARIABLE) else {
            let on = |name| std::env::var(name).is_ok_and(|v| v == "1" || v == "true");
            assert!(
                !on("CI") && !on("MCP_AGENT_REQUIRE_PEERS"),
                "{VARIABLE} is not set; `cargo xtask peers` installs llmposter"
            );
            eprintln!("skipped: {VARIABLE} is not set");
            return None;
        };
        let fixtures = tempfile::tempdir().unwrap();
        let file = fixtures.path().join("fixtures.yaml");
        std::fs::write(&file, FIXTURES).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(executable)
            .arg("--fixtures")
            .arg(&file)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llmposter");
        let server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            _fixtures: fixtures,
        };
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Some(server);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("llmposter did not listen on port {port} within 15 s");
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new("gpt-4o")
            .with_base_url(&self.base_url)
            .with_api_key(KEY)
            .with_retry(
                RetryPolicy::default()
                    .with_max_retries(2)
                    .with_initial_backoff(Duration::from_millis(5)),
            )
            .with_timeouts(
                Timeouts::default()
                    .with_request(Duration::from_secs(20))
                    .with_idle(Duration::from_secs(20)),
            )
    }

    fn model(&self) -> OpenAiModel {
        OpenAiModel::new(self.config()).unwrap()
    }
}

fn ask(text: &str) -> ModelRequest {
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    });
    ModelRequest::new(
        vec![Message::new(Role::User, text)],
        vec![
            ToolDescriptor::new("weather", schema.as_object().unwrap().clone())
                .with_description("The weather of a city"),
        ],
    )
}

fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    agent_core::error_chain(error)
}

#[tokio::test]
async fn a_tool_turn_whole_and_streamed_and_parallel_calls() {
    let Some(peer) = Llmposter::start().await else {
        return;
    };
    for (text, stream) in [("weather whole", false), ("weather stream", true)] {
        let model = OpenAiModel::new(peer.config().with_stream(stream)).unwrap();
        let answer = model.complete(ask(text)).await.unwrap();
        let [call] = answer.message.tool_calls.as_slice() else {
            panic!("one call expected: {answer:?}");
        };
        assert_eq!(
            (call.name.as_str(), &call.arguments["city"]),
            ("weather", &json!("Paris"))
        );

        let mut request = ask(text);
        request
            .messages
            .push(Message::tool_calls(vec![ToolCall::new(
                &call.id,
                &call.name,
                call.arguments.clone(),
            )]));
        request
            .messages
            .push(Message::tool_result(&call.id, "21 °C"));
        let pieces = Mutex::new(Vec::new());
        let sink = |t: &str| pieces.lock().unwrap().push(t.to_owned());
        let answer = model.complete_streaming(request, &sink).await.unwrap();
        assert!(answer.message.tool_calls.is_empty(), "{answer:?}");
        assert!(answer.message.content.starts_with("Sunny in Paris"));
        let pieces = pieces.into_inner().unwrap();
        assert_eq!(pieces.concat(), answer.message.content);
        if stream {
            assert!(pieces.len() > 1, "{pieces:?}");
        }
    }

    for stream in [false, true] {
        let model = OpenAiModel::new(peer.config().with_stream(stream)).unwrap();
        let answer = model.complete(ask("two cities")).await.unwrap();
        let cities: Vec<_> = answer
            .message
            .tool_calls
            .iter()
            .map(|c| c.arguments["city"].clone())
            .collect();
        assert_eq!(cities, [json!("Paris"), json!("Oslo")], "stream: {stream}");
        let ids: std::collections::BTreeSet<_> =
            answer.message.tool_calls.iter().map(|c| &c.id).collect();
        assert_eq!(ids.len(), 2);
    }
}

#[tokio::test]
async fn retries_and_faults_of_a_real_peer() {
    let Some(peer) = Llmposter::start().await else {
        return;
    };
    let model = peer.model();

    // 429 twice with `Retry-After: 0`, then the answer.
    let response = model.chat(&ask("rate limited")).await.unwrap();
    assert_eq!(
        (response.text.as_str(), response.attempts),
        ("After the wait.", 3)
    );

    // A lasting 500: given up after the retries, the provider's message shown.
    let err = model.chat(&ask("always failing")).await.unwrap_err();
    let text = chain(&err);
    assert!(
        text.starts_with("gave up after 3 attempts: HTTP 500"),
        "{text}"
    );
    assert!(text.contains("upstream exploded"), "{text}");

    // A connection dropped before anything arrived: retried, then answered.
    let response = model
        .chat_stream(&ask("dropped"), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        (response.text.as_str(), response.attempts),
        ("Second time lucky.", 2)
    );

    // A stream truncated without its end: an error, never a partial answer.
    let err = model.complete(ask("cut short")).await.unwrap_err();
    assert!(
        chain(&err).ends_with("the stream ended before the answer was complete"),
        "{err}"
    );

    // A body that is not JSON.
    let err = model.chat(&ask("garbled")).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the answer is not a chat completion: "),
        "{err}"
    );

    // A stream that stops sending, and an answer that does not come.
    let config = peer.config();
    let short = config
        .timeouts
        .with_idle(Duration::from_millis(300))
        .with_request(Duration::from_millis(300));
    let impatient = OpenAiModel::new(config.with_timeouts(short)).unwrap();
    let err = impatient
        .chat_stream(&ask("stalled"), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "idle-stream timeout of 0.3 s expired");
    let err = impatient.chat(&ask("slow")).await.unwrap_err();
    assert_eq!(err.to_string(), "request timeout of 0.3 s expired");
}

#[tokio::test]
async fn an_echoed_key_and_an_unknown_model_give_clear_errors() {
    let Some(peer) = Llmposter::start().await else {
        return;
    };
    let err = peer.model().complete(ask("bad key")).await.unwrap_err();
    let (text, debug) = (chain(&err), format!("{err:?}"));
    assert!(
        !text.contains(KEY) && !debug.contains(KEY),
        "{text}\n{debug}"
    );
    assert!(
        text.contains("HTTP 401 Unauthorized: Incorrect API key provided: [REDACTED]"),
        "{text}"
    );

    let unknown = OpenAiModel::new(peer.config().with_model("no-such-model")).unwrap();
    let err = unknown.complete(ask("hello")).await.unwrap_err();
    let text = chain(&err);
    assert!(
        text.starts_with(&format!(
            "model request failed: model `no-such-model` at {}: HTTP 404 Not Found: The model `no-such-model` does not exist",
            peer.base_url
        )),
        "{text}"
    );
}
