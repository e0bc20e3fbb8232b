//! Sequential calls over one client reuse one pooled connection: a response's SSE stream is
//! read to its end before its answer is handed over, so the connection is back in the pool
//! when the next request asks for one.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve, text_of};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};

/// Calls `echo` `calls` times in sequence over one client; returns the connections the
/// server accepted.
async fn connections_for(mode: Mode, calls: usize) -> usize {
    let rmcp = Arc::new(RmcpServer::new(mode));
    let server = serve(rmcp.handler()).await;
    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    let connection = connector.connect(&server.spec("echo")).await.unwrap();
    let client = rmcp::serve_client((), connection.transport).await.unwrap();
    for i in 0..calls {
        let result = client
            .peer()
            .call_tool(echo(&format!("hi {i}")))
            .await
            .unwrap();
        assert_eq!(text_of(&result), format!("hi {i}"));
    }
    let connections = server.connections();
    client.cancel().await.unwrap();
    connections
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_sse_calls_reuse_one_connection() {
    let connections = bounded(connections_for(Mode::SessionSse, 500)).await;
    // The POSTs on one connection, the standalone GET stream (held open) on another.
    assert!(connections <= 3, "{connections} connections for 500 calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_json_calls_reuse_one_connection() {
    let connections = bounded(connections_for(Mode::StatelessJson, 50)).await;
    assert!(connections <= 2, "{connections} connections for 50 calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_calls_to_a_default_rmcp_server_reuse_one_connection() {
    // Without the response waiting for its stream's end: 49 connections for these 500 calls.
    let connections = bounded(connections_for(Mode::DefaultSse, 500)).await;
    assert!(connections <= 3, "{connections} connections for 500 calls");
}
