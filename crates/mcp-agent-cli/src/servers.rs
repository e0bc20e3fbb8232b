//! `mcp-agent servers …`: what the configured servers are.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use mcp_agent::McpRunner;

use super::exit::Exit;
use super::logging::LogSecrets;
use super::open::{Governance, load, runtime, with_runner};
use super::term::{MAX_NAME, inline, out, out_json};

/// Longest version or protocol string printed.
const MAX_VERSION: usize = 64;

/// The `servers` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum ServersCommand {
    /// List the configured servers without connecting (names and transports).
    List,
    /// Connect to every configured server and report its identity and tool count.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `servers` command.
pub(crate) fn run(cmd: ServersCommand, file: Option<&Path>, logs: &LogSecrets) -> ExitCode {
    let json = matches!(cmd, ServersCommand::Check { json: true });
    let (config, secrets) = match load(file, json, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let secrets = &secrets;
    match cmd {
        ServersCommand::List => {
            for spec in &config.servers {
                if let Err(code) = out(format_args!("{}\t{}", spec.name, spec.kind())) {
                    return code;
                }
            }
            Exit::Success.into()
        }
        ServersCommand::Check { json } => runtime().block_on(with_runner(
            config,
            &Governance {
                json,
                config_secrets: secrets.clone(),
                logs: logs.clone(),
                ..Governance::default()
            },
            async |runner| check(runner, json).unwrap_or_else(|code| code),
        )),
    }
}

fn check(runner: &McpRunner, json: bool) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let entries = runner.catalog().entries();
    let report: Vec<Value> = runner
        .sessions()
        .iter()
        .map(|s| {
            let id = s.identity();
            json!({
                "server": s.name(),
                "transport": s.spec().kind(),
                "server_info": { "name": id.name, "version": id.version },
                "protocol_version": id.protocol_version,
                "tools": entries.iter().filter(|t| t.server == s.name()).count(),
                "instructions": id.instructions,
            })
        })
        .collect();
    if json {
        out_json(secrets, &Value::Array(report))?;
        return Ok(Exit::Success.into());
    }
    // Every cell but the configured name and the count is the server's own text.
    let cell = |v: &Value, max| inline(secrets, v.as_str().unwrap_or("?"), max);
    for r in &report {
        out(format_args!(
            "{}\t{}\t{} {}\tprotocol {}\t{} tools",
            cell(&r["server"], MAX_NAME),
            cell(&r["transport"], MAX_NAME),
            cell(&r["server_info"]["name"], MAX_NAME),
            cell(&r["server_info"]["version"], MAX_VERSION),
            cell(&r["protocol_version"], MAX_VERSION),
            r["tools"]
        ))?;
    }
    Ok(Exit::Success.into())
}
