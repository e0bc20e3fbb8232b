//! The `[serve]` table: how `mcp-agent serve` offers the configured servers to downstream MCP
//! clients (a governed gateway over stdio or streamable HTTP). Pure data, validated here; the
//! bearer token itself is never in the configuration, only the name of the variable that
//! holds it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::parse::{as_str, expect_object, field, parse_timeout, reject_unknown, shown, type_name};
use crate::path::{JsonPath, Problems};
use crate::{ConfigError, Problem, ProblemKind, Secret};

mod jwt;

pub use jwt::{JWT_ALGORITHMS, ServeJwt};

/// The keys of the `[serve]` table.
const SERVE_FIELDS: &[&str] = &[
    "http",
    "expose",
    "tool_names",
    "allowed_origins",
    "public_url",
    "allowed_hosts",
    "auth",
    "max_body_bytes",
    "max_sessions",
    "max_calls_per_session",
    "rate_limit",
    "auth_failure_rate_limit",
    "max_connections",
    "max_connections_per_address",
    "header_read_timeout_seconds",
    "body_read_timeout_seconds",
    "idle_timeout_seconds",
    "approve",
    "history",
];

/// The keys of `rate_limit`.
const RATE_FIELDS: &[&str] = &["per_second", "burst"];

/// The smallest request body bound (a JSON-RPC `initialize` must fit).
pub const MIN_SERVE_BODY_BYTES: u64 = 1024;

/// What downstream clients of the gateway see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ServeExposure {
    /// `mcp_search_tools` and `mcp_call_tool` (and `mcp_read_output`): the lazy surface.
    #[default]
    Lazy,
    /// Every upstream tool, as `server__tool`.
    Eager,
}

impl ServeExposure {
    /// Parses `lazy` or `eager`.
    ///
    /// ```
    /// use mcp_config::ServeExposure;
    /// assert_eq!(ServeExposure::parse("eager"), Some(ServeExposure::Eager));
    /// assert_eq!(ServeExposure::parse("all"), None);
    /// ```
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "lazy" => Some(Self::Lazy),
            "eager" => Some(Self::Eager),
            _ => None,
        }
    }
}

/// The names under which the gateway lists upstream tools first-class (every tool in eager
/// exposure; pinned and promoted ones in lazy exposure).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ServeToolNames {
    /// `server__tool`, whatever the servers call their tools (the default).
    #[default]
    Prefixed,
    /// Each tool's own name, as its server lists it, when no other tool of the session has it;
    /// a name two servers share (or one of the gateway's own tools has) stays `server__tool`.
    /// A gateway over one server then lists exactly that server's tools.
    Upstream,
}

impl ServeToolNames {
    /// Parses `prefixed` or `upstream`.
    ///
    /// ```
    /// use mcp_config::ServeToolNames;
    /// assert_eq!(ServeToolNames::parse("upstream"), Some(ServeToolNames::Upstream));
    /// assert_eq!(ServeToolNames::parse("bare"), None);
    /// ```
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "prefixed" => Some(Self::Prefixed),
            "upstream" => Some(Self::Upstream),
            _ => None,
        }
    }
}

/// What happens to a call that `[policy]` says needs approval: the gateway has nobody to ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ServeApproval {
    /// Refused, with a message saying so (the default).
    #[default]
    Deny,
    /// Run, as if approved.
    Allow,
}

/// Inbound authentication of the HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum ServeAuth {
    /// `auth = { bearer_token_env = "VAR" }`: clients send `Authorization: Bearer <token>`,
    /// the token being the value of `VAR` when the gateway starts.
    BearerTokenEnv(String),
    /// `auth = { jwt = { issuer = "...", jwks_url = "..." } }`: clients send a JWT of that
    /// issuer, signed by a key of its JWKS.
    Jwt(ServeJwt),
}

/// The shortest bearer token `[serve] auth.bearer_token_env` may hold, in bytes.
pub const MIN_SERVE_TOKEN_BYTES: usize = 16;

impl ServeAuth {
    /// The bearer token from the process environment; see [`token_from`](Self::token_from).
    pub fn token(&self) -> Result<Secret, ConfigError> {
        self.token_from(|name| std::env::var(name).ok())
    }

    /// The bearer token read through `lookup` from the named variable. Unset, empty or blank
    /// is an error naming the variable (never an endpoint open to any token), and so is a
    /// token shorter than [`MIN_SERVE_TOKEN_BYTES`].
    ///
    /// ```
    /// use mcp_config::ServeAuth;
    /// let auth = ServeAuth::BearerTokenEnv("GATEWAY_TOKEN".into());
    /// let token = auth.token_from(|_| Some("t-0123456789abcdef".into())).unwrap();
    /// assert_eq!(token.expose(), "t-0123456789abcdef");
    /// assert!(auth.token_from(|_| Some("t-1".into())).unwrap_err().to_string().contains("3 bytes"));
    /// assert!(auth.token_from(|_| None).unwrap_err().to_string().contains("GATEWAY_TOKEN"));
    /// ```
    pub fn token_from(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Secret, ConfigError> {
        let Self::BearerTokenEnv(name) = self else {
            return Err(ConfigError::invalid(vec![Problem::new(
                "serve.auth",
                ProblemKind::InvalidValue,
                "JWT authentication has no bearer token variable",
            )]));
        };
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            Some(value) if value.trim().len() < MIN_SERVE_TOKEN_BYTES => {
                Err(ConfigError::invalid(vec![Problem::new(
                    "serve.auth.bearer_token_env",
                    ProblemKind::InvalidValue,
                    format!(
                        "the bearer token in {} has {} bytes, fewer than the {MIN_SERVE_TOKEN_BYTES} required (a short token can be guessed; use e.g. `openssl rand -hex 32`)",
                        shown(name),
                        value.trim().len()
                    ),
                )]))
            }
            Some(value) => Ok(Secret::new(value.trim())),
            None => Err(ConfigError::invalid(vec![Problem::new(
                "serve.auth.bearer_token_env",
                ProblemKind::UndefinedVariable,
                format!(
                    "the bearer token variable {} is not set or empty",
                    shown(name)
                ),
            )])),
        }
    }
}

/// A token bucket per client address: `per_second` requests refill each second, up to
/// `burst` at once. A request finding the bucket empty is answered `429 Too Many Requests`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RateLimit {
    /// Requests per second, sustained (positive).
    pub per_second: f64,
    /// Requests at once after an idle spell (at least 1). Default: `per_second` rounded up.
    pub burst: u32,
}

impl RateLimit {
    /// `per_second` requests a second, in bursts of up to `burst`.
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self { per_second, burst }
    }
}

/// The operator's `[serve]` table. Every key is optional; `mcp-agent serve`'s flags win over
/// it.
///
/// | key | meaning | default |
/// | --- | --- | --- |
/// | `http` | address to serve streamable HTTP on (`"127.0.0.1:8080"`) | stdio |
/// | `expose` | `lazy` or `eager` | `lazy` |
/// | `tool_names` | `prefixed` (`server__tool`) or `upstream` (each tool's own name where no other tool has it) | `prefixed` |
/// | `allowed_origins` | browser origins allowed besides the endpoint's own | `[]` |
/// | `public_url` | the URL clients reach the endpoint by (behind a proxy, or on `0.0.0.0`) | none |
/// | `allowed_hosts` | `Host` values accepted besides the bound address and the public URL's | `[]` |
/// | `auth` | `{ bearer_token_env = "VAR" }` or `{ jwt = { issuer, jwks_url, audience, algorithms, leeway_s } }` | none |
/// | `max_body_bytes` | largest request body (at least 1024) | 4 MiB |
/// | `max_sessions` | downstream sessions open at once | 64 |
/// | `max_calls_per_session` | calls in flight per downstream session | 16 |
/// | `rate_limit` | `{ per_second = 10, burst = 20 }`, per client address | none |
/// | `auth_failure_rate_limit` | requests failing authentication, per client address; beyond, 429 before any check | `{ per_second = 1, burst = 10 }` |
/// | `max_connections` | HTTP connections open at once; one more is answered 503 and closed | 512 |
/// | `max_connections_per_address` | HTTP connections open at once from one client address | none |
/// | `header_read_timeout_seconds` | a request head (and a kept-alive HTTP/1 connection's idle wait) | 30 |
/// | `body_read_timeout_seconds` | a request body, whole (beyond: 408) | 30 |
/// | `idle_timeout_seconds` | a connection with no request in progress is closed | 60 |
/// | `approve` | `deny` or `allow`: calls `[policy]` says need approval | `deny` |
/// | `history` | directory recording each session's run (one subdirectory each) | none |
///
/// ```
/// use mcp_config::{Config, FileFormat, ServeApproval, ServeExposure};
///
/// let config = Config::parse(
///     r#"
/// [serve]
/// http = "127.0.0.1:8080"
/// expose = "eager"
/// auth = { bearer_token_env = "GATEWAY_TOKEN" }
/// rate_limit = { per_second = 5 }
/// "#,
///     FileFormat::Toml,
///     std::iter::empty::<(&str, &str)>(),
/// )?;
/// let serve = &config.serve;
/// assert_eq!(serve.http, Some("127.0.0.1:8080".parse().unwrap()));
/// assert_eq!(serve.expose, Some(ServeExposure::Eager));
/// assert_eq!(serve.approve, ServeApproval::Deny);
/// assert_eq!(serve.rate_limit.unwrap().burst, 5);
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Serve streamable HTTP on this address (stdio when unset and no flag says otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<SocketAddr>,
    /// Lazy or eager exposure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expose: Option<ServeExposure>,
    /// How first-class upstream tools are named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_names: Option<ServeToolNames>,
    /// Browser origins allowed besides the endpoint's own (`scheme://host[:port]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// The URL clients reach the endpoint by (`http(s)://host[:port]/path`): its host is an
    /// accepted `Host`, and it names the resource in the protected-resource metadata. Binding
    /// an unspecified address (`0.0.0.0`, `::`) needs it or [`allowed_hosts`](Self::allowed_hosts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// `Host` header values accepted besides the bound address and the public URL's host
    /// (DNS-rebinding protection).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Inbound authentication.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<ServeAuth>,
    /// The largest request body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Downstream sessions open at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<usize>,
    /// Calls in flight per downstream session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_calls_per_session: Option<usize>,
    /// Requests per second per client address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Requests failing authentication per second per client address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_failure_rate_limit: Option<RateLimit>,
    /// HTTP connections open at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// HTTP connections open at once from one client address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections_per_address: Option<usize>,
    /// How long a request head may take.
    #[serde(
        rename = "header_read_timeout_seconds",
        skip_serializing_if = "Option::is_none",
        serialize_with = "secs"
    )]
    pub header_read_timeout: Option<Duration>,
    /// How long a request body may take, whole.
    #[serde(
        rename = "body_read_timeout_seconds",
        skip_serializing_if = "Option::is_none",
        serialize_with = "secs"
    )]
    pub body_read_timeout: Option<Duration>,
    /// How long a connection may stay with no request in progress.
    #[serde(
        rename = "idle_timeout_seconds",
        skip_serializing_if = "Option::is_none",
        serialize_with = "secs"
    )]
    pub idle_timeout: Option<Duration>,
    /// Calls that need approval: denied or allowed.
    pub approve: ServeApproval,
    /// Where each session's run is recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<PathBuf>,
}

/// What one source's `[serve]` sets; a later source overrides only the keys it sets.
#[derive(Debug, Default)]
pub(crate) struct ServeLayer {
    http: Option<SocketAddr>,
    expose: Option<ServeExposure>,
    tool_names: Option<ServeToolNames>,
    allowed_origins: Option<Vec<String>>,
    public_url: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    auth: Option<ServeAuth>,
    max_body_bytes: Option<u64>,
    max_sessions: Option<usize>,
    max_calls_per_session: Option<usize>,
    rate_limit: Option<RateLimit>,
    auth_failure_rate_limit: Option<RateLimit>,
    max_connections: Option<usize>,
    max_connections_per_address: Option<usize>,
    header_read_timeout: Option<Duration>,
    body_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    approve: Option<ServeApproval>,
    history: Option<PathBuf>,
}

impl ServeLayer {
    /// Applies the keys this layer sets to `serve`.
    pub(crate) fn apply(self, serve: &mut ServeConfig) {
        if let Some(v) = self.http {
            serve.http = Some(v);
        }
        if let Some(v) = self.expose {
            serve.expose = Some(v);
        }
        if let Some(v) = self.tool_names {
            serve.tool_names = Some(v);
        }
        if let Some(v) = self.allowed_origins {
            serve.allowed_origins = v;
        }
        if let Some(v) = self.public_url {
            serve.public_url = Some(v);
        }
        if let Some(v) = self.allowed_hosts {
            serve.allowed_hosts = v;
        }
        if let Some(v) = self.auth {
            serve.auth = Some(v);
        }
        if let Some(v) = self.max_body_bytes {
            serve.max_body_bytes = Some(v);
        }
        if let Some(v) = self.max_sessions {
            serve.max_sessions = Some(v);
        }
        if let Some(v) = self.max_calls_per_session {
            serve.max_calls_per_session = Some(v);
        }
        if let Some(v) = self.rate_limit {
            serve.rate_limit = Some(v);
        }
        if let Some(v) = self.auth_failure_rate_limit {
            serve.auth_failure_rate_limit = Some(v);
        }
        if let Some(v) = self.max_connections {
            serve.max_connections = Some(v);
        }
        if let Some(v) = self.max_connections_per_address {
            serve.max_connections_per_address = Some(v);
        }
        if let Some(v) = self.header_read_timeout {
            serve.header_read_timeout = Some(v);
        }
        if let Some(v) = self.body_read_timeout {
            serve.body_read_timeout = Some(v);
        }
        if let Some(v) = self.idle_timeout {
            serve.idle_timeout = Some(v);
        }
        if let Some(v) = self.approve {
            serve.approve = v;
        }
        if let Some(v) = self.history {
            serve.history = Some(v);
        }
    }
}

/// Reads a `[serve]` table at `path`.
pub(crate) fn parse_serve(value: &Value, path: &JsonPath, p: &mut Problems) -> ServeLayer {
    let mut layer = ServeLayer::default();
    let Some(obj) = expect_object(value, path, "`serve`", p) else {
        return layer;
    };
    reject_unknown(obj, SERVE_FIELDS, path, p);
    if let Some(v) = field(obj, "http") {
        let at = path.key("http");
        if let Some(s) = as_str(v, &at, p) {
            match s.trim().parse::<SocketAddr>() {
                Ok(addr) => layer.http = Some(addr),
                Err(_) => p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!(
                        "{} is not an address: write `IP:PORT`, e.g. `127.0.0.1:8080`",
                        shown(s)
                    ),
                ),
            }
        }
    }
    layer.expose = choice(
        obj,
        "expose",
        path,
        p,
        ServeExposure::parse,
        "exposure",
        "`lazy` or `eager`",
    );
    layer.tool_names = choice(
        obj,
        "tool_names",
        path,
        p,
        ServeToolNames::parse,
        "tool names",
        "`prefixed` or `upstream`",
    );
    if let Some(v) = field(obj, "allowed_origins") {
        layer.allowed_origins = origins(v, &path.key("allowed_origins"), p);
    }
    if let Some(v) = field(obj, "public_url") {
        let at = path.key("public_url");
        if let Some(s) = as_str(v, &at, p) {
            let ok = url::Url::parse(s.trim()).ok().is_some_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.username().is_empty()
                    && u.password().is_none()
            });
            if ok {
                layer.public_url = Some(s.trim().to_owned());
            } else {
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!(
                        "{} is no public URL: write `http(s)://host[:port]/path`, without credentials",
                        shown(s)
                    ),
                );
            }
        }
    }
    if let Some(v) = field(obj, "allowed_hosts") {
        layer.allowed_hosts = hosts(v, &path.key("allowed_hosts"), p);
    }
    if let Some(v) = field(obj, "auth") {
        layer.auth = auth(v, &path.key("auth"), p);
    }
    if let Some(v) = field(obj, "max_body_bytes") {
        layer.max_body_bytes = integer(v, &path.key("max_body_bytes"), MIN_SERVE_BODY_BYTES, p);
    }
    let count = |key: &str, p: &mut Problems| {
        field(obj, key)
            .and_then(|v| integer(v, &path.key(key), 1, p))
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    layer.max_sessions = count("max_sessions", p);
    layer.max_calls_per_session = count("max_calls_per_session", p);
    if let Some(v) = field(obj, "rate_limit") {
        layer.rate_limit = rate_limit(v, &path.key("rate_limit"), p);
    }
    if let Some(v) = field(obj, "auth_failure_rate_limit") {
        layer.auth_failure_rate_limit = rate_limit(v, &path.key("auth_failure_rate_limit"), p);
    }
    layer.max_connections = count("max_connections", p);
    layer.max_connections_per_address = count("max_connections_per_address", p);
    let timeout = |key: &str, p: &mut Problems| {
        field(obj, key).and_then(|v| parse_timeout(v, &path.key(key), p))
    };
    layer.header_read_timeout = timeout("header_read_timeout_seconds", p);
    layer.body_read_timeout = timeout("body_read_timeout_seconds", p);
    layer.idle_timeout = timeout("idle_timeout_seconds", p);
    let approval = |word: &str| match word {
        "deny" => Some(ServeApproval::Deny),
        "allow" => Some(ServeApproval::Allow),
        _ => None,
    };
    layer.approve = choice(
        obj,
        "approve",
        path,
        p,
        approval,
        "approval",
        "`deny` or `allow`",
    );
    if let Some(v) = field(obj, "history") {
        let at = path.key("history");
        if let Some(s) = as_str(v, &at, p) {
            if s.trim().is_empty() {
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    "the history directory is empty",
                );
            } else {
                layer.history = Some(PathBuf::from(s));
            }
        }
    }
    layer
}

/// The word at `key` as one of a fixed set (`parse`), or a problem naming `what` it is and the
/// `words` allowed.
fn choice<T>(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    path: &JsonPath,
    p: &mut Problems,
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
    words: &str,
) -> Option<T> {
    let at = path.key(key);
    let word = as_str(field(obj, key)?, &at, p)?;
    let value = parse(word);
    if value.is_none() {
        p.push(
            &at,
            ProblemKind::InvalidValue,
            format!("unknown {what} {}: use {words}", shown(word)),
        );
    }
    value
}

/// A duration as seconds.
fn secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// A whole number of at least `min`.
fn integer(value: &Value, path: &JsonPath, min: u64, p: &mut Problems) -> Option<u64> {
    match value.as_u64() {
        Some(n) if n >= min => Some(n),
        Some(_) => {
            p.push(
                path,
                ProblemKind::InvalidValue,
                format!("must be at least {min}"),
            );
            None
        }
        None => {
            p.push(
                path,
                ProblemKind::WrongType,
                format!("must be a whole number, found {}", type_name(value)),
            );
            None
        }
    }
}

/// `Host` header values: a name or address, with an optional port, nothing else.
fn hosts(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<String>> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            ProblemKind::WrongType,
            format!("must be an array of host names, found {}", type_name(value)),
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        let Some(s) = as_str(item, &at, p) else {
            continue;
        };
        let ok = !s.is_empty()
            && s.len() <= 261
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
        if ok {
            out.push(s.to_ascii_lowercase());
        } else {
            p.push(
                &at,
                ProblemKind::InvalidValue,
                format!("{} is no host: write `name` or `name:port`", shown(s)),
            );
        }
    }
    Some(out)
}

fn origins(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<String>> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            ProblemKind::WrongType,
            format!("must be an array of origins, found {}", type_name(value)),
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        let Some(s) = as_str(item, &at, p) else {
            continue;
        };
        let ok = s == "null"
            || url::Url::parse(s)
                .ok()
                .is_some_and(|u| u.origin().is_tuple() && matches!(u.scheme(), "http" | "https"));
        if ok {
            out.push(s.to_owned());
        } else {
            p.push(
                &at,
                ProblemKind::InvalidValue,
                format!("{} is no origin: write `scheme://host[:port]`", shown(s)),
            );
        }
    }
    Some(out)
}

fn auth(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<ServeAuth> {
    let obj = expect_object(value, path, "`auth`", p)?;
    let mut known = vec!["bearer_token_env", "jwt"];
    for secret in ["bearer_token", "token"] {
        if obj.contains_key(secret) {
            known.push(secret);
            p.push(
                &path.key(secret),
                ProblemKind::UnknownField,
                "the token is not written in the configuration: put it in an environment \
                 variable and name that variable in `bearer_token_env`",
            );
        }
    }
    reject_unknown(obj, &known, path, p);
    if let Some(v) = field(obj, "jwt") {
        if obj.contains_key("bearer_token_env") {
            p.push(
                path,
                ProblemKind::InvalidValue,
                "set `bearer_token_env` or `jwt`, not both",
            );
        }
        return jwt::jwt(v, &path.key("jwt"), p).map(ServeAuth::Jwt);
    }
    let v = field(obj, "bearer_token_env")?;
    let at = path.key("bearer_token_env");
    let name = as_str(v, &at, p)?.trim();
    if name.is_empty() || name.contains(['=', '\0', ' ']) {
        p.push(
            &at,
            ProblemKind::InvalidValue,
            format!("{} is not a valid environment variable name", shown(name)),
        );
        return None;
    }
    Some(ServeAuth::BearerTokenEnv(name.to_owned()))
}

fn rate_limit(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<RateLimit> {
    let obj = expect_object(
        value,
        path,
        "`rate_limit` (`{ per_second = N, burst = M }`)",
        p,
    )?;
    reject_unknown(obj, RATE_FIELDS, path, p);
    let at = path.key("per_second");
    let Some(v) = field(obj, "per_second") else {
        p.push(&at, ProblemKind::MissingField, "`per_second` is required");
        return None;
    };
    let per_second = match v.as_f64() {
        Some(n) if n.is_finite() && n > 0.0 => n,
        Some(_) => {
            p.push(&at, ProblemKind::InvalidValue, "must be positive");
            return None;
        }
        None => {
            p.push(
                &at,
                ProblemKind::WrongType,
                format!("must be a number, found {}", type_name(v)),
            );
            return None;
        }
    };
    let burst = match field(obj, "burst") {
        Some(v) => integer(v, &path.key("burst"), 1, p)?,
        None => per_second.ceil() as u64,
    };
    Some(RateLimit::new(
        per_second,
        u32::try_from(burst).unwrap_or(u32::MAX),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{Config, FileFormat, ProblemKind, ServeApproval, ServeAuth, ServeToolNames};

    fn toml(text: &str) -> Result<Config, crate::ConfigError> {
        Config::parse(text, FileFormat::Toml, std::iter::empty::<(&str, &str)>())
    }

    #[test]
    fn a_whole_serve_table_is_read() {
        let config = toml(
            r#"
[serve]
http = "127.0.0.1:9000"
expose = "lazy"
tool_names = "upstream"
allowed_origins = ["http://localhost:5173"]
public_url = "https://gateway.example.com/mcp"
allowed_hosts = ["Gateway.internal:8443"]
auth = { bearer_token_env = "GW_TOKEN" }
max_body_bytes = 2048
max_sessions = 3
max_calls_per_session = 2
rate_limit = { per_second = 0.5, burst = 4 }
auth_failure_rate_limit = { per_second = 2 }
max_connections = 100
max_connections_per_address = 8
header_read_timeout_seconds = 5
body_read_timeout_seconds = 7.5
idle_timeout_seconds = 20
approve = "allow"
history = "/tmp/h"
"#,
        )
        .unwrap();
        let s = &config.serve;
        assert_eq!(s.tool_names, Some(ServeToolNames::Upstream));
        assert_eq!(s.max_sessions, Some(3));
        assert_eq!(s.max_calls_per_session, Some(2));
        assert_eq!(s.max_body_bytes, Some(2048));
        assert_eq!(s.approve, ServeApproval::Allow);
        assert_eq!(s.auth, Some(ServeAuth::BearerTokenEnv("GW_TOKEN".into())));
        assert_eq!(s.rate_limit.unwrap().burst, 4);
        assert_eq!(s.auth_failure_rate_limit.unwrap().burst, 2);
        assert_eq!(s.max_connections, Some(100));
        assert_eq!(s.max_connections_per_address, Some(8));
        assert_eq!(s.header_read_timeout, Some(Duration::from_secs(5)));
        assert_eq!(s.body_read_timeout, Some(Duration::from_millis(7500)));
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(20)));
        assert_eq!(s.allowed_origins, ["http://localhost:5173"]);
        assert_eq!(
            s.public_url.as_deref(),
            Some("https://gateway.example.com/mcp")
        );
        assert_eq!(s.allowed_hosts, ["gateway.internal:8443"]);
        let env = Config::from_env_vars([("MCP_AGENT__SERVE", r#"{"approve": "allow"}"#)]).unwrap();
        assert_eq!(env.serve.approve, ServeApproval::Allow);
    }

    #[test]
    fn every_bad_key_is_named() {
        let err = toml(
            r#"
[serve]
http = "localhost"
expose = "all"
tool_names = "bare"
allowed_origins = ["not an origin"]
public_url = "ftp://user:pw@gateway"
allowed_hosts = ["evil.example/path"]
auth = { jwt = { issuer = "x", jwks_url = "http://auth.example.com/k", algorithms = ["none", "HS256"] }, bearer_token = "tok-never-echoed" }
max_body_bytes = 10
max_sessions = 0
max_calls_per_session = "many"
rate_limit = { burst = 2 }
auth_failure_rate_limit = 5
max_connections = 0
max_connections_per_address = -1
header_read_timeout_seconds = 0
body_read_timeout_seconds = "long"
idle_timeout_seconds = -3
approve = "ask"
colour = 1
"#,
        )
        .unwrap_err();
        let problems: Vec<(ProblemKind, String)> = err
            .problems()
            .iter()
            .map(|p| (p.kind, p.path.clone()))
            .collect();
        for (kind, path) in [
            (ProblemKind::InvalidValue, "serve.http"),
            (ProblemKind::InvalidValue, "serve.expose"),
            (ProblemKind::InvalidValue, "serve.tool_names"),
            (ProblemKind::InvalidValue, "serve.allowed_origins[0]"),
            (ProblemKind::InvalidValue, "serve.public_url"),
            (ProblemKind::InvalidValue, "serve.allowed_hosts[0]"),
            (ProblemKind::InvalidValue, "serve.auth.jwt.jwks_url"),
            (ProblemKind::InvalidValue, "serve.auth.jwt.algorithms[0]"),
            (ProblemKind::InvalidValue, "serve.auth.jwt.algorithms[1]"),
            (ProblemKind::UnknownField, "serve.auth.bearer_token"),
            (ProblemKind::InvalidValue, "serve.max_body_bytes"),
            (ProblemKind::InvalidValue, "serve.max_sessions"),
            (ProblemKind::WrongType, "serve.max_calls_per_session"),
            (ProblemKind::MissingField, "serve.rate_limit.per_second"),
            (ProblemKind::WrongType, "serve.auth_failure_rate_limit"),
            (ProblemKind::InvalidValue, "serve.max_connections"),
            (ProblemKind::WrongType, "serve.max_connections_per_address"),
            (
                ProblemKind::InvalidTimeout,
                "serve.header_read_timeout_seconds",
            ),
            (ProblemKind::WrongType, "serve.body_read_timeout_seconds"),
            (ProblemKind::InvalidTimeout, "serve.idle_timeout_seconds"),
            (ProblemKind::InvalidValue, "serve.approve"),
            (ProblemKind::UnknownField, "serve.colour"),
        ] {
            assert!(
                problems.contains(&(kind, path.to_owned())),
                "{kind:?} {path} not in {problems:?}"
            );
        }
        let text = err.to_string();
        assert!(!text.contains("tok-never-echoed"), "{text}");
        assert!(text.contains("never accepted"), "{text}");
    }
}
