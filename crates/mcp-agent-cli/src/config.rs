//! `mcp-agent config …`: inspect the configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::{Config, ConfigError};

use super::EXIT_INVALID_CONFIG;
use super::term::{block, out, say};

/// The `config` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Load the environment (and a config file), check everything, and print the resolved
    /// configuration as JSON with every secret redacted. Exits 2 listing every problem with
    /// its path when the configuration is invalid. `MCP_AGENT__…` variables win over the
    /// `--file` settings.
    Check,
}

/// Runs a `config` command.
pub(crate) fn run(cmd: ConfigCommand, file: Option<PathBuf>) -> ExitCode {
    match cmd {
        ConfigCommand::Check => check(file),
    }
}

fn check(file: Option<PathBuf>) -> ExitCode {
    match Config::load(file.as_deref()) {
        Ok(config) => {
            // `Serialize` of the config redacts every secret.
            match serde_json::to_string_pretty(&config) {
                Ok(json) => match out(json) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(code) => code,
                },
                Err(e) => {
                    say(format_args!("error: cannot print the configuration: {e}"));
                    ExitCode::FAILURE
                }
            }
        }
        Err(err) => {
            report(&err);
            ExitCode::from(EXIT_INVALID_CONFIG)
        }
    }
}

/// Prints every problem on its own line: `[file: ]path: message [kind]`.
pub(crate) fn report(err: &ConfigError) {
    match err {
        ConfigError::Invalid { problems } => {
            let n = problems.len();
            say(format_args!(
                "error: invalid MCP configuration ({n} problem{}):",
                if n == 1 { "" } else { "s" }
            ));
            for problem in problems {
                let kind = serde_json::to_value(problem.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                say(format_args!("  {} [{kind}]", block(&problem.to_string())));
            }
        }
        other => say(format_args!("error: {}", super::term::chain(other))),
    }
}
