//! Tools opened per downstream session (`ToolServer::per_session`, what a gateway serves):
//! each session opens its own, closes them when it ends, and a shutdown waits for the
//! closes; a failed open is reported to the client and the server goes on; each session's
//! tool-list changes reach that session only; a stateless listen whose tools open after its
//! acknowledgment starts with a notification; `max_sessions` refuses one more `initialize`
//! with a clear error; the rate limit answers `429` with `Retry-After`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{
    HttpOptions, OpenError, OpenTools, RateLimit, SessionTools, ToolListChanges, ToolServer,
};
use serde_json::json;

use crate::support::{POST_HEADERS, bounded, initialize_body, object, send};

/// One session's tools: `whoami` answers the session's number.
struct Numbered {
    n: usize,
    changes: ToolListChanges,
    closed: Arc<AtomicUsize>,
    /// Also lists `added`.
    added: bool,
}

impl ToolCatalog for Numbered {
    fn tools(&self) -> Vec<ToolDescriptor> {
        let names: &[&str] = if self.added {
            &["whoami", "added"]
        } else {
            &["whoami"]
        };
        names
            .iter()
            .map(|name| ToolDescriptor::new(*name, object(json!({"type": "object"}))))
            .collect()
    }
}

#[async_trait]
impl ToolDispatcher for Numbered {
    async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::structured(json!({"session": self.n})))
    }
}

#[async_trait]
impl SessionTools for Numbered {
    fn list_changes(&self) -> Option<ToolListChanges> {
        Some(self.changes.clone())
    }

    async fn close(&self) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// Opens numbered tools; the `fail_next` flag makes the next open fail.
#[derive(Default)]
struct Opener {
    opened: AtomicUsize,
    closed: Arc<AtomicUsize>,
    fail_next: Mutex<bool>,
    changes: Mutex<Vec<ToolListChanges>>,
    /// Tools opened from now on also list `added` (the upstream changed).
    add: AtomicBool,
}

#[async_trait]
impl OpenTools for Opener {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
            return Err("upstream `kit` could not start".into());
        }
        let n = self.opened.fetch_add(1, Ordering::SeqCst);
        let changes = ToolListChanges::new();
        self.changes.lock().unwrap().push(changes.clone());
        Ok(Arc::new(Numbered {
            n,
            changes,
            closed: self.closed.clone(),
            added: self.add.load(Ordering::SeqCst),
        }))
    }
}

/// A client session on the in-memory transport, and the server's end.
async fn session(
    server: &ToolServer,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, Listener>,
    mcp_serve::SessionServer,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(server.clone().serve_transport(server_end));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let client = rmcp::ServiceExt::serve(Listener(tx), client_end)
        .await
        .unwrap();
    let served = serving.await.unwrap().unwrap();
    (client, served, rx)
}

/// A client handler that reports each tool-list change.
struct Listener(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(());
    }
}

async fn whoami(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Listener>,
) -> serde_json::Value {
    let result = bounded(
        "whoami",
        client.call_tool(rmcp::model::CallToolRequestParams::new("whoami")),
    )
    .await
    .unwrap();
    result.structured_content.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_opens_its_own_tools_and_closes_them_when_it_ends() {
    let opener = Arc::new(Opener::default());
    let server = ToolServer::per_session(opener.clone());
    assert!(server.exposed_tools().is_empty());

    let (first, first_served, mut first_changes) = session(&server).await;
    let (second, second_served, mut second_changes) = session(&server).await;
    let listed = bounded("list", first.list_all_tools()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "whoami");
    let a = whoami(&first).await;
    let b = whoami(&second).await;
    assert_ne!(a, b, "each session has its own tools");
    assert_eq!(opener.opened.load(Ordering::SeqCst), 2);

    // A change of one session's tools reaches that session only.
    let changes = opener.changes.lock().unwrap().clone();
    let index = a["session"].as_u64().unwrap() as usize;
    changes[index].notify();
    bounded("the change", first_changes.recv()).await.unwrap();
    assert!(second_changes.try_recv().is_err());

    // The session ends: its tools are closed, and the shutdown waits for that.
    drop(first);
    first_served.wait().await;
    first_served
        .shutdown(std::time::Duration::from_secs(10))
        .await;
    assert_eq!(opener.closed.load(Ordering::SeqCst), 1);
    second_served
        .shutdown(std::time::Duration::from_secs(10))
        .await;
    assert_eq!(opener.closed.load(Ordering::SeqCst), 2);
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_listen_opening_its_tools_anew_announces_what_changed_before() {
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::service::ClientLifecycleMode;
    let opener = Arc::new(Opener::default());
    let server = ToolServer::per_session(opener.clone())
        .serve_http(HttpOptions::default())
        .await
        .unwrap();
    let spec = mcp_config::ServerSpec::new(
        "served",
        mcp_config::TransportSpec::StreamableHttp(mcp_config::HttpSpec::new(server.url().clone())),
    );
    let transport =
        mcp_transport_http::HttpConnector::new(mcp_transport_http::HttpOptions::default())
            .expect("the HTTP connector")
            .transport(&spec)
            .expect("the transport");
    // Revision 2026-07-28: every request stands alone and opens its own tools.
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = bounded(
        "discover",
        rmcp::serve_client_with_lifecycle((), transport, lifecycle),
    )
    .await
    .expect("the lifecycle");
    let listed = bounded("list", client.list_all_tools()).await.unwrap();
    assert_eq!(listed.len(), 1);

    // The upstream changes between the listing and the listen: no open tools saw it happen,
    // so nothing raises their signal; the listen's own tools, opened after its
    // acknowledgment, already list it.
    opener.add.store(true, Ordering::SeqCst);
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = bounded("listen", client.listen(filter)).await.unwrap();
    let notification = bounded("the notification", subscription.next())
        .await
        .expect("the subscription")
        .expect("a notification, not the end");
    assert!(
        matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ),
        "{notification:?}"
    );
    let listed = bounded("list again", client.list_all_tools())
        .await
        .unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    drop(subscription);
    bounded("close", client.cancel()).await.unwrap();
    bounded("shutdown", server.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_open_is_reported_and_the_next_session_opens() {
    let opener = Arc::new(Opener::default());
    *opener.fail_next.lock().unwrap() = true;
    let server = ToolServer::per_session(opener.clone());

    let (client, served, _) = session(&server).await;
    let listed = bounded("list", client.list_all_tools()).await;
    let error = listed.unwrap_err().to_string();
    assert!(error.contains("upstream `kit` could not start"), "{error}");
    let result = bounded(
        "call",
        client.call_tool(rmcp::model::CallToolRequestParams::new("whoami")),
    )
    .await
    .unwrap();
    assert_eq!(result.is_error, Some(true));
    drop(client);
    served.shutdown(std::time::Duration::from_secs(5)).await;
    assert_eq!(
        opener.closed.load(Ordering::SeqCst),
        0,
        "nothing was opened"
    );

    let (client, served, _) = session(&server).await;
    assert_eq!(whoami(&client).await, json!({"session": 0}));
    drop(client);
    served.shutdown(std::time::Duration::from_secs(5)).await;
    assert_eq!(opener.closed.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_max_sessions_and_rate_limit() {
    let opener = Arc::new(Opener::default());
    let http = ToolServer::per_session(opener.clone())
        .serve_http(HttpOptions::default().with_max_sessions(1))
        .await
        .unwrap();
    let url = http.url().to_string();
    let first = send("POST", &url, POST_HEADERS, initialize_body()).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let second = send("POST", &url, POST_HEADERS, initialize_body()).await;
    assert_eq!(second.status, 503, "{}", second.body);
    let error = second.json();
    assert_eq!(error["id"], 1);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("too many sessions"), "{message}");
    assert!(message.contains("allows 1"), "{message}");
    let report = http.shutdown().await;
    assert_eq!(report.abandoned, 0);

    let http = ToolServer::per_session(opener)
        .serve_http(HttpOptions::default().with_rate_limit(RateLimit::new(0.01, 2)))
        .await
        .unwrap();
    let url = http.url().to_string();
    for _ in 0..2 {
        let answer = send("POST", &url, POST_HEADERS, initialize_body()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let limited = send("POST", &url, POST_HEADERS, initialize_body()).await;
    assert_eq!(limited.status, 429);
    let retry: u64 = limited.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1, "{retry}");
    http.shutdown().await;
}
