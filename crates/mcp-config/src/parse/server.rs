//! Server entries: one server object of this crate's schema or of an `mcpServers` entry, its
//! transport (stdio or streamable HTTP), timeouts and tool filter.

use serde_json::{Map, Value};

use super::auth::{
    check_authorization_headers, check_header_credentials, parse_auth, parse_headers,
};
use super::read::{
    as_bool, as_str, check_env_name, did_you_mean, expect_object, field, parse_http_url,
    parse_timeout, reject_unknown, shown, string_list, string_map,
};
use crate::path::{JsonPath, Problems};
use crate::{
    AuthSpec, CustomSpec, DEFAULT_CALL_TIMEOUT, HttpSpec, ProblemKind, Secret, ServerSpec,
    SpecOrigin, StdioSpec, ToolFilter, TransportKind, TransportSpec,
};

use ProblemKind::*;

/// The fields of a server object in this crate's own schema (env, config files, run metadata).
const SERVER_FIELDS: &[&str] = &[
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
    "shared",
    "roots",
    "instructions",
];

/// The most roots one server may be given.
const MAX_ROOTS: usize = 64;

/// `roots`: `file://` URIs, without control characters, at most [`MAX_ROOTS`].
fn parse_roots(value: &Value, path: &JsonPath, p: &mut Problems) -> Vec<String> {
    let roots = super::read::string_list(value, path, p);
    if roots.len() > MAX_ROOTS {
        p.push(
            path,
            InvalidValue,
            format!("at most {MAX_ROOTS} roots, not {}", roots.len()),
        );
        return Vec::new();
    }
    for (i, root) in roots.iter().enumerate() {
        if !root.starts_with("file://") || root.chars().any(char::is_control) || root.len() > 2048 {
            p.push(
                &path.index(i),
                InvalidValue,
                "a root is a `file://` URI of at most 2048 bytes, without control characters",
            );
        }
    }
    roots
}

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
    "shared",
    "roots",
    "instructions",
];

/// The fields every server has whatever its transport; a custom transport's other fields are
/// its parameters.
const COMMON_FIELDS: &[&str] = &[
    "name",
    "transport",
    "connect_timeout_seconds",
    "call_timeout_seconds",
    "tools",
    "shared",
    "roots",
    "instructions",
];

const STDIO_FIELDS: &[&str] = &["command", "args", "env", "cwd", "inherit_env"];
const HTTP_FIELDS: &[&str] = &["url", "headers", "auth"];
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
    let kind = transport_kind(obj, path, dialect, p);
    let allowed = match (&kind, dialect) {
        (Some(TransportKind::Other(_)), _) => COMMON_FIELDS,
        (_, Dialect::Native) => SERVER_FIELDS,
        (_, Dialect::McpServers) => MCP_SERVERS_FIELDS,
    };
    if !matches!(kind, Some(TransportKind::Other(_))) {
        reject_unknown(obj, allowed, path, p);
    }

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

    if let Some(kind) = &kind {
        let foreign = match kind {
            TransportKind::Stdio => HTTP_FIELDS,
            TransportKind::StreamableHttp => STDIO_FIELDS,
            _ => &[],
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
    let transport = match &kind {
        Some(TransportKind::Stdio) => parse_stdio(obj, path, p).map(TransportSpec::Stdio),
        Some(TransportKind::Other(custom)) => {
            let mut spec = CustomSpec::new(custom.clone());
            spec.params = obj
                .iter()
                .filter(|(k, _)| !allowed.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Some(TransportSpec::Custom(spec))
        }
        Some(_) => parse_http(obj, path, name.as_deref(), p).map(TransportSpec::StreamableHttp),
        None => None,
    };
    let auth = match (&kind, field(obj, "auth")) {
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
    let shared = field(obj, "shared")
        .and_then(|v| as_bool(v, &path.key("shared"), p))
        .unwrap_or(false);
    let roots = field(obj, "roots")
        .map(|v| parse_roots(v, &path.key("roots"), p))
        .unwrap_or_default();
    let instructions = field(obj, "instructions")
        .and_then(|v| as_bool(v, &path.key("instructions"), p))
        .unwrap_or(true);
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
    spec.shared = shared;
    spec.roots = roots;
    spec.instructions = instructions;
    spec.expanded = ["command", "args", "url", "headers"]
        .iter()
        .flat_map(|key| p.expanded_under(&path.key(key)))
        .map(Secret::from)
        .collect();
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

/// True for a custom transport kind's name: a lower-case letter, then up to 63 lower-case
/// letters, digits, `_`, `-` or `.`.
fn is_kind_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && word.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.".contains(c))
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
            "sse" => {
                p.push(
                    &at,
                    InvalidTransport,
                    "the legacy HTTP+SSE transport is not supported; use `streamable_http`",
                );
                None
            }
            other => {
                let near = did_you_mean(other, ["stdio", "streamable_http"]);
                if near.is_empty() && is_kind_name(other) {
                    return Some(TransportKind::Other(other.to_owned()));
                }
                p.push(
                    &at,
                    InvalidTransport,
                    format!(
                        "unknown transport: use `stdio`, `streamable_http` or the kind a registered connector names (lower-case letters, digits, `_`, `-`, `.`){near}"
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

/// Checks a server name: non-empty, at most [`MAX_SERVER_NAME_CHARS`](crate::MAX_SERVER_NAME_CHARS)
/// characters, `[A-Za-z0-9_-]` only, no `__`.
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
    let chars = name.chars().count();
    if chars > crate::MAX_SERVER_NAME_CHARS {
        p.push(
            path,
            InvalidName,
            format!(
                "server name {} has {chars} characters, more than the limit of {}",
                shown(name),
                crate::MAX_SERVER_NAME_CHARS
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::parse::parse_test_server as parse;
    use crate::{SecretSource, TokenEndpointAuthMethod};

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
    fn roots_are_file_uris_of_every_transport_each_bad_one_at_its_path() {
        let spec = parse(json!({"name": "fs", "command": "fs-mcp", "roots": ["file:///srv/data"]}))
            .unwrap();
        assert_eq!(spec.roots, ["file:///srv/data"]);
        let spec = parse(json!({"name": "web", "url": "https://x/mcp"})).unwrap();
        assert!(spec.roots.is_empty());
        let err = parse(json!({
            "name": "fs",
            "command": "fs-mcp",
            "roots": ["file:///ok", "https://x", "file:///a\u{7}b", 3]
        }))
        .unwrap_err();
        assert_eq!(
            err,
            [
                (WrongType, "servers[0].roots[3]".to_string()),
                (InvalidValue, "servers[0].roots[1]".to_string()),
                (InvalidValue, "servers[0].roots[2]".to_string()),
            ]
        );
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
    fn instructions_is_a_boolean_on_by_default() {
        let spec = parse(json!({"name": "git", "command": "git-mcp"})).unwrap();
        assert!(spec.instructions);
        let spec =
            parse(json!({"name": "git", "command": "git-mcp", "instructions": false})).unwrap();
        assert!(!spec.instructions);
        let err = parse(json!({"name": "web", "url": "https://x/mcp", "instructions": "no"}))
            .unwrap_err();
        assert_eq!(err, [(WrongType, "servers[0].instructions".to_string())]);
    }

    #[test]
    fn shared_is_a_boolean_of_every_dialect_and_transport() {
        let spec = parse(json!({"name": "git", "command": "git-mcp", "shared": true})).unwrap();
        assert!(spec.shared);
        let spec = parse(json!({"name": "git", "command": "git-mcp"})).unwrap();
        assert!(!spec.shared, "not shared unless the operator says so");
        let spec = parse(json!({"name": "bus", "transport": "bus", "shared": true})).unwrap();
        assert!(spec.shared);
        assert!(
            !matches!(&spec.transport, TransportSpec::Custom(c) if c.params.contains_key("shared")),
            "`shared` is no parameter of a custom transport"
        );
        let err =
            parse(json!({"name": "web", "url": "https://x/mcp", "shared": "yes"})).unwrap_err();
        assert_eq!(err, [(WrongType, "servers[0].shared".to_string())]);
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
