//! The integration tests of `mcp-client`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod directory;
mod elicitation;
mod features;
mod governed;
mod in_memory;
mod lifecycle;
mod listing;
mod pool;
mod run_secrets;
mod search;
mod skills;
mod surface;
#[cfg(feature = "otel")]
mod trace_context;
