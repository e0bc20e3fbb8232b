//! Streamable HTTP transport for MCP sessions, on hyper + hyper-util.
//!
//! Status: not implemented yet; see `docs/ARCHITECTURE.md`.
