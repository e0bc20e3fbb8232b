//! `mcp-agent tools …`: list, search and call the configured servers' tools.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::{
    CALL_TOOL, CallOutcome, Event, EventKind, EventReceiver, OutputStore, SearchRequest, ToolCall,
    ToolError, events::EventRecvError, prelude::ToolDispatcher,
};
use serde_json::{Value, json};

use mcp_agent::{McpRunner, Redactor};

use super::exit::Exit;
use super::logging::LogSecrets;
use super::open::{Governance, fail, json_error, load, runtime, with_runner};
use super::term::chain;
use super::term::{block, first_line, inline, name, out, out_json, out_part, safe_text, say};

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
    /// Call a tool as the model would: through the configuration's `[policy]` (identity
    /// rules, approval, output limit), validating the arguments against its schema first, and
    /// print what the model would see. A call refused by a rule or not approved exits 1,
    /// naming the rule.
    ///
    /// A call that needs approval is asked about on the terminal (y = this once, a = this tool
    /// for the rest of the run, n = no); with no terminal and no `--yes`, it is refused. The
    /// server's progress reports are printed on stderr as they come (`progress: 50/100 …`).
    Call {
        /// The tool: `server__tool`.
        name: String,
        /// The arguments, a JSON object (default `{}`).
        #[arg(default_value = "{}")]
        arguments: String,
        /// Print the result as JSON (content parts and structured content), as the model
        /// would see it.
        #[arg(long, conflicts_with = "full")]
        json: bool,
        /// Print the whole result, also when it is over the output limit (`[policy]
        /// max_output_bytes`; the model would see it cut, with a marker).
        #[arg(long)]
        full: bool,
        /// Approve the call if it needs approval, without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Record the session (`messages.jsonl`, `events.jsonl`) in this directory, created if
        /// missing and appended to if it holds a history; read it with `history show`.
        #[arg(long, value_name = "DIR")]
        history: Option<PathBuf>,
    },
}

/// Runs a `tools` command. `yes` is the top-level `--yes`.
pub(crate) fn run(
    cmd: ToolsCommand,
    file: Option<&Path>,
    yes: bool,
    logs: &LogSecrets,
) -> ExitCode {
    let json = match &cmd {
        ToolsCommand::List { json }
        | ToolsCommand::Search { json, .. }
        | ToolsCommand::Call { json, .. } => *json,
    };
    let (config, secrets) = match load(file, json, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let secrets = &secrets;
    let mut governance = Governance {
        yes,
        json,
        config_secrets: secrets.clone(),
        logs: logs.clone(),
        ..Governance::default()
    };
    if let ToolsCommand::Call {
        arguments,
        yes,
        history,
        ..
    } = &cmd
    {
        if let Err(message) = parse_arguments(arguments) {
            say(format_args!("error: {message}"));
            if json {
                json_error(
                    secrets,
                    Exit::InvalidConfig,
                    "arguments",
                    &message,
                    json!({}),
                );
            }
            return Exit::InvalidConfig.into();
        }
        governance.yes |= *yes;
        governance.history.clone_from(history);
    }
    runtime().block_on(with_runner(config, &governance, async |runner| {
        match cmd {
            ToolsCommand::List { json } => list(runner, json),
            ToolsCommand::Search {
                query,
                limit,
                server,
                json,
            } => search(runner, query, limit, server, json).await,
            ToolsCommand::Call {
                name,
                arguments,
                json,
                full,
                ..
            } => call(runner, name, &arguments, json, full).await,
        }
        .unwrap_or_else(|code| code)
    }))
}

/// The tools, each marked with whether the model sees it: a tool the configuration's
/// `[policy]` refuses (by server identity or name) is listed for the operator, marked
/// `(refused by [policy])`, and not counted among the model's tools.
fn list(runner: &McpRunner, json: bool) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let tools = runner.catalog().entries();
    let refused = tools.iter().filter(|t| t.is_hidden()).count();
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
                    "refused_by_policy": t.is_hidden(),
                })
            })
            .collect();
        out_json(secrets, &Value::Array(list))?;
    } else {
        for t in &tools {
            let mark = if t.is_hidden() {
                "(refused by [policy]) "
            } else {
                ""
            };
            out(format_args!(
                "{}\t{mark}{}",
                name(secrets, &t.id),
                first_line(secrets, t.description())
            ))?;
        }
        let shown = tools.len() - refused;
        let refused = if refused > 0 {
            format!(" ({refused} more refused by [policy])")
        } else {
            String::new()
        };
        say(format_args!(
            "{shown} tools from {} servers{refused}",
            runner.sessions().len()
        ));
    }
    Ok(Exit::Success.into())
}

/// With `[search]` configured the ranking is hybrid ([`Catalog::search_ranked`]); when the
/// embedder fails or stalls the words alone rank and a warning line on stderr says why.
///
/// [`Catalog::search_ranked`]: mcp_agent::Catalog::search_ranked
async fn search(
    runner: &McpRunner,
    query: String,
    limit: Option<usize>,
    server: Option<String>,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let mut request = SearchRequest::new(query);
    if let Some(limit) = limit {
        request = request.with_limit(limit);
    }
    if let Some(server) = server {
        request = request.with_server(server);
    }
    match runner.catalog().search_ranked(&request).await {
        Ok(response) => {
            if let Some(warning) = &response.warning {
                say(format_args!(
                    "warning: {}",
                    inline(secrets, warning, MAX_WARNING)
                ));
            }
            let value = response.to_json();
            if json {
                out_json(secrets, &value)?;
            } else {
                print_ranked(secrets, &value)?;
            }
            Ok(Exit::Success.into())
        }
        Err(e) => Err(fail(secrets, &e)),
    }
}

/// What a `--json` error object says of a failed call beside the message: the tool, its
/// server, and — for a result the tool marked `isError` — `"is_error": true` and the tool's
/// own text.
fn error_fields(secrets: &Redactor, error: &ToolError) -> Value {
    let mut fields = json!({
        "tool": error.tool(),
        "server": error.server(),
        "is_error": matches!(error, ToolError::Invocation { .. }),
    });
    if let ToolError::Invocation { message, .. } = error {
        fields["message"] = Value::String(block(secrets, message));
    }
    fields
}

/// The longest search warning printed, in characters.
const MAX_WARNING: usize = 512;

/// The id of the one call a `tools call` makes (in events and the history).
const CALL_ID: &str = "cli-1";

/// Calls `name` through `mcp_call_tool`, as the model would, so the governed layer decides on
/// the real tool.
async fn call(
    runner: &McpRunner,
    name: String,
    arguments: &str,
    json: bool,
    full: bool,
) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let arguments = parse_arguments(arguments).unwrap_or_default();
    let mut call_arguments = serde_json::Map::new();
    call_arguments.insert("tool_name".into(), Value::String(name));
    call_arguments.insert("arguments".into(), Value::Object(arguments));
    let call = ToolCall::new(CALL_ID, CALL_TOOL, call_arguments);
    // Subscribed before the call, to learn the handle of a cut output.
    let mut events = runner.governed().subscribe();
    let printed = super::progress::printed(runner.dispatch(call), |line| say(line));
    match printed.await {
        Ok(output) => {
            let finished = if full { finished(&mut events) } else { None };
            if json {
                out_json(secrets, &serde_json::to_value(&output).unwrap_or_default())?;
            } else if let Some(handle) = finished.as_ref().and_then(|e| e.output_handle.as_deref())
            {
                print_whole(secrets, runner.governed().outputs(), handle)?;
            } else {
                out(block(secrets, &output.to_model_text()))?;
                if finished.is_some_and(|e| e.outcome == Some(CallOutcome::Truncated)) {
                    say(
                        "note: the whole output was not kept (too large); above is what the model sees",
                    );
                }
            }
            Ok(Exit::Success.into())
        }
        Err(e) => {
            if json {
                json_error(
                    secrets,
                    Exit::Failed,
                    "call",
                    &chain(secrets, &e),
                    error_fields(secrets, &e),
                );
            }
            Err(fail(secrets, &e))
        }
    }
}

/// The `tool_call_finished` event of this command's call: its outcome, and the handle of its
/// whole output when the output was cut.
fn finished(events: &mut EventReceiver) -> Option<Event> {
    loop {
        match events.try_recv() {
            Ok(Some(event)) => {
                if event.kind == EventKind::ToolCallFinished
                    && event.call_id.as_deref() == Some(CALL_ID)
                {
                    return Some(event);
                }
            }
            // Missed events are not this call's end: it is emitted last.
            Err(EventRecvError::Lagged { .. }) => {}
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Prints the whole output kept under `handle`, piece by piece, terminal-safe.
fn print_whole(secrets: &Redactor, outputs: &OutputStore, handle: &str) -> Result<(), ExitCode> {
    let mut text = safe_text(secrets);
    let mut offset = 0;
    let mut last = '\n';
    loop {
        let chunk = outputs
            .read(handle, offset, outputs.chunk_limit())
            .map_err(|e| fail(secrets, &e))?;
        if let Some(c) = chunk.text.chars().next_back() {
            last = c;
        }
        out_part(&text.push(&chunk.text))?;
        if chunk.end >= chunk.total || chunk.end <= offset {
            break;
        }
        offset = chunk.end;
    }
    out_part(&text.finish())?;
    if last != '\n' {
        out_part("\n")?;
    }
    Ok(())
}

fn parse_arguments(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the arguments must be a JSON object, like '{\"text\": \"hi\"}'".into()),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

fn print_ranked(secrets: &Redactor, response: &Value) -> Result<(), ExitCode> {
    let tools = response["tools"].as_array().cloned().unwrap_or_default();
    for (rank, tool) in tools.iter().enumerate() {
        // A prompt, resource or skill says its kind and server; a tool is its `server__tool`.
        let what = match (tool["kind"].as_str(), tool["server"].as_str()) {
            (Some(kind), Some(server)) if kind != "tool" => {
                let target = tool["uri"].as_str().or(tool["name"].as_str()).unwrap_or("");
                format!("{kind} {} {}", name(secrets, server), name(secrets, target))
            }
            _ => name(secrets, tool["name"].as_str().unwrap_or("")),
        };
        out(format_args!(
            "{:>2}. {what}\t{}",
            rank + 1,
            first_line(secrets, tool["description"].as_str())
        ))?;
    }
    say(format_args!(
        "{} of {} matching tools",
        response["count"], response["total"]
    ));
    Ok(())
}
