//! Auth objects and credentials: `auth` (headers, bearer token, OAuth client credentials, a
//! user's OAuth login),
//! secrets given inline or by variable name, header maps, and the checks that refuse a
//! credential that would send nothing. Messages name the field, the server and any `${…}`
//! variable that gave nothing, never the value.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::auth_federated::{parse_enterprise, parse_workload};
use super::read::{
    as_str, check_env_name, did_you_mean, expect_object, field, non_empty_str, parse_http_url,
    reject_unknown, shown, string_list, string_map,
};
use crate::path::{JsonPath, Problems};
use crate::{
    AuthSpec, DpopMode, HttpSpec, OAuthClientCredentials, OAuthLogin, ProblemKind, Secret,
    SecretSource, TokenEndpointAuthMethod,
};

use ProblemKind::*;

const AUTH_FIELDS: &[&str] = &[
    "headers",
    "bearer_token",
    "bearer_token_env",
    "oauth_client_credentials",
    "oauth",
    "enterprise",
    "workload_identity",
];
const LOGIN_FIELDS: &[&str] = &[
    "client_id",
    "client_secret",
    "client_secret_env",
    "client_metadata_url",
    "scopes",
    "resource",
    "token_endpoint_auth_method",
    "redirect_uri",
    "allowed_issuers",
    "dpop",
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
    "dpop",
];
pub(super) fn parse_auth(
    value: &Value,
    path: &JsonPath,
    server: Option<&str>,
    p: &mut Problems,
) -> AuthSpec {
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
    if let Some(v) = field(obj, "oauth") {
        auth.oauth = parse_login(v, &path.key("oauth"), server, p);
        let other = if field(obj, "oauth_client_credentials").is_some() {
            Some("`oauth_client_credentials`")
        } else if field(obj, "bearer_token").is_some() || field(obj, "bearer_token_env").is_some() {
            Some("a bearer token")
        } else {
            None
        };
        if let Some(other) = other {
            p.push(
                path,
                ConflictingFields,
                format!(
                    "has both `oauth` and {other}; both set the Authorization header, keep one"
                ),
            );
        }
    }
    if let Some(v) = field(obj, "enterprise") {
        auth.enterprise = parse_enterprise(v, &path.key("enterprise"), p);
    }
    if let Some(v) = field(obj, "workload_identity") {
        auth.workload_identity = parse_workload(v, &path.key("workload_identity"), p);
    }
    let federated = ["enterprise", "workload_identity"]
        .into_iter()
        .filter(|k| field(obj, k).is_some())
        .collect::<Vec<_>>();
    if let Some(first) = federated.first() {
        let others = [
            "bearer_token",
            "bearer_token_env",
            "oauth_client_credentials",
            "oauth",
        ]
        .into_iter()
        .chain(federated.iter().skip(1).copied())
        .find(|k| field(obj, k).is_some());
        if let Some(other) = others {
            p.push(
                path,
                ConflictingFields,
                format!(
                    "has both `{first}` and `{other}`; both set the Authorization header, keep one"
                ),
            );
        }
    }
    auth
}

/// The `oauth` table: a user's login (authorization code with PKCE). Every field is optional.
fn parse_login(
    value: &Value,
    path: &JsonPath,
    server: Option<&str>,
    p: &mut Problems,
) -> Option<OAuthLogin> {
    let before = p.len();
    let obj = expect_object(value, path, "`oauth`", p)?;
    reject_unknown(obj, LOGIN_FIELDS, path, p);
    let mut login = OAuthLogin {
        client_id: field(obj, "client_id")
            .and_then(|v| non_empty_str(v, &path.key("client_id"), p)),
        client_secret: secret_source(obj, "client_secret", "client_secret_env", path, server, p),
        ..OAuthLogin::default()
    };
    if login.client_secret.is_some() && login.client_id.is_none() {
        p.push(
            &path.key("client_id"),
            MissingField,
            "a client secret belongs to a pre-registered client: set its `client_id` too",
        );
    }
    login.client_metadata_url = field(obj, "client_metadata_url").and_then(|v| {
        let at = path.key("client_metadata_url");
        let url = parse_http_url(as_str(v, &at, p)?, &at, p)?;
        if url.scheme() != "https" || url.path().trim_matches('/').is_empty() {
            p.push(
                &at,
                InvalidUrl,
                "a client ID metadata document URL must be https with a path (it is the client id)",
            );
            return None;
        }
        Some(url)
    });
    login.scopes = field(obj, "scopes").map(|v| {
        let at = path.key("scopes");
        let scopes = string_list(v, &at, p);
        for (i, scope) in scopes.iter().enumerate() {
            if scope.is_empty() || !scope.bytes().all(is_scope_byte) {
                p.push(
                    &at.index(i),
                    InvalidValue,
                    "a scope is one or more printable characters without spaces, quotes or backslashes (RFC 6749 §3.3)",
                );
            }
        }
        scopes
    });
    login.resource = field(obj, "resource").and_then(|v| {
        let at = path.key("resource");
        let resource = non_empty_str(v, &at, p)?;
        parse_http_url(&resource, &at, p)?;
        Some(resource)
    });
    login.token_endpoint_auth_method = field(obj, "token_endpoint_auth_method").and_then(|v| {
        let at = path.key("token_endpoint_auth_method");
        const METHODS: [&str; 3] = ["none", "client_secret_basic", "client_secret_post"];
        let method = match as_str(v, &at, p)? {
            "none" => TokenEndpointAuthMethod::None,
            "client_secret_basic" => TokenEndpointAuthMethod::ClientSecretBasic,
            "client_secret_post" => TokenEndpointAuthMethod::ClientSecretPost,
            other => {
                p.push(
                    &at,
                    InvalidValue,
                    format!(
                        "unknown token endpoint auth method for a login: use one of {}{}",
                        METHODS.join(", "),
                        did_you_mean(other, METHODS)
                    ),
                );
                return None;
            }
        };
        let secret = login.client_secret.is_some();
        match (method, secret) {
            (TokenEndpointAuthMethod::None, true) => p.push(
                &at,
                ConflictingFields,
                "`none` sends no client secret, but one is configured; remove one of them",
            ),
            (TokenEndpointAuthMethod::None, false) => {}
            (_, false) => p.push(
                &at,
                MissingField,
                "a secret-based method needs `client_secret` or `client_secret_env`",
            ),
            (_, true) => {}
        }
        Some(method)
    });
    login.redirect_uri = field(obj, "redirect_uri").and_then(|v| {
        let at = path.key("redirect_uri");
        let url = parse_http_url(as_str(v, &at, p)?, &at, p)?;
        let loopback = matches!(
            url.host(),
            Some(url::Host::Ipv4(ip)) if ip.is_loopback()
        ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
            || url.host_str() == Some("localhost");
        if url.scheme() == "http" && !loopback {
            p.push(
                &at,
                InvalidUrl,
                "a redirect URI is https, or http on a loopback address (RFC 8252 §7.3)",
            );
            return None;
        }
        if url.fragment().is_some() {
            p.push(
                &at,
                InvalidUrl,
                "a redirect URI has no fragment (RFC 6749 §3.1.2)",
            );
            return None;
        }
        Some(url)
    });
    login.allowed_issuers = field(obj, "allowed_issuers")
        .map(|v| {
            let at = path.key("allowed_issuers");
            string_list(v, &at, p)
                .iter()
                .enumerate()
                .filter_map(|(i, s)| parse_http_url(s, &at.index(i), p))
                .collect()
        })
        .unwrap_or_default();
    login.dpop = parse_dpop(obj, path, p);
    (p.len() == before).then_some(login)
}

/// RFC 6749 §3.3 `scope-token` characters: %x21 / %x23-5B / %x5D-7E.
fn is_scope_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E)
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
    let dpop = parse_dpop(obj, path, p);
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
        dpop,
    })
}

/// `dpop`: `true`, `false` or `"preferred"`; absent is `false`.
fn parse_dpop(obj: &Map<String, Value>, path: &JsonPath, p: &mut Problems) -> DpopMode {
    match field(obj, "dpop") {
        None | Some(Value::Bool(false)) => DpopMode::Off,
        Some(Value::Bool(true)) => DpopMode::Required,
        Some(Value::String(s)) if s == "preferred" => DpopMode::Preferred,
        Some(_) => {
            p.push(
                &path.key("dpop"),
                InvalidValue,
                "`dpop` is true, false or \"preferred\"",
            );
            DpopMode::Off
        }
    }
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
pub(super) fn check_authorization_headers(
    http: &HttpSpec,
    auth: &AuthSpec,
    path: &JsonPath,
    p: &mut Problems,
) {
    if auth.bearer.is_none()
        && auth.oauth_client_credentials.is_none()
        && auth.oauth.is_none()
        && auth.enterprise.is_none()
        && auth.workload_identity.is_none()
    {
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

pub(super) fn parse_headers(
    value: &Value,
    path: &JsonPath,
    p: &mut Problems,
) -> BTreeMap<String, Secret> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::parse::parse_test_server as parse;

    #[test]
    fn an_empty_oauth_table_is_a_login_with_everything_discovered() {
        let spec =
            parse(json!({"name": "x", "url": "https://x/mcp", "auth": {"oauth": {}}})).unwrap();
        assert_eq!(spec.auth.oauth, Some(OAuthLogin::default()));
        assert!(!spec.auth.is_empty());
    }

    #[test]
    fn a_full_oauth_table_is_typed() {
        let spec = parse(json!({
            "name": "x",
            "url": "https://x/mcp",
            "auth": {"oauth": {
                "client_id": "agent", "client_secret_env": "X_SECRET",
                "client_metadata_url": "https://agent.example/client.json",
                "scopes": ["files:read", "offline_access"],
                "resource": "https://x/mcp",
                "token_endpoint_auth_method": "client_secret_post",
                "redirect_uri": "http://127.0.0.1:8765/callback",
                "allowed_issuers": ["https://login.example"]
            }}
        }))
        .unwrap();
        let login = spec.auth.oauth.unwrap();
        assert_eq!(login.client_id.as_deref(), Some("agent"));
        assert_eq!(
            login.client_secret,
            Some(SecretSource::Env("X_SECRET".into()))
        );
        assert_eq!(
            login.client_metadata_url.unwrap().as_str(),
            "https://agent.example/client.json"
        );
        assert_eq!(login.scopes.unwrap(), ["files:read", "offline_access"]);
        assert_eq!(login.resource.as_deref(), Some("https://x/mcp"));
        assert_eq!(
            login.token_endpoint_auth_method,
            Some(TokenEndpointAuthMethod::ClientSecretPost)
        );
        assert_eq!(
            login.redirect_uri.unwrap().as_str(),
            "http://127.0.0.1:8765/callback"
        );
        assert_eq!(login.allowed_issuers.len(), 1);
    }

    #[test]
    fn dpop_is_true_false_or_preferred_in_both_oauth_tables() {
        let login = |dpop: Value| {
            parse(json!({"name": "x", "url": "https://x/mcp", "auth": {"oauth": {"dpop": dpop}}}))
                .map(|s| s.auth.oauth.unwrap().dpop)
        };
        assert_eq!(login(json!(true)).unwrap(), DpopMode::Required);
        assert_eq!(login(json!(false)).unwrap(), DpopMode::Off);
        assert_eq!(login(json!("preferred")).unwrap(), DpopMode::Preferred);
        let err = login(json!("yes")).unwrap_err();
        assert_eq!(
            err,
            [(InvalidValue, "servers[0].auth.oauth.dpop".to_owned())]
        );
        let spec = parse(json!({"name": "x", "url": "https://x/mcp", "auth": {
            "oauth_client_credentials": {"client_id": "c", "client_secret": "s", "dpop": "preferred"}
        }}))
        .unwrap();
        let cc = spec.auth.oauth_client_credentials.unwrap();
        assert_eq!(cc.dpop, DpopMode::Preferred);
        assert_eq!(
            serde_json::to_value(&cc).unwrap()["dpop"],
            json!("preferred")
        );
        assert_eq!(
            parse(json!({"name": "x", "url": "https://x/mcp", "auth": {"oauth": {}}}))
                .unwrap()
                .auth
                .oauth
                .unwrap()
                .dpop,
            DpopMode::Off
        );
    }

    #[test]
    fn oauth_problems_are_at_their_paths() {
        let err = parse(json!({
            "name": "x",
            "url": "https://x/mcp",
            "auth": {"bearer_token": "t", "oauth": {
                "client_secret": "s",
                "client_metadata_url": "http://agent.example/client.json",
                "scopes": ["ok", "two words", 3],
                "resource": "not a url",
                "token_endpoint_auth_method": "private_key_jwt",
                "redirect_uri": "http://evil.example/cb",
                "allowed_issuers": ["ftp://x"],
                "scope": "a"
            }}
        }))
        .unwrap_err();
        let expected = [
            (UnknownField, "servers[0].auth.oauth.scope"),
            (MissingField, "servers[0].auth.oauth.client_id"),
            (InvalidUrl, "servers[0].auth.oauth.client_metadata_url"),
            (WrongType, "servers[0].auth.oauth.scopes[2]"),
            (InvalidValue, "servers[0].auth.oauth.scopes[1]"),
            (InvalidUrl, "servers[0].auth.oauth.resource"),
            (
                InvalidValue,
                "servers[0].auth.oauth.token_endpoint_auth_method",
            ),
            (InvalidUrl, "servers[0].auth.oauth.redirect_uri"),
            (
                UnsupportedScheme,
                "servers[0].auth.oauth.allowed_issuers[0]",
            ),
            (ConflictingFields, "servers[0].auth"),
        ];
        let expected: Vec<_> = expected.iter().map(|(k, p)| (*k, p.to_string())).collect();
        assert_eq!(err, expected);

        let err = parse(
            json!({"name": "x", "url": "https://x/mcp", "auth": {"oauth": {
                "client_id": "a", "client_secret": "s", "token_endpoint_auth_method": "none"
            }}}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            [(
                ConflictingFields,
                "servers[0].auth.oauth.token_endpoint_auth_method".to_string()
            )]
        );
        let err = parse(
            json!({"name": "x", "url": "https://x/mcp", "auth": {"oauth": {
                "client_id": "a", "token_endpoint_auth_method": "client_secret_basic"
            }}}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            [(
                MissingField,
                "servers[0].auth.oauth.token_endpoint_auth_method".to_string()
            )]
        );
        let err = parse(json!({"name": "x", "url": "https://x/mcp", "auth": {
            "oauth": {}, "oauth_client_credentials": {"client_id": "c", "client_secret": "s"}
        }}))
        .unwrap_err();
        assert_eq!(err, [(ConflictingFields, "servers[0].auth".to_string())]);
        let err = parse(json!({"name": "x", "url": "https://x/mcp", "auth": {"oauth": "yes"}}))
            .unwrap_err();
        assert_eq!(err, [(WrongType, "servers[0].auth.oauth".to_string())]);
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
}
