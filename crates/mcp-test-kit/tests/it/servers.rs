//! The test kit's servers, driven by a real rmcp client: in memory, over HTTP, and the stdio
//! binary.

use std::sync::Arc;
use std::time::Duration;

use mcp_test_kit::{Observations, TestServer, TestServerOptions, serve_http, serve_in_memory};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Every await in these tests is bounded by this.
const LIMIT: Duration = Duration::from_secs(20);

use mcp_test_kit::bounded;

async fn client(options: TestServerOptions) -> RunningService<RoleClient, ()> {
    let stream = serve_in_memory(TestServer::new(options));
    bounded(rmcp::serve_client((), stream)).await.unwrap()
}

async fn call(
    client: &RunningService<RoleClient, impl rmcp::Service<RoleClient>>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let args = args.as_object().cloned().unwrap_or_default();
    bounded(client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)))
        .await
        .unwrap()
}

/// One call and what its result must be.
fn check(result: &CallToolResult, structured: Option<Value>, is_error: bool, text: Option<&str>) {
    assert_eq!(result.structured_content, structured, "{result:?}");
    assert_eq!(result.is_error, Some(is_error), "{result:?}");
    if let Some(text) = text {
        let first = result.content.first().and_then(|c| c.as_text());
        assert_eq!(first.map(|t| t.text.as_str()), Some(text), "{result:?}");
    }
}

#[tokio::test]
async fn tools_answer_as_documented() {
    let client = client(TestServerOptions::default()).await;
    let cases = [
        (
            "echo",
            json!({"x": [1, 2]}),
            Some(json!({"x": [1, 2]})),
            false,
            Some(r#"{"x":[1,2]}"#),
        ),
        (
            "add",
            json!({"a": 2, "b": 40}),
            Some(json!({"sum": 42.0})),
            false,
            None,
        ),
        (
            "add",
            json!({"a": "2"}),
            None,
            true,
            Some("`a` and `b` must be numbers"),
        ),
        (
            "fail",
            json!({"message": "boom"}),
            None,
            true,
            Some("the failing tool failed: boom"),
        ),
        (
            "slow",
            json!({"ms": 1}),
            Some(json!({"slept_ms": 1})),
            false,
            None,
        ),
        (
            "remove_tool",
            json!({"name": "absent"}),
            Some(json!({"changed": false})),
            false,
            None,
        ),
    ];
    for (tool, args, structured, is_error, text) in cases {
        let result = call(&client, tool, args).await;
        check(&result, structured, is_error, text);
    }
    bounded(client.cancel()).await.unwrap();
}

#[tokio::test]
async fn content_has_every_block_type() {
    let client = client(TestServerOptions::default()).await;
    let result = call(&client, "content", json!({})).await;
    let kinds: Vec<&str> = result
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::Resource(_) => "resource",
            ContentBlock::ResourceLink(_) => "resource_link",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["text", "image", "audio", "resource", "resource_link"]
    );
    bounded(client.cancel()).await.unwrap();
}

#[tokio::test]
async fn huge_output_arrives_whole() {
    let client = client(TestServerOptions::default()).await;
    let result = call(&client, "huge", json!({"bytes": 5_000_000})).await;
    let text = result.content[0].as_text().unwrap();
    assert_eq!(text.text.len(), 5_000_000);
    bounded(client.cancel()).await.unwrap();
}

#[tokio::test]
async fn thousand_tools_come_in_pages() {
    let client = client(
        TestServerOptions::default()
            .with_extra_tools(1_000)
            .with_page_size(100),
    )
    .await;
    let first = bounded(client.list_tools(None)).await.unwrap();
    assert_eq!(first.tools.len(), 100);
    assert_eq!(first.next_cursor.as_deref(), Some("100"));
    let all = bounded(client.list_all_tools()).await.unwrap();
    assert_eq!(
        all.len(),
        1_000
            + TestServer::new(TestServerOptions::default())
                .tool_names()
                .len()
    );
    assert!(all.iter().any(|t| t.name == "tool_0999"));
    let echoed = call(&client, "tool_0500", json!({"n": 5})).await;
    check(&echoed, Some(json!({"n": 5})), false, None);
    bounded(client.cancel()).await.unwrap();
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct ListChanged(Arc<Notify>);

impl ClientHandler for ListChanged {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.notify_one();
    }
}

#[tokio::test]
async fn adding_and_removing_tools_notifies() {
    let changed = ListChanged::default();
    let stream = serve_in_memory(TestServer::new(TestServerOptions::default()));
    let client = bounded(rmcp::serve_client(changed.clone(), stream))
        .await
        .unwrap();

    let added = call(&client, "add_tool", json!({"name": "fresh"})).await;
    check(&added, Some(json!({"changed": true})), false, None);
    bounded(changed.0.notified()).await;
    let tools = bounded(client.list_all_tools()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "fresh"));
    check(
        &call(&client, "fresh", json!({"a": 1})).await,
        Some(json!({"a": 1})),
        false,
        None,
    );

    call(&client, "remove_tool", json!({"name": "fresh"})).await;
    bounded(changed.0.notified()).await;
    let tools = bounded(client.list_all_tools()).await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "fresh"));
    bounded(client.cancel()).await.unwrap();
}

#[tokio::test]
async fn a_dropped_slow_call_is_recorded_as_cancelled() {
    let seen = Observations::new();
    let client = client(TestServerOptions::default().with_observations(seen.clone())).await;
    let args = json!({"ms": 60_000}).as_object().cloned().unwrap();
    let slow = client.call_tool(CallToolRequestParams::new("slow").with_arguments(args));
    tokio::select! {
        _ = slow => panic!("the slow call finished"),
        started = seen.wait_until(LIMIT, |s| s.calls_of("slow") == 1) => {
            assert!(started.is_some(), "the slow call never started");
        }
    }
    // The call future is dropped here; rmcp sends notifications/cancelled.
    let snapshot = seen
        .wait_for_cancelled(1, LIMIT)
        .await
        .expect("no cancellation");
    assert_eq!(snapshot.cancelled().len(), 1);
    bounded(client.cancel()).await.unwrap();
}

#[tokio::test]
async fn crash_drops_the_connection() {
    let client = client(TestServerOptions::default()).await;
    let args = json!({}).as_object().cloned().unwrap();
    let result =
        bounded(client.call_tool(CallToolRequestParams::new("crash").with_arguments(args))).await;
    assert!(result.is_err(), "{result:?}");
}

#[tokio::test]
async fn slow_initialize_delays_the_handshake() {
    let stream = serve_in_memory(TestServer::new(
        TestServerOptions::default().with_init_delay(Duration::from_secs(60)),
    ));
    let handshake =
        tokio::time::timeout(Duration::from_millis(200), rmcp::serve_client((), stream)).await;
    assert!(handshake.is_err(), "the handshake finished early");
}

#[tokio::test]
async fn http_server_speaks_streamable_http() {
    use http_body_util::{BodyExt, Full};
    use hyper::Request;

    let server = serve_http(TestServerOptions::default()).await.unwrap();
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Full<hyper::body::Bytes>>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    });
    let request = Request::post(server.url())
        .header("host", server.addr().to_string())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::from(initialize.to_string()))
        .unwrap();
    let response = bounded(sender.send_request(request)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("mcp-session-id"));
    // The SSE stream of this response stays open; read until the result arrives.
    let mut body = response.into_body();
    let mut text = String::new();
    while !text.contains("serverInfo") {
        let frame = bounded(body.frame()).await.expect("body ended").unwrap();
        if let Some(data) = frame.data_ref() {
            text.push_str(&String::from_utf8_lossy(data));
        }
    }
    assert!(text.contains("mcp-test-kit"), "{text}");
    bounded(server.shutdown()).await;
}

mod stdio {
    use std::process::Stdio;

    use mcp_test_kit::RecordFile;
    use mcp_test_kit::stdio::{Mode, StdioServerArgs};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::process::Command;

    use super::*;

    fn command(args: &StdioServerArgs) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-test-server"));
        cmd.args(args.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    #[tokio::test]
    async fn binary_serves_and_records_cancellations() {
        let dir = std::env::temp_dir().join(format!("mcp-test-kit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let record = RecordFile::new(dir.join("record.jsonl"));
        let _ = std::fs::remove_file(record.path());
        let args = StdioServerArgs::new(Mode::Test)
            .with_record(record.path())
            .with_stdout_noise();
        let mut child = command(&args).spawn().unwrap();
        let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = bounded(rmcp::serve_client((), transport)).await.unwrap();

        check(
            &call(&client, "echo", json!({"a": 1})).await,
            Some(json!({"a": 1})),
            false,
            None,
        );
        let args = json!({"ms": 60_000}).as_object().cloned().unwrap();
        let slow = client.call_tool(CallToolRequestParams::new("slow").with_arguments(args));
        tokio::select! {
            _ = slow => panic!("the slow call finished"),
            started = record.wait_until(LIMIT, |s| s.calls_of("slow") == 1) => assert!(started.is_some()),
        }
        assert!(
            record.wait_for_cancelled(1, LIMIT).await.is_some(),
            "no cancellation recorded"
        );
        let seen = call(
            &client,
            "observations",
            json!({"cancelled": 1, "timeout_ms": 5_000}),
        )
        .await;
        // The handshake, `echo`, `slow`, its cancellation, `observations`.
        assert_eq!(
            seen.structured_content.unwrap()["events"]
                .as_array()
                .unwrap()
                .len(),
            5
        );
        assert_eq!(record.snapshot().handshakes(), 1);

        bounded(client.cancel()).await.unwrap();
        let status = bounded(child.wait()).await.unwrap();
        assert!(status.success(), "{status}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn garbage_mode_writes_garbage_and_exits() {
        let mut child = command(&StdioServerArgs::new(Mode::GarbageOnStdout))
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).split(b'\n');
        let mut all = Vec::new();
        while let Some(line) = bounded(lines.next_segment()).await.unwrap() {
            all.push(line);
        }
        assert_eq!(
            all.first().map(Vec::as_slice),
            Some(&b"this is not JSON"[..])
        );
        assert!(
            all.iter()
                .all(|l| serde_json::from_slice::<rmcp::model::ServerJsonRpcMessage>(l).is_err())
        );
        let status = bounded(child.wait()).await.unwrap();
        assert_eq!(status.code(), Some(2));
    }

    #[tokio::test]
    async fn http_flag_prints_a_url() {
        let mut args = StdioServerArgs::new(Mode::Test);
        args.http = true;
        let mut child = command(&args).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = bounded(lines.next_line()).await.unwrap().unwrap();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        drop(child.stdin.take());
        assert!(bounded(child.wait()).await.unwrap().success());
    }
}
