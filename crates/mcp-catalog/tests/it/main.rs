//! The integration tests of `mcp-catalog`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod catalog;
mod dataset;
mod embed_updates;
mod hostile;
mod hybrid_catalog;
mod output_bounds;
mod read;
mod read_output;
