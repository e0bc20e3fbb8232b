//! The federated `auth` tables: `enterprise` (SEP-990 enterprise-managed authorization) and
//! `workload_identity`. Their credentials come from a variable or a file: a key that would put
//! one in the document itself is refused with the key to use instead.

use serde_json::{Map, Value};
use url::Url;

use super::read::{
    as_str, check_env_name, expect_object, field, non_empty_str, parse_http_url, reject_unknown,
    string_list,
};
use crate::path::{JsonPath, Problems};
use crate::{EnterpriseAuth, ProblemKind, SecretSource, TokenSource, WorkloadIdentity};

use ProblemKind::*;

const ENTERPRISE_FIELDS: &[&str] = &[
    "idp_token_url",
    "subject_token_env",
    "subject_token_file",
    "client_id",
    "client_secret_env",
    "idp_client_id",
    "idp_client_secret_env",
    "audience",
    "resource",
    "scope",
    "allowed_issuers",
];
const WORKLOAD_FIELDS: &[&str] = &[
    "token_file",
    "token_env",
    "client_id",
    "audience",
    "scope",
    "allowed_issuers",
];
/// Keys that would hold a credential inline, each with the key to use instead.
const INLINE_KEYS: &[(&str, &str)] = &[
    ("client_secret", "client_secret_env"),
    ("idp_client_secret", "idp_client_secret_env"),
    ("subject_token", "subject_token_env` or `subject_token_file"),
    ("token", "token_file` or `token_env"),
];

/// The `enterprise` table.
pub(super) fn parse_enterprise(
    value: &Value,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<EnterpriseAuth> {
    let before = p.len();
    let obj = expect_object(value, path, "`enterprise`", p)?;
    check_keys(obj, ENTERPRISE_FIELDS, path, p);
    let idp_token_url = match field(obj, "idp_token_url") {
        None => {
            p.push(
                &path.key("idp_token_url"),
                MissingField,
                "enterprise-managed authorization needs the identity provider's `idp_token_url`",
            );
            None
        }
        Some(v) => {
            let at = path.key("idp_token_url");
            as_str(v, &at, p).and_then(|s| parse_http_url(s, &at, p))
        }
    };
    let subject_token = token_source(
        obj,
        ("subject_token_env", "subject_token_file"),
        "the user's identity token",
        path,
        p,
    );
    let client_id = match field(obj, "client_id") {
        None => {
            p.push(
                &path.key("client_id"),
                MissingField,
                "enterprise-managed authorization needs the `client_id` registered at the MCP server's authorization server",
            );
            None
        }
        Some(v) => non_empty_str(v, &path.key("client_id"), p),
    };
    let client_secret = env_secret(obj, "client_secret_env", path, p);
    let idp_client_id =
        field(obj, "idp_client_id").and_then(|v| non_empty_str(v, &path.key("idp_client_id"), p));
    let idp_client_secret = env_secret(obj, "idp_client_secret_env", path, p);
    if idp_client_secret.is_some() && idp_client_id.is_none() {
        p.push(
            &path.key("idp_client_id"),
            MissingField,
            "a secret at the identity provider belongs to a client there: set `idp_client_id` too",
        );
    }
    let audience = field(obj, "audience").and_then(|v| non_empty_str(v, &path.key("audience"), p));
    let resource = url_string(obj, "resource", path, p);
    let scope = field(obj, "scope").and_then(|v| non_empty_str(v, &path.key("scope"), p));
    let allowed_issuers = issuers(obj, path, p);
    if p.len() > before {
        return None;
    }
    Some(EnterpriseAuth {
        idp_token_url: idp_token_url?,
        subject_token: subject_token?,
        client_id: client_id?,
        client_secret,
        idp_client_id,
        idp_client_secret,
        audience,
        resource,
        scope,
        allowed_issuers,
    })
}

/// The `workload_identity` table.
pub(super) fn parse_workload(
    value: &Value,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<WorkloadIdentity> {
    let before = p.len();
    let obj = expect_object(value, path, "`workload_identity`", p)?;
    check_keys(obj, WORKLOAD_FIELDS, path, p);
    let token = token_source(
        obj,
        ("token_env", "token_file"),
        "the workload's token",
        path,
        p,
    );
    let client_id =
        field(obj, "client_id").and_then(|v| non_empty_str(v, &path.key("client_id"), p));
    let audience = url_string(obj, "audience", path, p);
    let scope = field(obj, "scope").and_then(|v| non_empty_str(v, &path.key("scope"), p));
    let allowed_issuers = issuers(obj, path, p);
    if p.len() > before {
        return None;
    }
    Some(WorkloadIdentity {
        token: token?,
        client_id,
        audience,
        scope,
        allowed_issuers,
    })
}

/// Unknown keys, and keys that would put a credential in the document (each naming the key to
/// use instead).
fn check_keys(obj: &Map<String, Value>, allowed: &[&str], path: &JsonPath, p: &mut Problems) {
    let mut known: Vec<&str> = allowed.to_vec();
    for (inline, instead) in INLINE_KEYS {
        if obj.contains_key(*inline) {
            known.push(inline);
            p.push(
                &path.key(inline),
                InvalidValue,
                format!(
                    "a credential is never written into the configuration here; name where it is with `{instead}`"
                ),
            );
        }
    }
    reject_unknown(obj, &known, path, p);
}

/// Exactly one of `env_key` (a variable name) and `file_key` (a path).
fn token_source(
    obj: &Map<String, Value>,
    (env_key, file_key): (&str, &str),
    what: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<TokenSource> {
    match (field(obj, env_key), field(obj, file_key)) {
        (Some(_), Some(_)) => {
            p.push(
                path,
                ConflictingFields,
                format!("has both `{env_key}` and `{file_key}`; keep one"),
            );
            None
        }
        (None, None) => {
            p.push(
                &path.key(file_key),
                MissingField,
                format!("{what} comes from `{file_key}` or `{env_key}`; set one"),
            );
            None
        }
        (Some(v), None) => {
            let at = path.key(env_key);
            let name = non_empty_str(v, &at, p)?;
            check_env_name(&name, &at, p).then_some(TokenSource::Env(name))
        }
        (None, Some(v)) => {
            let at = path.key(file_key);
            let file = non_empty_str(v, &at, p)?;
            if file.contains('\0') {
                p.push(&at, InvalidValue, "a file path has no NUL character");
                return None;
            }
            Some(TokenSource::File(file.into()))
        }
    }
}

/// An optional `*_env` key naming the variable of a secret.
fn env_secret(
    obj: &Map<String, Value>,
    key: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<SecretSource> {
    let at = path.key(key);
    let name = non_empty_str(field(obj, key)?, &at, p)?;
    check_env_name(&name, &at, p).then_some(SecretSource::Env(name))
}

/// `allowed_issuers`: http(s) URLs.
fn issuers(obj: &Map<String, Value>, path: &JsonPath, p: &mut Problems) -> Vec<Url> {
    let Some(v) = field(obj, "allowed_issuers") else {
        return Vec::new();
    };
    let at = path.key("allowed_issuers");
    string_list(v, &at, p)
        .iter()
        .enumerate()
        .filter_map(|(i, s)| parse_http_url(s, &at.index(i), p))
        .collect()
}

/// An optional key holding an http(s) URL, kept as written.
fn url_string(
    obj: &Map<String, Value>,
    key: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<String> {
    let at = path.key(key);
    let text = non_empty_str(field(obj, key)?, &at, p)?;
    parse_http_url(&text, &at, p)?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::parse::parse_test_server as parse;

    fn problems(auth: Value) -> Vec<(ProblemKind, String)> {
        parse(json!({"name": "x", "url": "https://x/mcp", "auth": auth})).unwrap_err()
    }

    #[test]
    fn an_enterprise_table_is_typed() {
        let spec = parse(
            json!({"name": "x", "url": "https://x/mcp", "auth": {"enterprise": {
                "idp_token_url": "https://idp.example/token",
                "subject_token_file": "/run/id_token",
                "client_id": "agent", "client_secret_env": "AGENT_SECRET",
                "idp_client_id": "agent-at-idp",
                "audience": "https://as.example", "resource": "https://x/mcp", "scope": "files:read"
            }}}),
        )
        .unwrap();
        let e = spec.auth.enterprise.unwrap();
        assert_eq!(e.idp_token_url.as_str(), "https://idp.example/token");
        assert_eq!(
            e.subject_token,
            TokenSource::File(PathBuf::from("/run/id_token"))
        );
        assert_eq!(e.client_id, "agent");
        assert_eq!(
            e.client_secret,
            Some(SecretSource::Env("AGENT_SECRET".into()))
        );
        assert_eq!(e.idp_client_id.as_deref(), Some("agent-at-idp"));
        assert_eq!(e.audience.as_deref(), Some("https://as.example"));
        assert_eq!(e.resource.as_deref(), Some("https://x/mcp"));
        assert_eq!(e.scope.as_deref(), Some("files:read"));
    }

    #[test]
    fn a_workload_table_is_typed() {
        let spec = parse(json!({"name": "x", "url": "https://x/mcp", "auth": {
            "workload_identity": {"token_env": "WORKLOAD_TOKEN", "audience": "https://x/mcp"}
        }}))
        .unwrap();
        let w = spec.auth.workload_identity.unwrap();
        assert_eq!(w.token, TokenSource::Env("WORKLOAD_TOKEN".into()));
        assert_eq!(w.audience.as_deref(), Some("https://x/mcp"));
        assert_eq!(w.client_id, None);
    }

    #[test]
    fn enterprise_problems_are_at_their_paths() {
        let err = problems(json!({"enterprise": {
            "subject_token_env": "A", "subject_token_file": "/f",
            "client_secret": "inline", "idp_client_secret_env": "B",
            "resource": "not a url", "scopes": "x"
        }}));
        let at = |k: &str| format!("servers[0].auth.enterprise{k}");
        assert_eq!(
            err,
            [
                (InvalidValue, at(".client_secret")),
                (UnknownField, at(".scopes")),
                (MissingField, at(".idp_token_url")),
                (ConflictingFields, at("")),
                (MissingField, at(".client_id")),
                (MissingField, at(".idp_client_id")),
                (InvalidUrl, at(".resource")),
            ]
        );
    }

    #[test]
    fn workload_problems_are_at_their_paths() {
        let at = |k: &str| format!("servers[0].auth.workload_identity{k}");
        assert_eq!(
            problems(json!({"workload_identity": {"token": "eyJ", "token_env": "A=B"}})),
            [
                (InvalidValue, at(".token")),
                (InvalidValue, at(".token_env"))
            ]
        );
        assert_eq!(
            problems(json!({"workload_identity": {}})),
            [(MissingField, at(".token_file"))]
        );
        assert_eq!(
            problems(json!({"workload_identity": {"token_file": ""}})),
            [(InvalidValue, at(".token_file"))]
        );
    }

    #[test]
    fn one_way_to_set_the_authorization_header() {
        let err = problems(json!({
            "workload_identity": {"token_file": "/t"},
            "enterprise": {"idp_token_url": "https://i/t", "subject_token_env": "S", "client_id": "c"},
        }));
        assert_eq!(err, [(ConflictingFields, "servers[0].auth".to_string())]);
        let err = problems(json!({
            "bearer_token": "t", "workload_identity": {"token_file": "/t"}
        }));
        assert_eq!(err, [(ConflictingFields, "servers[0].auth".to_string())]);
    }
}
