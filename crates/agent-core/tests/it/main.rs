//! The integration tests of `agent-core`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod output_memory;
