//! `mcp-agent servers …`: what the configured servers are.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use super::open::{load, print_json, runtime, with_runner};

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
pub(crate) fn run(cmd: ServersCommand, file: Option<&Path>) -> ExitCode {
    let config = match load(file) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match cmd {
        ServersCommand::List => {
            for spec in &config.servers {
                println!("{}\t{}", spec.name, spec.kind());
            }
            ExitCode::SUCCESS
        }
        ServersCommand::Check { json } => runtime().block_on(with_runner(config, async |runner| {
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
                print_json(&Value::Array(report));
            } else {
                for r in &report {
                    println!(
                        "{}\t{}\t{} {}\tprotocol {}\t{} tools",
                        r["server"].as_str().unwrap_or(""),
                        r["transport"].as_str().unwrap_or(""),
                        r["server_info"]["name"].as_str().unwrap_or("?"),
                        r["server_info"]["version"].as_str().unwrap_or("?"),
                        r["protocol_version"].as_str().unwrap_or("?"),
                        r["tools"]
                    );
                }
            }
            ExitCode::SUCCESS
        })),
    }
}
