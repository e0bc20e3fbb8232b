//! `serve`'s configuration reload: SIGHUP re-reads the sources the command started with (the
//! same `--file` and environment), checks them as at start, and — when valid — builds a new
//! gateway that new sessions are opened with ([`Gateways::replace`]); sessions in progress keep
//! theirs until they end. An invalid configuration is refused with every problem printed, as at
//! start, and the one in use stays. One line tells each reload: `reloaded: N servers`, or
//! `error: reload refused: …`.
//!
//! A burst of SIGHUPs is one reload: it starts once [`QUIET`] has passed without another (at
//! most [`MOST_DELAY`] after the first), and a SIGHUP during a reload brings one more, so the
//! configuration read last is the one written before the last SIGHUP.
//!
//! What is reloaded: the servers, `[policy]`, `[search]` and every other table the runs are
//! opened with, and `[serve] approve` and `history`. The rest of `[serve]` (the listener,
//! `auth`, `state`, bounds, `expose`, `tool_names`, `run_pool`) and `tool_server.name` are
//! fixed when the gateway starts: a reload that changes them applies the rest and warns,
//! naming them, that they take effect on a restart.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcp_agent::{Config, Redactor};
use serde_json::{Map, Value};
use tokio::signal::unix::Signal;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::gateways::{Built, Gateways};
use super::logging::LogSecrets;
use super::settings::ServeSettings;
use super::term::say;

/// A reload starts once SIGHUPs have stopped for this long…
const QUIET: Duration = Duration::from_millis(200);
/// …or this long after the first of a burst that does not stop.
const MOST_DELAY: Duration = Duration::from_millis(500);

/// The `[serve]` keys a reload applies; every other one is fixed when the gateway starts.
const RELOADED_SERVE_KEYS: &[&str] = &["approve", "history"];

/// Builds a configuration's gateway with the secret engine of the configurations loaded so far
/// and its `[serve]` settings (only the per-run ones are read).
pub(crate) type Build = Box<dyn Fn(&Redactor, Config, &ServeSettings) -> Built + Send + Sync>;

/// Where `serve` read its configuration, read again on each reload.
pub(crate) struct Sources {
    /// `--file`, if given (the environment is read again too).
    pub(crate) file: Option<PathBuf>,
    /// What the log scrubs with: it learns each reloaded configuration's secrets too.
    pub(crate) logs: LogSecrets,
}

/// What a reload needs: the sources, what the gateway started with, how to build a gateway,
/// and where to put it.
pub(crate) struct Reload {
    sources: Sources,
    /// Every secret of the configurations loaded so far (sessions of older ones may still run).
    secrets: Redactor,
    started: Fixed,
    build: Build,
    gateways: Arc<Gateways>,
}

/// What of a configuration is fixed when the gateway starts.
pub(crate) struct Fixed {
    /// `[serve]`, each key with its value.
    serve: Map<String, Value>,
    /// `tool_server.name`.
    name: String,
}

impl Fixed {
    /// What of `config` is fixed when the gateway starts with it.
    pub(crate) fn of(config: &Config) -> Self {
        Self {
            serve: config.serve.merged(),
            name: config.tool_server.name.clone(),
        }
    }

    /// The keys of `config` fixed at start whose value is not the one the gateway started
    /// with, as paths (`serve.http`), sorted.
    fn changed_in(&self, config: &Config) -> Vec<String> {
        let now = config.serve.merged();
        let started = &self.serve;
        let mut keys: Vec<String> = started
            .keys()
            .chain(now.keys())
            .filter(|key| !RELOADED_SERVE_KEYS.contains(&key.as_str()))
            .filter(|key| started.get(*key) != now.get(*key))
            .map(|key| format!("serve.{key}"))
            .collect();
        if config.tool_server.name != self.name {
            keys.push("tool_server.name".to_owned());
        }
        keys.sort();
        keys.dedup();
        keys
    }
}

impl Reload {
    /// Reloads from `sources`, built by `build` into `gateways`, of a gateway started with
    /// `started` and the secret engine `secrets`.
    pub(crate) fn new(
        sources: Sources,
        secrets: &Redactor,
        started: Fixed,
        build: Build,
        gateways: Arc<Gateways>,
    ) -> Self {
        Self {
            sources,
            secrets: secrets.clone(),
            started,
            build,
            gateways,
        }
    }

    /// Reads the sources again and, if the configuration is valid, replaces the gateway.
    async fn once(&mut self) {
        let file = self.sources.file.clone();
        let loaded =
            tokio::task::spawn_blocking(move || super::settings::load(file.as_deref())).await;
        let (config, settings) = match loaded {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(e)) => {
                super::config::report_scrubbed(&e, &self.secrets);
                return self.refused();
            }
            Err(e) => {
                say(format_args!(
                    "error: the configuration could not be read: {e}"
                ));
                return self.refused();
            }
        };
        self.secrets = self
            .secrets
            .clone()
            .with_secrets(super::term::secret_values(&config, &settings));
        self.sources.logs.scrub_with(&self.secrets);
        let fixed = self.started.changed_in(&config);
        if !fixed.is_empty() {
            say(format_args!(
                "warning: reload: changed, but kept as started until a restart: {}",
                fixed.join(", ")
            ));
        }
        let servers = config.servers.len();
        let built = (self.build)(&self.secrets, config, &settings.serve);
        self.gateways.replace(built);
        say(format_args!(
            "reloaded: {servers} server{}",
            plural(servers)
        ));
    }

    fn refused(&self) {
        let servers = self.gateways.servers();
        say(format_args!(
            "error: reload refused: still serving the configuration in use ({servers} server{})",
            plural(servers)
        ));
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The task reloading on SIGHUP, stopped when dropped.
pub(crate) struct Reloads(Option<JoinHandle<()>>);

impl Reloads {
    /// Stops reloading (a reload under way is dropped before it replaces anything).
    pub(crate) fn stop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

impl Drop for Reloads {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reloads on each burst of `hangups` (none: SIGHUP could not be caught, and keeps its
/// default action).
pub(crate) fn watch(hangups: Option<Signal>, mut reload: Reload) -> Reloads {
    let Some(mut hangups) = hangups else {
        return Reloads(None);
    };
    Reloads(Some(tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let latest = Instant::now() + MOST_DELAY;
            loop {
                tokio::select! {
                    more = hangups.recv() => if more.is_none() { break },
                    () = tokio::time::sleep(QUIET) => break,
                    () = tokio::time::sleep_until(latest) => break,
                }
            }
            reload.once().await;
        }
    })))
}

#[cfg(test)]
mod tests {
    use mcp_agent::Config;
    use mcp_agent::config::FileFormat;

    use super::Fixed;

    fn parse(text: &str) -> Config {
        Config::parse(text, FileFormat::Toml, std::iter::empty::<(&str, &str)>()).unwrap()
    }

    #[test]
    fn the_keys_fixed_at_start_are_named_when_changed_and_the_reloaded_ones_are_not() {
        let started = Fixed::of(&parse(
            "[serve]\nhttp = \"127.0.0.1:8080\"\nmax_sessions = 4\napprove = \"deny\"\n",
        ));
        let same = parse("[serve]\nmax_sessions = 4\nhttp = \"127.0.0.1:8080\"\n");
        assert_eq!(started.changed_in(&same), Vec::<String>::new());
        let reloaded = parse(
            "[serve]\nhttp = \"127.0.0.1:8080\"\nmax_sessions = 4\napprove = \"allow\"\n\
             history = \"h\"\n",
        );
        assert_eq!(started.changed_in(&reloaded), Vec::<String>::new());
        let fixed = parse(
            "[tool_server]\nname = \"other\"\n[serve]\nhttp = \"127.0.0.1:9090\"\n\
             expose = \"eager\"\n",
        );
        assert_eq!(
            started.changed_in(&fixed),
            [
                "serve.expose",
                "serve.http",
                "serve.max_sessions",
                "tool_server.name"
            ]
        );
    }
}
