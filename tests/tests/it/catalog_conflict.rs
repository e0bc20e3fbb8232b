//! A server whose tools cannot join the run's catalog (two of its tool names map to the same
//! model-facing name) is a failed server like any other: `skip_unavailable` goes on without it
//! and reports why, `fail_fast` fails the run; either way its session is closed and no process
//! of the run is left.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::{EventKind, Runner, ToolCatalog, ToolDispatcher};
use async_trait::async_trait;
use integration_tests::harness::{Harness, bounded, call_tool, stdio_server};
use mcp_client::{ClientError, McpRunner, SessionError};
use mcp_config::{Config, CustomSpec, PartialFailure, ServerSpec, TransportKind, TransportSpec};
use mcp_connector::{ConnectError, Connection, Connector, NoHandle};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use rmcp::model::{
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

/// Lists `a.b` and `a-b`, which the catalog cannot both show under `clash__a-b`.
#[derive(Clone)]
struct Clashing;

impl ServerHandler for Clashing {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(json!({"type": "object"}).as_object().cloned().unwrap());
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("a.b", "dotted", schema.clone()),
            Tool::new("a-b", "dashed", schema),
        ]))
    }
}

/// The transport kind of [`InMemory`].
const CLASHING: &str = "clashing_in_memory";

/// Serves [`Clashing`] in memory for every spec, counting the sessions it opened and that are
/// still running.
#[derive(Default, Clone)]
struct InMemory {
    live: Arc<AtomicUsize>,
}

#[async_trait]
impl Connector for InMemory {
    fn kind(&self) -> TransportKind {
        TransportKind::Other(CLASHING.into())
    }

    async fn connect(&self, _spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let live = self.live.clone();
        live.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            if let Ok(running) = Clashing.serve(server).await {
                let _ = running.waiting().await;
            }
            live.fetch_sub(1, Ordering::SeqCst);
        });
        let (read, write) = tokio::io::split(client);
        Ok(Connection::new(
            AsyncRwTransport::new_client(read, write),
            NoHandle,
        ))
    }
}

fn clash() -> ServerSpec {
    ServerSpec::new("clash", TransportSpec::Custom(CustomSpec::new(CLASHING)))
}

async fn wait_closed(live: &AtomicUsize) {
    bounded(async {
        while live.load(Ordering::SeqCst) != 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// Opens a run of a test-kit server `kit` and the colliding `clash` under `policy`.
async fn open_kit_and_clash(
    policy: PartialFailure,
) -> (Harness, InMemory, Result<McpRunner, ClientError>) {
    let harness = Harness::new();
    let memory = InMemory::default();
    let config = Config::new(vec![
        stdio_server("kit", &StdioServerArgs::new(Mode::Test)),
        clash(),
    ])
    .unwrap()
    .with_partial_failure(policy);
    let client = harness
        .builder(config)
        .connectors(harness.connectors().with(memory.clone()))
        .build();
    let opened = bounded(client.open_runner(&harness.input())).await;
    (harness, memory, opened)
}

#[tokio::test]
async fn skip_unavailable_skips_a_server_whose_tools_collide() {
    let (harness, memory, opened) = open_kit_and_clash(PartialFailure::SkipUnavailable).await;
    let runner = opened.expect("the run opens");
    assert_eq!(
        runner
            .sessions()
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>(),
        ["kit"]
    );
    let skipped = runner.skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].server, "clash");
    assert!(matches!(&skipped[0].error, SessionError::Catalog { server, .. } if server == "clash"));
    let failed = harness.events.of_kind(EventKind::ServerFailed);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].server.as_deref(), Some("clash"));
    // The skipped server's session is closed; the others work.
    wait_closed(&memory.live).await;
    let out = bounded(call_tool(&runner, "kit__echo", json!({"x": 1})))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"x": 1})));

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn fail_fast_fails_the_run_on_colliding_tools_and_closes_everything() {
    let (harness, memory, opened) = open_kit_and_clash(PartialFailure::FailFast).await;
    let err = opened.unwrap_err();
    assert!(
        matches!(&err, ClientError::Server(SessionError::Catalog { server, .. }) if server == "clash"),
        "{err:?}"
    );
    wait_closed(&memory.live).await;
    harness.assert_no_process_left().await;
}

#[tokio::test]
async fn a_closed_runner_shows_no_tools_and_refuses_calls() {
    let harness = Harness::new();
    let client = harness.client(vec![stdio_server("kit", &StdioServerArgs::new(Mode::Test))]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    assert!(!runner.tools().is_empty());
    bounded(runner.close()).await;
    assert!(runner.tools().is_empty());
    let err = bounded(call_tool(&runner, "kit__echo", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, agent_core::ToolError::Transport { .. }),
        "{err:?}"
    );
    // Closing twice is harmless.
    bounded(runner.close()).await;
    let _ = runner
        .dispatch(agent_core::ToolCall::new(
            "x",
            "mcp_search_tools",
            Default::default(),
        ))
        .await
        .unwrap_err();
    harness.assert_no_process_left().await;
}
