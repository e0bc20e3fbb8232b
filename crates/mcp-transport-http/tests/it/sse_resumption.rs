//! A response stream that closes before its response is resumed with `Last-Event-ID`, after
//! the delay the server asked for with `retry`; a server that holds none of the stream's events
//! (it answers the resumption with a stream that ends at once) fails the call within the
//! reconnection policy's attempts instead of being asked forever.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Handler, bounded, echo, respond, serve, text_of};
use http::{Method, Response, StatusCode};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use serde_json::{Value, json};

const SESSION: &str = "session-1";

fn sse(text: String) -> Response<common::Body> {
    let mut response = respond(StatusCode::OK, "text/event-stream", text);
    response
        .headers_mut()
        .insert("mcp-session-id", SESSION.parse().unwrap());
    response
}

/// A scripted server: the response stream of `tools/call` sends one event (id `e1`, retry
/// 10 ms) and closes; a GET with `Last-Event-ID: e1` delivers the result, or, when the server
/// is `forgetful`, ends at once without an event.
fn scripted() -> Handler {
    script(false)
}

fn script(forgetful: bool) -> Handler {
    let pending = Arc::new(Mutex::new(None::<Value>));
    Arc::new(move |parts, body| {
        let pending = pending.clone();
        Box::pin(async move {
            let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let method = message.get("method").and_then(Value::as_str).unwrap_or("");
            let last_event_id = parts
                .headers
                .get("last-event-id")
                .and_then(|v| v.to_str().ok());
            match (&parts.method, method, last_event_id) {
                (&Method::POST, "initialize", _) => {
                    let result = json!({
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": { "tools": {} },
                            "serverInfo": { "name": "scripted", "version": "1" }
                        }
                    });
                    let mut response =
                        respond(StatusCode::OK, "application/json", result.to_string());
                    response
                        .headers_mut()
                        .insert("mcp-session-id", SESSION.parse().unwrap());
                    response
                }
                (&Method::POST, "tools/call", _) => {
                    *pending.lock().unwrap() = Some(message["id"].clone());
                    sse("id: e1\nretry: 10\ndata:\n\n".to_owned())
                }
                (&Method::POST, _, _) => respond(StatusCode::ACCEPTED, "text/plain", ""),
                (&Method::GET, _, Some("e1")) if forgetful => sse(String::new()),
                (&Method::GET, _, Some("e1")) => {
                    let id = pending.lock().unwrap().take().expect("a call to resume");
                    let result = json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "result": { "content": [{ "type": "text", "text": "resumed" }] }
                    });
                    sse(format!("id: e2\ndata: {result}\n\n"))
                }
                // No standalone stream; DELETE is fine.
                (&Method::GET, _, _) => respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", ""),
                _ => respond(StatusCode::OK, "text/plain", ""),
            }
        })
    })
}

#[tokio::test]
async fn closed_response_stream_resumes_with_last_event_id() {
    bounded(async {
        let server = serve(scripted()).await;
        // Without the server's `retry`, the client would wait 60 s before resuming: longer
        // than the test's bound.
        let options = HttpOptions::default().with_sse_reconnect(
            2,
            Duration::from_secs(60),
            Duration::from_secs(60),
        );
        let connector = HttpConnector::new(options).unwrap();
        let connection = connector.connect(&server.spec("resuming")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let result = client.peer().call_tool(echo("ignored")).await.unwrap();
        assert_eq!(text_of(&result), "resumed");
        client.cancel().await.unwrap();

        let resumes: Vec<_> = server
            .seen()
            .into_iter()
            .filter(|s| s.method == Method::GET && s.header("last-event-id").is_some())
            .collect();
        assert_eq!(resumes.len(), 1, "{resumes:?}");
        assert_eq!(resumes[0].header("last-event-id"), Some("e1"));
        assert_eq!(resumes[0].header("mcp-session-id"), Some(SESSION));
        assert!(
            resumes[0]
                .header("accept")
                .is_some_and(|a| a.contains("text/event-stream"))
        );
        assert_eq!(server.count_method(&Method::DELETE), 1);
    })
    .await;
}

#[tokio::test]
async fn a_resumption_that_ends_without_an_event_fails_the_call_after_the_policy_s_attempts() {
    bounded(async {
        let server = serve(script(true)).await;
        let options = HttpOptions::default().with_sse_reconnect(
            3,
            Duration::from_millis(10),
            Duration::from_millis(10),
        );
        let connector = HttpConnector::new(options).unwrap();
        let connection = connector.connect(&server.spec("forgetful")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let called = client.peer().call_tool(echo("ignored")).await;
        assert!(called.is_err(), "{called:?}");
        // The session itself goes on: the next request is still sent in it.
        assert!(!client.is_closed());
        client.cancel().await.unwrap();

        let resumes = server
            .seen()
            .into_iter()
            .filter(|s| s.method == Method::GET && s.header("last-event-id") == Some("e1"))
            .count();
        assert!((1..=4).contains(&resumes), "{resumes} resumptions");
    })
    .await;
}
