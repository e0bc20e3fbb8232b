//! Give an AI agent the tools of external MCP servers, safely and per run.
//!
//! This is the library's front door: an application depends on this one crate, picks
//! transports with features, and finds the types of a run at the root and the traits in
//! [`prelude`].
//!
//! ```no_run
//! use mcp_agent::prelude::*;
//! use mcp_agent::{Config, McpClient, McpSelection, RunInput, ToolCall};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = McpClient::builder(Config::from_env()?)
//!     .connectors(mcp_agent::connectors()?)
//!     .build();
//! let input = RunInput::new("conversation-7", "file the bug")
//!     .with_meta("mcp", McpSelection::servers(["github"]));
//! let runner = client.open_runner(&input).await?;
//! let found = runner
//!     .dispatch(ToolCall::from_json("1", "mcp_search_tools", json!({"query": "create issue"}))?)
//!     .await?;
//! println!("{}", found.to_model_text());
//! runner.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Feature Flags
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `stdio` | yes | MCP servers run as child processes ([`mcp_transport_stdio`]) |
//! | `http` | yes | MCP servers over streamable HTTP on hyper + rustls ([`mcp_transport_http`]) |
//!
//! A spec whose transport is not compiled in is refused when its session opens, with an error
//! naming the missing feature ([`mcp_connector::ConnectError::Unsupported`]).
//!
//! The command-line tool is the separate `mcp-agent-cli` package (its binary is named
//! `mcp-agent`), so a library build pulls in no argument parser and no server side of rmcp.

mod error;

pub use error::SetupError;

pub use agent_core;
pub use mcp_auth;
pub use mcp_catalog;
pub use mcp_client;
pub use mcp_config;
pub use mcp_connector;
#[cfg(feature = "http")]
pub use mcp_transport_http;
#[cfg(feature = "stdio")]
pub use mcp_transport_stdio;
/// The MCP protocol crate this library is built on; a custom connector must use this one.
pub use rmcp;

pub use agent_core::{
    ApprovalDecision, ApprovalRequest, Event, EventKind, RunInput, ToolCall, ToolDescriptor,
    ToolError, ToolOutput,
};
pub use mcp_catalog::{CALL_TOOL, CatalogConfig, Exposure, SEARCH_TOOL, SearchRequest};
pub use mcp_client::{
    ClientError, Connectors, McpClient, McpClientBuilder, McpRunner, ServerIdentity, SessionError,
};
pub use mcp_config::{
    Config, ConfigError, McpSelection, PartialFailure, RunSelection, Scrubber, Secret, ServerSpec,
};
pub use mcp_connector::{ConnectError, Connector};

/// The traits a run is used through: `use mcp_agent::prelude::*;`.
pub mod prelude {
    pub use agent_core::{
        ApprovalGate, EventSink, Model, Runner, RunnerFactory, ToolCatalog, ToolDispatcher,
        ToolPolicy,
    };
}

/// A [`Connectors`] registry with every transport compiled in, with default options. A
/// built-in transport left out of the build is registered as disabled, so a spec that needs it
/// is refused with the feature that adds it. Add a custom transport with
/// [`Connectors::with`].
pub fn connectors() -> Result<Connectors, SetupError> {
    let connectors = Connectors::new();
    #[cfg(feature = "stdio")]
    let connectors = connectors.with(mcp_transport_stdio::StdioConnector::new());
    #[cfg(not(feature = "stdio"))]
    let connectors = connectors.disabled(mcp_config::TransportKind::Stdio, "stdio");
    #[cfg(feature = "http")]
    let connectors = connectors.with(mcp_transport_http::HttpConnector::new(
        mcp_transport_http::HttpOptions::default(),
    )?);
    #[cfg(not(feature = "http"))]
    let connectors = connectors.disabled(mcp_config::TransportKind::StreamableHttp, "http");
    Ok(connectors)
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
