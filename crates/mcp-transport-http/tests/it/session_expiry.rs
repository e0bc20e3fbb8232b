//! HTTP 404 on a live session: the transport re-initialises once, signals the renewal (so the
//! client can re-list what it caches) and retries the request.

use crate::common;

use std::sync::Arc;

use common::{Mode, RmcpServer, bounded, echo, serve, text_of};
use http::{Method, StatusCode};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};

#[tokio::test]
async fn expired_session_is_reinitialised_once_then_the_call_succeeds() {
    bounded(async {
        let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
        let server = serve(rmcp.handler()).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let connection = connector.connect(&server.spec("expiring")).await.unwrap();
        let handle = connection.handle;
        let mut renewals = handle.renewals().expect("HTTP sessions signal renewals");
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        let before = client.peer().call_tool(echo("before")).await.unwrap();
        assert_eq!(text_of(&before), "before");
        assert_eq!(handle.diagnostics(), None);
        // The first handshake is no renewal.
        assert!(!renewals.has_changed().unwrap());
        assert_eq!(*renewals.borrow_and_update(), 0);
        let old_session = server
            .seen()
            .iter()
            .find_map(|s| s.header("mcp-session-id").map(str::to_owned))
            .unwrap();

        rmcp.forget_sessions().await;
        let after = client.peer().call_tool(echo("after")).await.unwrap();
        assert_eq!(text_of(&after), "after");
        // Signalled by the time the retried call is answered.
        assert!(renewals.has_changed().unwrap());
        assert_eq!(*renewals.borrow_and_update(), 1);

        assert_eq!(server.count_rpc("initialize"), 2);
        assert_eq!(server.count_rpc("notifications/initialized"), 2);
        let seen = server.seen();
        let calls: Vec<_> = seen
            .iter()
            .filter(|s| s.rpc.as_deref() == Some("tools/call"))
            .collect();
        // before (ok), after on the old session (404), after retried on the new one (ok).
        assert_eq!(
            calls.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StatusCode::OK, StatusCode::NOT_FOUND, StatusCode::OK]
        );
        assert_eq!(
            calls[1].header("mcp-session-id"),
            Some(old_session.as_str())
        );
        let new_session = calls[2].header("mcp-session-id").unwrap().to_owned();
        assert_ne!(new_session, old_session);
        // The re-initialise went out without a session id.
        let inits: Vec<_> = seen
            .iter()
            .filter(|s| s.rpc.as_deref() == Some("initialize"))
            .collect();
        assert_eq!(inits[1].header("mcp-session-id"), None);
        assert!(
            handle
                .diagnostics()
                .unwrap()
                .contains("re-initialised 1 time")
        );

        // Later calls use the new session, and close deletes it.
        client.peer().call_tool(echo("later")).await.unwrap();
        assert!(!renewals.has_changed().unwrap());
        client.cancel().await.unwrap();
        let seen = server.seen();
        assert_eq!(
            seen.iter()
                .rfind(|s| s.rpc.as_deref() == Some("tools/call"))
                .unwrap()
                .header("mcp-session-id"),
            Some(new_session.as_str())
        );
        let delete = seen.iter().find(|s| s.method == Method::DELETE).unwrap();
        assert_eq!(delete.header("mcp-session-id"), Some(new_session.as_str()));
        assert_eq!(server.count_rpc("initialize"), 2);
    })
    .await;
}
