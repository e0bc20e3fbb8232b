//! Opening the configured servers for one CLI command.

use std::path::Path;
use std::process::ExitCode;

use agent_core::{RunInput, Runner};
use mcp_client::{McpClient, McpRunner};
use mcp_config::Config;

use super::EXIT_INVALID_CONFIG;

/// Exit code when servers could not be opened or a call failed.
pub(crate) const EXIT_FAILED: u8 = 1;

/// Loads the environment and `file`, reporting every problem and returning exit code 2 on an
/// invalid configuration.
pub(crate) fn load(file: Option<&Path>) -> Result<Config, ExitCode> {
    Config::load(file).map_err(|err| {
        super::config::report(&err);
        ExitCode::from(EXIT_INVALID_CONFIG)
    })
}

/// A runtime for one command.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Opens every server of `config` for one run, printing why on failure.
pub(crate) async fn open(config: Config) -> Result<McpRunner, ExitCode> {
    let connectors = mcp_agent::connectors().map_err(|e| fail(&e))?;
    let client = McpClient::builder(config)
        .connectors(connectors)
        .agent("mcp-agent-cli")
        .build();
    let runner = client
        .open_runner(&RunInput::new("cli", ""))
        .await
        .map_err(|e| fail(&e))?;
    for skipped in runner.skipped() {
        eprintln!(
            "warning: skipped server `{}`: {}",
            skipped.server,
            chain(&skipped.error)
        );
    }
    Ok(runner)
}

/// Runs `body` with the runner and always closes it — also when the process is interrupted
/// (Ctrl-C) or asked to terminate: the servers run in their own process groups, so a
/// terminal's signal never reaches them, and an exit without closing would orphan them.
pub(crate) async fn with_runner<F>(config: Config, body: F) -> ExitCode
where
    F: AsyncFnOnce(&McpRunner) -> ExitCode,
{
    let opening = tokio::select! {
        opened = open(config) => opened,
        code = interrupted() => Err(code),
    };
    let runner = match opening {
        Ok(runner) => runner,
        Err(code) => return code,
    };
    let code = tokio::select! {
        code = body(&runner) => code,
        code = interrupted() => code,
    };
    runner.close().await;
    code
}

/// Resolves when the process receives SIGINT or SIGTERM, with the conventional exit code
/// (128 + signal number). Never resolves if the handlers cannot be installed.
async fn interrupted() -> ExitCode {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    let code = tokio::select! {
        _ = int.recv() => 130,
        _ = term.recv() => 143,
    };
    eprintln!("interrupted: closing the MCP sessions");
    ExitCode::from(code)
}

/// Prints an error with its whole cause chain and returns the failure exit code.
pub(crate) fn fail(error: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("error: {}", chain(error));
    ExitCode::from(EXIT_FAILED)
}

/// `error: cause: cause…` on one line (multi-line causes such as a stderr tail keep their lines).
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// Prints a value as pretty JSON.
pub(crate) fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}
