//! The main job (`mcp-agent` with no command) and the embedded demo server it falls back to.

use std::path::Path;
use std::process::ExitCode;

use mcp_agent::agent_core::{ToolCall, ToolCatalog, ToolDispatcher};
use mcp_agent::mcp_catalog::{CALL_TOOL, SEARCH_TOOL};
use mcp_agent::mcp_config::{Config, ServerSpec, StdioSpec, TransportSpec};
use rmcp::ServiceExt;
use serde_json::json;

use mcp_agent::mcp_client::McpRunner;
use serde_json::Value;

use super::open::{EXIT_FAILED, Governance, fail, load, runtime, with_runner};
use super::term::{MAX_BLOCK, MAX_NAME, block, inline, out, say};

/// The name of the demo server in the catalog (its tools are `demo__…`).
const DEMO: &str = "demo";

/// Connects to the configured servers — or, with none configured, to the embedded demo
/// server — shows what the model sees, and runs a search and a call end to end. `yes`
/// approves every call that the configuration's `[policy]` says needs approval.
pub(crate) fn main_job(file: Option<&Path>, yes: bool) -> ExitCode {
    let config = match load(file) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let demo = config.servers.is_empty();
    let config = if demo {
        match demo_config(config) {
            Ok(config) => config,
            Err(code) => return code,
        }
    } else {
        config
    };
    runtime().block_on(with_runner(
        config,
        &Governance { yes, history: None },
        async |runner| show(runner, demo).await.unwrap_or_else(|code| code),
    ))
}

/// What the model sees, then (for the demo server) a search and two calls.
async fn show(runner: &McpRunner, demo: bool) -> Result<ExitCode, ExitCode> {
    for session in runner.sessions() {
        let id = session.identity();
        out(format_args!(
            "connected: {} ({} {}, protocol {})",
            session.name(),
            inline(id.name.as_deref().unwrap_or("?"), MAX_NAME),
            inline(id.version.as_deref().unwrap_or("?"), MAX_NAME),
            inline(&id.protocol_version, MAX_NAME)
        ))?;
    }
    let surface: Vec<String> = runner.tools().into_iter().map(|t| t.name).collect();
    out(format_args!(
        "the model sees {} tools: {} ({} MCP tools behind them)",
        surface.len(),
        inline(&surface.join(", "), MAX_BLOCK),
        runner.catalog().len()
    ))?;
    if !demo {
        out("try: mcp-agent tools search \"<what you need>\"")?;
        return Ok(ExitCode::SUCCESS);
    }
    let steps = [
        (
            SEARCH_TOOL,
            json!({ "query": "add two numbers", "limit": 3 }),
        ),
        (
            CALL_TOOL,
            json!({ "tool_name": "demo__add", "arguments": { "a": 2, "b": 3 } }),
        ),
        (
            CALL_TOOL,
            json!({ "tool_name": "demo__word_count", "arguments": { "text": "the quick brown fox" } }),
        ),
    ];
    for (i, (tool, arguments)) in steps.into_iter().enumerate() {
        out(format_args!("> {tool} {arguments}"))?;
        let Value::Object(arguments) = arguments else {
            unreachable!("every step's arguments are an object literal")
        };
        let call = ToolCall::new(format!("demo-{i}"), tool, arguments);
        match runner.dispatch(call).await {
            Ok(output) => out(format_args!("< {}", block(&output.to_model_text())))?,
            Err(e) => return Err(fail(&e)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The configuration with the demo server, spawned from this very binary.
fn demo_config(config: Config) -> Result<Config, ExitCode> {
    let exe = std::env::current_exe().map_err(|e| {
        say(format_args!(
            "error: cannot locate the mcp-agent binary to spawn the demo server: {e}"
        ));
        ExitCode::from(EXIT_FAILED)
    })?;
    let spec = ServerSpec::new(
        DEMO,
        TransportSpec::Stdio(StdioSpec::new(exe.to_string_lossy(), ["demo-server"])),
    );
    let connect_timeout = config.connect_timeout;
    let policy = config.policy;
    Config::new(vec![spec])
        .map(|c| c.with_connect_timeout(connect_timeout).with_policy(policy))
        .map_err(|e| {
            super::config::report(&e);
            ExitCode::from(super::EXIT_INVALID_CONFIG)
        })
}

/// Serves the demo server on stdin/stdout until stdin closes.
pub(crate) fn serve() -> ExitCode {
    runtime().block_on(async {
        let service = match crate::demo_server::DemoServer
            .serve((tokio::io::stdin(), tokio::io::stdout()))
            .await
        {
            Ok(service) => service,
            Err(e) => {
                say(format_args!("demo server: {e}"));
                return ExitCode::from(EXIT_FAILED);
            }
        };
        match service.waiting().await {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                say(format_args!("demo server: {e}"));
                ExitCode::from(EXIT_FAILED)
            }
        }
    })
}
