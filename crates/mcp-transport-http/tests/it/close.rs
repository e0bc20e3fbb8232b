//! Closing the transport deletes the session on the server.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve};
use http::{Method, StatusCode};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};

#[tokio::test]
async fn close_sends_delete_with_the_session_id() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let server = serve(rmcp.handler()).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let connection = connector.connect(&server.spec("closing")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        client.peer().call_tool(echo("x")).await.unwrap();
        assert_eq!(server.count_method(&Method::DELETE), 0);
        assert_eq!(rmcp.sessions.sessions.read().await.len(), 1);

        // Closing waits for the DELETE to finish.
        client.cancel().await.unwrap();
        let seen = server.seen();
        let deletes: Vec<_> = seen.iter().filter(|s| s.method == Method::DELETE).collect();
        assert_eq!(deletes.len(), 1);
        let session = seen
            .iter()
            .find_map(|s| s.header("mcp-session-id"))
            .expect("a session id");
        assert_eq!(deletes[0].header("mcp-session-id"), Some(session));
        assert!(deletes[0].status.is_success(), "{:?}", deletes[0].status);
        assert_ne!(deletes[0].status, StatusCode::NOT_FOUND);
        assert!(rmcp.sessions.sessions.read().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn dropping_the_client_also_deletes_the_session() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let inner = rmcp.handler();
        let deleted = Arc::new(tokio::sync::Notify::new());
        let signal = deleted.clone();
        let server = serve(Arc::new(move |parts: http::request::Parts, body| {
            let is_delete = parts.method == Method::DELETE;
            let (response, signal) = (inner(parts, body), signal.clone());
            Box::pin(async move {
                let response = response.await;
                if is_delete {
                    signal.notify_one();
                }
                response
            })
        }))
        .await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let connection = connector.connect(&server.spec("dropped")).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        client.peer().call_tool(echo("x")).await.unwrap();

        drop(client);
        deleted.notified().await;
        assert!(rmcp.sessions.sessions.read().await.is_empty());
    })
    .await;
}
