//! The lazy MCP tool catalog.
//!
//! Status: not implemented yet; see `docs/ARCHITECTURE.md`.
