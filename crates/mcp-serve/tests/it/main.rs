//! Integration tests of mcp-serve: one module per behaviour, `support` beside them.

mod answers;
mod connections;
mod downstream;
mod dpop;
mod exposure;
mod features;
mod http_checks;
mod jwt;
mod mcp_client;
mod param_headers;
mod per_session;
mod pool;
mod progress;
mod python_peer;
mod results;
mod runner;
mod shared_sessions;
mod shutdown;
mod stdio_pipes;
mod support;
