//! MCP servers for tests, built with rmcp: usable in memory, as a stdio binary
//! (`mcp-test-server`) and over streamable HTTP on 127.0.0.1.
//!
//! - [`TestServer`]: one server whose tools exercise every client path — `echo`, `add`,
//!   `slow` (cancellable; cancellations are recorded in [`Observations`]), `fail` (`isError`),
//!   `env`, `stderr`, `content` (image, audio, embedded resource, resource link), `huge`,
//!   `crash`, `add_tool` / `remove_tool` (with `notifications/tools/list_changed`),
//!   `spawn_child` (a grandchild process) and `observations`; plus, by option, many
//!   synthetic tools served in pages, a slow `initialize` and `ask` (an elicitation request
//!   sent to the client).
//! - [`hostile::HostileServer`]: correct MCP that abuses what a server may choose — endless
//!   `tools/list` pagination (a repeated cursor, a two-cursor cycle, ever-new pages), tools with
//!   escape-laden or enormous names, a `serverInfo` of any size, and a text (a secret) it echoes
//!   in every error and result.
//! - Serving: [`serve_in_memory`] (a duplex pipe), [`serve_http`] (a URL and a shutdown
//!   handle), and the `mcp-test-server` binary ([`stdio`]: modes such as
//!   `garbage-on-stdout`, `slow-initialize`, `ignores-stdin-close`; [`stdio::binary`] finds it
//!   from another crate's tests).
//! - Third-party peers installed by `cargo xtask peers`: [`peer`] finds one (skipping or
//!   failing the test when it is missing), [`redis::RedisServer`] runs a real Redis per test
//!   (stopped and restarted on its port at will; with TLS, certificates from
//!   [`tls::TestCa`]), [`lb::LoadBalancer`] a real round-robin load balancer (nginx) per test.
//! - [`oauth::AuthServer`]: an OAuth authorization server (client credentials, rotating
//!   refresh tokens) that counts its token requests and every refresh token sent.
//!
//! ```
//! use mcp_test_kit::{Observations, TestServer, TestServerOptions, serve_in_memory};
//! use rmcp::model::CallToolRequestParams;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let seen = Observations::new();
//! let server = TestServer::new(TestServerOptions::default().with_observations(seen.clone()));
//! let client = rmcp::serve_client((), serve_in_memory(server)).await?;
//! let args = json!({ "greeting": "hi" }).as_object().cloned().unwrap();
//! let result = client
//!     .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
//!     .await?;
//! assert_eq!(result.structured_content, Some(json!({ "greeting": "hi" })));
//! assert_eq!(seen.snapshot().calls_of("echo"), 1);
//! client.cancel().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Architecture invariant
//!
//! A test double: depends on rmcp and the HTTP server stack only, never on this workspace's
//! product crates, so any of them can use it as a dev-dependency.

mod daemon;
mod escape;
pub mod hostile;
mod http;
pub mod lb;
mod memory;
pub mod oauth;
mod observe;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod peer;
pub mod procs;
pub mod prometheus;
pub mod redis;
mod schema;
mod server;
pub mod stdio;
pub mod tls;

pub use http::{HttpServer, serve_handler_http, serve_http, serve_status};
pub use memory::{serve_handler_in_memory, serve_in_memory};
pub use observe::{Event, Observations, RecordFile, Snapshot};
pub use server::{
    CrashAction, DIRECTORY_PAGE, HUGE_RESOURCE_BYTES, SkillHostility, Skills, TestServer,
    TestServerOptions, write_example_skills,
};

/// How long any one await of a test may take before the test fails (generous: the machines
/// that run the suite are shared and slow; a test that needs this much is broken anyway).
pub const TEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Awaits `f`, failing the test (naming the caller's line) after [`TEST_LIMIT`]: a safety net
/// so a broken test fails instead of hanging the suite, never a way to wait for something.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert_eq!(mcp_test_kit::bounded(async { 7 }).await, 7);
/// # }
/// ```
#[track_caller]
pub fn bounded<F: std::future::Future>(f: F) -> impl std::future::Future<Output = F::Output> {
    let at = std::panic::Location::caller();
    async move {
        tokio::time::timeout(TEST_LIMIT, f)
            .await
            .unwrap_or_else(|_| panic!("not done within {TEST_LIMIT:?} (at {at})"))
    }
}
