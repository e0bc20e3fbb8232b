//! `mcp-agent tools …`: list, search and call the configured servers' tools.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::agent_core::{ToolCall, ToolDispatcher};
use mcp_agent::mcp_catalog::{CALL_TOOL, SearchRequest};
use serde_json::{Value, json};

use mcp_agent::mcp_client::McpRunner;

use super::open::{fail, load, runtime, with_runner};
use super::term::{MAX_NAME, block, first_line, inline, out, out_json, say};

/// The `tools` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List every tool of every configured server, as `server__tool`.
    List {
        /// Print JSON (name, server, remote name, description, input schema).
        #[arg(long)]
        json: bool,
    },
    /// Rank the tools for a query, as the model's `mcp_search_tools` does.
    Search {
        /// What to look for, in words (or `select:server__tool,…`).
        query: String,
        /// How many results (default 10, at most 50).
        #[arg(long)]
        limit: Option<usize>,
        /// Only this server's tools.
        #[arg(long)]
        server: Option<String>,
        /// Print the search result JSON exactly as the model sees it.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool, validating the arguments against its schema first.
    Call {
        /// The tool: `server__tool`.
        name: String,
        /// The arguments, a JSON object (default `{}`).
        #[arg(default_value = "{}")]
        arguments: String,
        /// Print the whole result as JSON (content parts and structured content).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `tools` command.
pub(crate) fn run(cmd: ToolsCommand, file: Option<&Path>) -> ExitCode {
    let config = match load(file) {
        Ok(config) => config,
        Err(code) => return code,
    };
    if let ToolsCommand::Call { arguments, .. } = &cmd
        && let Err(message) = parse_arguments(arguments)
    {
        say(format_args!("error: {message}"));
        return ExitCode::from(super::EXIT_INVALID_CONFIG);
    }
    runtime().block_on(with_runner(config, async |runner| {
        match cmd {
            ToolsCommand::List { json } => list(runner, json),
            ToolsCommand::Search {
                query,
                limit,
                server,
                json,
            } => search(runner, query, limit, server, json),
            ToolsCommand::Call {
                name,
                arguments,
                json,
            } => call(runner, name, &arguments, json).await,
        }
        .unwrap_or_else(|code| code)
    }))
}

fn list(runner: &McpRunner, json: bool) -> Result<ExitCode, ExitCode> {
    let tools = runner.catalog().entries();
    if json {
        let list: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.id,
                    "model_name": t.model_name(),
                    "server": t.server,
                    "remote_name": t.remote_name,
                    "description": t.description(),
                    "input_schema": *t.input_schema(),
                })
            })
            .collect();
        out_json(&Value::Array(list))?;
    } else {
        for t in &tools {
            out(format_args!(
                "{}\t{}",
                inline(&t.id, MAX_NAME),
                first_line(t.description())
            ))?;
        }
        say(format_args!(
            "{} tools from {} servers",
            tools.len(),
            runner.sessions().len()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn search(
    runner: &McpRunner,
    query: String,
    limit: Option<usize>,
    server: Option<String>,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let mut request = SearchRequest::new(query);
    if let Some(limit) = limit {
        request = request.with_limit(limit);
    }
    if let Some(server) = server {
        request = request.with_server(server);
    }
    match runner.catalog().search(&request) {
        Ok(response) => {
            let value = response.to_json();
            if json {
                out_json(&value)?;
            } else {
                print_ranked(&value)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(fail(&e)),
    }
}

async fn call(
    runner: &McpRunner,
    name: String,
    arguments: &str,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let arguments = parse_arguments(arguments).unwrap_or_default();
    let mut call_arguments = serde_json::Map::new();
    call_arguments.insert("tool_name".into(), Value::String(name));
    call_arguments.insert("arguments".into(), Value::Object(arguments));
    let call = ToolCall::new("cli-1", CALL_TOOL, call_arguments);
    match runner.dispatch(call).await {
        Ok(output) => {
            if json {
                out_json(&serde_json::to_value(&output).unwrap_or_default())?;
            } else {
                out(block(&output.to_model_text()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(fail(&e)),
    }
}

fn parse_arguments(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the arguments must be a JSON object, like '{\"text\": \"hi\"}'".into()),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

fn print_ranked(response: &Value) -> Result<(), ExitCode> {
    let tools = response["tools"].as_array().cloned().unwrap_or_default();
    for (rank, tool) in tools.iter().enumerate() {
        out(format_args!(
            "{:>2}. {}\t{}",
            rank + 1,
            inline(tool["name"].as_str().unwrap_or(""), MAX_NAME),
            first_line(tool["description"].as_str())
        ))?;
    }
    say(format_args!(
        "{} of {} matching tools",
        response["count"], response["total"]
    ));
    Ok(())
}
