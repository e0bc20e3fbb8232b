//! A server that sends its elicitation for a running call on the standalone GET stream only,
//! and drops it when that stream is not open yet (the official conformance suite's SEP-1034
//! server does: the TypeScript SDK without an event store), gets it to the client even when
//! the GET is slow: the session's requests wait until the server has answered the GET.
//!
//! The scripted server forces the ordering a loaded machine produced: it answers the GET only
//! once a `tools/call` has arrived (having sent, or lost, its elicitation by then) or after
//! [`HOLD`]. A client that sends the call alongside the GET loses the elicitation and its call
//! never ends; one that waits for the GET's answer sends the call after it, and the
//! elicitation arrives.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{Body, Handler, bounded, respond, serve};
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

const SESSION: &str = "session-1";
/// The id of the server's elicitation request.
const ELICITATION: &str = "elicitation-1";
/// How long the server holds the GET when no call arrives.
const HOLD: Duration = Duration::from_secs(2);

type Events = mpsc::UnboundedSender<Result<Frame<Bytes>, std::convert::Infallible>>;

/// What the scripted server holds between requests.
#[derive(Default)]
struct State {
    /// The open standalone stream.
    get_stream: Mutex<Option<Events>>,
    /// The running call: its id and its response stream.
    call: Mutex<Option<(Value, Events)>>,
    /// A call arrived (the GET may be answered).
    called: Notify,
    /// Elicitations dropped for want of a GET stream.
    lost: AtomicUsize,
}

/// An open `text/event-stream` response and the sender of its events.
fn event_stream() -> (Response<Body>, Events) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let body = StreamBody::new(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let response = Response::builder()
        .header("content-type", "text/event-stream")
        .header("mcp-session-id", SESSION)
        .body(BodyExt::boxed(body))
        .unwrap();
    (response, tx)
}

fn event(message: &Value) -> Result<Frame<Bytes>, std::convert::Infallible> {
    Ok(Frame::data(Bytes::from(format!(
        "event: message\ndata: {message}\n\n"
    ))))
}

fn script(state: Arc<State>) -> Handler {
    Arc::new(move |parts, body| {
        let state = state.clone();
        Box::pin(async move {
            let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let method = message["method"].as_str().unwrap_or_default();
            match (&parts.method, method) {
                (&Method::POST, "initialize") => {
                    let result = json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "get-only-elicitation", "version": "1"},
                    }});
                    let mut response =
                        respond(StatusCode::OK, "application/json", result.to_string());
                    response
                        .headers_mut()
                        .insert("mcp-session-id", SESSION.parse().unwrap());
                    response
                }
                (&Method::POST, "tools/call") => {
                    let elicitation = json!({"jsonrpc": "2.0", "id": ELICITATION,
                    "method": "elicitation/create", "params": {
                        "message": "Accept?",
                        "requestedSchema": {"type": "object", "properties": {}},
                    }});
                    // On the standalone stream only; without one it is gone.
                    match state.get_stream.lock().unwrap().as_ref() {
                        Some(get) => {
                            let _ = get.send(event(&elicitation));
                        }
                        None => {
                            state.lost.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    let (response, events) = event_stream();
                    *state.call.lock().unwrap() = Some((message["id"].clone(), events));
                    state.called.notify_one();
                    response
                }
                // The client's answer to the elicitation: the call ends with its action.
                (&Method::POST, "") if message["id"] == ELICITATION => {
                    if let Some((id, events)) = state.call.lock().unwrap().take() {
                        let action = message["result"]["action"].clone();
                        let _ = events.send(event(&json!({"jsonrpc": "2.0", "id": id, "result": {
                            "content": [{"type": "text", "text": format!("answered: {action}")}],
                        }})));
                    }
                    respond(StatusCode::ACCEPTED, "text/plain", "")
                }
                (&Method::POST, _) => respond(StatusCode::ACCEPTED, "text/plain", ""),
                (&Method::GET, _) => {
                    // Late: once a call has arrived, or after HOLD.
                    let _ = tokio::time::timeout(HOLD, state.called.notified()).await;
                    let (response, events) = event_stream();
                    *state.get_stream.lock().unwrap() = Some(events);
                    response
                }
                _ => respond(StatusCode::OK, "text/plain", ""),
            }
        })
    })
}

#[tokio::test]
async fn elicitation_sent_only_on_a_late_get_stream_reaches_the_client() {
    bounded(async {
        let state = Arc::new(State::default());
        let server = serve(script(state.clone())).await;
        // Longer than the server's hold: the requests wait for the GET's answer, not for this.
        let options = HttpOptions::default().with_event_stream_wait(common::TEST_TIMEOUT);
        let connector = HttpConnector::new(options).unwrap();
        let connection = connector.connect(&server.spec("late-get")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let call = client.peer().call_tool(CallToolRequestParams::new("ask"));
        let call = tokio::time::timeout(common::TEST_TIMEOUT / 2, call)
            .await
            .unwrap_or_else(|_| {
                let lost = state.lost.load(Ordering::SeqCst);
                panic!("the call never ended: {lost} elicitation(s) sent before the GET stream was open")
            })
            .unwrap();
        // `()` declines every elicitation: the server got the client's answer.
        assert_eq!(common::text_of(&call), "answered: \"decline\"");
        assert_eq!(state.lost.load(Ordering::SeqCst), 0);
        client.cancel().await.unwrap();

        // The GET was answered before the call was sent.
        let seen = server.seen();
        let get = seen.iter().position(|s| s.method == Method::GET);
        let call = seen
            .iter()
            .position(|s| s.rpc.as_deref() == Some("tools/call"));
        assert!(get.zip(call).is_some_and(|(g, c)| g < c), "{seen:?}");
    })
    .await;
}
