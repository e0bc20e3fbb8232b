//! The operator's configuration: servers plus global settings, merged from the environment and
//! a config file.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::parse::did_you_mean;
use crate::parse::{
    Dialect, PolicyLayer, as_bool, as_str, check_header_credentials, check_name, check_not_blank,
    expect_object, field, is_disabled, parse_http_url, parse_policy, parse_server, parse_timeout,
    reject_unknown,
};
use crate::path::{JsonPath, Problems};
use crate::table::{Table, TableLayer};
use crate::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, InlinePolicy, PolicyConfig, Problem, ProblemKind,
    SecretSource, ServerSpec, SpecOrigin, TransportSpec,
};

/// The name the server direction announces when none is configured.
pub const DEFAULT_TOOL_SERVER_NAME: &str = "mcp-agent";

/// The operator's configuration: the configured servers and the global settings.
///
/// Load it with [`Config::load`] (environment + optional file), [`Config::from_env`],
/// [`Config::from_file`] or [`Config::from_json`]; build it in code with [`Config::new`].
/// Every loader validates everything and reports all problems at once
/// ([`ConfigError::Invalid`]). `Debug` and `Serialize` redact every secret.
///
/// # Schema
///
/// The same keys in a config file (TOML or JSON) and, upper-cased after `MCP_AGENT__` with
/// `__` for nesting, in the environment:
///
/// | key | environment | default |
/// | --- | --- | --- |
/// | `servers` (array of server objects) | `MCP_AGENT__SERVERS` (JSON array) | `[]` |
/// | `mcpServers` (object, files only) | — | `{}` |
/// | `connect_timeout_seconds` | `MCP_AGENT__CONNECT_TIMEOUT_SECONDS` | `30.0` |
/// | `tool_server.name` | `MCP_AGENT__TOOL_SERVER__NAME` | `mcp-agent` |
/// | `partial_failure` (`fail_fast` or `skip_unavailable`) | `MCP_AGENT__PARTIAL_FAILURE` | `fail_fast` |
/// | `require_allow_mcp` | `MCP_AGENT__REQUIRE_ALLOW_MCP` | `false` |
/// | `allow_inline_stdio` | `MCP_AGENT__ALLOW_INLINE_STDIO` | `false` |
/// | `allow_inline_env_secrets` | `MCP_AGENT__ALLOW_INLINE_ENV_SECRETS` | `false` |
/// | `ssrf_guard` | `MCP_AGENT__SSRF_GUARD` | `true` |
/// | `policy` (table, see [`PolicyConfig`]) | `MCP_AGENT__POLICY` (JSON object) | no rules, 64 KiB |
/// | `model` (table, kept raw: see [`Table`]) | `MCP_AGENT__MODEL` (JSON object) | nothing set |
/// | `search` (table, see [`SearchConfig`](crate::SearchConfig)) | files only | lexical search |
/// | `serve` (table, kept raw: see [`Table`]) | `MCP_AGENT__SERVE` (JSON object) | nothing set |
///
/// The `[policy]` table holds `allow`, `deny` and `approve` (arrays of `{ server, tool }`
/// globs over the server's `serverInfo.name` and the tool's name on it), `approve_destructive`
/// and `approve_open_world` (booleans), `max_output_bytes` (an integer, at least 1024) and
/// `max_spill_bytes` (an integer).
/// Each key set by the environment replaces the file's.
///
/// A server object has `name`, `transport` (`stdio` or `streamable_http`; inferred from
/// `command` or `url` when omitted), `command`, `args`, `env`, `cwd`, `inherit_env` (stdio),
/// `url`, `headers`, `auth` {`headers`, `bearer_token`, `bearer_token_env`,
/// `oauth_client_credentials` {`token_url`, `client_id`, `client_secret`, `client_secret_env`,
/// `scope`, `resource` (alias `audience`), `token_endpoint_auth_method`, `allowed_issuers`},
/// `oauth` (a user's login, every key optional: `client_id`, `client_secret`,
/// `client_secret_env`, `client_metadata_url`, `scopes`, `resource`,
/// `token_endpoint_auth_method` (`none`, `client_secret_basic`, `client_secret_post`),
/// `redirect_uri`, `allowed_issuers`), `enterprise` ([`EnterpriseAuth`](crate::EnterpriseAuth):
/// `idp_token_url`, `subject_token_env` or `subject_token_file`, `client_id`,
/// `client_secret_env`, `idp_client_id`, `idp_client_secret_env`, `audience`, `resource`,
/// `scope`, `allowed_issuers`), `workload_identity` ([`WorkloadIdentity`](crate::WorkloadIdentity):
/// `token_file` or `token_env`, `client_id`, `audience`, `scope`, `allowed_issuers`)} (HTTP), `connect_timeout_seconds`, `call_timeout_seconds` (default 60; every timeout
/// is a positive number of seconds, at most a year: [`MAX_TIMEOUT_SECS`](crate::read::MAX_TIMEOUT_SECS)) and `tools`
/// {`allow`, `deny`, `pinned`}, and `shared` (default `false`: the runs of one client reuse one
/// pooled session of the server; caller-supplied servers never do, see [`ServerSpec::shared`]),
/// `roots`, and `instructions` (default `true`: the server's instructions go into a run's system
/// prompt, see [`ServerSpec::instructions`]). Unknown keys are errors, and so is a key given twice.
///
/// Inline credentials must say something: a `bearer_token`, `client_secret` or `auth.headers`
/// value, or an `Authorization` header, that is empty, only whitespace or a bare scheme
/// (`Bearer `) is an error naming the server and the field.
///
/// # Precedence
///
/// [`Config::load`] reads the file first, then the environment: settings set in both take the
/// environment's value; servers from both are kept (file first), and a server name defined
/// twice, in one source or across them, is an error naming it.
///
/// ```
/// use std::time::Duration;
/// use mcp_config::{Config, PartialFailure};
///
/// let config = Config::from_env_vars([
///     ("MCP_AGENT__SERVERS", r#"[{"name": "weather", "command": "weather-mcp-server"}]"#),
///     ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "5"),
///     ("MCP_AGENT__TOOL_SERVER__NAME", "my-agent"),
///     ("HOME", "/home/me"), // not ours: ignored
/// ])?;
/// assert_eq!(config.servers[0].name, "weather");
/// assert_eq!(config.connect_timeout, Duration::from_secs(5));
/// assert_eq!(config.tool_server.name, "my-agent");
/// assert_eq!(config.partial_failure, PartialFailure::FailFast);
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Config {
    /// The configured servers, validated and uniquely named.
    #[serde(serialize_with = "redacted_servers")]
    pub servers: Vec<ServerSpec>,
    /// The connect timeout of servers that set none.
    #[serde(rename = "connect_timeout_seconds", serialize_with = "secs")]
    pub connect_timeout: Duration,
    /// The server direction's settings.
    pub tool_server: ToolServerConfig,
    /// What a run does when a server cannot be reached; a run may override it.
    pub partial_failure: PartialFailure,
    /// Attach MCP servers only to runs whose metadata sets `"allow_mcp": true`.
    pub require_allow_mcp: bool,
    /// What caller-supplied (inline) specs may do.
    #[serde(flatten)]
    pub inline: InlinePolicy,
    /// The `[policy]` table: identity rules, approval rules, output bound.
    pub policy: PolicyConfig,
    /// The `[model]` table, kept raw for the application (the CLI: the endpoint an agent run
    /// asks); not serialized, since its values may be secrets.
    #[serde(skip)]
    pub model: Table,
    /// The `[search]` table: hybrid tool search (lexical when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<crate::SearchConfig>,
    /// The `[serve]` table, kept raw for the application (the CLI: how `mcp-agent serve`
    /// offers the servers to MCP clients); not serialized.
    #[serde(skip)]
    pub serve: Table,
}

/// The specs, each with the values `${VAR}` put into it ([`ServerSpec::expanded`]) redacted.
fn redacted_servers<S: serde::Serializer>(servers: &[ServerSpec], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::{Error as _, SerializeSeq};
    let mut seq = s.serialize_seq(Some(servers.len()))?;
    for spec in servers {
        if spec.expanded.is_empty() {
            seq.serialize_element(spec)?;
            continue;
        }
        let mut value = serde_json::to_value(spec).map_err(S::Error::custom)?;
        crate::Redactor::new()
            .with_secrets(&spec.expanded)
            .scrub_json(&mut value);
        seq.serialize_element(&value)?;
    }
    seq.end()
}

impl Default for Config {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            tool_server: ToolServerConfig::default(),
            partial_failure: PartialFailure::default(),
            require_allow_mcp: false,
            inline: InlinePolicy::default(),
            policy: PolicyConfig::default(),
            model: Table::default(),
            search: None,
            serve: Table::default(),
        }
    }
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Config {
    /// A configuration of `servers` with default settings, after checking the servers as the
    /// loaders would ([`validate_specs`]).
    ///
    /// ```
    /// use mcp_config::{Config, ServerSpec, StdioSpec, TransportSpec};
    ///
    /// let spec = ServerSpec::new("git", TransportSpec::Stdio(StdioSpec::new("git-mcp", ["--ro"])));
    /// let config = Config::new(vec![spec.clone(), spec]);
    /// assert!(config.is_err(), "duplicate names are refused");
    /// ```
    pub fn new(servers: Vec<ServerSpec>) -> Result<Self, ConfigError> {
        validate_specs(&servers)?;
        Ok(Self {
            servers,
            ..Self::default()
        })
    }

    /// Parses a configuration document (the schema of a config file) from JSON, without
    /// `${VAR}` expansion and without reading the environment.
    ///
    /// ```
    /// use mcp_config::{Config, ProblemKind};
    /// use serde_json::json;
    ///
    /// let err = Config::from_json(&json!({"servers": [{"name": "git", "comand": "git-mcp"}]}))
    ///     .unwrap_err();
    /// let kinds: Vec<_> = err.problems().iter().map(|p| (p.kind, p.path.as_str())).collect();
    /// assert!(kinds.contains(&(ProblemKind::UnknownField, "servers[0].comand")));
    /// assert!(err.to_string().contains("did you mean `command`?"));
    /// ```
    pub fn from_json(document: &Value) -> Result<Self, ConfigError> {
        let mut p = Problems::new();
        let layer = Layer::from_document(document, None, &mut p);
        merge(vec![layer], p)
    }

    /// The configured server called `name`.
    pub fn server(&self, name: &str) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// Sets the default connect timeout.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the partial-failure policy.
    #[must_use]
    pub fn with_partial_failure(mut self, policy: PartialFailure) -> Self {
        self.partial_failure = policy;
        self
    }

    /// Sets what inline specs may do.
    #[must_use]
    pub fn with_inline_policy(mut self, policy: InlinePolicy) -> Self {
        self.inline = policy;
        self
    }

    /// Requires runs to opt in with `"allow_mcp": true`.
    #[must_use]
    pub fn with_require_allow_mcp(mut self, require: bool) -> Self {
        self.require_allow_mcp = require;
        self
    }

    /// Sets the `[policy]` table.
    ///
    /// ```
    /// use agent_core::{IdentityRules, Rule};
    /// use mcp_config::{Config, PolicyConfig};
    ///
    /// let config = Config::default().with_policy(
    ///     PolicyConfig::default().with_identity(IdentityRules::default().deny(Rule::new("*", "rm"))),
    /// );
    /// assert_eq!(config.policy.identity.deny.len(), 1);
    /// ```
    #[must_use]
    pub fn with_policy(mut self, policy: PolicyConfig) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the server direction's name.
    #[must_use]
    pub fn with_tool_server_name(mut self, name: impl Into<String>) -> Self {
        self.tool_server.name = name.into();
        self
    }
}

/// The server direction's settings (exposing the agent's tools as an MCP server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ToolServerConfig {
    /// The name announced in `initialize` (`serverInfo.name`). Default `mcp-agent`.
    pub name: String,
}

impl Default for ToolServerConfig {
    fn default() -> Self {
        Self {
            name: DEFAULT_TOOL_SERVER_NAME.to_owned(),
        }
    }
}

/// What a run does when one of its servers cannot be connected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PartialFailure {
    /// The run fails (default).
    #[default]
    FailFast,
    /// The run goes on without it; the skipped server is reported with its cause.
    SkipUnavailable,
}

impl PartialFailure {
    const WORDS: [&'static str; 2] = ["fail_fast", "skip_unavailable"];

    /// Parses `fail_fast` or `skip_unavailable`.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "fail_fast" => Some(Self::FailFast),
            "skip_unavailable" => Some(Self::SkipUnavailable),
            _ => None,
        }
    }

    pub(crate) fn from_value(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Self> {
        let word = as_str(value, path, p)?;
        let parsed = Self::parse(word);
        if parsed.is_none() {
            p.push(
                path,
                ProblemKind::InvalidValue,
                format!(
                    "unknown partial-failure policy: use `fail_fast` or `skip_unavailable`{}",
                    did_you_mean(word, Self::WORDS)
                ),
            );
        }
        parsed
    }
}

/// Checks specs built in code (for instance by a custom [`ServerResolver`](crate::ServerResolver))
/// as the loaders check parsed ones: names valid and unique, a non-empty command, an
/// http(s) URL without credentials, non-zero timeouts, no blank inline credential (bearer
/// token, client secret, `auth.headers` value, `Authorization` header). Paths are
/// `servers[i].…`.
///
/// ```
/// use mcp_config::{HttpSpec, ProblemKind, ServerSpec, TransportSpec, validate_specs};
///
/// let url = "ftp://files.example.com/".parse().unwrap();
/// let spec = ServerSpec::new("files", TransportSpec::StreamableHttp(HttpSpec::new(url)));
/// let err = validate_specs(&[spec]).unwrap_err();
/// assert_eq!(err.problems()[0].kind, ProblemKind::UnsupportedScheme);
/// assert_eq!(err.problems()[0].path, "servers[0].url");
/// ```
pub fn validate_specs(specs: &[ServerSpec]) -> Result<(), ConfigError> {
    let mut p = Problems::new();
    let root = JsonPath::root().key("servers");
    for (i, spec) in specs.iter().enumerate() {
        let at = root.index(i);
        check_name(&spec.name, &at.key("name"), &mut p);
        if let Some(first) = specs[..i].iter().position(|s| s.name == spec.name) {
            p.push(
                &at.key("name"),
                ProblemKind::DuplicateName,
                format!(
                    "server `{}` is defined twice (first at {})",
                    spec.name,
                    root.index(first)
                ),
            );
        }
        match &spec.transport {
            TransportSpec::Stdio(stdio) if stdio.command.trim().is_empty() => {
                p.push(
                    &at.key("command"),
                    ProblemKind::InvalidValue,
                    "`command` is empty",
                );
            }
            TransportSpec::StreamableHttp(http) => {
                parse_http_url(http.url.as_str(), &at.key("url"), &mut p);
                let name = Some(spec.name.as_str());
                check_header_credentials(&http.headers, &at.key("headers"), false, name, &mut p);
            }
            _ => {}
        }
        check_blank_credentials(spec, &at.key("auth"), &mut p);
        if spec.call_timeout.is_zero() {
            p.push(
                &at.key("call_timeout_seconds"),
                ProblemKind::InvalidTimeout,
                "a timeout must be positive",
            );
        }
        if spec.connect_timeout.is_some_and(|d| d.is_zero()) {
            p.push(
                &at.key("connect_timeout_seconds"),
                ProblemKind::InvalidTimeout,
                "a timeout must be positive",
            );
        }
    }
    p.finish(())
}

/// The checks of [`check_not_blank`] and [`check_header_credentials`] on a built spec's `auth`.
fn check_blank_credentials(spec: &ServerSpec, at: &JsonPath, p: &mut Problems) {
    let name = Some(spec.name.as_str());
    let auth = &spec.auth;
    check_header_credentials(&auth.headers, &at.key("headers"), true, name, p);
    if let Some(SecretSource::Inline(token)) = &auth.bearer {
        check_not_blank(
            token.expose(),
            "bearer_token",
            &at.key("bearer_token"),
            name,
            p,
        );
    }
    if let Some(oauth) = &auth.oauth_client_credentials
        && let SecretSource::Inline(secret) = &oauth.client_secret
    {
        let at = at.key("oauth_client_credentials").key("client_secret");
        check_not_blank(secret.expose(), "client_secret", &at, name, p);
    }
    if let Some(login) = &auth.oauth
        && let Some(SecretSource::Inline(secret)) = &login.client_secret
    {
        let at = at.key("oauth").key("client_secret");
        check_not_blank(secret.expose(), "client_secret", &at, name, p);
    }
}

/// The top-level keys of a config document.
const DOCUMENT_FIELDS: &[&str] = &[
    "servers",
    "mcpServers",
    "connect_timeout_seconds",
    "tool_server",
    "partial_failure",
    "require_allow_mcp",
    "allow_inline_stdio",
    "allow_inline_env_secrets",
    "ssrf_guard",
    "policy",
    "model",
    "search",
    "serve",
];

/// The settings one source (a file, the environment) gives; unset ones are `None`.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    /// For messages: "the environment" or the file's path.
    pub(crate) label: String,
    pub(crate) file: Option<PathBuf>,
    /// Each server with the path of its name (`servers[0].name`, or the key `mcpServers.git`).
    pub(crate) servers: Vec<(ServerSpec, JsonPath)>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) tool_server_name: Option<String>,
    pub(crate) partial_failure: Option<PartialFailure>,
    pub(crate) require_allow_mcp: Option<bool>,
    pub(crate) allow_inline_stdio: Option<bool>,
    pub(crate) allow_inline_env_secrets: Option<bool>,
    pub(crate) ssrf_guard: Option<bool>,
    pub(crate) policy: Option<PolicyLayer>,
    pub(crate) model: Option<TableLayer>,
    pub(crate) search: Option<crate::SearchConfig>,
    pub(crate) serve: Option<TableLayer>,
}

impl Layer {
    /// Reads a config document (already `${VAR}`-expanded).
    pub(crate) fn from_document(doc: &Value, file: Option<PathBuf>, p: &mut Problems) -> Self {
        let mut layer = Self {
            label: file
                .as_ref()
                .map_or_else(|| "the document".to_owned(), |f| f.display().to_string()),
            file,
            ..Self::default()
        };
        let root = JsonPath::root();
        let Some(obj) = expect_object(doc, &root, "a config document", p) else {
            return layer;
        };
        reject_unknown(obj, DOCUMENT_FIELDS, &root, p);
        if let Some(v) = field(obj, "servers") {
            layer.servers_from_array(v, &root.key("servers"), p);
        }
        if let Some(v) = field(obj, "mcpServers") {
            let at = root.key("mcpServers");
            if let Some(entries) = expect_object(v, &at, "`mcpServers`", p) {
                for (name, entry) in entries {
                    if is_disabled(entry) {
                        continue;
                    }
                    let entry_at = at.key(name);
                    let spec = parse_server(
                        entry,
                        &entry_at,
                        Dialect::McpServers,
                        Some(name),
                        SpecOrigin::Operator,
                        p,
                    );
                    if let Some(spec) = spec {
                        layer.servers.push((spec, entry_at));
                    }
                }
            }
        }
        if let Some(v) = field(obj, "connect_timeout_seconds") {
            layer.connect_timeout = parse_timeout(v, &root.key("connect_timeout_seconds"), p);
        }
        if let Some(v) = field(obj, "tool_server") {
            let at = root.key("tool_server");
            if let Some(ts) = expect_object(v, &at, "`tool_server`", p) {
                reject_unknown(ts, &["name"], &at, p);
                if let Some(v) = field(ts, "name") {
                    layer.tool_server_name = tool_server_name(v, &at.key("name"), p);
                }
            }
        }
        if let Some(v) = field(obj, "partial_failure") {
            layer.partial_failure = PartialFailure::from_value(v, &root.key("partial_failure"), p);
        }
        let flag = |key: &str, p: &mut Problems| {
            field(obj, key).and_then(|v| as_bool(v, &root.key(key), p))
        };
        layer.require_allow_mcp = flag("require_allow_mcp", p);
        layer.allow_inline_stdio = flag("allow_inline_stdio", p);
        layer.allow_inline_env_secrets = flag("allow_inline_env_secrets", p);
        layer.ssrf_guard = flag("ssrf_guard", p);
        if let Some(v) = field(obj, "policy") {
            layer.policy = Some(parse_policy(v, &root.key("policy"), p));
        }
        if let Some(v) = field(obj, "model") {
            let file = layer.file.clone();
            layer.model = TableLayer::read(v, root.key("model"), file, "model", p);
        }
        if let Some(v) = field(obj, "search") {
            let base = layer.file.as_deref().and_then(std::path::Path::parent);
            layer.search = crate::search::parse_search(v, &root.key("search"), base, p);
        }
        if let Some(v) = field(obj, "serve") {
            let file = layer.file.clone();
            layer.serve = TableLayer::read(v, root.key("serve"), file, "serve", p);
        }
        layer
    }

    /// Parses an array of server objects at `path`.
    pub(crate) fn servers_from_array(&mut self, value: &Value, path: &JsonPath, p: &mut Problems) {
        let Some(items) = value.as_array() else {
            p.push(
                path,
                ProblemKind::WrongType,
                format!(
                    "must be an array of servers, found {}",
                    crate::parse::type_name(value)
                ),
            );
            return;
        };
        for (i, item) in items.iter().enumerate() {
            let at = path.index(i);
            if let Some(spec) =
                parse_server(item, &at, Dialect::Native, None, SpecOrigin::Operator, p)
            {
                self.servers.push((spec, at.key("name")));
            }
        }
    }
}

pub(crate) fn tool_server_name(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<String> {
    let s = as_str(value, path, p)?;
    if s.trim().is_empty() {
        p.push(
            path,
            ProblemKind::EmptyName,
            "the tool server name is empty",
        );
        return None;
    }
    Some(s.to_owned())
}

/// Merges layers in order (later settings win; servers accumulate) into a config, or fails
/// with every problem: those already in `p` and duplicate server names.
pub(crate) fn merge(layers: Vec<Layer>, p: Problems) -> Result<Config, ConfigError> {
    merge_reading(layers, p, |_, _| ()).map(|(config, ())| config)
}

/// [`merge`], then `read` (the application reading the raw tables) adding its problems to the
/// rest before any is reported.
pub(crate) fn merge_reading<T>(
    layers: Vec<Layer>,
    mut p: Problems,
    read: impl FnOnce(&Config, &mut Problems) -> T,
) -> Result<(Config, T), ConfigError> {
    let (config, duplicates) = merge_layers(layers);
    for problem in duplicates {
        p.push_problem(problem);
    }
    let read = read(&config, &mut p);
    p.finish((config, read))
}

/// The layers merged, and the problems of server names defined twice.
fn merge_layers(layers: Vec<Layer>) -> (Config, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut config = Config::default();
    let mut seen: Vec<(String, String)> = Vec::new(); // (name, "where")
    for layer in layers {
        for (spec, at) in layer.servers {
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == spec.name) {
                let mut problem = Problem::new(
                    at.as_str(),
                    ProblemKind::DuplicateName,
                    format!("server `{}` is defined twice (first at {first})", spec.name),
                );
                problem.file = layer.file.clone();
                problems.push(problem);
                continue;
            }
            let place = if layer.file.is_some() {
                format!("{at} in {}", layer.label)
            } else {
                at.to_string()
            };
            seen.push((spec.name.clone(), place));
            config.servers.push(spec);
        }
        if let Some(v) = layer.connect_timeout {
            config.connect_timeout = v;
        }
        if let Some(v) = layer.tool_server_name {
            config.tool_server.name = v;
        }
        if let Some(v) = layer.partial_failure {
            config.partial_failure = v;
        }
        if let Some(v) = layer.require_allow_mcp {
            config.require_allow_mcp = v;
        }
        if let Some(v) = layer.allow_inline_stdio {
            config.inline.allow_stdio = v;
        }
        if let Some(v) = layer.allow_inline_env_secrets {
            config.inline.allow_env_secrets = v;
        }
        if let Some(v) = layer.ssrf_guard {
            config.inline.ssrf_guard = v;
        }
        if let Some(policy) = layer.policy {
            policy.apply(&mut config.policy);
        }
        if let Some(model) = layer.model {
            config.model.push(model);
        }
        if let Some(search) = layer.search {
            config.search = Some(search);
        }
        if let Some(serve) = layer.serve {
            config.serve.push(serve);
        }
    }
    (config, problems)
}
