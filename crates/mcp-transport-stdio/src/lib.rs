//! Child-process (stdio) transport for MCP sessions.
//!
//! Status: not implemented yet; see `docs/ARCHITECTURE.md`.
