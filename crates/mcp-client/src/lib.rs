//! Per-run MCP orchestration.
//!
//! For one agent run, [`McpClient::open_runner`] resolves the run's servers
//! ([`mcp_config::ServerResolver`]), connects them in parallel through [`Connectors`]
//! (bounded; each within its connect timeout, which covers the handshake and the full tool
//! listing), builds the [`mcp_catalog::Catalog`] and returns an [`McpRunner`]: the lazy
//! `mcp_search_tools` / `mcp_call_tool` surface over those sessions. Closing the runner (or
//! the [`agent_core::RunScope`] that [`McpClient`] hands out as an
//! [`agent_core::RunnerFactory`]) closes every session.
//!
//! A server that fails is fatal under `fail_fast` and reported in [`McpRunner::skipped`] under
//! `skip_unavailable`. Each session keeps the server's initialize identity
//! ([`ServerIdentity`]) and re-lists its tools on `notifications/tools/list_changed`.

mod client;
mod error;
mod handler;
mod open;
mod runner;
mod session;

pub use client::{McpClient, McpClientBuilder};
pub use error::{ClientError, SessionError};
pub use open::SkippedServer;
pub use runner::McpRunner;
pub use session::{Connectors, ServerIdentity, Session};
