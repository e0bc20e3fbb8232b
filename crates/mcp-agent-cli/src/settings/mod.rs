//! The CLI's own tables of the configuration, `[serve]` and `[model]`, which mcp-config keeps
//! raw: read here with its problem-collecting reader straight into the option types of
//! mcp-serve and agent-model-openai, their problems reported with the rest of the
//! configuration's ([`Config::load_with`]).

use std::path::Path;

use mcp_agent::config::read::Problems;
use mcp_agent::{Config, ConfigError};
use serde_json::Value;

pub(crate) mod model;
pub(crate) mod serve;
mod serve_auth;
mod serve_state;

pub(crate) use model::ModelTable;
pub(crate) use serve::ServeSettings;

/// The CLI's tables, read.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// `[serve]`.
    pub(crate) serve: ServeSettings,
    /// `[model]`, over the environment's `OPENAI_*` variables.
    pub(crate) model: ModelTable,
}

/// Reads the CLI's tables of `config`; `lookup` reads the environment under `[model]`.
pub(crate) fn read(
    config: &Config,
    lookup: impl Fn(&str) -> Option<String>,
    p: &mut Problems,
) -> Settings {
    Settings {
        serve: serve::read(&config.serve, p),
        model: model::read(&config.model, lookup, p),
    }
}

/// Loads the environment and `file` with the CLI's tables: every problem at once.
pub(crate) fn load(file: Option<&Path>) -> Result<(Config, Settings), ConfigError> {
    Config::load_with(file, |config, p| {
        read(config, |name| std::env::var(name).ok(), p)
    })
}

/// The CLI's tables as the sources give them together, for `config check`: `[model]` header
/// values redacted.
pub(crate) fn shown(config: &Config) -> Vec<(&'static str, Value)> {
    let mut shown = Vec::new();
    if !config.model.is_empty() {
        let mut model = config.model.merged();
        if let Some(Value::Object(headers)) = model.get_mut("headers") {
            for value in headers.values_mut() {
                *value = Value::from(mcp_agent::config::REDACTED);
            }
        }
        shown.push(("model", Value::Object(model)));
    }
    if !config.serve.is_empty() {
        shown.push(("serve", Value::Object(config.serve.merged())));
    }
    shown
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use mcp_agent::config::{FileFormat, ProblemKind};
    use mcp_agent::{Config, ConfigError};

    use super::Settings;

    /// The settings of a TOML document, with no environment.
    pub(crate) fn toml(text: &str) -> Result<Settings, ConfigError> {
        let none = std::iter::empty::<(&str, &str)>();
        Config::parse_with(text, FileFormat::Toml, none, |config, p| {
            super::read(config, |_| None, p)
        })
        .map(|(_, settings)| settings)
    }

    /// The settings of `vars` (the environment) and `file`.
    pub(crate) fn load(
        vars: &[(&str, &str)],
        file: Option<&Path>,
    ) -> Result<Settings, ConfigError> {
        let lookup = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        };
        Config::load_with_vars_and(vars.iter().copied(), file, |config, p| {
            super::read(config, lookup, p)
        })
        .map(|(_, settings)| settings)
    }

    /// Each problem's kind and path.
    pub(crate) fn kinds(err: &ConfigError) -> Vec<(ProblemKind, String)> {
        err.problems()
            .iter()
            .map(|p| (p.kind, p.path.clone()))
            .collect()
    }

    /// The settings of `vars` alone.
    pub(crate) fn env(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        load(vars, None)
    }

    #[test]
    fn config_check_shows_the_tables_without_header_values() {
        let text = "[model]\nmodel = \"m\"\ntimeout_seconds = 2.5\nheaders = { \"X-Team\" = \"agents-secret\" }\n[serve]\nexpose = \"eager\"\n";
        let none = std::iter::empty::<(&str, &str)>();
        let config = Config::parse(text, FileFormat::Toml, none).unwrap();
        let shown = serde_json::to_string(&super::shown(&config)).unwrap();
        assert!(shown.contains(r#""timeout_seconds":2.5"#), "{shown}");
        assert!(
            shown.contains("X-Team") && !shown.contains("agents-secret"),
            "{shown}"
        );
        assert!(shown.contains(r#""expose":"eager""#), "{shown}");
    }
}
