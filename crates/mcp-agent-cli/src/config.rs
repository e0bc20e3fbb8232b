//! `mcp-agent config …`: inspect the configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::ConfigError;

use super::exit::Exit;
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
    match super::settings::load(file.as_deref()) {
        Ok((config, _)) => {
            // `Serialize` of the config redacts every secret; the CLI's tables follow.
            let mut json = serde_json::to_value(&config);
            if let Ok(serde_json::Value::Object(object)) = &mut json {
                object.extend(
                    super::settings::shown(&config)
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v)),
                );
            }
            match json.and_then(|json| serde_json::to_string_pretty(&json)) {
                Ok(json) => match out(json) {
                    Ok(()) => Exit::Success.into(),
                    Err(code) => code,
                },
                Err(e) => {
                    say(format_args!("error: cannot print the configuration: {e}"));
                    Exit::Failed.into()
                }
            }
        }
        Err(err) => {
            report(&err);
            Exit::InvalidConfig.into()
        }
    }
}

/// Prints every problem on its own line: `[file: ]path: message [kind]`.
pub(crate) fn report(err: &ConfigError) {
    // A configuration that did not load knows no secret; its messages name none.
    report_scrubbed(err, &mcp_agent::Redactor::new());
}

/// [`report`], with the secrets `secrets` knows replaced (a reload's: the configurations
/// loaded before may hold a value the new one puts where it does not belong).
pub(crate) fn report_scrubbed(err: &ConfigError, secrets: &mcp_agent::Redactor) {
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
                say(format_args!(
                    "  {} [{kind}]",
                    block(secrets, &problem.to_string())
                ));
            }
        }
        other => say(format_args!(
            "error: {}",
            super::term::chain(secrets, other)
        )),
    }
}
