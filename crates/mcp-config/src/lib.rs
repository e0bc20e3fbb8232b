//! MCP server specs: types, validation, loading and per-run selection.
