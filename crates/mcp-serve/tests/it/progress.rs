//! A call's progress, end to end: a native tool served over streamable HTTP reports with
//! `agent_core::progress::report`, the server sends it as `notifications/progress` under the
//! token its client chose, and that client (`mcp_client`, for its caller's
//! `agent_core::progress::with_progress` scope) hands it to its caller — at both revisions.
//! Reports that do not increase or are not finite never leave the server, a message loses its
//! control characters, and two calls at once each get their own reports. A sessionless
//! (2026-07-28) call is answered in one JSON body, unless it reports progress: then in an event
//! stream that carries the reports before the answer.

use std::sync::{Arc, Mutex};

use agent_core::progress::{self, Progress, ProgressSink};
use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{Exposure, HttpOptions, HttpServer, ToolServer};
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::json;
use tokio::sync::mpsc;

use crate::downstream::downstream;
use crate::support::{bounded, call_through, object, output_text, stateless_call};

/// One tool, `work`, that reports its progress as it goes.
struct Reporter;

impl ToolCatalog for Reporter {
    fn tools(&self) -> Vec<ToolDescriptor> {
        vec![ToolDescriptor::new(
            "work",
            object(json!({"type": "object"})),
        )]
    }
}

#[async_trait]
impl ToolDispatcher for Reporter {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        // Each call's reports start at its `base`, so that two calls' reports differ.
        let base = call
            .arguments
            .get("base")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0);
        let steps = [
            Progress::new(base + 1.0)
                .with_total(base + 3.0)
                .with_message("\u{1b}[2Jstarted\n"),
            Progress::new(f64::NAN),
            Progress::new(base + 0.5),
            Progress::new(base + 2.0).with_total(base + 3.0),
            Progress::new(base + 2.0),
            Progress::new(base + 3.0)
                .with_total(base + 3.0)
                .with_message("done"),
        ];
        for step in steps {
            progress::report(step);
            tokio::task::yield_now().await;
        }
        Ok(ToolOutput::text("worked"))
    }
}

/// `work` served over streamable HTTP.
async fn serve_reporter() -> HttpServer {
    ToolServer::new(Arc::new(Reporter), Exposure::only(["work"]))
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP")
}

/// The reports a call of `work` with `base` gives its caller.
fn expected(base: f64) -> [Progress; 3] {
    [
        Progress::new(base + 1.0)
            .with_total(base + 3.0)
            .with_message("[2Jstarted"),
        Progress::new(base + 2.0).with_total(base + 3.0),
        Progress::new(base + 3.0)
            .with_total(base + 3.0)
            .with_message("done"),
    ]
}

/// A progress scope whose sink collects the reports.
fn collector() -> (ProgressSink, Arc<Mutex<Vec<Progress>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink: ProgressSink = {
        let seen = seen.clone();
        Arc::new(move |p: Progress| seen.lock().unwrap().push(p))
    };
    (sink, seen)
}

#[tokio::test]
async fn a_served_tool_s_progress_reaches_the_caller_of_the_client_at_both_revisions() {
    let server = serve_reporter().await;
    for discover in [false, true] {
        let runner = downstream(server.url(), discover, None).await;
        let (sink, seen) = collector();
        let output = progress::with_progress(sink, call_through(&runner, "work", json!({})))
            .await
            .unwrap();
        assert_eq!(output_text(&output), "worked");
        // Every report was there before the answer.
        assert_eq!(
            *seen.lock().unwrap(),
            expected(0.0),
            "discover = {discover}"
        );

        // Two calls at once on one session, each in its own scope: each gets its own reports.
        let (sink_a, seen_a) = collector();
        let (sink_b, seen_b) = collector();
        let (a, b) = tokio::join!(
            progress::with_progress(sink_a, call_through(&runner, "work", json!({"base": 10}))),
            progress::with_progress(sink_b, call_through(&runner, "work", json!({"base": 20}))),
        );
        assert_eq!(output_text(&a.unwrap()), "worked");
        assert_eq!(output_text(&b.unwrap()), "worked");
        assert_eq!(*seen_a.lock().unwrap(), expected(10.0));
        assert_eq!(*seen_b.lock().unwrap(), expected(20.0));
        let _ = runner.shutdown().await;
    }
    bounded("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn a_sessionless_call_is_one_json_body_unless_it_reports_progress() {
    let server = serve_reporter().await;
    let url = server.url().as_str();
    let content_type = |answer: &crate::support::Answer| {
        let value = answer.headers.get(http::header::CONTENT_TYPE);
        value.and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
    };

    // Nobody asked for progress: the reports stay on the server and the answer is the body.
    let answer = stateless_call(url, "work", json!({}), json!({}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(content_type(&answer), "application/json", "{}", answer.body);
    assert!(!answer.body.contains("data:"), "{}", answer.body);
    let message = answer.json();
    assert_eq!(message["id"], 7);
    assert_eq!(message["result"]["content"][0]["text"], "worked");

    // With a progress token the reports come first, so the answer is an event stream.
    let meta = json!({"progressToken": "t1"});
    let answer = stateless_call(url, "work", json!({}), meta, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        content_type(&answer),
        "text/event-stream",
        "{}",
        answer.body
    );
    let messages = answer.messages();
    let reports: Vec<_> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            (
                m["params"]["progressToken"].clone(),
                m["params"]["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(
        reports,
        [
            (json!("t1"), json!(1.0)),
            (json!("t1"), json!(2.0)),
            (json!("t1"), json!(3.0))
        ],
        "{}",
        answer.body
    );
    let last = messages.last().expect("messages");
    assert_eq!(
        last["result"]["content"][0]["text"], "worked",
        "{}",
        answer.body
    );
    bounded("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn a_session_request_is_one_json_body_unless_it_reports_progress() {
    use crate::support::{POST_HEADERS, initialize_body, send};
    let server = serve_reporter().await;
    let url = server.url().as_str();
    let header = |answer: &crate::support::Answer, name: &str| {
        let value = answer.headers.get(name);
        value.and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
    };

    // The handshake's answer is one JSON body, sent with its length and the session's id.
    let opened = send("POST", url, POST_HEADERS, initialize_body()).await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    assert_eq!(header(&opened, "content-type"), "application/json");
    assert_eq!(
        header(&opened, "content-length"),
        opened.body.len().to_string()
    );
    assert_eq!(opened.json()["id"], 1, "{}", opened.body);
    let session = header(&opened, "mcp-session-id");
    assert!(!session.is_empty());
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    headers.extend([
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = send("POST", url, &headers, initialized.to_string()).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);

    // A call that reports nothing: its answer is the body.
    let call = |id: u64, meta: serde_json::Value| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "work", "arguments": {}, "_meta": meta},
        })
        .to_string()
    };
    let answer = send("POST", url, &headers, call(2, json!({}))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(header(&answer, "content-type"), "application/json");
    assert_eq!(answer.json()["id"], 2, "{}", answer.body);
    assert_eq!(answer.json()["result"]["content"][0]["text"], "worked");

    // With a progress token the reports come first: an event stream, primed for resumption,
    // with every report and then the answer.
    let answer = send(
        "POST",
        url,
        &headers,
        call(3, json!({"progressToken": "t"})),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(header(&answer, "content-type"), "text/event-stream");
    let priming = answer.body.split("\n\n").next().unwrap_or_default();
    let fields: Vec<&str> = priming
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert!(
        fields.contains(&"id") && fields.contains(&"retry") && answer.messages().len() == 4,
        "the priming event first: {}",
        answer.body
    );
    let messages = answer.messages();
    let reports = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(reports, 3, "{}", answer.body);
    assert_eq!(messages.last().unwrap()["id"], 3, "{}", answer.body);
    bounded("shutdown", server.shutdown()).await;
}

/// Records the progress notifications it is sent, as they arrive.
struct Recorder(mpsc::UnboundedSender<ProgressNotificationParam>);

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params);
    }
}

#[tokio::test]
async fn only_increasing_finite_progress_leaves_the_server() {
    let server = ToolServer::new(Arc::new(Reporter), Exposure::only(["work"]));
    let (server_end, client_end) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(server.serve_transport(server_end));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = bounded("initialize", Recorder(tx).serve(client_end))
        .await
        .unwrap();
    let _session = bounded("serve", serving).await.unwrap().unwrap();
    let params = CallToolRequestParams::new("work").with_arguments(object(json!({})));
    let result = bounded("the call", client.call_tool(params)).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    // rmcp's client gave the call a token of its own; the server sent under it what the tool
    // reported, filtered: three reports (handled on tasks of their own, so in any order).
    let mut sent = Vec::new();
    while sent.len() < 3 {
        sent.push(bounded("a report", rx.recv()).await.unwrap());
    }
    sent.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let token = &sent[0].progress_token;
    assert!(sent.iter().all(|p| &p.progress_token == token));
    let got: Vec<_> = sent
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (1.0, Some(3.0), Some("[2Jstarted".to_owned())),
            (2.0, Some(3.0), None),
            (3.0, Some(3.0), Some("done".to_owned())),
        ]
    );
}
