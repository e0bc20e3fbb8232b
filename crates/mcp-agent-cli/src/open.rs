//! Opening the configured servers for one CLI command, and closing them whatever happens.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcp_agent::{Config, ConfigError, FeatureError, McpClient, McpRunner, Redactor, RunInput};

use super::exit::Exit;
use super::logging::LogSecrets;
use super::settings::Settings;
use super::signals::Signals;
use super::term::{block, chain, say};

/// Loads the environment and `file`, reporting every problem and returning exit code 2 on an
/// invalid configuration (with `json`, also as a [`json_error`] object on stdout). Returns the
/// configuration's secret engine ([`secrets_of`](super::term::secrets_of)) with it, which
/// `logs` scrubs with from now on.
pub(crate) fn load(
    file: Option<&Path>,
    json: bool,
    logs: &LogSecrets,
) -> Result<(Config, Redactor), ExitCode> {
    load_all(file, json, logs).map(|(config, _, secrets)| (config, secrets))
}

/// [`load`], with the CLI's tables (`[serve]`, `[model]`) read.
pub(crate) fn load_all(
    file: Option<&Path>,
    json: bool,
    logs: &LogSecrets,
) -> Result<(Config, Settings, Redactor), ExitCode> {
    let nothing = Redactor::new();
    let (config, settings) = super::settings::load(file).map_err(|err| {
        super::config::report(&err);
        if json {
            let problems: Vec<String> = match &err {
                ConfigError::Invalid { problems } => problems
                    .iter()
                    .map(|p| block(&nothing, &p.to_string()))
                    .collect(),
                _ => Vec::new(),
            };
            let error = match &err {
                ConfigError::Invalid { .. } => "invalid MCP configuration".to_owned(),
                other => chain(&nothing, other),
            };
            json_error(
                &nothing,
                Exit::InvalidConfig,
                "configuration",
                &error,
                serde_json::json!({ "problems": problems }),
            );
        }
        ExitCode::from(Exit::InvalidConfig)
    })?;
    let secrets = super::term::secrets_of(&config, &settings);
    logs.scrub_with(&secrets);
    Ok((config, settings, secrets))
}

/// With `--json`, a failure is a JSON object on stdout too (stderr still tells it in words): the
/// object a `tools call --json` prints instead of its result, or the last line of a
/// `run --json`, so a script reads one JSON value whatever happened:
/// `{"kind": "error", "exit_code": N, "stage": "…", "error": "…"}`, with `fields` merged in.
/// `stage` says how far the command got: `configuration`, `connect` or `call`/`run`.
pub(crate) fn json_error(
    secrets: &Redactor,
    code: Exit,
    stage: &str,
    error: &str,
    fields: serde_json::Value,
) {
    let mut object = serde_json::json!({
        "kind": "error",
        "exit_code": code.code(),
        "stage": stage,
        "error": error,
    });
    if let (Some(object), serde_json::Value::Object(fields)) = (object.as_object_mut(), fields) {
        object.extend(fields);
    }
    // A closed stdout already ends the command with its own code.
    let _ = super::term::out_json_line(secrets, &object);
}

/// Worker threads of a command's runtime: a command runs one agent or one call at a time.
pub(crate) const COMMAND_WORKERS: usize = 2;

/// A runtime for one command.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    runtime_with(COMMAND_WORKERS)
}

/// A runtime of `workers` worker threads (at least one).
pub(crate) fn runtime_with(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// How a command's run is governed, beyond the configuration's `[policy]` (identity rules,
/// approval rules and the output limit, which the client applies itself).
#[derive(Debug, Clone, Default)]
pub(crate) struct Governance {
    /// `--yes`: approve every call that needs approval.
    pub(crate) yes: bool,
    /// `--history DIR`: record the session directly in this directory.
    pub(crate) history: Option<PathBuf>,
    /// Secrets of the run the servers' specs do not hold (a model's API key and header
    /// values): redacted from approval prompts, events and the history like theirs.
    pub(crate) secrets: Vec<String>,
    /// `--json`: a failure to open the servers is also printed as a [`json_error`] object.
    pub(crate) json: bool,
    /// The configuration's secret engine: what is printed before the run is open.
    pub(crate) config_secrets: Redactor,
    /// What the log scrubs with: the run's engine once it is open.
    pub(crate) logs: LogSecrets,
}

/// `[search] embedder = { local = … }`: with the `embed-local` feature, mcp-embed-local's
/// loader; without it, none, and a run naming a local model fails naming the feature.
pub(crate) fn local_model(builder: mcp_agent::McpClientBuilder) -> mcp_agent::McpClientBuilder {
    #[cfg(feature = "embed-local")]
    {
        builder.local_model(mcp_embed_local::load_embedder)
    }
    #[cfg(not(feature = "embed-local"))]
    {
        builder
    }
}

/// Opens every server of `config` for one run, printing why on failure. A run left with no
/// server at all (every one skipped under `skip_unavailable`) is a failure too.
///
/// Every call of the run goes through the client's governed layer, with the approval gate of
/// [`approve::gate`](super::approve::gate). A history directory that cannot be written fails
/// here, naming it, before any server is contacted.
async fn open(config: Config, governance: &Governance) -> Result<McpRunner, ExitCode> {
    let configured = config.servers.len();
    let connectors = mcp_agent::connectors().map_err(|e| connect_failed(governance, &e))?;
    let gate = super::approve::gate(governance.yes);
    let client = McpClient::builder(config)
        .connectors(connectors)
        .agent("mcp-agent-cli")
        .events(std::sync::Arc::new(super::logging::LoggedEvents))
        .elicitation(super::elicit::handler())
        .govern(|layer| {
            // The configuration's engine (the model's key and headers too) is the template of
            // the run's, which adds the servers' secrets and learns the run's tokens.
            let redactor = governance
                .config_secrets
                .clone()
                .with_secrets(governance.secrets.iter().cloned());
            layer.approval_gate(gate).redactor(redactor)
        });
    let client = local_model(client).build();
    let input = RunInput::new("cli", "");
    let runner = match &governance.history {
        Some(dir) => client.open_runner_with_history(&input, dir).await,
        None => client.open_runner(&input).await,
    }
    .map_err(|e| connect_failed(governance, &e))?;
    // From now on everything printed or logged goes through the run's engine: it learns the
    // tokens the run's sessions obtain.
    let secrets = runner.redactor();
    governance.logs.scrub_with(secrets);
    for skipped in runner.skipped() {
        say(format_args!(
            "warning: skipped: {}",
            chain(secrets, &skipped.error)
        ));
    }
    if configured > 0 && runner.sessions().is_empty() {
        let message = format!("none of the {configured} configured servers is available");
        say(format_args!("error: {message}"));
        if governance.json {
            let skipped: Vec<String> = runner
                .skipped()
                .iter()
                .map(|s| chain(secrets, &s.error))
                .collect();
            json_error(
                secrets,
                Exit::Failed,
                "connect",
                &message,
                serde_json::json!({ "servers": skipped }),
            );
        }
        return Err(Exit::Failed.into());
    }
    Ok(runner)
}

/// Reports a failure to open the servers (with `--json`, also as a [`json_error`] object),
/// scrubbed by the configuration's engine: the run's does not exist.
fn connect_failed(governance: &Governance, error: &(dyn std::error::Error + 'static)) -> ExitCode {
    let secrets = &governance.config_secrets;
    if governance.json {
        let text = chain(secrets, error);
        json_error(
            secrets,
            Exit::Failed,
            "connect",
            &text,
            serde_json::json!({}),
        );
    }
    fail(secrets, error)
}

/// Runs `body` with the runner and always closes it.
///
/// The terminating signals are caught before anything is spawned. A signal while connecting
/// drops the half-open run (its child processes are killed); during `body` it stops the body
/// and closes the run gracefully; a signal during the close (the first or a second one) cuts
/// the grace period short and kills what is left. The exit code is then 128 + the signal.
///
/// Closing also ends the governed layer: kept outputs are deleted and the history is synced; a
/// history that could not be written is reported, and fails a command that had succeeded.
pub(crate) async fn with_runner<F>(config: Config, governance: &Governance, body: F) -> ExitCode
where
    F: AsyncFnOnce(&McpRunner) -> ExitCode,
{
    let mut signals = Signals::install();
    let runner = tokio::select! {
        opened = open(config, governance) => match opened {
            Ok(runner) => runner,
            Err(code) => return code,
        },
        code = signals.recv() => {
            say("interrupted while connecting: stopping the MCP servers");
            return code;
        }
    };
    let code = tokio::select! {
        code = body(&runner) => code,
        code = signals.recv() => {
            say("interrupted: closing the MCP sessions");
            code
        }
    };
    let code = tokio::select! {
        closed = runner.shutdown() => match closed {
            Ok(()) => code,
            Err(e) => {
                let failed = fail(runner.redactor(), &e);
                if code == ExitCode::from(Exit::Success) { failed } else { code }
            }
        },
        code = signals.recv() => {
            say("interrupted again: stopping the MCP servers now");
            code
        }
    };
    // After a cut-short close, dropping the runner kills whatever still runs.
    drop(runner);
    code
}

/// Prints an error with its whole cause chain, scrubbed by `secrets`, and returns the failure
/// exit code.
pub(crate) fn fail(secrets: &Redactor, error: &(dyn std::error::Error + 'static)) -> ExitCode {
    say(format_args!("error: {}", chain(secrets, error)));
    Exit::Failed.into()
}

/// Runs `body` on a runner over every server of `file`'s configuration, for a command that
/// only reads (listings, `resources read`, `prompts get`): the configuration loaded (exit 2 on
/// a problem), the servers opened under `[policy]`, closed whatever `body` returns.
pub(crate) fn with_config_runner<F>(
    file: Option<&Path>,
    json: bool,
    logs: &LogSecrets,
    body: F,
) -> ExitCode
where
    F: AsyncFnOnce(&McpRunner) -> ExitCode,
{
    let (config, secrets) = match load(file, json, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let governance = Governance {
        json,
        config_secrets: secrets,
        logs: logs.clone(),
        ..Governance::default()
    };
    runtime().block_on(with_runner(config, &governance, body))
}

/// The servers a listing covers: `only` (asked whatever it declared), or every open one that
/// declares `capability` (`resources`, `prompts`) in its initialize result.
pub(crate) fn offering<'a>(
    runner: &'a McpRunner,
    only: Option<&'a str>,
    capability: &str,
) -> Vec<&'a str> {
    match only {
        Some(server) => vec![server],
        None => runner
            .sessions()
            .iter()
            .filter(|s| s.identity().declares(capability))
            .map(|s| s.name())
            .collect(),
    }
}

/// A failed request of a listing or a read: exit 1, and with `--json` the error object
/// (naming the server).
pub(crate) fn failed(
    secrets: &Redactor,
    json: bool,
    stage: &str,
    error: &FeatureError,
) -> ExitCode {
    if json {
        json_error(
            secrets,
            Exit::Failed,
            stage,
            &chain(secrets, error),
            serde_json::json!({ "server": error.server() }),
        );
    }
    fail(secrets, error)
}
