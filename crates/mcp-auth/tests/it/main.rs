//! The integration tests of `mcp-auth`, one module per behaviour, compiled as one test binary.
//! They use the public API only, against a scripted in-memory [`HttpFetch`](mcp_auth::HttpFetch)
//! (`fake.rs`); the same flows over real sockets are in `mcp-transport-http`'s tests.

mod fake;

mod dpop;
mod login_errors;
mod login_flow;
mod login_on_demand;
mod login_secrets;
mod login_tokens;
mod token_store;
