//! The `[model]` table: which OpenAI-compatible chat-completions endpoint `mcp-agent run` asks,
//! and how, read over the ecosystem's variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`) into
//! agent-model-openai's [`OpenAiConfig`]. The key itself is never in the configuration, only
//! the name of the variable that holds it.
//!
//! | key | meaning |
//! | --- | --- |
//! | `base_url` | the endpoint, up to and including its version (`http://localhost:11434/v1`) |
//! | `model` | the model's name on it |
//! | `api_key_env` | the variable holding the API key (default `OPENAI_API_KEY`) |
//! | `headers` | extra headers sent with every request; values are secrets (`${VAR}` in a file) |
//! | `timeout_seconds` | how long the endpoint may stay silent: until an answer's headers arrive, and between two pieces of a streamed answer (default 60) |

use std::time::Duration;

use agent_model_openai::OpenAiConfig;
use mcp_agent::config::read::{
    JsonPath, Problems, Table, expect_object, non_blank, parse_base_url, parse_timeout, shown,
    type_name,
};
use mcp_agent::{
    ConfigError, Secret,
    config::{Problem, ProblemKind},
};
use serde_json::Value;

/// The keys of the `[model]` table.
const MODEL_FIELDS: &[&str] = &[
    "base_url",
    "model",
    "api_key_env",
    "headers",
    "timeout_seconds",
];

/// How long a model may stay silent when `[model]` sets no `timeout_seconds`: well under the
/// HTTP adapter's own 300 s, so a run against an endpoint that never answers fails in a
/// minute, naming the timeout.
const DEFAULT_MODEL_TIMEOUT: Duration = Duration::from_secs(60);

/// The `[model]` table read over the environment.
#[derive(Debug, Clone)]
pub(crate) struct ModelTable {
    /// The endpoint's configuration: the environment's, with what the table sets over it (the
    /// model's name is empty when neither names one).
    pub(crate) config: OpenAiConfig,
    /// The name of the environment variable holding the API key (never the key).
    pub(crate) api_key_env: Option<String>,
}

impl ModelTable {
    /// The API key read through `lookup` from the variable `api_key_env` names; `None` when
    /// no variable is named. A named variable that is unset, empty or blank is an error
    /// naming the variable (never a request without the key the operator asked for).
    pub(crate) fn api_key_from(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Secret>, ConfigError> {
        let Some(name) = &self.api_key_env else {
            return Ok(None);
        };
        match lookup(name).filter(|value| !value.trim().is_empty()) {
            Some(value) => Ok(Some(Secret::new(value.trim()))),
            None => Err(ConfigError::invalid(vec![Problem::new(
                "model.api_key_env",
                ProblemKind::UndefinedVariable,
                format!("the API key variable {} is not set or empty", shown(name)),
            )])),
        }
    }
}

/// Reads the `[model]` table over the variables `lookup` reads, pushing every problem.
pub(crate) fn read(
    table: &Table,
    lookup: impl Fn(&str) -> Option<String>,
    p: &mut Problems,
) -> ModelTable {
    let mut config = OpenAiConfig::from_lookup(lookup);
    // A key written into the table is refused with the way to give it (never echoing it).
    let mut known = MODEL_FIELDS.to_vec();
    if table.contains("api_key") {
        known.push("api_key");
        table.push_at(
            "api_key",
            p,
            ProblemKind::UnknownField,
            "the API key is not written in the configuration: put it in an environment \
             variable and name that variable in `api_key_env` (default `OPENAI_API_KEY`)",
        );
    }
    table.reject_unknown(&known, p);
    if let Some(base_url) = table.read("base_url", p, parse_base_url) {
        config.base_url = base_url;
    }
    if let Some(model) = table.read("model", p, |v, at, p| non_blank(v, at, "the model name", p)) {
        config.model = model;
    }
    let api_key_env = table.read("api_key_env", p, |v, at, p| {
        let name = non_blank(v, at, "the variable name", p)?;
        if name.contains(['=', '\0', ' ']) {
            p.push(
                at,
                ProblemKind::InvalidValue,
                format!("{} is not a valid environment variable name", shown(&name)),
            );
            return None;
        }
        Some(name)
    });
    if let Some(headers) = table.read("headers", p, headers) {
        config.headers = headers.into_iter().collect();
    }
    let silence = table
        .read("timeout_seconds", p, parse_timeout)
        .unwrap_or(DEFAULT_MODEL_TIMEOUT);
    config.timeouts = config.timeouts.with_request(silence).with_idle(silence);
    ModelTable {
        config,
        api_key_env,
    }
}

/// An object of header names (HTTP tokens) to string values, which are secrets and never
/// shown.
fn headers(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<(String, String)>> {
    let obj = expect_object(value, path, "`headers`", p)?;
    let mut headers = Vec::with_capacity(obj.len());
    for (name, value) in obj {
        let at = path.key(name);
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            p.push(
                &at,
                ProblemKind::InvalidName,
                format!("{} is not a valid header name", shown(name)),
            );
            continue;
        }
        match value {
            Value::String(s) => headers.push((name.clone(), s.clone())),
            other => p.push(
                &at,
                ProblemKind::WrongType,
                format!(
                    "a header value must be a string, found {}",
                    type_name(other)
                ),
            ),
        }
    }
    Some(headers)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_agent::config::ProblemKind;

    use crate::settings::tests::{env, toml};

    #[test]
    fn timeout_seconds_bounds_the_silence_with_a_default_well_under_five_minutes() {
        let table = toml("[model]\nmodel = \"m\"\n").unwrap().model;
        assert_eq!(table.config.timeouts.request, Duration::from_secs(60));
        assert_eq!(table.config.timeouts.idle, Duration::from_secs(60));
        let table = toml("[model]\ntimeout_seconds = 2.5\n").unwrap().model;
        assert_eq!(table.config.timeouts.request, Duration::from_millis(2500));
        assert_eq!(table.config.timeouts.idle, Duration::from_millis(2500));
        let err = toml("[model]\ntimeout_seconds = -1\n").unwrap_err();
        assert_eq!(err.problems()[0].path, "model.timeout_seconds");
        assert_eq!(err.problems()[0].kind, ProblemKind::InvalidTimeout);
    }

    #[test]
    fn a_model_table_in_a_file_and_the_environment_the_environment_winning_key_by_key() {
        let file = r#"
[model]
base_url = "http://localhost:8000/v1/"
model = "from-file"
headers = { "X-Team" = "agents-secret-value" }
"#;
        let dir = std::env::temp_dir().join(format!("mcp-agent-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mcp.toml");
        std::fs::write(&path, file).unwrap();
        let vars = [(
            "MCP_AGENT__MODEL",
            r#"{"model": "from-env", "api_key_env": "MY_KEY"}"#,
        )];
        let table = crate::settings::tests::load(&vars, Some(&path))
            .unwrap()
            .model;
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(table.config.base_url, "http://localhost:8000/v1");
        assert_eq!(table.config.model, "from-env");
        assert_eq!(table.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(table.config.headers["X-Team"], "agents-secret-value");
        assert!(!format!("{table:?}").contains("agents-secret-value"));

        let only_env = env(&[("MCP_AGENT__MODEL", r#"{"model": "from-env"}"#)]).unwrap();
        assert_eq!(only_env.model.config.model, "from-env");
        assert!(only_env.model.api_key_env.is_none());
    }

    #[test]
    fn every_problem_of_a_model_table_at_its_path_and_no_value_echoed() {
        let err = toml(
            r#"
[model]
base_url = "ftp://host/v1"
model = " "
api_key = "sk-never-echoed"
api_key_env = "A=B"
headers = { "bad name" = "x", "X-Ok" = 3 }
"#,
        )
        .unwrap_err();
        let problems = crate::settings::tests::kinds(&err);
        for expected in [
            (ProblemKind::UnsupportedScheme, "model.base_url"),
            (ProblemKind::InvalidValue, "model.model"),
            (ProblemKind::UnknownField, "model.api_key"),
            (ProblemKind::InvalidValue, "model.api_key_env"),
            (ProblemKind::InvalidName, "model.headers[\"bad name\"]"),
            (ProblemKind::WrongType, "model.headers.X-Ok"),
        ] {
            assert!(
                problems.contains(&(expected.0, expected.1.to_owned())),
                "{expected:?} not in {problems:?}"
            );
        }
        let text = err.to_string();
        assert!(!text.contains("sk-never-echoed"), "{text}");
        let api_key = err
            .problems()
            .iter()
            .find(|p| p.path == "model.api_key")
            .unwrap();
        assert!(api_key.message.contains("`api_key_env`"), "{api_key}");

        let err = toml("[model]\nbase_url = \"https://user:pw-secret@host/v1\"\n").unwrap_err();
        assert!(!err.to_string().contains("pw-secret"), "{err}");
    }

    #[test]
    fn the_key_is_read_from_the_named_variable_and_a_missing_one_is_named() {
        let model = toml("[model]\napi_key_env = \"TEAM_KEY\"\n").unwrap().model;
        let key = model
            .api_key_from(|name| (name == "TEAM_KEY").then(|| " sk-team ".to_owned()))
            .unwrap()
            .unwrap();
        assert_eq!(key.expose(), "sk-team");
        let err = model.api_key_from(|_| Some("  ".into())).unwrap_err();
        assert!(err.to_string().contains("`TEAM_KEY`"), "{err}");
        assert_eq!(err.problems()[0].kind, ProblemKind::UndefinedVariable);
        let unnamed = toml("").unwrap().model;
        assert!(
            unnamed
                .api_key_from(|_| Some("x".into()))
                .unwrap()
                .is_none()
        );
    }
}
