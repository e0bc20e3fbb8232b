//! How a session started with `server/discover` (`McpClientBuilder::discover`) goes against
//! servers of either revision, on a scripted server that answers
//! `server/discover` as each kind of server in the wild does: a 2026-07-28 server (discover
//! result, then per-request metadata), a legacy one refusing it, one answering garbage, one
//! never answering, and one that claims 2026-07-28 but only works after `initialize`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::{RunInput, Runner, ToolCall, ToolDispatcher};
use mcp_client::{McpClient, McpRunner};
use mcp_config::Config;
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How the scripted server answers `server/discover`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Discover {
    /// A discover result offering 2026-07-28; no `initialize` needed.
    Modern,
    /// JSON-RPC method not found.
    MethodNotFound,
    /// A result that is not a discover result (`{}`), as servers answering every method do.
    Garbage,
    /// Nothing, ever (its answer would come after `initialize`'s, so it is never sent).
    Never,
    /// A discover result, but every other request fails until `initialize`.
    ClaimsModern,
    /// A discover result announcing tool-list changes, which it sends only on a
    /// `subscriptions/listen` stream (after each `tools/call`), as revision 2026-07-28 asks.
    Announcing,
    /// Announcing, but its tool list changed as its `subscriptions/listen` arrived, before the
    /// subscription started: a second tool, announced on no stream.
    ChangedAtListen,
    /// A discover result, late on the first connection (a server slow to start), and
    /// `initialize` refused, as a server of 2026-07-28 refuses it.
    SlowModern,
    /// No discover (2025-11-25 through `initialize`), yet every `tools/call` answered with an
    /// input-required result, which that revision does not have.
    LegacyAsking,
}

/// Every request the server received, in order.
type Seen = Arc<Mutex<Vec<Value>>>;

fn discover_result() -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}},
        "instructions": "modern instructions",
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-server", "version": "2.0.0"}},
    })
}

fn initialize_result() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "legacy-server", "version": "1.0.0"},
        "instructions": "legacy instructions",
    })
}

/// A line-delimited JSON-RPC server scripted by `mode`, recording what it received.
fn scripted(mode: Discover, seen: Seen) -> tokio::io::DuplexStream {
    let (client, server) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let (read, mut write) = tokio::io::split(server);
        let mut lines = BufReader::new(read).lines();
        let mut initialized = false;
        let mut listening: Option<Value> = None;
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let first_discover = !seen
                .lock()
                .unwrap()
                .iter()
                .any(|m| m["method"] == "server/discover");
            seen.lock().unwrap().push(message.clone());
            let id = message.get("id").cloned();
            let method = message["method"].as_str().unwrap_or_default();
            if method == "server/discover" && mode == Discover::SlowModern && first_discover {
                tokio::time::sleep(Duration::from_millis(2000)).await;
            }
            let mut notify = None;
            if method == "subscriptions/listen" {
                listening = id.clone();
                notify = Some(json!({
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {
                        "notifications": {"toolsListChanged": true},
                        "_meta": {"io.modelcontextprotocol/subscriptionId": id},
                    },
                }));
            } else if method == "tools/call"
                && mode == Discover::Announcing
                && let Some(subscription) = &listening
            {
                notify = Some(json!({
                    "method": "notifications/tools/list_changed",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": subscription}},
                }));
            }
            let reply = match (method, mode) {
                ("initialize", Discover::SlowModern) => Some(json!({"error": {
                    "code": -32022,
                    "message": "connection is serving the 2026-07-28 protocol",
                }})),
                (
                    "server/discover",
                    Discover::Modern | Discover::ClaimsModern | Discover::SlowModern,
                ) => Some(json!({"result": discover_result()})),
                ("server/discover", Discover::MethodNotFound | Discover::LegacyAsking) => {
                    Some(json!({"error": {"code": -32601, "message": "Method not found"}}))
                }
                ("server/discover", Discover::Garbage) => Some(json!({"result": {}})),
                ("server/discover", Discover::Never) => None,
                ("server/discover", Discover::Announcing | Discover::ChangedAtListen) => {
                    let mut result = discover_result();
                    result["capabilities"] = json!({"tools": {"listChanged": true}});
                    Some(json!({"result": result}))
                }
                ("tools/call", Discover::LegacyAsking) => Some(json!({"result": {
                    "resultType": "input_required",
                    "inputRequests": {"confirm": {
                        "method": "elicitation/create",
                        "params": {
                            "message": "Sure?",
                            "requestedSchema": {"type": "object", "properties": {}},
                        },
                    }},
                    "requestState": "round-1",
                }})),
                ("tools/call", _) => Some(json!({"result": {
                    "content": [{"type": "text", "text": "done"}],
                }})),
                ("initialize", _) => {
                    initialized = true;
                    Some(json!({"result": initialize_result()}))
                }
                ("tools/list", Discover::ClaimsModern) if !initialized => {
                    Some(json!({"error": {"code": -32600, "message": "Server not initialized"}}))
                }
                // Listings the client may cache for a minute (`ttlMs`).
                ("tools/list", Discover::ChangedAtListen) if listening.is_some() => {
                    Some(json!({"result": {"tools": [
                        {"name": "echo", "inputSchema": {"type": "object"}},
                        {"name": "added", "inputSchema": {"type": "object"}},
                    ], "ttlMs": 60_000}}))
                }
                ("tools/list", Discover::ChangedAtListen) => Some(json!({"result": {"tools": [
                    {"name": "echo", "inputSchema": {"type": "object"}},
                ], "ttlMs": 60_000}})),
                ("tools/list", _) => Some(json!({"result": {"tools": [
                    {"name": "echo", "inputSchema": {
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "type": "object",
                        "properties": {"m": {"$ref": "#/$defs/text"}},
                        "$defs": {"text": {"type": "string"}},
                    }},
                ]}})),
                _ => None,
            };
            let mut out = Vec::new();
            if let (Some(id), Some(mut reply)) = (id, reply) {
                reply["id"] = id;
                out.push(reply);
            }
            out.extend(notify);
            for mut message in out {
                message["jsonrpc"] = json!("2.0");
                let mut text = message.to_string();
                text.push('\n');
                if write.write_all(text.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    });
    client
}

fn client(mode: Discover, seen: Seen, connect_timeout: Duration) -> McpClient {
    let memory = InMemoryConnector::new().server("s", move || scripted(mode, seen.clone()));
    let mut spec = spec("s");
    spec.connect_timeout = Some(connect_timeout);
    McpClient::builder(Config::new(vec![spec]).expect("a valid spec"))
        .connectors(Connectors::new().with(memory))
        .discover(true)
        .build()
}

fn methods(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_owned))
        .collect()
}

/// A run opened on a server answering as `mode`, and what the server receives.
async fn open_run(mode: Discover) -> (McpRunner, Seen) {
    let seen = Seen::default();
    let runner = client(mode, seen.clone(), Duration::from_secs(10))
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    (runner, seen)
}

/// Opens a run on a server answering discover as `mode`; returns the session's identity
/// (name, protocol, instructions), what the server received and how long the open took.
async fn open(
    mode: Discover,
    connect_timeout: Duration,
) -> (Result<(String, String, String), String>, Seen, Duration) {
    let seen = Seen::default();
    let started = Instant::now();
    let opened = client(mode, seen.clone(), connect_timeout)
        .open_runner(&RunInput::new("s", "i"))
        .await;
    let took = started.elapsed();
    let outcome = match opened {
        Ok(runner) => {
            let identity = runner.sessions()[0].identity().clone();
            let tools = runner.catalog().len();
            assert!(tools > 0, "the tool was listed");
            runner.close().await;
            Ok((
                identity.name.unwrap_or_default(),
                identity.protocol_version,
                identity.instructions.unwrap_or_default(),
            ))
        }
        Err(e) => Err(agent_core::error_chain(&e)),
    };
    (outcome, seen, took)
}

#[tokio::test]
async fn a_2026_07_28_server_is_discovered_and_sent_per_request_metadata() {
    let (outcome, seen, _) = open(Discover::Modern, Duration::from_secs(10)).await;
    assert_eq!(
        outcome.unwrap(),
        (
            "modern-server".into(),
            "2026-07-28".into(),
            "modern instructions".into()
        )
    );
    assert_eq!(methods(&seen)[..2], ["server/discover", "tools/list"]);
    let list = seen.lock().unwrap()[1].clone();
    let meta = &list["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{list}"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"], "mcp-agent",
        "{list}"
    );
}

#[tokio::test]
async fn a_legacy_server_refusing_discover_is_initialized_at_once() {
    let (outcome, seen, took) = open(Discover::MethodNotFound, Duration::from_secs(10)).await;
    assert_eq!(
        outcome.unwrap(),
        (
            "legacy-server".into(),
            "2025-11-25".into(),
            "legacy instructions".into()
        )
    );
    assert_eq!(
        methods(&seen)[..4],
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list"
        ]
    );
    assert!(took < Duration::from_secs(1), "no wait: {took:?}");
}

#[tokio::test]
async fn a_discover_answered_with_garbage_falls_back_to_initialize_at_once() {
    let (outcome, seen, took) = open(Discover::Garbage, Duration::from_secs(10)).await;
    assert_eq!(outcome.unwrap().0, "legacy-server");
    assert_eq!(methods(&seen)[..2], ["server/discover", "initialize"]);
    assert!(took < Duration::from_secs(1), "no wait: {took:?}");
}

#[tokio::test]
async fn a_discover_never_answered_falls_back_within_its_bound() {
    // The probe waits half the connect timeout at most (here 1 s), not rmcp's 10 s.
    let (outcome, seen, took) = open(Discover::Never, Duration::from_secs(2)).await;
    assert_eq!(
        outcome.unwrap(),
        (
            "legacy-server".into(),
            "2025-11-25".into(),
            "legacy instructions".into()
        )
    );
    assert_eq!(methods(&seen)[..2], ["server/discover", "initialize"]);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(2),
        "bounded wait: {took:?}"
    );
}

#[tokio::test]
async fn a_server_claiming_2026_07_28_that_only_speaks_initialize_is_initialized() {
    let (outcome, seen, _) = open(Discover::ClaimsModern, Duration::from_secs(10)).await;
    assert_eq!(
        outcome.unwrap(),
        (
            "legacy-server".into(),
            "2025-11-25".into(),
            "legacy instructions".into()
        )
    );
    let methods = methods(&seen);
    assert_eq!(
        methods,
        [
            "server/discover",
            "tools/list",
            "initialize",
            "notifications/initialized",
            "tools/list"
        ],
        "{methods:?}"
    );
}

#[tokio::test]
async fn a_2026_07_28_server_slower_than_the_probe_is_discovered_on_a_new_connection() {
    // The probe waits 1.5 s; the server answers after 2 s and then refuses `initialize`.
    let (outcome, seen, took) = open(Discover::SlowModern, Duration::from_secs(3)).await;
    assert_eq!(
        outcome.unwrap(),
        (
            "modern-server".into(),
            "2026-07-28".into(),
            "modern instructions".into()
        )
    );
    assert_eq!(
        methods(&seen),
        [
            "server/discover",
            "initialize",
            "server/discover",
            "tools/list"
        ]
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn tool_list_changes_of_a_discovered_server_come_through_its_subscription() {
    let (runner, seen) = open_run(Discover::Announcing).await;
    let session = runner.sessions()[0].clone();
    let mut changed = session.tools_changed();
    // The subscription is opened in the background once the session is open.
    tokio::time::timeout(Duration::from_secs(5), async {
        while !methods(&seen).contains(&"subscriptions/listen".to_owned()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the session subscribes");
    let listen = seen
        .lock()
        .unwrap()
        .iter()
        .find(|m| m["method"] == "subscriptions/listen")
        .cloned()
        .unwrap();
    assert_eq!(
        listen["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "{listen}"
    );
    // Through the run's governed layer, as every call of a run goes.
    runner
        .dispatch(ToolCall::new("c1", "s__echo", serde_json::Map::new()))
        .await
        .expect("the call succeeds");
    tokio::time::timeout(Duration::from_secs(5), changed.changed())
        .await
        .expect("the change is signalled")
        .expect("the session is open");
    runner.close().await;
}

#[tokio::test]
async fn an_input_required_result_over_an_older_revision_fails_the_call_in_one_round() {
    let (runner, seen) = open_run(Discover::LegacyAsking).await;
    assert_eq!(
        runner.sessions()[0].identity().protocol_version,
        "2025-11-25"
    );
    let outcome = runner
        .dispatch(ToolCall::new("c1", "s__echo", serde_json::Map::new()))
        .await;
    assert!(outcome.is_err(), "{outcome:?}");
    let calls = methods(&seen).iter().filter(|m| *m == "tools/call").count();
    assert_eq!(calls, 1, "no second round: {:?}", methods(&seen));
    runner.close().await;
}

#[tokio::test]
async fn a_tool_list_change_before_the_subscription_started_reaches_the_catalog() {
    let (runner, _) = open_run(Discover::ChangedAtListen).await;
    let mut relisted = runner.tools_changed();
    tokio::time::timeout(Duration::from_secs(5), async {
        while runner.catalog().len() < 2 {
            relisted.changed().await.expect("the run is open");
        }
    })
    .await
    .expect("the tool added before the subscription is listed");
    assert!(runner.catalog().lookup("s__added").is_some());
    runner.close().await;
}

#[tokio::test]
async fn json_schema_2020_12_is_kept_as_sent() {
    let (runner, _) = open_run(Discover::Modern).await;
    let schema = runner
        .catalog()
        .entries()
        .iter()
        .find(|t| t.remote_name == "echo")
        .map(|t| t.input_schema_json().to_owned())
        .expect("the tool is listed");
    let schema: Value = serde_json::from_str(&schema).unwrap();
    assert_eq!(schema["properties"]["m"]["$ref"], "#/$defs/text");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    runner.close().await;
}

#[tokio::test]
async fn without_discover_sessions_start_with_initialize() {
    let seen = Seen::default();
    let memory = InMemoryConnector::new().server("s", {
        let seen = seen.clone();
        move || scripted(Discover::Modern, seen.clone())
    });
    let runner = McpClient::builder(Config::new(vec![spec("s")]).expect("a valid spec"))
        .connectors(Connectors::new().with(memory))
        .discover(false)
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    assert_eq!(
        runner.sessions()[0].identity().protocol_version,
        "2025-11-25"
    );
    runner.close().await;
    assert_eq!(methods(&seen)[0], "initialize");
}

#[tokio::test]
async fn a_discovered_server_announces_tool_list_changes_through_its_subscription() {
    use mcp_test_kit::{TestServer, TestServerOptions, serve_in_memory};
    let memory = InMemoryConnector::new().server("kit", || {
        serve_in_memory(TestServer::new(
            TestServerOptions::default()
                .with_name("kit")
                .with_discover(true),
        ))
    });
    let runner = McpClient::builder(Config::new(vec![spec("kit")]).expect("a valid spec"))
        .connectors(Connectors::new().with(memory))
        .discover(true)
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    let session = runner.sessions()[0].clone();
    assert_eq!(session.identity().protocol_version, "2026-07-28");
    let mut changed = session.tools_changed();
    let mut arguments = serde_json::Map::new();
    arguments.insert("name".into(), json!("weather_report"));
    runner
        .dispatch(ToolCall::new("c1", "kit__add_tool", arguments))
        .await
        .expect("the call succeeds");
    tokio::time::timeout(Duration::from_secs(5), changed.changed())
        .await
        .expect("the change is announced")
        .expect("the session is open");
    let names: Vec<String> = session
        .list_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"weather_report".to_owned()), "{names:?}");
    runner.close().await;
}

#[tokio::test]
async fn by_default_a_legacy_test_kit_server_is_discovered_then_initialized_without_a_stall() {
    use mcp_test_kit::{Observations, TestServer, TestServerOptions, serve_in_memory};
    let memory = InMemoryConnector::new().server("kit", || {
        serve_in_memory(TestServer::new(
            TestServerOptions::default()
                .with_name("kit")
                .with_observations(Observations::new()),
        ))
    });
    let started = Instant::now();
    // No `discover` call: the default.
    let runner = McpClient::builder(Config::new(vec![spec("kit")]).expect("a valid spec"))
        .connectors(Connectors::new().with(memory))
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    let took = started.elapsed();
    let session = runner.sessions()[0].clone();
    assert_eq!(session.identity().protocol_version, "2025-11-25");
    assert_eq!(session.identity().name.as_deref(), Some("kit"));
    // Method-not-found is an answer: no waiting for the probe's bound.
    assert!(
        took < mcp_client::lifecycle::DEFAULT_DISCOVER_TIMEOUT / 4,
        "{took:?}"
    );
    runner.close().await;
}

/// A client over a scripted server that answers discover as `mode` says at each connection;
/// runs one run per entry of `modes` (switching before each) and returns what the server
/// received in each, and the outcome of each.
async fn open_in_turn(
    modes: &[Discover],
    connect_timeout: Duration,
) -> Vec<(Vec<String>, Result<String, String>)> {
    let seen = Seen::default();
    let mode = Arc::new(Mutex::new(modes[0]));
    let memory = InMemoryConnector::new().server("s", {
        let (seen, mode) = (seen.clone(), mode.clone());
        move || scripted(*mode.lock().unwrap(), seen.clone())
    });
    let mut spec = spec("s");
    spec.connect_timeout = Some(connect_timeout);
    let client = McpClient::builder(Config::new(vec![spec]).expect("a valid spec"))
        .connectors(Connectors::new().with(memory))
        .discover(true)
        .build();
    let mut runs = Vec::new();
    for &now in modes {
        *mode.lock().unwrap() = now;
        // Kept across runs: a slow modern server is slow on its first discover only.
        let before = methods(&seen).len();
        let outcome = match client.open_runner(&RunInput::new("s", "i")).await {
            Ok(runner) => {
                let protocol = runner.sessions()[0].identity().protocol_version.clone();
                runner.close().await;
                Ok(protocol)
            }
            Err(e) => Err(agent_core::error_chain(&e)),
        };
        runs.push((methods(&seen).split_off(before), outcome));
    }
    runs
}

#[tokio::test]
async fn a_server_that_refused_discover_is_initialized_at_once_the_next_time() {
    let runs = open_in_turn(
        &[Discover::MethodNotFound, Discover::MethodNotFound],
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(runs[0].0[..2], ["server/discover", "initialize"]);
    assert_eq!(
        runs[1].0[..3],
        ["initialize", "notifications/initialized", "tools/list"]
    );
    assert!(!runs[1].0.contains(&"server/discover".to_owned()));
    assert_eq!(runs[1].1.as_deref(), Ok("2025-11-25"));
}

#[tokio::test]
async fn a_server_whose_probe_went_unanswered_is_probed_again() {
    // Unanswered is not refused: a modern server slow to start must keep its discover.
    let runs = open_in_turn(&[Discover::Never, Discover::Never], Duration::from_secs(2)).await;
    for (methods, outcome) in &runs {
        assert_eq!(methods[..2], ["server/discover", "initialize"]);
        assert_eq!(outcome.as_deref(), Ok("2025-11-25"));
    }
}

#[tokio::test]
async fn a_remembered_server_that_now_refuses_initialize_is_discovered() {
    // Upgraded between runs: `initialize` is refused, so the probe comes back, on a new
    // connection, and the server is no longer remembered.
    let runs = open_in_turn(
        &[
            Discover::MethodNotFound,
            Discover::SlowModern,
            Discover::SlowModern,
        ],
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(runs[1].0, ["initialize", "server/discover", "tools/list"]);
    assert_eq!(runs[1].1.as_deref(), Ok("2026-07-28"));
    assert_eq!(runs[2].0, ["server/discover", "tools/list"]);
}
