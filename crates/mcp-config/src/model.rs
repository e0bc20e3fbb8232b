//! The `[model]` table: which OpenAI-compatible chat-completions endpoint an agent run asks,
//! and how. Pure data: the key itself is never in the configuration, only the name of the
//! variable that holds it, read into a [`Secret`] when a run needs it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::parse::{as_str, expect_object, field, reject_unknown, shown, type_name};
use crate::path::{JsonPath, Problems};
use crate::{ConfigError, Problem, ProblemKind, Secret};

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
pub const DEFAULT_MODEL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The operator's `[model]`: the endpoint (`base_url`, up to and including its version, e.g.
/// `http://localhost:11434/v1`), the model's name on it (`model`), the name of the environment
/// variable holding the API key (`api_key_env`) and extra headers sent with every request
/// (`headers`, values treated as secrets; `${VAR}` expansion puts a variable's value there
/// in a file). Every key is optional: a caller layers flags over it, and it over the
/// ecosystem's variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`).
///
/// ```
/// use mcp_config::{Config, FileFormat};
///
/// let config = Config::parse(
///     r#"
/// [model]
/// base_url = "http://localhost:11434/v1"
/// model = "qwen3:8b"
/// api_key_env = "OLLAMA_KEY"
/// headers = { "X-Team" = "agents" }
/// "#,
///     FileFormat::Toml,
///     std::iter::empty::<(&str, &str)>(),
/// )?;
/// let model = &config.model;
/// assert_eq!(model.base_url.as_deref(), Some("http://localhost:11434/v1"));
/// assert_eq!(model.model.as_deref(), Some("qwen3:8b"));
/// // The key is read from the named variable, into a redacting secret.
/// let key = model.api_key_from(|name| (name == "OLLAMA_KEY").then(|| "k-123".to_owned()))?;
/// assert_eq!(key.map(|k| k.to_string()), Some("[REDACTED]".to_owned()));
/// // Header values never print.
/// assert!(!serde_json::to_string(&config).unwrap().contains("agents"));
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The endpoint's base URL (`…/v1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model's name as the endpoint knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The name of the environment variable holding the API key (never the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request; their values are secrets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
    /// `timeout_seconds`: how long the endpoint may stay silent — until an answer's headers
    /// arrive, and between two pieces of a streamed answer. `None`:
    /// [`DEFAULT_MODEL_TIMEOUT`].
    #[serde(
        skip_serializing_if = "Option::is_none",
        rename = "timeout_seconds",
        serialize_with = "timeout_secs"
    )]
    pub timeout: Option<std::time::Duration>,
}

fn timeout_secs<S: serde::Serializer>(
    d: &Option<std::time::Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

impl ModelConfig {
    /// Sets the base URL.
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// Sets the model's name.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the name of the variable holding the API key.
    #[must_use]
    pub fn with_api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self
    }

    /// Sets `timeout_seconds`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long the endpoint may stay silent: `timeout_seconds`, else
    /// [`DEFAULT_MODEL_TIMEOUT`].
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout.unwrap_or(DEFAULT_MODEL_TIMEOUT)
    }

    /// Sets the extra headers.
    #[must_use]
    pub fn with_headers(mut self, headers: BTreeMap<String, Secret>) -> Self {
        self.headers = headers;
        self
    }

    /// The API key from the process environment: the variable `api_key_env` names, or `None`
    /// when no variable is named. See [`api_key_from`](Self::api_key_from).
    pub fn api_key(&self) -> Result<Option<Secret>, ConfigError> {
        self.api_key_from(|name| std::env::var(name).ok())
    }

    /// The API key read through `lookup` from the variable `api_key_env` names; `None` when
    /// no variable is named. A named variable that is unset, empty or blank is an error
    /// naming the variable (never a request without the key the operator asked for).
    pub fn api_key_from(
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

/// What one source's `[model]` sets; a later source overrides only the keys it sets.
#[derive(Debug, Default)]
pub(crate) struct ModelLayer {
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    headers: Option<BTreeMap<String, Secret>>,
    timeout: Option<std::time::Duration>,
}

impl ModelLayer {
    /// Applies the keys this layer sets to `model`.
    pub(crate) fn apply(self, model: &mut ModelConfig) {
        if let Some(v) = self.base_url {
            model.base_url = Some(v);
        }
        if let Some(v) = self.model {
            model.model = Some(v);
        }
        if let Some(v) = self.api_key_env {
            model.api_key_env = Some(v);
        }
        if let Some(v) = self.headers {
            model.headers = v;
        }
        if let Some(v) = self.timeout {
            model.timeout = Some(v);
        }
    }
}

/// Reads a `[model]` table at `path`.
pub(crate) fn parse_model(value: &Value, path: &JsonPath, p: &mut Problems) -> ModelLayer {
    let mut layer = ModelLayer::default();
    let Some(obj) = expect_object(value, path, "`model`", p) else {
        return layer;
    };
    // A key written into the table is refused with the way to give it (never echoing it).
    let mut known = MODEL_FIELDS.to_vec();
    if obj.contains_key("api_key") {
        known.push("api_key");
        p.push(
            &path.key("api_key"),
            ProblemKind::UnknownField,
            "the API key is not written in the configuration: put it in an environment \
             variable and name that variable in `api_key_env` (default `OPENAI_API_KEY`)",
        );
    }
    reject_unknown(obj, &known, path, p);
    if let Some(v) = field(obj, "base_url") {
        layer.base_url = base_url(v, &path.key("base_url"), p);
    }
    if let Some(v) = field(obj, "model") {
        layer.model = non_blank(v, &path.key("model"), "the model name", p);
    }
    if let Some(v) = field(obj, "api_key_env") {
        let at = path.key("api_key_env");
        layer.api_key_env = non_blank(v, &at, "the variable name", p).filter(|name| {
            let ok = !name.contains('=') && !name.contains('\0') && !name.contains(' ');
            if !ok {
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!("{} is not a valid environment variable name", shown(name)),
                );
            }
            ok
        });
    }
    if let Some(v) = field(obj, "headers") {
        layer.headers = headers(v, &path.key("headers"), p);
    }
    if let Some(v) = field(obj, "timeout_seconds") {
        layer.timeout = crate::parse::parse_timeout(v, &path.key("timeout_seconds"), p);
    }
    layer
}

fn non_blank(value: &Value, path: &JsonPath, what: &str, p: &mut Problems) -> Option<String> {
    let s = as_str(value, path, p)?.trim();
    if s.is_empty() {
        p.push(path, ProblemKind::InvalidValue, format!("{what} is empty"));
        return None;
    }
    Some(s.to_owned())
}

/// An `http` or `https` URL with a host and no credentials; kept as written (less trailing
/// slashes), since the endpoint's path is appended to it.
pub(crate) fn base_url(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<String> {
    let s = non_blank(value, path, "the base URL", p)?;
    let url = match url::Url::parse(&s) {
        Ok(url) => url,
        Err(e) => {
            p.push_caused(path, ProblemKind::InvalidUrl, "not a valid URL", e);
            return None;
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        p.push(
            path,
            ProblemKind::UnsupportedScheme,
            format!(
                "URL scheme {} is not supported: use http or https",
                shown(url.scheme())
            ),
        );
        return None;
    }
    if url.host().is_none() {
        p.push(path, ProblemKind::InvalidUrl, "the URL has no host");
        return None;
    }
    if !url.username().is_empty() || url.password().is_some() {
        p.push(
            path,
            ProblemKind::InvalidUrl,
            "the URL must not carry credentials (`user:password@`); use `api_key_env` or `headers`",
        );
        return None;
    }
    Some(s.trim_end_matches('/').to_owned())
}

/// An object of header names (HTTP tokens) to string values, which are kept as secrets and
/// never shown.
fn headers(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<BTreeMap<String, Secret>> {
    let obj = expect_object(value, path, "`headers`", p)?;
    let mut headers = BTreeMap::new();
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
            Value::String(s) => {
                headers.insert(name.clone(), Secret::new(s.as_str()));
            }
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
    use crate::{Config, FileFormat, ProblemKind};

    fn toml(text: &str) -> Result<Config, crate::ConfigError> {
        Config::parse(text, FileFormat::Toml, std::iter::empty::<(&str, &str)>())
    }

    #[test]
    fn timeout_seconds_bounds_the_silence_with_a_default_well_under_five_minutes() {
        let config = toml("[model]\nmodel = \"m\"\n").unwrap();
        assert_eq!(config.model.timeout, None);
        assert_eq!(config.model.timeout(), std::time::Duration::from_secs(60));
        let config = toml("[model]\ntimeout_seconds = 2.5\n").unwrap();
        assert_eq!(
            config.model.timeout(),
            std::time::Duration::from_millis(2500)
        );
        assert!(
            serde_json::to_string(&config)
                .unwrap()
                .contains(r#""timeout_seconds":2.5"#)
        );
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
        let config = toml(file).unwrap();
        assert_eq!(
            config.model.base_url.as_deref(),
            Some("http://localhost:8000/v1")
        );
        let env = Config::from_env_vars([(
            "MCP_AGENT__MODEL",
            r#"{"model": "from-env", "api_key_env": "MY_KEY"}"#,
        )])
        .unwrap();
        assert_eq!(env.model.model.as_deref(), Some("from-env"));
        assert_eq!(env.model.api_key_env.as_deref(), Some("MY_KEY"));

        let shown = serde_json::to_string(&config).unwrap();
        assert!(!shown.contains("agents-secret-value"), "{shown}");
        assert!(shown.contains("X-Team"), "{shown}");
        assert!(!format!("{config:?}").contains("agents-secret-value"));
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
        let problems: Vec<(ProblemKind, String)> = err
            .problems()
            .iter()
            .map(|p| (p.kind, p.path.clone()))
            .collect();
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
        let model = super::ModelConfig::default().with_api_key_env("TEAM_KEY");
        let key = model
            .api_key_from(|name| (name == "TEAM_KEY").then(|| " sk-team ".to_owned()))
            .unwrap()
            .unwrap();
        assert_eq!(key.expose(), "sk-team");
        let err = model.api_key_from(|_| Some("  ".into())).unwrap_err();
        assert!(err.to_string().contains("`TEAM_KEY`"), "{err}");
        assert_eq!(err.problems()[0].kind, ProblemKind::UndefinedVariable);
        assert!(
            super::ModelConfig::default()
                .api_key_from(|_| Some("x".into()))
                .unwrap()
                .is_none()
        );
    }
}
