//! Parsing and validating server specs from JSON values, reporting every problem with its path.
//!
//! Every function here pushes what it finds to a [`Problems`] collector and goes on, so one
//! pass reports all problems of a document. No message contains a value that could be a
//! secret: only field names, server names, variable names and enum words.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};
use url::Url;

use crate::path::{JsonPath, Problems, did_you_mean, shown};
use crate::{
    AuthSpec, DEFAULT_CALL_TIMEOUT, HttpSpec, OAuthClientCredentials, ProblemKind, Secret,
    SecretSource, ServerSpec, SpecOrigin, StdioSpec, TokenEndpointAuthMethod, ToolFilter,
    TransportKind, TransportSpec,
};

use ProblemKind::*;

/// The fields of a server object in this crate's own schema (env, config files, run metadata).
pub(crate) const SERVER_FIELDS: &[&str] = &[
    "name",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "inherit_env",
    "url",
    "headers",
    "auth",
    "connect_timeout_seconds",
    "call_timeout_seconds",
    "tools",
];

/// The fields of an `mcpServers` entry: the name is the key; `type` and `disabled` come from
/// the ecosystem format.
const MCP_SERVERS_FIELDS: &[&str] = &[
    "type",
    "disabled",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "inherit_env",
    "url",
    "headers",
    "auth",
    "connect_timeout_seconds",
    "call_timeout_seconds",
    "tools",
];

const STDIO_FIELDS: &[&str] = &["command", "args", "env", "cwd", "inherit_env"];
const HTTP_FIELDS: &[&str] = &["url", "headers", "auth"];
const AUTH_FIELDS: &[&str] = &[
    "headers",
    "bearer_token",
    "bearer_token_env",
    "oauth_client_credentials",
];
const OAUTH_FIELDS: &[&str] = &[
    "token_url",
    "client_id",
    "client_secret",
    "client_secret_env",
    "scope",
    "resource",
    "audience",
    "token_endpoint_auth_method",
    "allowed_issuers",
];
const TOOLS_FIELDS: &[&str] = &["allow", "deny", "pinned"];

/// Which schema a server object follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// This crate's schema: `name` is a field.
    Native,
    /// An entry of the ecosystem's `mcpServers` object: the name is the key.
    McpServers,
}

/// Parses one server object. `None` when it has any problem (all of them are pushed).
pub(crate) fn parse_server(
    value: &Value,
    path: &JsonPath,
    dialect: Dialect,
    key_name: Option<&str>,
    origin: SpecOrigin,
    p: &mut Problems,
) -> Option<ServerSpec> {
    let before = p.len();
    let obj = expect_object(value, path, "a server", p)?;
    let allowed = match dialect {
        Dialect::Native => SERVER_FIELDS,
        Dialect::McpServers => MCP_SERVERS_FIELDS,
    };
    reject_unknown(obj, allowed, path, p);

    let name = match dialect {
        Dialect::Native => {
            let at = path.key("name");
            match field(obj, "name") {
                None => {
                    p.push(&at, MissingField, "a server needs a `name`");
                    None
                }
                Some(v) => as_str(v, &at, p).map(|s| {
                    check_name(s, &at, p);
                    s.to_owned()
                }),
            }
        }
        Dialect::McpServers => key_name.map(|k| {
            check_name(k, path, p);
            k.to_owned()
        }),
    };

    let kind = transport_kind(obj, path, dialect, p);
    if let Some(kind) = kind {
        let foreign = match kind {
            TransportKind::Stdio => HTTP_FIELDS,
            _ => STDIO_FIELDS,
        };
        for f in foreign {
            if field(obj, f).is_some() {
                p.push(
                    &path.key(f),
                    NotApplicable,
                    format!("`{f}` does not apply to a {kind} server"),
                );
            }
        }
    }
    let transport = match kind {
        Some(TransportKind::Stdio) => parse_stdio(obj, path, p).map(TransportSpec::Stdio),
        Some(_) => parse_http(obj, path, name.as_deref(), p).map(TransportSpec::StreamableHttp),
        None => None,
    };
    let auth = match (kind, field(obj, "auth")) {
        (Some(TransportKind::StreamableHttp), Some(v)) => {
            parse_auth(v, &path.key("auth"), name.as_deref(), p)
        }
        _ => AuthSpec::default(),
    };
    if let Some(TransportSpec::StreamableHttp(http)) = &transport {
        check_authorization_headers(http, &auth, path, p);
    }

    let connect_timeout = field(obj, "connect_timeout_seconds")
        .and_then(|v| parse_timeout(v, &path.key("connect_timeout_seconds"), p));
    let call_timeout = field(obj, "call_timeout_seconds")
        .and_then(|v| parse_timeout(v, &path.key("call_timeout_seconds"), p));
    let tools = field(obj, "tools")
        .map(|v| parse_tools(v, &path.key("tools"), p))
        .unwrap_or_default();
    if dialect == Dialect::McpServers
        && let Some(v) = field(obj, "disabled")
    {
        as_bool(v, &path.key("disabled"), p);
    }

    if p.len() > before {
        return None;
    }
    let mut spec = ServerSpec::new(name?, transport?);
    spec.auth = auth;
    spec.connect_timeout = connect_timeout;
    spec.call_timeout = call_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
    spec.tools = tools;
    spec.origin = origin;
    Some(spec)
}

impl ServerSpec {
    /// Parses and validates one server object of this crate's schema (see
    /// [`Config`](crate::Config)); problem paths are relative to the object (`command`,
    /// `auth.bearer_token_env`). The spec gets `origin`; for [`SpecOrigin::Inline`] check the
    /// operator's policy with [`Config::select`](crate::Config::select) rather than using the
    /// spec directly. Useful for specs kept as JSON in a store read by a custom
    /// [`ServerResolver`](crate::ServerResolver).
    ///
    /// ```
    /// use mcp_config::{ProblemKind, ServerSpec, SpecOrigin};
    /// use serde_json::json;
    ///
    /// let spec = ServerSpec::from_json(&json!({"name": "web", "url": "https://web.example/mcp"}), SpecOrigin::Operator)?;
    /// assert_eq!(spec.name, "web");
    ///
    /// let err = ServerSpec::from_json(&json!({"name": "web", "url": "ftp://x"}), SpecOrigin::Operator).unwrap_err();
    /// assert_eq!((err.problems()[0].kind, err.problems()[0].path.as_str()), (ProblemKind::UnsupportedScheme, "url"));
    /// # Ok::<(), mcp_config::ConfigError>(())
    /// ```
    pub fn from_json(value: &Value, origin: SpecOrigin) -> Result<Self, crate::ConfigError> {
        let mut p = Problems::new();
        let spec = parse_server(
            value,
            &JsonPath::root(),
            Dialect::Native,
            None,
            origin,
            &mut p,
        );
        match spec {
            Some(spec) if p.is_empty() => Ok(spec),
            _ => Err(crate::ConfigError::invalid(p.into_vec())),
        }
    }
}

/// True when an `mcpServers` entry says `"disabled": true` (it is then skipped unchecked, as
/// desktop hosts do).
pub(crate) fn is_disabled(value: &Value) -> bool {
    value.get("disabled").and_then(Value::as_bool) == Some(true)
}

/// The transport a server declares, or infers from `command` / `url`.
fn transport_kind(
    obj: &Map<String, Value>,
    path: &JsonPath,
    dialect: Dialect,
    p: &mut Problems,
) -> Option<TransportKind> {
    let transport = field(obj, "transport");
    let ty = match dialect {
        Dialect::McpServers => field(obj, "type"),
        Dialect::Native => None,
    };
    if transport.is_some() && ty.is_some() {
        p.push(
            path,
            ConflictingFields,
            "has both `transport` and `type`; keep one",
        );
        return None;
    }
    if let Some(v) = transport {
        let at = path.key("transport");
        return match as_str(v, &at, p)? {
            "stdio" => Some(TransportKind::Stdio),
            "streamable_http" => Some(TransportKind::StreamableHttp),
            other => {
                p.push(
                    &at,
                    InvalidTransport,
                    format!(
                        "unknown transport: use `stdio` or `streamable_http`{}",
                        did_you_mean(other, ["stdio", "streamable_http"])
                    ),
                );
                None
            }
        };
    }
    if let Some(v) = ty {
        let at = path.key("type");
        return match as_str(v, &at, p)? {
            "stdio" => Some(TransportKind::Stdio),
            "http" | "streamable_http" | "streamable-http" | "streamableHttp" => {
                Some(TransportKind::StreamableHttp)
            }
            "sse" => {
                p.push(
                    &at,
                    InvalidTransport,
                    "the legacy HTTP+SSE transport is not supported; use streamable HTTP (`\"type\": \"http\"`)",
                );
                None
            }
            other => {
                p.push(
                    &at,
                    InvalidTransport,
                    format!(
                        "unknown type: use `stdio` or `http`{}",
                        did_you_mean(other, ["stdio", "http"])
                    ),
                );
                None
            }
        };
    }
    match (field(obj, "command").is_some(), field(obj, "url").is_some()) {
        (true, false) => Some(TransportKind::Stdio),
        (false, true) => Some(TransportKind::StreamableHttp),
        (true, true) => {
            p.push(
                path,
                ConflictingFields,
                "has both `command` (stdio) and `url` (streamable_http); keep one",
            );
            None
        }
        (false, false) => {
            p.push(
                path,
                MissingField,
                "needs `command` (a stdio server) or `url` (a streamable_http server)",
            );
            None
        }
    }
}

fn parse_stdio(obj: &Map<String, Value>, path: &JsonPath, p: &mut Problems) -> Option<StdioSpec> {
    let before = p.len();
    let at = path.key("command");
    let command = match field(obj, "command") {
        None => {
            p.push(&at, MissingField, "a stdio server needs a `command`");
            None
        }
        Some(v) => as_str(v, &at, p).and_then(|s| {
            if s.trim().is_empty() {
                p.push(&at, InvalidValue, "`command` is empty");
                None
            } else {
                Some(s.to_owned())
            }
        }),
    };
    let args = field(obj, "args")
        .map(|v| string_list(v, &path.key("args"), p))
        .unwrap_or_default();
    let env = field(obj, "env")
        .map(|v| {
            let at = path.key("env");
            let map = string_map(v, &at, p);
            for k in map.keys() {
                check_env_name(k, &at.key(k), p);
            }
            map.into_iter().map(|(k, v)| (k, Secret::from(v))).collect()
        })
        .unwrap_or_default();
    let cwd = field(obj, "cwd").and_then(|v| {
        let at = path.key("cwd");
        let s = as_str(v, &at, p)?;
        if s.is_empty() {
            p.push(&at, InvalidValue, "`cwd` is empty");
            return None;
        }
        Some(s.into())
    });
    let inherit_env = field(obj, "inherit_env")
        .and_then(|v| as_bool(v, &path.key("inherit_env"), p))
        .unwrap_or(false);
    if p.len() > before {
        return None;
    }
    let mut spec = StdioSpec::new(command?, args);
    spec.env = env;
    spec.cwd = cwd;
    spec.inherit_env = inherit_env;
    Some(spec)
}

fn parse_http(
    obj: &Map<String, Value>,
    path: &JsonPath,
    server: Option<&str>,
    p: &mut Problems,
) -> Option<HttpSpec> {
    let before = p.len();
    let at = path.key("url");
    let url = match field(obj, "url") {
        None => {
            p.push(&at, MissingField, "a streamable_http server needs a `url`");
            None
        }
        Some(v) => as_str(v, &at, p).and_then(|s| parse_http_url(s, &at, p)),
    };
    let headers = field(obj, "headers")
        .map(|v| {
            let at = path.key("headers");
            let headers = parse_headers(v, &at, p);
            check_header_credentials(&headers, &at, false, server, p);
            headers
        })
        .unwrap_or_default();
    if p.len() > before {
        return None;
    }
    let mut spec = HttpSpec::new(url?);
    spec.headers = headers;
    Some(spec)
}

fn parse_auth(value: &Value, path: &JsonPath, server: Option<&str>, p: &mut Problems) -> AuthSpec {
    let mut auth = AuthSpec::default();
    let Some(obj) = expect_object(value, path, "`auth`", p) else {
        return auth;
    };
    reject_unknown(obj, AUTH_FIELDS, path, p);
    if let Some(v) = field(obj, "headers") {
        let at = path.key("headers");
        auth.headers = parse_headers(v, &at, p);
        check_header_credentials(&auth.headers, &at, true, server, p);
    }
    auth.bearer = secret_source(obj, "bearer_token", "bearer_token_env", path, server, p);
    if let Some(SecretSource::Inline(token)) = &auth.bearer
        && has_control_char(token.expose())
    {
        p.push(
            &path.key("bearer_token"),
            InvalidValue,
            format!(
                "`bearer_token`{} contains a control character (such as a line break)",
                of_server(server)
            ),
        );
    }
    if let Some(v) = field(obj, "oauth_client_credentials") {
        auth.oauth_client_credentials =
            parse_oauth(v, &path.key("oauth_client_credentials"), server, p);
        if field(obj, "bearer_token").is_some() || field(obj, "bearer_token_env").is_some() {
            p.push(
                path,
                ConflictingFields,
                "has both a bearer token and `oauth_client_credentials`; both set the Authorization header, keep one",
            );
        }
    }
    auth
}

fn parse_oauth(
    value: &Value,
    path: &JsonPath,
    server: Option<&str>,
    p: &mut Problems,
) -> Option<OAuthClientCredentials> {
    let before = p.len();
    let obj = expect_object(value, path, "`oauth_client_credentials`", p)?;
    reject_unknown(obj, OAUTH_FIELDS, path, p);
    let token_url = field(obj, "token_url").and_then(|v| {
        let at = path.key("token_url");
        as_str(v, &at, p).and_then(|s| parse_http_url(s, &at, p))
    });
    let at = path.key("client_id");
    let client_id = match field(obj, "client_id") {
        None => {
            p.push(
                &at,
                MissingField,
                "OAuth client credentials need a `client_id`",
            );
            None
        }
        Some(v) => non_empty_str(v, &at, p),
    };
    let client_secret = secret_source(obj, "client_secret", "client_secret_env", path, server, p);
    if client_secret.is_none()
        && field(obj, "client_secret").is_none()
        && field(obj, "client_secret_env").is_none()
    {
        p.push(
            &path.key("client_secret"),
            MissingField,
            "OAuth client credentials need `client_secret` or `client_secret_env`",
        );
    }
    let scope = field(obj, "scope").and_then(|v| non_empty_str(v, &path.key("scope"), p));
    let resource = match (field(obj, "resource"), field(obj, "audience")) {
        (Some(_), Some(_)) => {
            p.push(
                path,
                ConflictingFields,
                "has both `resource` and `audience` (its alias); keep one",
            );
            None
        }
        (Some(v), None) => non_empty_str(v, &path.key("resource"), p),
        (None, Some(v)) => non_empty_str(v, &path.key("audience"), p),
        (None, None) => None,
    };
    let method = field(obj, "token_endpoint_auth_method").and_then(|v| {
        let at = path.key("token_endpoint_auth_method");
        const METHODS: [&str; 3] = [
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt",
        ];
        match as_str(v, &at, p)? {
            "client_secret_basic" => Some(TokenEndpointAuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(TokenEndpointAuthMethod::ClientSecretPost),
            "private_key_jwt" => Some(TokenEndpointAuthMethod::PrivateKeyJwt),
            other => {
                p.push(
                    &at,
                    InvalidValue,
                    format!(
                        "unknown token endpoint auth method: use one of {}{}",
                        METHODS.join(", "),
                        did_you_mean(other, METHODS)
                    ),
                );
                None
            }
        }
    });
    let allowed_issuers = field(obj, "allowed_issuers")
        .map(|v| {
            let at = path.key("allowed_issuers");
            string_list(v, &at, p)
                .iter()
                .enumerate()
                .filter_map(|(i, s)| parse_http_url(s, &at.index(i), p))
                .collect()
        })
        .unwrap_or_default();
    if p.len() > before {
        return None;
    }
    Some(OAuthClientCredentials {
        token_url,
        client_id: client_id?,
        client_secret: client_secret?,
        scope,
        resource,
        token_endpoint_auth_method: method,
        allowed_issuers,
    })
}

/// `inline_key` (a secret in the document, neither empty nor only whitespace) or `env_key` (the
/// name of a variable holding it); never both.
fn secret_source(
    obj: &Map<String, Value>,
    inline_key: &str,
    env_key: &str,
    path: &JsonPath,
    server: Option<&str>,
    p: &mut Problems,
) -> Option<SecretSource> {
    match (field(obj, inline_key), field(obj, env_key)) {
        (Some(_), Some(_)) => {
            p.push(
                path,
                ConflictingFields,
                format!("has both `{inline_key}` and `{env_key}`; keep one"),
            );
            None
        }
        (Some(v), None) => {
            let at = path.key(inline_key);
            let s = as_str(v, &at, p)?;
            check_not_blank(s, inline_key, &at, server, p)
                .then(|| SecretSource::Inline(Secret::from(s)))
        }
        (None, Some(v)) => {
            let at = path.key(env_key);
            let name = non_empty_str(v, &at, p)?;
            check_env_name(&name, &at, p).then_some(SecretSource::Env(name))
        }
        (None, None) => None,
    }
}

/// True when an inline secret says something; else a problem naming the field, the server and
/// any `${…}` references that gave nothing.
pub(crate) fn check_not_blank(
    secret: &str,
    field: &str,
    path: &JsonPath,
    server: Option<&str>,
    p: &mut Problems,
) -> bool {
    if !secret.trim().is_empty() {
        return true;
    }
    p.push(
        path,
        InvalidValue,
        format!(
            "`{field}`{} is empty or only whitespace{}",
            of_server(server),
            p.empty_vars_note(path)
        ),
    );
    false
}

/// Header values that would send no credential: in `auth.headers` (`all`) any empty or
/// whitespace-only value; elsewhere an `Authorization` / `Proxy-Authorization` value that is
/// blank or a bare scheme (`Bearer ` after an empty `${TOKEN}`), and any blank value that came
/// from `${…}` references that gave nothing.
pub(crate) fn check_header_credentials(
    headers: &BTreeMap<String, Secret>,
    path: &JsonPath,
    all: bool,
    server: Option<&str>,
    p: &mut Problems,
) {
    const SCHEMES: [&str; 6] = ["bearer", "basic", "token", "digest", "negotiate", "dpop"];
    for (name, value) in headers {
        let at = path.key(name);
        let value = value.expose().trim();
        let auth = name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("proxy-authorization");
        let problem = if value.is_empty() && (all || auth || p.has_empty_vars(&at)) {
            "is empty or only whitespace"
        } else if auth && SCHEMES.iter().any(|s| value.eq_ignore_ascii_case(s)) {
            "names an authentication scheme but no credentials"
        } else {
            continue;
        };
        p.push(
            &at,
            InvalidValue,
            format!(
                "header {}{} {problem}{}",
                shown(name),
                of_server(server),
                p.empty_vars_note(&at)
            ),
        );
    }
}

/// ` of server `name`` for messages, or nothing when the name is not known.
fn of_server(server: Option<&str>) -> String {
    server.map_or_else(String::new, |s| format!(" of server {}", shown(s)))
}

fn has_control_char(s: &str) -> bool {
    s.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

/// With a bearer token or OAuth, the Authorization header is the auth layer's: a static one
/// beside it would be sent twice or silently replaced.
fn check_authorization_headers(
    http: &HttpSpec,
    auth: &AuthSpec,
    path: &JsonPath,
    p: &mut Problems,
) {
    if auth.bearer.is_none() && auth.oauth_client_credentials.is_none() {
        return;
    }
    let sets = [
        (path.key("headers"), &http.headers),
        (path.key("auth").key("headers"), &auth.headers),
    ];
    for (at, headers) in sets {
        for name in headers.keys() {
            if name.eq_ignore_ascii_case("authorization") {
                p.push(
                    &at.key(name),
                    ConflictingFields,
                    "an `Authorization` header conflicts with the configured bearer token or OAuth credentials",
                );
            }
        }
    }
}

fn parse_tools(value: &Value, path: &JsonPath, p: &mut Problems) -> ToolFilter {
    let mut tools = ToolFilter::default();
    let Some(obj) = expect_object(value, path, "`tools`", p) else {
        return tools;
    };
    reject_unknown(obj, TOOLS_FIELDS, path, p);
    let list = |key: &str, p: &mut Problems| -> Vec<String> {
        let at = path.key(key);
        let items = field(obj, key)
            .map(|v| string_list(v, &at, p))
            .unwrap_or_default();
        for (i, s) in items.iter().enumerate() {
            if s.is_empty() {
                p.push(&at.index(i), InvalidValue, "empty tool name or glob");
            }
        }
        items
    };
    tools.allow = list("allow", p);
    tools.deny = list("deny", p);
    tools.pinned = list("pinned", p);
    for (i, name) in tools.pinned.iter().enumerate() {
        if !name.is_empty() && !tools.allows(name) {
            p.push(
                &path.key("pinned").index(i),
                ConflictingFields,
                format!("pinned tool {} is excluded by `allow`/`deny`", shown(name)),
            );
        }
    }
    tools
}

/// A positive, finite number of seconds.
pub(crate) fn parse_timeout(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Duration> {
    let Some(secs) = value.as_f64() else {
        p.push(
            path,
            WrongType,
            format!("expected a number of seconds, found {}", type_name(value)),
        );
        return None;
    };
    if !(secs > 0.0 && secs.is_finite()) {
        p.push(
            path,
            InvalidTimeout,
            format!("a timeout must be a positive number of seconds, not {secs}"),
        );
        return None;
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => {
            p.push(path, InvalidTimeout, "a timeout must be at least 1 ns");
            None
        }
        Err(_) => {
            p.push(
                path,
                InvalidTimeout,
                format!("timeout {secs} s is too large"),
            );
            None
        }
    }
}

/// Checks a server name: non-empty, `[A-Za-z0-9_-]` only, no `__`.
pub(crate) fn check_name(name: &str, path: &JsonPath, p: &mut Problems) -> bool {
    let before = p.len();
    if name.is_empty() {
        p.push(path, EmptyName, "the server name is empty");
        return false;
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        p.push(
            path,
            InvalidName,
            format!(
                "server name {} may only contain letters, digits, `_` and `-`",
                shown(name)
            ),
        );
    }
    if name.contains("__") {
        p.push(
            path,
            DoubleUnderscore,
            format!(
                "server name {} must not contain `__` (it separates server and tool in `server__tool`)",
                shown(name)
            ),
        );
    }
    p.len() == before
}

/// An `http` or `https` URL with a host and no credentials.
pub(crate) fn parse_http_url(s: &str, path: &JsonPath, p: &mut Problems) -> Option<Url> {
    let url = match Url::parse(s) {
        Ok(url) => url,
        Err(e) => {
            p.push(path, InvalidUrl, format!("not a valid URL ({e})"));
            return None;
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        p.push(
            path,
            UnsupportedScheme,
            format!(
                "URL scheme {} is not supported: use http or https",
                shown(url.scheme())
            ),
        );
        return None;
    }
    if url.host().is_none() {
        p.push(path, InvalidUrl, "the URL has no host");
        return None;
    }
    if !url.username().is_empty() || url.password().is_some() {
        p.push(
            path,
            InvalidUrl,
            "the URL must not carry credentials (`user:password@`); use `auth.headers` or `auth.bearer_token`",
        );
        return None;
    }
    Some(url)
}

fn parse_headers(value: &Value, path: &JsonPath, p: &mut Problems) -> BTreeMap<String, Secret> {
    let map = string_map(value, path, p);
    let mut seen: Vec<String> = Vec::new();
    for (name, v) in &map {
        let at = path.key(name);
        let lower = name.to_ascii_lowercase();
        if seen.contains(&lower) {
            p.push(
                &at,
                ConflictingFields,
                format!(
                    "header {} is given twice (header names ignore case)",
                    shown(name)
                ),
            );
        }
        seen.push(lower);
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            p.push(
                &at,
                InvalidValue,
                format!("{} is not a valid HTTP header name", shown(name)),
            );
        }
        if has_control_char(v) {
            p.push(
                &at,
                InvalidValue,
                "the header value contains a control character (such as a line break)",
            );
        }
    }
    map.into_iter().map(|(k, v)| (k, Secret::from(v))).collect()
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An environment variable name: non-empty, no `=`, no NUL.
fn check_env_name(name: &str, path: &JsonPath, p: &mut Problems) -> bool {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        p.push(
            path,
            InvalidValue,
            format!("{} is not a valid environment variable name", shown(name)),
        );
        return false;
    }
    true
}

// ---- small value readers -------------------------------------------------------------------

/// A field's value; `null` counts as absent.
pub(crate) fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// Reports every key of `obj` not in `allowed`, with the closest allowed name.
pub(crate) fn reject_unknown(
    obj: &Map<String, Value>,
    allowed: &[&str],
    path: &JsonPath,
    p: &mut Problems,
) {
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            p.push(
                &path.key(key),
                UnknownField,
                format!(
                    "unknown field {}{}",
                    shown(key),
                    did_you_mean(key, allowed.iter().copied())
                ),
            );
        }
    }
}

pub(crate) fn expect_object<'a>(
    value: &'a Value,
    path: &JsonPath,
    what: &str,
    p: &mut Problems,
) -> Option<&'a Map<String, Value>> {
    let obj = value.as_object();
    if obj.is_none() {
        p.push(
            path,
            WrongType,
            format!("{what} must be an object, found {}", type_name(value)),
        );
    }
    obj
}

pub(crate) fn as_str<'a>(value: &'a Value, path: &JsonPath, p: &mut Problems) -> Option<&'a str> {
    let s = value.as_str();
    if s.is_none() {
        p.push(
            path,
            WrongType,
            format!("expected a string, found {}", type_name(value)),
        );
    }
    s
}

fn non_empty_str(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<String> {
    let s = as_str(value, path, p)?;
    if s.is_empty() {
        p.push(path, InvalidValue, "must not be empty");
        return None;
    }
    Some(s.to_owned())
}

pub(crate) fn as_bool(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<bool> {
    let b = value.as_bool();
    if b.is_none() {
        p.push(
            path,
            WrongType,
            format!("expected true or false, found {}", type_name(value)),
        );
    }
    b
}

fn string_list(value: &Value, path: &JsonPath, p: &mut Problems) -> Vec<String> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            WrongType,
            format!("expected an array of strings, found {}", type_name(value)),
        );
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, v)| as_str(v, &path.index(i), p).map(str::to_owned))
        .collect()
}

fn string_map(value: &Value, path: &JsonPath, p: &mut Problems) -> BTreeMap<String, String> {
    let Some(obj) = value.as_object() else {
        p.push(
            path,
            WrongType,
            format!(
                "expected an object of string values, found {}",
                type_name(value)
            ),
        );
        return BTreeMap::new();
    };
    obj.iter()
        .filter_map(|(k, v)| as_str(v, &path.key(k), p).map(|s| (k.clone(), s.to_owned())))
        .collect()
}

/// "a string", "an array", … for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<ServerSpec, Vec<(ProblemKind, String)>> {
        let mut p = Problems::new();
        let spec = parse_server(
            &value,
            &JsonPath::root().key("servers").index(0),
            Dialect::Native,
            None,
            SpecOrigin::Operator,
            &mut p,
        );
        match spec {
            Some(s) if p.is_empty() => Ok(s),
            _ => Err(p.into_vec().into_iter().map(|p| (p.kind, p.path)).collect()),
        }
    }

    #[test]
    fn a_full_http_spec_parses() {
        let spec = parse(json!({
            "name": "linear",
            "url": "https://mcp.example.com/linear",
            "headers": {"X-Tenant": "t1"},
            "auth": {"oauth_client_credentials": {
                "client_id": "id", "client_secret_env": "LINEAR_SECRET",
                "scope": "read", "audience": "https://mcp.example.com",
                "token_endpoint_auth_method": "client_secret_post"
            }},
            "connect_timeout_seconds": 5,
            "call_timeout_seconds": 12.5,
            "tools": {"allow": ["get_*"], "deny": ["get_secret"], "pinned": ["get_issue"]}
        }))
        .unwrap();
        assert_eq!(spec.kind(), TransportKind::StreamableHttp);
        assert_eq!(spec.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(spec.call_timeout, Duration::from_millis(12_500));
        let oauth = spec.auth.oauth_client_credentials.unwrap();
        assert_eq!(oauth.resource.as_deref(), Some("https://mcp.example.com"));
        assert_eq!(
            oauth.client_secret,
            SecretSource::Env("LINEAR_SECRET".into())
        );
        assert_eq!(
            oauth.token_endpoint_auth_method,
            Some(TokenEndpointAuthMethod::ClientSecretPost)
        );
        assert_eq!(spec.tools.pinned, ["get_issue"]);
    }

    #[test]
    fn a_stdio_spec_gets_defaults() {
        let spec = parse(json!({"name": "git", "command": "git-mcp", "args": ["--ro"]})).unwrap();
        assert_eq!(spec.call_timeout, DEFAULT_CALL_TIMEOUT);
        assert_eq!(spec.connect_timeout, None);
        let TransportSpec::Stdio(stdio) = spec.transport else {
            panic!("not stdio")
        };
        assert_eq!(stdio.args, ["--ro"]);
        assert!(!stdio.inherit_env);
    }

    #[test]
    fn problems_are_all_reported_with_paths() {
        let err = parse(json!({
            "name": "a__b c",
            "transport": "stdio",
            "comand": "x",
            "args": ["ok", 3],
            "url": "https://x",
            "call_timeout_seconds": -1,
            "tools": {"allow": ["a"], "pinned": ["b"]}
        }))
        .unwrap_err();
        let expected = [
            (UnknownField, "servers[0].comand"),
            (InvalidName, "servers[0].name"),
            (DoubleUnderscore, "servers[0].name"),
            (NotApplicable, "servers[0].url"),
            (MissingField, "servers[0].command"),
            (WrongType, "servers[0].args[1]"),
            (InvalidTimeout, "servers[0].call_timeout_seconds"),
            (ConflictingFields, "servers[0].tools.pinned[0]"),
        ];
        let expected: Vec<_> = expected.iter().map(|(k, p)| (*k, p.to_string())).collect();
        assert_eq!(err, expected);
    }

    #[test]
    fn auth_conflicts_are_reported() {
        let err = parse(json!({
            "name": "x",
            "url": "https://x",
            "headers": {"Authorization": "Bearer a", "Bad Header": "v", "X-Ok": "a\r\nb"},
            "auth": {"bearer_token": "t", "bearer_token_env": "T"}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            [
                (
                    InvalidValue,
                    r#"servers[0].headers["Bad Header"]"#.to_string()
                ),
                (InvalidValue, "servers[0].headers.X-Ok".to_string()),
                (ConflictingFields, "servers[0].auth".to_string()),
            ]
        );
        let err = parse(json!({
            "name": "x",
            "url": "https://x",
            "headers": {"authorization": "Bearer a"},
            "auth": {"bearer_token": "t"}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            [(
                ConflictingFields,
                "servers[0].headers.authorization".to_string()
            )]
        );
    }

    #[test]
    fn urls_must_be_plain_http() {
        for (url, kind) in [
            ("ftp://example.com/x", UnsupportedScheme),
            ("file:///etc/passwd", UnsupportedScheme),
            ("not a url", InvalidUrl),
            ("https://user:pw@example.com/", InvalidUrl),
        ] {
            let err = parse(json!({"name": "x", "url": url})).unwrap_err();
            assert_eq!(err, [(kind, "servers[0].url".to_string())], "{url}");
        }
    }
}
