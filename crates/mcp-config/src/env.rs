//! Loading from the environment: `MCP_AGENT__…` variables.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::{Layer, PartialFailure, merge, tool_server_name};
use crate::parse::did_you_mean;
use crate::parse::parse_timeout;
use crate::path::{JsonPath, Problems};
use crate::table::TableLayer;
use crate::{Config, ConfigError, ProblemKind};

/// The prefix of every variable this crate reads.
pub const ENV_PREFIX: &str = "MCP_AGENT__";

/// The variables this crate reads, after the prefix.
const KEYS: &[&str] = &[
    "SERVERS",
    "CONNECT_TIMEOUT_SECONDS",
    "TOOL_SERVER__NAME",
    "PARTIAL_FAILURE",
    "REQUIRE_ALLOW_MCP",
    "ALLOW_INLINE_STDIO",
    "ALLOW_INLINE_ENV_SECRETS",
    "SSRF_GUARD",
    "POLICY",
    "MODEL",
    "SERVE",
];

impl Config {
    /// Loads the configuration from the process environment (see [`Config::from_env_vars`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        let (vars, mut p) = process_env();
        let layer = env_layer(&vars, &mut p);
        merge(vec![layer], p)
    }

    /// Loads the configuration from environment variables given as `(name, value)` pairs, so
    /// tests and embedders need not touch the process environment.
    ///
    /// Reads `MCP_AGENT__SERVERS` (a JSON array of server objects, default `[]`),
    /// `MCP_AGENT__CONNECT_TIMEOUT_SECONDS` (default 30), `MCP_AGENT__TOOL_SERVER__NAME`
    /// (default `mcp-agent`), `MCP_AGENT__PARTIAL_FAILURE`, and the boolean switches
    /// `MCP_AGENT__REQUIRE_ALLOW_MCP`, `MCP_AGENT__ALLOW_INLINE_STDIO`,
    /// `MCP_AGENT__ALLOW_INLINE_ENV_SECRETS` and `MCP_AGENT__SSRF_GUARD` (`true`/`false`,
    /// `1`/`0`, `yes`/`no`, `on`/`off`), and `MCP_AGENT__POLICY` (a JSON object: the `[policy]`
    /// table of a file, see [`PolicyConfig`](crate::PolicyConfig)) and `MCP_AGENT__MODEL` and
    /// `MCP_AGENT__SERVE` (JSON objects: the `[model]` and `[serve]` tables, kept raw, see
    /// [`Table`](crate::read::Table)). A variable
    /// set to the empty string counts as unset. Other variables with the prefix are errors (a
    /// typo must not be ignored); variables without it are ignored. Problem paths start with
    /// the variable's name: `MCP_AGENT__SERVERS[1].url`; a key given twice in one object of
    /// `MCP_AGENT__SERVERS` is one of them.
    ///
    /// ```
    /// use mcp_config::{Config, ProblemKind};
    ///
    /// let err = Config::from_env_vars([("MCP_AGENT__SERVERS", "[{oops")]).unwrap_err();
    /// assert_eq!(err.problems()[0].kind, ProblemKind::Syntax);
    /// assert_eq!(err.problems()[0].path, "MCP_AGENT__SERVERS");
    /// assert!(err.to_string().contains("MCP_AGENT__SERVERS is not valid JSON"));
    /// ```
    pub fn from_env_vars<I, K, V>(vars: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let vars = collect_vars(vars);
        let mut p = Problems::new();
        let layer = env_layer(&vars, &mut p);
        merge(vec![layer], p)
    }
}

/// Collects `(name, value)` pairs into a sorted map (the last value of a name wins).
pub(crate) fn collect_vars<I, K, V>(vars: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    vars.into_iter()
        .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
        .collect()
}

/// The process environment as UTF-8 pairs; one of our variables that is not UTF-8 is a
/// problem, others are skipped.
pub(crate) fn process_env() -> (BTreeMap<String, String>, Problems) {
    let mut p = Problems::new();
    let mut vars = BTreeMap::new();
    for (k, v) in std::env::vars_os() {
        let Ok(k) = k.into_string() else { continue };
        match v.into_string() {
            Ok(v) => {
                vars.insert(k, v);
            }
            Err(_) if k.starts_with(ENV_PREFIX) => p.push(
                &JsonPath::raw(k.as_str()),
                ProblemKind::InvalidValue,
                format!("{k} is not valid UTF-8"),
            ),
            Err(_) => {}
        }
    }
    (vars, p)
}

/// The settings the `MCP_AGENT__…` variables give.
pub(crate) fn env_layer(vars: &BTreeMap<String, String>, p: &mut Problems) -> Layer {
    let mut layer = Layer {
        label: "the environment".to_owned(),
        ..Layer::default()
    };
    for (name, value) in vars {
        let Some(key) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if value.trim().is_empty() {
            continue;
        }
        let at = JsonPath::raw(name.as_str());
        match key {
            "SERVERS" => match crate::json::parse(value, &at, p) {
                Ok(v @ Value::Array(_)) => layer.servers_from_array(&v, &at, p),
                Ok(v) => p.push(
                    &at,
                    ProblemKind::WrongType,
                    format!(
                        "{name} must be a JSON array of servers, found {}",
                        crate::parse::type_name(&v)
                    ),
                ),
                Err(e) => p.push_caused(
                    &at,
                    ProblemKind::Syntax,
                    format!("{name} is not valid JSON"),
                    e,
                ),
            },
            "CONNECT_TIMEOUT_SECONDS" => match value.trim().parse::<f64>() {
                Ok(secs) => {
                    layer.connect_timeout = match serde_json::Number::from_f64(secs) {
                        Some(n) => parse_timeout(&Value::Number(n), &at, p),
                        None => {
                            p.push(
                                &at,
                                ProblemKind::InvalidTimeout,
                                format!("{name} must be a positive, finite number of seconds"),
                            );
                            None
                        }
                    }
                }
                Err(_) => p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!("{name} must be a number of seconds"),
                ),
            },
            "TOOL_SERVER__NAME" => {
                layer.tool_server_name = tool_server_name(&Value::from(value.as_str()), &at, p);
            }
            "PARTIAL_FAILURE" => {
                layer.partial_failure =
                    PartialFailure::from_value(&Value::from(value.trim()), &at, p);
            }
            "REQUIRE_ALLOW_MCP" => layer.require_allow_mcp = env_bool(name, value, &at, p),
            "ALLOW_INLINE_STDIO" => layer.allow_inline_stdio = env_bool(name, value, &at, p),
            "ALLOW_INLINE_ENV_SECRETS" => {
                layer.allow_inline_env_secrets = env_bool(name, value, &at, p);
            }
            "SSRF_GUARD" => layer.ssrf_guard = env_bool(name, value, &at, p),
            "POLICY" => match crate::json::parse(value, &at, p) {
                Ok(v) => layer.policy = Some(crate::parse::parse_policy(&v, &at, p)),
                Err(e) => p.push_caused(
                    &at,
                    ProblemKind::Syntax,
                    format!("{name} is not valid JSON"),
                    e,
                ),
            },
            "MODEL" => match crate::json::parse(value, &at, p) {
                Ok(v) => layer.model = TableLayer::read(&v, at, None, "model", p),
                Err(e) => p.push_caused(
                    &at,
                    ProblemKind::Syntax,
                    format!("{name} is not valid JSON"),
                    e,
                ),
            },
            "SERVE" => match crate::json::parse(value, &at, p) {
                Ok(v) => layer.serve = TableLayer::read(&v, at, None, "serve", p),
                Err(e) => p.push_caused(
                    &at,
                    ProblemKind::Syntax,
                    format!("{name} is not valid JSON"),
                    e,
                ),
            },
            _ => {
                let known: Vec<String> = KEYS.iter().map(|k| format!("{ENV_PREFIX}{k}")).collect();
                p.push(
                    &at,
                    ProblemKind::UnknownField,
                    format!(
                        "unknown variable {name}{}",
                        did_you_mean(name, known.iter().map(String::as_str))
                    ),
                );
            }
        }
    }
    layer
}

fn env_bool(name: &str, value: &str, at: &JsonPath, p: &mut Problems) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => {
            p.push(
                at,
                ProblemKind::InvalidValue,
                format!("{name} must be true or false"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn defaults_without_variables() {
        let config = Config::from_env_vars([("PATH", "/bin")]).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.connect_timeout, Duration::from_secs(30));
        assert_eq!(config.tool_server.name, "mcp-agent");
        assert!(config.inline.ssrf_guard);
    }

    #[test]
    fn every_variable_is_read() {
        let config = Config::from_env_vars([
            (
                "MCP_AGENT__SERVERS",
                r#"[{"name": "a", "url": "https://a.example/mcp"}]"#,
            ),
            ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "2.5"),
            ("MCP_AGENT__TOOL_SERVER__NAME", "agent-x"),
            ("MCP_AGENT__PARTIAL_FAILURE", "skip_unavailable"),
            ("MCP_AGENT__REQUIRE_ALLOW_MCP", "yes"),
            ("MCP_AGENT__ALLOW_INLINE_STDIO", "1"),
            ("MCP_AGENT__ALLOW_INLINE_ENV_SECRETS", "TRUE"),
            ("MCP_AGENT__SSRF_GUARD", "false"),
        ])
        .unwrap();
        assert_eq!(config.servers.len(), 1);
        assert_eq!(config.connect_timeout, Duration::from_millis(2500));
        assert_eq!(config.tool_server.name, "agent-x");
        assert_eq!(config.partial_failure, PartialFailure::SkipUnavailable);
        assert!(config.require_allow_mcp);
        assert!(config.inline.allow_stdio && config.inline.allow_env_secrets);
        assert!(!config.inline.ssrf_guard);
    }

    #[test]
    fn empty_values_count_as_unset() {
        let config =
            Config::from_env_vars([("MCP_AGENT__SERVERS", ""), ("MCP_AGENT__SSRF_GUARD", " ")]);
        assert_eq!(config.unwrap(), Config::default());
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = Config::from_env_vars([
            ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "soon"),
            ("MCP_AGENT__SERVER", "[]"),
            ("MCP_AGENT__SSRF_GUARD", "maybe"),
            ("MCP_AGENT__PARTIAL_FAILURE", "skip"),
        ])
        .unwrap_err();
        let got: Vec<_> = err
            .problems()
            .iter()
            .map(|p| (p.kind, p.path.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    ProblemKind::InvalidValue,
                    "MCP_AGENT__CONNECT_TIMEOUT_SECONDS"
                ),
                (ProblemKind::InvalidValue, "MCP_AGENT__PARTIAL_FAILURE"),
                (ProblemKind::UnknownField, "MCP_AGENT__SERVER"),
                (ProblemKind::InvalidValue, "MCP_AGENT__SSRF_GUARD"),
            ]
        );
        assert!(
            err.to_string()
                .contains("did you mean `MCP_AGENT__SERVERS`?")
        );
        for timeout in ["0", "-1", "inf", "NaN"] {
            let err = Config::from_env_vars([("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", timeout)])
                .unwrap_err();
            assert_eq!(
                err.problems()[0].kind,
                ProblemKind::InvalidTimeout,
                "{timeout}"
            );
        }
    }
}
