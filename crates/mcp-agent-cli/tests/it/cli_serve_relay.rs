//! `mcp-agent serve` relays an upstream's input-required results (SEP-2322) to a 2026-07-28
//! client: the test kit (upstream, speaking 2026-07-28 with `--discover`) asks with its
//! `test_input_required_result_*` tools; the gateway hands the input requests on, its own
//! sealed `requestState` in place of the kit's, and sends the retry's answers upstream. The
//! client is `mcp_client` (which answers the rounds with its elicitation handler) or raw HTTP
//! (which shows what the gateway refuses: a changed state, a state replayed on another tool,
//! an upstream state past the relay's bound).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use mcp_agent::{
    Config, ElicitationHandler, McpClient, OpenOptions, ServerSpec, ToolCall,
    config::{HttpSpec, ResolvedRun, RunOptions, TransportSpec},
    error_chain,
    prelude::ToolDispatcher,
    rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction},
};
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, LIMIT, kit_config_with, request};

/// A gateway listing the kit's tools under their own names, the kit speaking 2026-07-28.
fn gateway() -> (tempfile::TempDir, Gateway) {
    let (dir, file, _record) = kit_config_with(
        "expose = \"eager\"\ntool_names = \"upstream\"",
        &["--discover", "--suite-tools"],
    );
    let gateway = Gateway::start(&file, &[]);
    (dir, gateway)
}

/// Accepts every elicitation with `content`, counting them.
struct Person {
    content: Value,
    asked: AtomicUsize,
}

#[async_trait]
impl ElicitationHandler for Person {
    async fn elicit(&self, _server: &str, _request: ElicitRequestParams) -> ElicitResult {
        self.asked.fetch_add(1, Ordering::SeqCst);
        ElicitResult::new(ElicitationAction::Accept).with_content(self.content.clone())
    }
}

/// A raw 2026-07-28 `tools/call` of `tool` with `extra` params (`inputResponses`,
/// `requestState`): the JSON-RPC answer.
fn raw_call(addr: &str, tool: &str, extra: Value) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
    });
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    let (status, _, text) = request(addr, "POST", &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    text.lines()
        .filter_map(|line| serde_json::from_str(line.trim_start_matches("data:").trim()).ok())
        .find(|m: &Value| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

fn confirm() -> Value {
    json!({"confirm": {"action": "accept", "content": {"ok": true}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_elicitation_round_trips_through_the_gateway() {
    let (_dir, gateway) = gateway();
    let mut spec = ServerSpec::new(
        "gw",
        TransportSpec::StreamableHttp(HttpSpec::new(gateway.url.parse().unwrap())),
    );
    spec.connect_timeout = Some(LIMIT);
    spec.call_timeout = LIMIT;
    let client = McpClient::builder(Config::new(vec![spec.clone()]).unwrap())
        .connectors(mcp_agent::connectors().unwrap())
        .discover(true)
        .build();
    let person = Arc::new(Person {
        content: json!({"name": "Alice", "ok": true, "color": "blue"}),
        asked: AtomicUsize::new(0),
    });
    let run = ResolvedRun::new(vec![spec], RunOptions::default());
    let runner = client
        .open_resolved_with(run, OpenOptions::new().with_elicitation(person.clone()))
        .await
        .unwrap_or_else(|e| panic!("open: {}", error_chain(&e)));
    let call = |tool: &str| {
        let call = ToolCall::new("c", format!("gw__{tool}"), Default::default());
        let runner = &runner;
        async move {
            tokio::time::timeout(LIMIT, runner.dispatch(call))
                .await
                .expect("answered in time")
                .unwrap_or_else(|e| panic!("{}", error_chain(&e)))
                .to_model_text()
        }
    };
    // One round, no state: the downstream person answered, the upstream greets them.
    let text = call("test_input_required_result_elicitation").await;
    assert!(text.contains("Hello, Alice!"), "{text}");
    assert_eq!(person.asked.load(Ordering::SeqCst), 1);
    // The upstream's signed state went out sealed in the gateway's and came back intact.
    let text = call("test_input_required_result_request_state").await;
    assert!(text.contains("state-ok"), "{text}");
    // Two rounds, each with a new state.
    let text = call("test_input_required_result_multi_round").await;
    assert!(text.contains("Alice likes blue"), "{text}");
    assert_eq!(person.asked.load(Ordering::SeqCst), 4);
    runner.shutdown().await.unwrap();
}

#[test]
fn a_changed_or_replayed_state_is_refused_by_the_gateway() {
    let (_dir, gateway) = gateway();
    let addr = gateway.addr();
    let first = raw_call(&addr, "test_input_required_result_request_state", json!({}));
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    assert_eq!(
        asked["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert!(state.starts_with("g1."), "the gateway's own state: {state}");

    // The state as issued, on its tool: the upstream completes.
    let done = raw_call(
        &addr,
        "test_input_required_result_request_state",
        json!({"inputResponses": confirm(), "requestState": state}),
    );
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("state-ok"), "{done}");

    // Changed: refused by the gateway, -32602.
    let tampered = raw_call(
        &addr,
        "test_input_required_result_request_state",
        json!({"inputResponses": confirm(), "requestState": format!("{state}-TAMPERED")}),
    );
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");
    let message = tampered["error"]["message"].as_str().unwrap();
    assert!(message.contains("not one this gateway issued"), "{message}");
    // Replayed on another tool (whose upstream state has the same shape): refused too.
    let replayed = raw_call(
        &addr,
        "test_input_required_result_tampered_state",
        json!({"inputResponses": confirm(), "requestState": state}),
    );
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    let message = replayed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("test_input_required_result_tampered_state")
            && message.contains("not one this gateway issued"),
        "{message}"
    );
}

#[test]
fn an_upstream_state_past_the_bound_is_refused_naming_server_and_limit() {
    let (_dir, gateway) = gateway();
    let answer = raw_call(&gateway.addr(), "input_required_huge_state", json!({}));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("server `kit`") && text.contains("16384") && text.contains("requestState"),
        "{text}"
    );
    assert!(result.get("requestState").is_none(), "{answer}");
}
