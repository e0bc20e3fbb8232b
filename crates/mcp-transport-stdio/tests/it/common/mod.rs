//! Helpers for tests that spawn the test kit's `mcp-test-server` through the connector.
//!
//! Processes are checked by pid and process group through `/proc`, never by name.

#![allow(dead_code, unreachable_pub, unused_imports)]

use std::time::Duration;

use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
use mcp_connector::{ConnectionHandle, Connector};
use mcp_test_kit::stdio::StdioServerArgs;
use mcp_transport_stdio::{StdioConnector, StdioOptions};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;

/// Every wait in these tests is bounded by this.
pub const LIMIT: Duration = Duration::from_secs(20);

#[allow(unused_imports)]
pub use mcp_test_kit::bounded;

/// A spec running the test server with `args`.
pub fn spec(name: &str, args: &StdioServerArgs) -> ServerSpec {
    let binary = mcp_test_kit::stdio::binary();
    ServerSpec::new(
        name,
        TransportSpec::Stdio(StdioSpec::new(binary.display().to_string(), args.to_args())),
    )
}

/// A connector with short grace periods, so fault tests are quick.
pub fn connector() -> StdioConnector {
    StdioConnector::with_options(
        StdioOptions::default().with_terminate_grace(Duration::from_millis(300)),
    )
}

/// A test server started through the connector, with its rmcp client initialised.
pub struct Started {
    /// What the transport holds outside the protocol (the process).
    pub handle: Box<dyn ConnectionHandle>,
    /// The server's pid (it leads its own process group).
    pub pid: u32,
    /// The client side of the MCP session.
    pub client: RunningService<RoleClient, ()>,
}

/// Starts the test server `name` with `args` and completes the MCP handshake.
pub async fn start(name: &str, args: &StdioServerArgs) -> Started {
    let connection = bounded(connector().connect(&spec(name, args)))
        .await
        .unwrap();
    let pid = connection.handle.pid().unwrap();
    let client = bounded(rmcp::serve_client((), connection.transport))
        .await
        .unwrap();
    Started {
        handle: connection.handle,
        pid,
        client,
    }
}

/// Calls `tool` with `args`.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let args = args.as_object().cloned().unwrap_or_default();
    bounded(client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)))
        .await
}

pub use mcp_test_kit::procs::{assert_not_running, eventually, group_of, state};

/// Asserts that the server `pid` is gone and reaped (no zombie) and that nothing of its
/// process group still runs, waiting at most 5 s (SIGKILL is asynchronous).
pub async fn assert_all_gone(pid: u32) {
    mcp_test_kit::procs::assert_gone(&[pid]).await;
}

/// The error and its sources, joined.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
