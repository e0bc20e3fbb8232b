//! Shared helpers for the integration tests in `tests/tests/it/` (one test binary).
//!
//! The tests exercise the workspace's crates together, the way an application uses them.

use std::path::PathBuf;

pub mod bench;
pub mod fleet;
pub mod harness;
pub mod memory;
pub mod peers;
pub use mcp_test_kit::procs;

/// A binary of this workspace (`cargo xtask test` builds them all before running tests).
///
/// Located next to the test executable's `deps/` directory, so it works for any target dir.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile dir");
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}
