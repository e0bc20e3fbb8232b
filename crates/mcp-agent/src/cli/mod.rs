//! The command line: one module per command group (`config`, …), each with its own clap
//! subcommand enum and a `run` function returning the process exit code.
//!
//! To add a group: a module `src/cli/<group>.rs` with a `#[derive(Subcommand)]` enum and
//! `pub(crate) fn run(…) -> ExitCode`, a variant in [`Command`], and an arm in [`run`].

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod config;

/// Exit code for a configuration that is invalid or cannot be read.
pub(crate) const EXIT_INVALID_CONFIG: u8 = 2;

/// Give an AI agent the tools of external MCP servers.
///
/// Servers are configured with `MCP_AGENT__…` environment variables and/or a config file
/// (TOML, JSON, or the `mcpServers` JSON of desktop MCP hosts).
#[derive(Debug, Parser)]
#[command(name = "mcp-agent", version)]
pub(crate) struct Cli {
    /// What to do; without a command, print this help.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// The command groups.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Inspect the MCP server configuration.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

/// Parses the command line and runs the command.
pub(crate) fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => {
            // Printing help can only fail on a closed stdout, where nothing is left to tell.
            let _ = Cli::command().print_help();
            println!();
            ExitCode::SUCCESS
        }
        Some(Command::Config(cmd)) => config::run(cmd),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
