//! Helpers for tests that spawn the test kit's `mcp-test-server` through the connector.
//!
//! Processes are checked by pid and process group through `/proc`, never by name.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
use mcp_test_kit::stdio::StdioServerArgs;
use mcp_transport_stdio::{StdioConnector, StdioOptions};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;

/// Every wait in these tests is bounded by this.
pub const LIMIT: Duration = Duration::from_secs(20);

/// Awaits `f`, failing the test after [`LIMIT`].
pub async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

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
        StdioOptions::default().terminate_grace(Duration::from_millis(300)),
    )
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

/// The state letter of `pid` (`R`, `S`, `Z`, …), or `None` when no such process exists.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: comm may contain spaces and parentheses; the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The process group of `pid`, if it exists.
pub fn group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// Processes of group `pgid` that are not zombies.
pub fn live_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| group_of(pid) == Some(pgid) && state(pid).is_some_and(|s| s != 'Z'))
        .collect()
}

/// Waits until `check` holds, re-checking every 10 ms for at most `timeout`.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts that the server `pid` is gone and reaped (no zombie) and that nothing of its
/// process group still runs, waiting at most 5 s (SIGKILL is asynchronous).
pub async fn assert_all_gone(pid: u32) {
    let gone = eventually(Duration::from_secs(5), || {
        state(pid).is_none() && live_members(pid).is_empty()
    })
    .await;
    assert!(
        gone,
        "server {pid} state {:?}, live group members {:?}",
        state(pid),
        live_members(pid)
    );
}

/// Asserts that `pid` does not run (gone, or a zombie waiting for whoever adopted it).
pub async fn assert_not_running(pid: u32) {
    let stopped = eventually(Duration::from_secs(5), || {
        state(pid).is_none_or(|s| s == 'Z')
    })
    .await;
    assert!(stopped, "process {pid} still runs ({:?})", state(pid));
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
