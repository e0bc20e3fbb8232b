//! Every request is answered: over stdio a message too large or nested too deep gets an
//! error naming the limit, `tools/call` with `arguments` that are no object gets -32602, a
//! second request in flight under the id of another gets an error, and a call cut off by the
//! drain timeout gets a JSON-RPC error instead of a closed stream.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use mcp_serve::{Exposure, HttpOptions, ToolServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};

use crate::support::{
    Tools, bounded, call_through, in_memory, mcp_client_http, rmcp_call, serve_http,
};

/// Reads lines until the answer to request `id` (`null`: an error without id).
async fn answer_to<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>, id: Value) -> Value {
    bounded(&format!("the answer to {id}"), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if message.get("id") == Some(&id)
                || (id.is_null() && message.get("error").is_some() && message.get("id").is_none())
            {
                return message;
            }
        }
    })
    .await
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_refused_line_is_answered_naming_why() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-serve-demo"))
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the demo server");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut say = async |line: &str| {
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
    };
    say(INITIALIZE).await;
    assert!(
        answer_to(&mut lines, json!(0))
            .await
            .get("result")
            .is_some()
    );
    say(INITIALIZED).await;

    // Larger than max_request_bytes (4 MiB by default): dropped unread, answered.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5 << 20)
    );
    say(&huge).await;
    let error = answer_to(&mut lines, Value::Null).await;
    let text = error["error"]["message"].as_str().unwrap();
    assert!(
        text.contains("4194304 bytes") && text.contains("max_request_bytes"),
        "{error}"
    );
    assert_eq!(error["error"]["code"], -32600);

    // Nested deeper than serde_json reads.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"a":{}{}}}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    say(&deep).await;
    let error = answer_to(&mut lines, Value::Null).await;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("128 levels"),
        "{error}"
    );

    // `arguments` that are no object: invalid params, with the request's id.
    say(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":[1,2]}}"#).await;
    let error = answer_to(&mut lines, json!(3)).await;
    assert_eq!(error["error"]["code"], -32602, "{error}");

    // The session goes on.
    say(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#).await;
    let answer = answer_to(&mut lines, json!(4)).await;
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"result": 3.0}),
        "{answer}"
    );
    drop(stdin);
    let _ = bounded("the demo exits", child.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_in_flight_under_the_same_id_is_refused() {
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    let server = ToolServer::new(tools.clone(), Exposure::only(["gate", "mapping"]));
    let serving = tokio::spawn(server.serve_transport(server_end));
    let (read, mut write) = tokio::io::split(client_end);
    let mut lines = BufReader::new(read).lines();
    for line in [INITIALIZE, INITIALIZED] {
        write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    answer_to(&mut lines, json!(0)).await;
    let session = bounded("the session", serving).await.unwrap().unwrap();

    let call = |tool: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        ) + "\n"
    };
    write.write_all(call("gate").as_bytes()).await.unwrap();
    bounded("the gate call runs", started.recv()).await.unwrap();
    write.write_all(call("mapping").as_bytes()).await.unwrap();
    let refused = answer_to(&mut lines, json!(10)).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in flight")
    );
    assert_eq!(tools.calls(), 1, "the second call never ran");

    tools.open_gate();
    let answer = answer_to(&mut lines, json!(10)).await;
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"gate": "passed"}),
        "{answer}"
    );
    session.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_the_drain_gets_an_error_answer() {
    // A session (in memory, as over stdio).
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let (client, session) =
        in_memory(ToolServer::new(tools.clone(), Exposure::only(["gate"]))).await;
    let client = Arc::new(client);
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { rmcp_call(&client, "gate", json!({})).await }
    });
    bounded("the call runs", started.recv()).await.unwrap();
    let report = session.shutdown(Duration::from_millis(50)).await;
    assert_eq!(report.abandoned, 1);
    match bounded("the cut-off call", in_flight).await.unwrap() {
        Err(rmcp::ServiceError::McpError(error)) => {
            assert!(
                error.message.contains("shut down before `gate` finished"),
                "{error:?}"
            );
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }

    // Over HTTP.
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let options = HttpOptions::default().with_drain_timeout(Duration::from_millis(50));
    let server = serve_http(&tools, Exposure::only(["gate"]), options).await;
    let runner = Arc::new(mcp_client_http(server.url(), None).await);
    let in_flight = tokio::spawn({
        let runner = runner.clone();
        async move { call_through(&runner, "gate", json!({})).await }
    });
    bounded("the call runs", started.recv()).await.unwrap();
    let report = bounded("the shutdown", server.shutdown()).await;
    assert_eq!(report.abandoned, 1);
    let error = bounded("the cut-off call", in_flight)
        .await
        .unwrap()
        .unwrap_err();
    let text = agent_core::error_chain(&error);
    assert!(text.contains("shut down before `gate` finished"), "{text}");
    agent_core::Runner::close(&*runner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_second_request_in_flight_under_the_same_id_is_refused() {
    use crate::support::{POST_HEADERS, initialize_body, send};
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let server = serve_http(
        &tools,
        Exposure::only(["gate", "mapping"]),
        HttpOptions::default(),
    )
    .await;
    let url = server.url().to_string();
    let opened = send("POST", &url, POST_HEADERS, initialize_body()).await;
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let headers: Vec<(String, String)> = POST_HEADERS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain([
            ("mcp-session-id".to_owned(), session),
            ("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()),
        ])
        .collect();
    let post = move |body: String| {
        let (url, headers) = (url.clone(), headers.clone());
        async move {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            send("POST", &url, &headers, body).await
        }
    };
    post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned()).await;
    let call = |tool: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        )
    };
    let first = tokio::spawn(post(call("gate")));
    bounded("the gate call runs", started.recv()).await.unwrap();
    let second = post(call("mapping")).await;
    assert_eq!(second.status, 400, "{}", second.body);
    assert_eq!(second.json()["error"]["code"], -32600);
    assert_eq!(second.json()["id"], 10);
    assert_eq!(tools.calls(), 1, "the second call never ran");
    tools.open_gate();
    let first = bounded("the first call's answer", first).await.unwrap();
    assert!(first.body.contains(r#""gate":"passed""#), "{}", first.body);
    // Answered, its id is free again.
    assert!(post(call("mapping")).await.body.contains(r#""sum":0.0"#));
    server.shutdown().await;
}
