//! The main job (`mcp-agent` with no command): with no configuration, a whole agent run on the
//! embedded demo server and scripted model; and the demo server itself.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::sync::Arc;

use mcp_agent::{
    Config, McpRunner, ServerSpec,
    config::{StdioSpec, TransportSpec},
    prelude::ToolCatalog,
};
use rmcp::ServiceExt;

use super::agent::{self, AgentOptions};
use super::demo_model;
use super::exit::Exit;
use super::logging::LogSecrets;
use super::open::{Governance, load, runtime, with_runner};
use super::term::{MAX_BLOCK, MAX_NAME, inline, out, say};

/// The name of the demo server in the catalog (its tools are `demo__…`).
const DEMO: &str = "demo";

/// Connects to the configured servers and shows what the model sees — or, with none
/// configured, runs a whole agent: the embedded demo server (spawned from this binary) and
/// the embedded scripted model, through the same loop, governed layer, events and output as
/// `mcp-agent run`. `yes` approves every call that the configuration's `[policy]` says needs
/// approval; `history` records the session there.
pub(crate) fn main_job(
    file: Option<&Path>,
    yes: bool,
    history: Option<PathBuf>,
    logs: &LogSecrets,
) -> ExitCode {
    let (config, secrets) = match load(file, false, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let secrets = &secrets;
    let governance = Governance {
        yes,
        history,
        config_secrets: secrets.clone(),
        logs: logs.clone(),
        ..Governance::default()
    };
    if !config.servers.is_empty() {
        return runtime().block_on(with_runner(config, &governance, async |runner| {
            show(runner).unwrap_or_else(|code| code)
        }));
    }
    let config = match demo_config(config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    say(
        "no MCP servers configured: an agent run with the embedded demo server and a scripted model (no API key needed)",
    );
    let options = AgentOptions {
        max_steps: DEMO_STEPS,
        json: false,
        steps_flag: None,
    };
    runtime().block_on(with_runner(config, &governance, async |runner| {
        if let Err(code) = introduce(runner) {
            return code;
        }
        let code = agent::run(
            runner,
            Arc::new(demo_model::model()),
            demo_model::INSTRUCTION,
            &options,
        )
        .await;
        if code == ExitCode::from(Exit::Success) {
            say(
                "next: configure your MCP servers (mcp-agent --help), and run a real model with \
                 OPENAI_BASE_URL=… OPENAI_API_KEY=… mcp-agent run --model NAME \"<instruction>\"",
            );
        }
        code
    }))
}

/// The most steps of the demo run (it needs three).
const DEMO_STEPS: u32 = 5;

/// The servers, the surface the model sees and the instruction, on stderr.
fn introduce(runner: &McpRunner) -> Result<(), ExitCode> {
    for line in connected(runner) {
        say(line);
    }
    say(surface(runner));
    say(format_args!("instruction: {}", demo_model::INSTRUCTION));
    Ok(())
}

/// One line per connected server.
fn connected(runner: &McpRunner) -> Vec<String> {
    let secrets = runner.redactor();
    runner
        .sessions()
        .iter()
        .map(|session| {
            let id = session.identity();
            format!(
                "connected: {} ({} {}, protocol {})",
                session.name(),
                inline(secrets, id.name.as_deref().unwrap_or("?"), MAX_NAME),
                inline(secrets, id.version.as_deref().unwrap_or("?"), MAX_NAME),
                inline(secrets, &id.protocol_version, MAX_NAME)
            )
        })
        .collect()
}

/// What the model sees.
fn surface(runner: &McpRunner) -> String {
    let secrets = runner.redactor();
    let surface: Vec<String> = runner.tools().into_iter().map(|t| t.name).collect();
    format!(
        "the model sees {} tools: {} ({} MCP tools behind them)",
        surface.len(),
        inline(secrets, &surface.join(", "), MAX_BLOCK),
        runner
            .catalog()
            .entries()
            .iter()
            .filter(|t| !t.is_hidden())
            .count()
    )
}

/// What the model would see of the configured servers, and what to try next.
fn show(runner: &McpRunner) -> Result<ExitCode, ExitCode> {
    for line in connected(runner) {
        out(line)?;
    }
    out(surface(runner))?;
    out("try: mcp-agent tools search \"<what you need>\"")?;
    out("or:  mcp-agent run --model NAME \"<instruction>\" (an OpenAI-compatible model)")?;
    Ok(Exit::Success.into())
}

/// The configuration with the demo server, spawned from this very binary.
fn demo_config(config: Config) -> Result<Config, ExitCode> {
    let exe = std::env::current_exe().map_err(|e| {
        say(format_args!(
            "error: cannot locate the mcp-agent binary to spawn the demo server: {e}"
        ));
        ExitCode::from(Exit::Failed)
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
            Exit::InvalidConfig.into()
        })
}

/// Serves the demo server on stdin/stdout until stdin closes.
pub(crate) fn serve() -> ExitCode {
    runtime().block_on(async {
        let service = match crate::demo_server::DemoServer
            .serve(mcp_serve::process_stdio())
            .await
        {
            Ok(service) => service,
            Err(e) => {
                say(format_args!("demo server: {e}"));
                return Exit::Failed.into();
            }
        };
        match service.waiting().await {
            Ok(_) => Exit::Success.into(),
            Err(e) => {
                say(format_args!("demo server: {e}"));
                Exit::Failed.into()
            }
        }
    })
}
