//! What every CLI test shares.

use std::process::{Command, Output};

/// Runs the `mcp-agent` binary with `args` and only the variables of `env`.
pub(crate) fn mcp_agent(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run mcp-agent")
}
