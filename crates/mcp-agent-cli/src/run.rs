//! `mcp-agent run INSTRUCTION`: an agent run with an OpenAI-compatible model over the
//! configured servers' tools.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use mcp_agent::agent::DEFAULT_MAX_STEPS;

use super::agent::{self, AgentOptions};
use super::exit::Exit;
use super::logging::LogSecrets;
use super::model::{self, ModelFlags};
use super::open::{Governance, json_error, load_all, runtime, with_runner};
use super::term::{MAX_BLOCK, inline, say};

/// `mcp-agent run`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// What the agent should do, in words.
    pub(crate) instruction: String,
    /// The model's name on the endpoint (wins over `[model] model`).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// The endpoint's base URL, up to and including its version, e.g.
    /// `http://localhost:11434/v1` (wins over `[model] base_url` and `OPENAI_BASE_URL`).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// The most model answers before the run stops without one (exit 1).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STEPS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_steps: u32,
    /// Record the session (`messages.jsonl`, `events.jsonl`) in this directory; read it with
    /// `history show`.
    #[arg(long, value_name = "DIR")]
    pub(crate) history: Option<PathBuf>,
    /// Approve every call that the configuration's `[policy]` says needs approval, without
    /// asking.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Print the run's events as JSON lines on stdout (the last line: the answer) instead of
    /// the streamed text and the tool lines.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `mcp-agent run`. `yes` is the top-level `--yes`.
pub(crate) fn run(args: RunArgs, file: Option<&Path>, yes: bool, logs: &LogSecrets) -> ExitCode {
    let (config, settings, secrets) = match load_all(file, args.json, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let secrets = &secrets;
    let flags = ModelFlags {
        model: args.model,
        base_url: args.base_url,
    };
    // The model is checked before any server starts.
    let model_config = model::config(&flags, &settings.model, |name| std::env::var(name).ok());
    let model_secrets: Vec<String> = model_config
        .as_ref()
        .map(|c| {
            c.api_key
                .iter()
                .map(|key| key.expose().to_owned())
                .chain(c.headers.values().cloned())
                .collect()
        })
        .unwrap_or_default();
    let model = model_config.and_then(model::build);
    let model = match model {
        Ok(model) => model,
        Err(message) => {
            say(format_args!("error: {message}"));
            if args.json {
                json_error(
                    secrets,
                    Exit::InvalidConfig,
                    "configuration",
                    &inline(secrets, &message, MAX_BLOCK),
                    serde_json::json!({}),
                );
            }
            return Exit::InvalidConfig.into();
        }
    };
    let governance = Governance {
        yes: yes || args.yes,
        history: args.history,
        secrets: model_secrets,
        json: args.json,
        config_secrets: secrets.clone(),
        logs: logs.clone(),
    };
    let options = AgentOptions {
        max_steps: args.max_steps,
        json: args.json,
        steps_flag: Some("--max-steps"),
    };
    let instruction = args.instruction;
    runtime().block_on(with_runner(config, &governance, async |runner| {
        agent::run(runner, model, &instruction, &options).await
    }))
}
