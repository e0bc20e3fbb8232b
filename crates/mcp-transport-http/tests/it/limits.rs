//! Response bodies over the configured limit are errors, not buffers.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, big, bounded, echo, serve, text_of};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};

const LIMIT: usize = 64 * 1024;

/// The error and its causes, joined.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(" <- ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn check(mode: Mode, options: HttpOptions, expected: &[&str]) {
    let rmcp = Arc::new(RmcpServer::new(mode));
    let server = serve(rmcp.handler()).await;
    let connector = HttpConnector::new(options).unwrap();
    let connection = connector.connect(&server.spec("bounded")).await.unwrap();
    let client = rmcp::serve_client((), connection.transport).await.unwrap();

    let small = client.peer().call_tool(big(LIMIT / 2)).await.unwrap();
    assert_eq!(text_of(&small).len(), LIMIT / 2);
    let err = client.peer().call_tool(big(4 * LIMIT)).await.unwrap_err();
    let text = chain(&err);
    for part in expected {
        assert!(text.contains(part), "{text} lacks {part}");
    }
    // The session survives: the next call works.
    let after = client.peer().call_tool(echo("still here")).await.unwrap();
    assert_eq!(text_of(&after), "still here");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn json_body_over_the_limit_is_an_error() {
    bounded(check(
        Mode::StatelessJson,
        HttpOptions::default().with_max_response_bytes(LIMIT),
        &[
            "server `bounded`: the HTTP response body of ",
            &format!(" bytes exceeds the limit of {LIMIT} bytes"),
        ],
    ))
    .await;
}

#[tokio::test]
async fn sse_event_over_the_limit_is_an_error() {
    bounded(check(
        Mode::SessionSse,
        HttpOptions::default().with_max_sse_event_bytes(LIMIT),
        &[&format!(
            "server `bounded`: a server-sent event exceeds the limit of {LIMIT} bytes"
        )],
    ))
    .await;
}

#[test]
fn default_limit_is_16_mib() {
    let options = HttpOptions::default();
    assert_eq!(options.max_response_bytes, 16 * 1024 * 1024);
    assert_eq!(options.max_sse_event_bytes, 16 * 1024 * 1024);
}
