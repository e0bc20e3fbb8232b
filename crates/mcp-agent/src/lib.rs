//! Give an AI agent the tools of external MCP servers, safely and per run.
//!
//! This is the facade: an application depends on this one crate and picks transports with
//! features. It re-exports the workspace's crates and builds the [`Connectors`] registry for
//! the transports compiled in.
//!
//! ```no_run
//! use mcp_agent::agent_core::RunInput;
//! use mcp_agent::mcp_config::Config;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::from_env()?;
//! let connectors = mcp_agent::connectors()?;
//! # let _ = (config, connectors, RunInput::new("s", "i"));
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

pub mod demo;

pub use agent_core;
pub use mcp_catalog;
pub use mcp_client;
pub use mcp_client::Connectors;
pub use mcp_config;
pub use mcp_connector;
#[cfg(feature = "http")]
pub use mcp_transport_http;
#[cfg(feature = "stdio")]
pub use mcp_transport_stdio;

/// Why the default connectors could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The HTTP transport could not be set up (e.g. TLS roots).
    #[cfg(feature = "http")]
    #[error("the HTTP transport could not be set up")]
    Http(#[from] mcp_transport_http::HttpError),
}

/// A [`Connectors`] registry with every transport compiled in, with default options.
pub fn connectors() -> Result<Connectors, SetupError> {
    #[allow(unused_mut)]
    let mut connectors = Connectors::new();
    #[cfg(feature = "stdio")]
    {
        connectors = connectors.with(mcp_transport_stdio::StdioConnector::new());
    }
    #[cfg(feature = "http")]
    {
        connectors = connectors.with(mcp_transport_http::HttpConnector::new(
            mcp_transport_http::HttpOptions::default(),
        )?);
    }
    Ok(connectors)
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
