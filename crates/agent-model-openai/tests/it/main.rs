//! The integration tests of `agent-model-openai`, one module per behaviour, against a scripted
//! provider on 127.0.0.1 (`provider.rs`) and against the third-party peer llmposter
//! (`peer_llmposter.rs`).

mod provider;

mod error_chains;
mod faults;
mod non_streaming;
mod peer_llmposter;
mod retries;
mod secrets;
mod streaming;
