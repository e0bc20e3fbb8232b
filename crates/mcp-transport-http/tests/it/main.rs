//! The integration tests of `mcp-transport-http`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod common;
mod oauth_support;
mod peer_process;

mod causes;
mod close;
mod connection_reuse;
mod echoed_secrets;
mod empty_env_token;
mod error_chains;
mod headers_and_auth;
mod hostile_messages;
mod json_and_sse;
mod limits;
mod oauth;
mod oauth_federated;
mod oauth_login_peers;
mod oauth_peers;
mod oauth_secrets;
mod param_headers;
mod session_expiry;
mod sse_resumption;
mod ssrf_guard;
mod standalone_stream;
mod tls;
mod trace_headers;
mod unauthorized;
