//! The `mcp-agent` command-line tool.
//!
//! One module per command group (`config`, …), each with its own clap subcommand enum and a
//! `run` function returning the process exit code (one of `exit::Exit`, the table of every
//! code the tool ends with). To add a group: a module `src/<group>.rs`
//! with a `#[derive(Subcommand)]` enum and `pub(crate) fn run(…) -> ExitCode`, a variant in
//! `Command`, and an arm in `run`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod approve;
mod auth;
mod config;
mod demo;
mod demo_model;
mod demo_server;
mod elicit;
mod exit;
mod gateways;
mod history;
mod logging;
mod model;
mod monitor;
mod open;
mod progress;
mod prompts;
mod reload;
mod resources;
mod run;
mod serve;
mod servers;
mod settings;
mod shared_sessions;
mod shared_state;
mod signals;
mod skills;
mod term;
mod tools;
mod trim;

/// Give an AI agent the tools of external MCP servers.
///
/// Servers are configured with `MCP_AGENT__…` environment variables and/or a config file
/// (TOML, JSON, or the `mcpServers` JSON of desktop MCP hosts).
#[derive(Debug, Parser)]
#[command(name = "mcp-agent", version)]
pub(crate) struct Cli {
    /// What to do. Without a command: connect to the configured servers and show what the
    /// model sees, or — with no configuration — run a whole agent: the embedded demo server
    /// and a scripted model that searches, calls two tools and answers.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,

    /// A config file (`.toml` or `.json`, this tool's schema or an `mcpServers` file) for the
    /// main job; `MCP_AGENT__…` variables are read too.
    #[arg(long, short = 'f', value_name = "FILE", global = true)]
    pub(crate) file: Option<std::path::PathBuf>,

    /// More log output on stderr: `-v` info, `-vv` debug, `-vvv` trace. `RUST_LOG` (e.g.
    /// `RUST_LOG=mcp_client=debug`) wins over both flags.
    #[arg(long, short = 'v', action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,

    /// Only errors in the log output.
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,

    /// The log output's format on stderr: `text` for people, or `json`: one JSON object a
    /// line (`timestamp`, `level`, `target`, `fields`) for log shippers, the command's own
    /// messages and every tool call's events (target `mcp_agent::event`) included.
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value = "text",
        global = true
    )]
    pub(crate) log_format: logging::LogFormat,

    /// Approve every call that the configuration's `[policy]` says needs approval, without
    /// asking (for the main job; `run` and `tools call` take it too).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,

    /// Record the main job's session (`messages.jsonl`, `events.jsonl`) in this directory;
    /// read it with `history show DIR`.
    #[arg(long, value_name = "DIR")]
    pub(crate) history: Option<std::path::PathBuf>,
}

/// The command groups.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run an agent: an OpenAI-compatible model with the configured servers' tools.
    ///
    /// The model calls tools (every call through the configuration's `[policy]`) until it
    /// answers. Its text is printed as it arrives, one line per tool call on stderr (and one
    /// per progress report of its server). Exit 0
    /// with an answer, 1 when the run failed, 128 + n on a signal (after closing every
    /// server).
    ///
    /// The model: `--model`, `--base-url`, else the config's `[model]` table (`base_url`,
    /// `model`, `api_key_env`, `headers`), else `OPENAI_BASE_URL` and `OPENAI_API_KEY`.
    Run(run::RunArgs),
    /// Inspect the MCP server configuration.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Connect to the configured servers and report what each one is.
    #[command(subcommand)]
    Servers(servers::ServersCommand),
    /// List, search and call the configured servers' tools.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// List and read the configured servers' resources (through `[policy]`).
    #[command(subcommand)]
    Resources(resources::ResourcesCommand),
    /// List the configured servers' prompts and get one with arguments (through `[policy]`).
    #[command(subcommand)]
    Prompts(prompts::PromptsCommand),
    /// List the configured servers' skills (the skills extension) and show one, checked.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// Log in to an HTTP server with OAuth (its `oauth` auth table), see the stored logins,
    /// log out.
    #[command(subcommand)]
    Auth(auth::AuthCommand),
    /// Serve the configured servers as one MCP server (a governed gateway), on stdin/stdout
    /// or streamable HTTP (`--http ADDR`, or `[serve] http`). Each client session gets its
    /// own upstream sessions; every call goes through `[policy]`; a call that needs approval
    /// is denied unless `[serve] approve = "allow"`. SIGTERM/SIGINT drain and exit 0; SIGHUP
    /// reloads the configuration for new sessions.
    Serve(serve::ServeArgs),
    /// Read a session's history (what `run` or `tools call` wrote with `--history DIR`).
    #[command(subcommand)]
    History(history::HistoryCommand),
    /// Serve the embedded demo MCP server on stdin/stdout (what the main job spawns).
    #[command(hide = true)]
    DemoServer,
}

fn main() -> ExitCode {
    run()
}

/// Parses the command line and runs the command.
fn run() -> ExitCode {
    let cli = Cli::parse();
    let logs = logging::LogSecrets::default();
    // Kept until the command ends: its drop flushes the traces still queued.
    let _telemetry = logging::init(cli.verbose, cli.quiet, cli.log_format, &logs);
    let file = cli.file.as_deref();
    match cli.command {
        None => demo::main_job(file, cli.yes, cli.history, &logs),
        Some(Command::Run(args)) => run::run(args, file, cli.yes, &logs),
        Some(Command::Config(cmd)) => config::run(cmd, cli.file),
        Some(Command::Servers(cmd)) => servers::run(cmd, file, &logs),
        Some(Command::Tools(cmd)) => tools::run(cmd, file, cli.yes, &logs),
        Some(Command::Resources(cmd)) => resources::run(cmd, file, &logs),
        Some(Command::Prompts(cmd)) => prompts::run(cmd, file, &logs),
        Some(Command::Skills(cmd)) => skills::run(cmd, file, &logs),
        Some(Command::Auth(cmd)) => auth::run(cmd, file, &logs),
        Some(Command::History(cmd)) => history::run(cmd, file),
        Some(Command::Serve(args)) => serve::run(args, file, &logs),
        Some(Command::DemoServer) => demo::serve(),
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
