//! Auth objects and credentials: `auth` (headers, bearer token, OAuth client credentials),
//! secrets given inline or by variable name, header maps, and the checks that refuse a
//! credential that would send nothing. Messages name the field, the server and any `${…}`
//! variable that gave nothing, never the value.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::read::{
    as_str, check_env_name, did_you_mean, expect_object, field, non_empty_str, parse_http_url,
    reject_unknown, shown, string_list, string_map,
};
use crate::path::{JsonPath, Problems};
use crate::{
    AuthSpec, HttpSpec, OAuthClientCredentials, ProblemKind, Secret, SecretSource,
    TokenEndpointAuthMethod,
};

use ProblemKind::*;

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
pub(super) fn check_authorization_headers(
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
