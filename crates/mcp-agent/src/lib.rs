//! Give an AI agent the tools of external MCP servers, safely and per run.
//!
//! This is the facade: it re-exports the workspace's crates so an application depends on one
//! crate and picks transports with features.
//!
//! # Feature Flags
//!
//! None yet: the transport features arrive with the transports.

pub use agent_core;
pub use mcp_config;
