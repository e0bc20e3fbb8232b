//! The integration tests of `mcp-test-kit`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod redis_peer;
mod servers;
