//! W3C trace context: a call whose `_meta` carries `traceparent`/`tracestate` reaches the
//! server with both as HTTP headers too; an untraced call and the session's other requests
//! carry none.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use rmcp::model::RequestParamsMeta as _;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn a_traced_call_carries_its_context_as_headers() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let server = serve(rmcp.handler()).await;
        let spec = server.spec("traced");
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let connection = connector.connect(&spec).await.unwrap();
        let client = rmcp::serve_client((), connection.transport).await.unwrap();

        let mut traced = echo("traced");
        traced.set_traceparent(PARENT);
        traced.set_tracestate("vendor=abc");
        client.peer().call_tool(traced).await.unwrap();
        client.peer().call_tool(echo("plain")).await.unwrap();
        client.cancel().await.unwrap();

        let seen = server.seen();
        let calls: Vec<_> = seen
            .iter()
            .filter(|s| s.rpc.as_deref() == Some("tools/call"))
            .collect();
        assert_eq!(calls.len(), 2, "{seen:?}");
        assert_eq!(calls[0].header("traceparent"), Some(PARENT));
        assert_eq!(calls[0].header("tracestate"), Some("vendor=abc"));
        assert_eq!(calls[1].header("traceparent"), None);
        for other in seen
            .iter()
            .filter(|s| s.rpc.as_deref() != Some("tools/call"))
        {
            assert_eq!(other.header("traceparent"), None, "{other:?}");
        }
    })
    .await;
}
