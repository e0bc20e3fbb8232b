//! Connect, initialise, list and call over both response modes of a real rmcp server.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve, text_of};
use http::Method;
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};

/// Opens a session to a server in `mode`, lists and calls; returns what the server saw.
async fn round_trip(mode: Mode) -> Vec<common::Seen> {
    let rmcp = Arc::new(RmcpServer::new(mode));
    let server = serve(rmcp.handler()).await;
    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    let connection = connector.connect(&server.spec("echo")).await.unwrap();
    let client = rmcp::serve_client((), connection.transport).await.unwrap();

    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["echo", "big"]);
    for i in 0..5 {
        let result = client
            .peer()
            .call_tool(echo(&format!("hi {i}")))
            .await
            .unwrap();
        assert_eq!(text_of(&result), format!("hi {i}"));
    }
    client.cancel().await.unwrap();
    // Stateless JSON: connections are reused from the pool (5 calls, one list, handshake).
    if mode == Mode::StatelessJson {
        assert!(
            server.connections() < server.count_method(&Method::POST),
            "{} connections for {} POSTs",
            server.connections(),
            server.count_method(&Method::POST)
        );
    }
    server.seen()
}

#[tokio::test]
async fn session_with_sse_responses() {
    let seen = bounded(round_trip(Mode::SessionSse)).await;
    let posts: Vec<_> = seen.iter().filter(|s| s.method == Method::POST).collect();
    assert_eq!(posts[0].rpc.as_deref(), Some("initialize"));
    assert_eq!(posts[0].header("mcp-session-id"), None);
    // Every later request carries the session id and the negotiated protocol version.
    let session = posts[1]
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    for s in &seen[1..] {
        assert_eq!(s.header("mcp-session-id"), Some(session.as_str()), "{s:?}");
        assert!(s.header("mcp-protocol-version").is_some(), "{s:?}");
    }
    let calls = posts
        .iter()
        .filter(|s| s.rpc.as_deref() == Some("tools/call"));
    assert!(calls.clone().count() == 5);
    assert!(
        calls
            .into_iter()
            .all(|s| s.response_type.as_deref() == Some("text/event-stream"))
    );
    assert!(
        posts[0]
            .header("accept")
            .is_some_and(|a| a.contains("text/event-stream") && a.contains("application/json"))
    );
}

#[tokio::test]
async fn stateless_with_json_responses() {
    let seen = bounded(round_trip(Mode::StatelessJson)).await;
    assert!(seen.iter().all(|s| s.header("mcp-session-id").is_none()));
    let calls = seen
        .iter()
        .filter(|s| s.rpc.as_deref() == Some("tools/call"));
    assert!(calls.clone().count() == 5);
    assert!(
        calls
            .into_iter()
            .all(|s| s.response_type.as_deref() == Some("application/json"))
    );
    assert!(
        seen[1..]
            .iter()
            .all(|s| s.header("mcp-protocol-version").is_some())
    );
}
