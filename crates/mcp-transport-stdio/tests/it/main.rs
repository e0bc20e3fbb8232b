//! The integration tests of `mcp-transport-stdio`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod common;

mod env;
mod faults;
mod hygiene;
mod lifecycle;
mod limits;
