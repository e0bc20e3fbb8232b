//! The model of `mcp-agent run`: an OpenAI-compatible chat-completions endpoint, configured in
//! layers — a flag wins over the config's `[model]` table, the table over the environment
//! (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, the ecosystem's convention; see
//! [`settings::model`](super::settings::model)).

use std::sync::Arc;

use agent_model_openai::{OpenAiConfig, OpenAiModel};
use mcp_agent::Redactor;
use mcp_agent::prelude::Model;

use super::settings::ModelTable;

/// What the command line says about the model.
#[derive(Debug, Clone, Default)]
pub(crate) struct ModelFlags {
    /// `--model NAME`.
    pub(crate) model: Option<String>,
    /// `--base-url URL`.
    pub(crate) base_url: Option<String>,
}

/// The endpoint's configuration from `flags` over `table` (itself over the environment).
/// The key comes from the variable the table's `api_key_env` names (read through `lookup`),
/// else `OPENAI_API_KEY`; it is never a flag (a command line is visible to every user of the
/// machine).
///
/// Fails, saying how to fix it, when no model is named or `api_key_env` names a variable that
/// is not set.
pub(crate) fn config(
    flags: &ModelFlags,
    table: &ModelTable,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<OpenAiConfig, String> {
    let mut config = table.config.clone();
    if let Some(base_url) = &flags.base_url {
        config = config.with_base_url(base_url.trim().trim_end_matches('/'));
    }
    let model = flags
        .model
        .as_deref()
        .unwrap_or(&config.model)
        .trim()
        .to_owned();
    if model.is_empty() {
        return Err(String::from(
            "no model to run: pass --model NAME, or set `model` in the config's [model] \
             table (e.g. `gpt-4o-mini`, or the model a local server serves)",
        ));
    }
    config = config.with_model(model);
    match table.api_key_from(&lookup) {
        Ok(Some(key)) => config = config.with_api_key(key.expose()),
        Ok(None) => {}
        // Names the variable, never its value: nothing to scrub, only to escape.
        Err(e) => return Err(super::term::chain(&Redactor::new(), &e)),
    }
    Ok(config)
}

/// The model for `config`, or why it cannot be used (naming the setting, never its value).
pub(crate) fn build(config: OpenAiConfig) -> Result<Arc<dyn Model>, String> {
    let shown = format!("model `{}`", config.model);
    let secrets = Redactor::new().with_secrets(config.api_key.iter().map(|k| k.expose()));
    OpenAiModel::new(config)
        .map(|model| Arc::new(model) as Arc<dyn Model>)
        .map_err(|e| format!("{shown}: {}", super::term::chain(&secrets, &e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// The `[model]` table of `json` (as `MCP_AGENT__MODEL`) over the variables `vars`.
    fn table(json: &str, vars: &[(&str, &str)]) -> ModelTable {
        let mut all = vars.to_vec();
        all.push(("MCP_AGENT__MODEL", json));
        crate::settings::tests::env(&all).unwrap().model
    }

    #[test]
    fn the_table_timeout_bounds_the_silence_and_defaults_well_under_five_minutes() {
        let flags = ModelFlags {
            model: Some("m".into()),
            base_url: None,
        };
        let config = config(&flags, &table("{}", &[]), env(&[])).unwrap();
        assert_eq!(config.timeouts.request, Duration::from_secs(60));
        assert_eq!(config.timeouts.idle, Duration::from_secs(60));
        let table = table(r#"{"timeout_seconds": 1.5}"#, &[]);
        let config = super::config(&flags, &table, env(&[])).unwrap();
        assert_eq!(config.timeouts.request, Duration::from_millis(1500));
        assert_eq!(config.timeouts.idle, Duration::from_millis(1500));
    }

    #[test]
    fn a_flag_wins_over_the_table_and_the_table_over_the_environment() {
        let vars = [
            ("OPENAI_BASE_URL", "http://env.example/v1"),
            ("OPENAI_API_KEY", "sk-from-env"),
            ("TEAM_KEY", "sk-from-table"),
        ];
        let lookup = env(&vars);
        let table_json = r#"{"base_url": "http://table.example/v1", "model": "table-model",
                             "api_key_env": "TEAM_KEY"}"#;
        let table_of_file = table(table_json, &vars);
        let flags = ModelFlags {
            model: Some("flag-model".into()),
            base_url: Some("http://flag.example/v1/".into()),
        };

        let config = config(&flags, &table_of_file, &lookup).unwrap();
        assert_eq!(config.base_url, "http://flag.example/v1");
        assert_eq!(config.model, "flag-model");
        assert_eq!(config.api_key.unwrap().expose(), "sk-from-table");

        let config = super::config(&ModelFlags::default(), &table_of_file, &lookup).unwrap();
        assert_eq!(config.base_url, "http://table.example/v1");
        assert_eq!(config.model, "table-model");

        let only_env = table(r#"{"model": "m"}"#, &vars);
        let config = super::config(&ModelFlags::default(), &only_env, &lookup).unwrap();
        assert_eq!(config.base_url, "http://env.example/v1");
        assert_eq!(config.api_key.unwrap().expose(), "sk-from-env");
    }

    #[test]
    fn no_model_or_a_missing_key_variable_says_how_to_fix_it() {
        let err = config(&ModelFlags::default(), &table("{}", &[]), env(&[])).unwrap_err();
        assert!(err.contains("--model NAME"), "{err}");

        let table = table(r#"{"model": "m", "api_key_env": "MISSING_KEY"}"#, &[]);
        let err = config(&ModelFlags::default(), &table, env(&[])).unwrap_err();
        assert!(err.contains("`MISSING_KEY`"), "{err}");
    }

    #[test]
    fn headers_of_the_table_are_sent_and_a_bad_one_is_named_without_its_value() {
        let table = table(
            r#"{"model": "m", "headers": {"X-Bad": "line\nbreak-secret"}}"#,
            &[],
        );
        let config = config(&ModelFlags::default(), &table, env(&[])).unwrap();
        let err = build(config).err().unwrap();
        assert!(err.contains("X-Bad"), "{err}");
        assert!(!err.contains("break-secret"), "{err}");
    }
}
