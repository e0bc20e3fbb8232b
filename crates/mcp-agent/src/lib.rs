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
//! # Governed calls
//!
//! Every call of a run — `mcp_search_tools`, `mcp_call_tool`, pinned and promoted MCP tools,
//! the application's native tools ([`McpClientBuilder::native_tools`]), `mcp_read_output` —
//! goes through the run's [`GovernedLayer`]: identity rules (`[policy]` `allow` / `deny`,
//! matched against each server's `serverInfo.name`; refused tools are not even shown), the
//! [`ToolPolicy`](prelude::ToolPolicy), approval of the real tool (`server__tool`, also behind
//! `mcp_call_tool`) by an [`ApprovalGate`](prelude::ApprovalGate), the call timeout, the output
//! limit (`max_output_bytes`; the rest is read with [`READ_OUTPUT_TOOL`]), `tool_call_*`
//! [`EventKind`]s beside the server events, and the run's [`History`]
//! (`messages.jsonl`, `events.jsonl`, secrets redacted). The layer starts from the
//! configuration's `[policy]`; [`McpClientBuilder::govern`] adjusts it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::path::Path;
//! use mcp_agent::prelude::*;
//! use mcp_agent::{AutoApprove, Config, EventKind, McpClient, RunInput};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // mcp.toml:
//! //   [policy]
//! //   allow = [{ server = "mcp-servers/everything", tool = "*" }]
//! //   deny = [{ server = "*", tool = "delete_*" }]
//! //   approve_destructive = true
//! let client = McpClient::builder(Config::load(Some(Path::new("mcp.toml")))?)
//!     .connectors(mcp_agent::connectors()?)
//!     .govern(|layer| layer.approval_gate(Arc::new(AutoApprove)))
//!     .history_root("history")
//!     .build();
//! let runner = client.open_runner(&RunInput::new("conversation-7", "tidy up")).await?;
//! let mut events = runner.governed().subscribe();
//! // … the model calls tools through `runner.dispatch(…)` …
//! while let Ok(Some(event)) = events.try_recv() {
//!     if event.kind == EventKind::ToolCallDenied {
//!         println!("denied: {:?} {:?}", event.tool, event.message);
//!     }
//! }
//! runner.shutdown().await?; // sessions closed, history/conversation-7/*.jsonl synced
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
//! | `embed` | no | hybrid tool search for the config's `[search]` with an OpenAI-compatible embeddings endpoint (`mcp_embed`; no ML dependency) |
//! | `embed-local` | no | `embed` plus a local sentence-transformers model (candle, tokenizers) |
//!
//! A `[search]` whose back end is not compiled in fails a run's opening, naming the feature
//! ([`mcp_client::SearchSetupError::NotBuilt`]).
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
#[cfg(feature = "embed")]
pub use mcp_embed;
#[cfg(feature = "http")]
pub use mcp_transport_http;
#[cfg(feature = "stdio")]
pub use mcp_transport_stdio;
/// The MCP protocol crate this library is built on; a custom connector must use this one.
pub use rmcp;

pub use agent_core::{
    ApprovalDecision, ApprovalRequest, ApprovalRules, ApprovalTrigger, AutoApprove, CallOutcome,
    Event, EventKind, EventReceiver, Governed, GovernedLayer, History, HistoryError, IdentityRules,
    OutputLimits, Redactor, Rule, RunInput, ToolCall, ToolDescriptor, ToolError, ToolOutput,
};
pub use mcp_catalog::{
    CALL_TOOL, Catalog, CatalogConfig, Exposure, READ_OUTPUT_TOOL, SEARCH_TOOL, SearchRequest,
};
pub use mcp_client::{
    ClientError, Connectors, McpClient, McpClientBuilder, McpRunner, ServerIdentity, SessionError,
};
pub use mcp_config::{
    Config, ConfigError, McpSelection, PartialFailure, PolicyConfig, RunSelection, Scrubber,
    Secret, ServerSpec,
};
pub use mcp_connector::{ConnectError, Connector};

/// The traits a run is used through: `use mcp_agent::prelude::*;`.
pub mod prelude {
    pub use agent_core::{
        ApprovalGate, CallResolver, EventSink, Model, Runner, RunnerFactory, ToolCatalog,
        ToolDispatcher, ToolPolicy,
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
