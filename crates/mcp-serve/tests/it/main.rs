//! Integration tests of mcp-serve.
