//! MCP server specs: types, validation, loading and per-run selection.
//!
//! The types ([`ServerSpec`] and its parts) say how to reach one MCP server, how to
//! authenticate to it and which of its tools to use. Secrets live in [`Secret`], which never
//! prints its value.

mod secret;
mod spec;

pub use secret::{REDACTED, Secret};
pub use spec::{
    AuthSpec, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, HttpSpec, OAuthClientCredentials,
    SecretSource, ServerSpec, SpecOrigin, StdioSpec, TokenEndpointAuthMethod, ToolFilter,
    TransportKind, TransportSpec,
};
