//! Authentication for MCP HTTP transports: static headers, bearer tokens and OAuth2 client
//! credentials.
//!
//! Status: not implemented yet. The secret type it builds on is
//! [`mcp_config::Secret`]; the auth forms are configured through
//! [`mcp_config::AuthSpec`].
