//! The integration tests of `mcp-config`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod loading;
mod policy;
mod problems;
mod robustness;
