//! Serve an agent's tools as an MCP server, over stdio and streamable HTTP.
//!
//! Any [`ToolCatalog`](agent_core::ToolCatalog) + [`ToolDispatcher`](agent_core::ToolDispatcher)
//! — native tools, or an `mcp_client::McpRunner`, whose calls then go through its governed
//! layer — becomes an MCP server with [`ToolServer`]: which tools are served is opt-in
//! ([`Exposure`]), results are mapped by [`call_result`], and each downstream session's
//! concurrent calls are bounded. Over HTTP ([`ToolServer::serve_http`]) every request is
//! checked before rmcp sees it: the endpoint binds 127.0.0.1 unless told otherwise, validates
//! `Origin` (403), requires the bearer token when [`BearerAuth`] is set — one token, or a JWT
//! verified against its issuer's JWKS ([`JwtAuth`]) — (401 with the RFC 9728 metadata it
//! serves), bounds the body (413) and answers a body that is no JSON-RPC message
//! with a JSON-RPC error. Both serve 2025-11-25 clients (sessions) and 2026-07-28 clients
//! (stateless over HTTP), and shut down gracefully: stop accepting, drain what is in flight
//! (bounded), close. A tool reports its progress with [`agent_core::progress::report`]; a
//! client that asked for a call's progress (`_meta.progressToken`) gets it as
//! `notifications/progress`, before the call's answer. Requests (by method and status), rate
//! refusals and active sessions are counted through the `metrics` facade under the names of
//! `agent_core::telemetry`; a host that installs a recorder gets them.
//!
//! Tools opened per session ([`ToolServer::per_session`]) may offer more than tools
//! ([`SessionTools::features`], a [`SessionFeatures`]): resources, resource templates, prompts,
//! completions, subscriptions and skills (the skills extension, [`SKILLS_PAGE`] a page; its
//! directory reads, [`DIRECTORY_PAGE`] a page),
//! declared as capabilities only when offered ([`Offered`]),
//! each request checked before it reaches them, resource updates relayed coalesced
//! ([`ResourceUpdates`]); [`UpstreamNames`] is how a gateway names and routes them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
//! use mcp_serve::{Exposure, HttpOptions, ToolServer};
//! use serde_json::json;
//!
//! struct Adder;
//! impl ToolCatalog for Adder {
//!     fn tools(&self) -> Vec<ToolDescriptor> {
//!         let schema = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
//!         vec![ToolDescriptor::new("add", schema.as_object().unwrap().clone())]
//!     }
//! }
//! #[async_trait::async_trait]
//! impl ToolDispatcher for Adder {
//!     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
//!         let n = |k: &str| call.arguments.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
//!         Ok(ToolOutput::structured(json!(n("a") + n("b"))))
//!     }
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), mcp_serve::ServeError> {
//! let server = ToolServer::new(Arc::new(Adder), Exposure::only(["add"]));
//! let http = server.serve_http(HttpOptions::default()).await?;
//! println!("MCP endpoint: {}", http.url());
//! // … until the process is told to stop:
//! let report = http.shutdown().await;
//! assert_eq!(report.abandoned, 0);
//! # Ok(())
//! # }
//! ```

mod convert;
mod downstream;
mod drain;
mod error;
mod exposure;
mod features;
mod handler;
mod http;
mod lines;
mod list_changes;
mod message;
mod param_headers;
mod per_session;
mod pool;
mod progress;
mod relay;
mod restore;
mod server;
mod stdio;
mod trace_context;
mod untrusted;
mod upstream_names;

pub use convert::{call_result, mcp_tool};
pub use downstream::Downstream;
pub use drain::{ServeState, ShutdownReport};
pub use error::{DownstreamError, ServeError};
pub use exposure::Exposure;
pub use features::{
    DIRECTORY_PAGE, MAX_FEATURE_URI_BYTES, MAX_PROMPT_ARGUMENTS, MAX_SESSION_SUBSCRIPTIONS,
    Offered, ResourceUpdates, SKILLS_PAGE, SessionFeatures, no_skill, not_a_directory,
    resource_not_found,
};
pub use http::{
    BearerAuth, DpopPolicy, HttpOptions, HttpServer, InProcessReplay, InProcessSessions,
    InProcessStore, JwksError, JwtAlgorithm, JwtAuth, MAX_HTTP_TIMEOUT, OnStoreError, PROOF_WINDOW,
    ProofReplay, RateLimit, RateLimitStore, SessionNotice, SessionStore, SharedRateLimit,
    SharedSessions, StoreError, Taken, UntrustableNetwork, trusted_proxy,
};
/// The type of [`HttpOptions::trusted_proxies`]' networks (`"10.0.0.0/8".parse()`).
pub use ipnet::IpNet;
pub use list_changes::ToolListChanges;
pub use per_session::{OpenError, OpenTools, SessionTools};
pub use pool::{PoolOptions, PooledTools};
pub use relay::{InputRound, MAX_CLIENT_STATE_BYTES, Round, STATE_TTL};
pub use server::ToolServer;
pub use stdio::{SessionServer, process_stdio};
pub use upstream_names::{MAX_UPSTREAM_URI_BYTES, UPSTREAM_SCHEME, UpstreamNames};

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
