//! `[serve] auth`: a bearer token named by its variable, or inbound JWTs read into mcp-serve's
//! [`JwtAuth`].

use std::time::Duration;

use mcp_agent::config::read::{
    JsonPath, Problems, as_str, expect_object, field, reject_unknown, shown, whole_number,
};
use mcp_agent::{
    ConfigError, Secret,
    config::{Problem, ProblemKind},
};
use mcp_serve::{DpopPolicy, JwtAlgorithm, JwtAuth};
use serde_json::Value;

/// The keys of `auth.jwt`.
const JWT_FIELDS: &[&str] = &[
    "issuer",
    "audience",
    "jwks_url",
    "algorithms",
    "leeway_s",
    "claims",
    "dpop",
];

/// The most claims `auth.jwt.claims` may name.
const MAX_CLAIMS: usize = 16;

/// The shortest bearer token `[serve] auth.bearer_token_env` may hold, in bytes.
const MIN_TOKEN_BYTES: usize = 16;

/// Inbound authentication of the HTTP endpoint.
#[derive(Debug, Clone)]
pub(crate) enum ServeAuth {
    /// `auth = { bearer_token_env = "VAR" }`: clients send `Authorization: Bearer <token>`,
    /// the token being the value of `VAR` when the gateway starts.
    BearerTokenEnv(String),
    /// `auth = { jwt = { issuer = "...", jwks_url = "..." } }`: clients send a JWT of that
    /// issuer, signed by a key of its JWKS.
    Jwt(Box<JwtAuth>),
}

impl ServeAuth {
    /// The bearer token read through `lookup` from the named variable. Unset, empty or blank
    /// is an error naming the variable (never an endpoint open to any token), and so is a
    /// token shorter than [`MIN_TOKEN_BYTES`].
    pub(crate) fn token_from(
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
            Some(value) if value.trim().len() < MIN_TOKEN_BYTES => {
                Err(ConfigError::invalid(vec![Problem::new(
                    "serve.auth.bearer_token_env",
                    ProblemKind::InvalidValue,
                    format!(
                        "the bearer token in {} has {} bytes, fewer than the {MIN_TOKEN_BYTES} required (a short token can be guessed; use e.g. `openssl rand -hex 32`)",
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

/// Reads `auth` at `path`.
pub(super) fn read(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<ServeAuth> {
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
        return jwt(v, &path.key("jwt"), p).map(|jwt| ServeAuth::Jwt(Box::new(jwt)));
    }
    let Some(v) = field(obj, "bearer_token_env") else {
        // An `auth` that names no way to authenticate must not serve everyone.
        p.push(
            path,
            ProblemKind::MissingField,
            "`auth` needs `bearer_token_env` (the variable holding the token) or `jwt`; \
             without either, remove `auth` to serve without authentication",
        );
        return None;
    };
    let name = super::serve_state::env_var(v, &path.key("bearer_token_env"), p)?;
    Some(ServeAuth::BearerTokenEnv(name))
}

/// Reads `auth.jwt` at `path`: which tokens the gateway accepts.
fn jwt(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<JwtAuth> {
    let obj = expect_object(
        value,
        path,
        "`jwt` (`{ issuer = \"...\", jwks_url = \"...\" }`)",
        p,
    )?;
    reject_unknown(obj, JWT_FIELDS, path, p);
    let text = |key: &str, p: &mut Problems| {
        let at = path.key(key);
        let s = as_str(field(obj, key)?, &at, p)?.trim();
        if s.is_empty() {
            p.push(&at, ProblemKind::InvalidValue, "is empty");
            return None;
        }
        Some(s.to_owned())
    };
    let required = |key: &str, v: Option<String>, p: &mut Problems| {
        if v.is_none() && !obj.contains_key(key) {
            p.push(
                &path.key(key),
                ProblemKind::MissingField,
                format!("`{key}` is required"),
            );
        }
        v
    };
    let issuer = text("issuer", p);
    let issuer = required("issuer", issuer, p);
    let audience = text("audience", p);
    let jwks_url = text("jwks_url", p);
    let jwks_url = required("jwks_url", jwks_url, p).and_then(|u| {
        let parsed = url::Url::parse(&u).ok();
        let loopback = parsed.as_ref().is_some_and(|u| match u.host() {
            Some(url::Host::Domain(d)) => d == "localhost",
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        });
        match parsed {
            Some(url) if url.scheme() == "https" || (url.scheme() == "http" && loopback) => {
                Some(url)
            }
            _ => {
                p.push(
                    &path.key("jwks_url"),
                    ProblemKind::InvalidValue,
                    format!(
                        "{} must be an https URL (http only on a loopback host)",
                        shown(&u)
                    ),
                );
                None
            }
        }
    });
    let algorithms = match field(obj, "algorithms") {
        Some(v) => Some(algorithms(v, &path.key("algorithms"), p)?),
        None => None,
    };
    let leeway = match field(obj, "leeway_s") {
        Some(v) => {
            let at = path.key("leeway_s");
            let leeway = Duration::from_secs(whole_number(v, &at, 0, p)?);
            if leeway > JwtAuth::MAX_LEEWAY {
                // More would let long-expired tokens pass.
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!(
                        "must be at most {} (seconds)",
                        JwtAuth::MAX_LEEWAY.as_secs()
                    ),
                );
                return None;
            }
            Some(leeway)
        }
        None => None,
    };
    let claims = match field(obj, "claims") {
        Some(v) => Some(claim_names(v, &path.key("claims"), p)?),
        None => None,
    };
    let dpop = match field(obj, "dpop") {
        Some(v) => {
            let at = path.key("dpop");
            match as_str(v, &at, p)?.parse::<DpopPolicy>() {
                Ok(policy) => Some(policy),
                Err(reason) => {
                    p.push(&at, ProblemKind::InvalidValue, reason);
                    return None;
                }
            }
        }
        None => None,
    };
    let mut jwt = JwtAuth::new(issuer?, jwks_url?);
    if let Some(dpop) = dpop {
        jwt = jwt.with_dpop(dpop);
    }
    if let Some(claims) = claims {
        jwt = jwt.with_claims(claims);
    }
    if let Some(audience) = audience {
        jwt = jwt.with_audience(audience);
    }
    if let Some(algorithms) = algorithms {
        jwt = jwt.with_algorithms(algorithms);
    }
    if let Some(leeway) = leeway {
        jwt = jwt.with_leeway(leeway);
    }
    Some(jwt)
}

/// An array of at most [`MAX_CLAIMS`] claim names (each 1 to 64 bytes).
fn claim_names(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<Vec<String>> {
    let Some(items) = value.as_array().filter(|items| items.len() <= MAX_CLAIMS) else {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!("must be an array of at most {MAX_CLAIMS} claim names"),
        );
        return None;
    };
    let mut names = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Some(name) = as_str(item, &at.index(i), p) else {
            continue;
        };
        if name.trim().is_empty() || name.len() > 64 {
            p.push(
                &at.index(i),
                ProblemKind::InvalidValue,
                "a claim name is 1 to 64 bytes",
            );
            continue;
        }
        names.push(name.to_owned());
    }
    Some(names)
}

/// A non-empty array of asymmetric algorithm names.
fn algorithms(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<Vec<JwtAlgorithm>> {
    let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
        p.push(
            at,
            ProblemKind::InvalidValue,
            "must be a non-empty array of algorithm names",
        );
        return None;
    };
    let mut algorithms = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Some(name) = as_str(item, &at.index(i), p) else {
            continue;
        };
        match name.parse::<JwtAlgorithm>() {
            Ok(algorithm) => algorithms.push(algorithm),
            Err(why) => p.push(&at.index(i), ProblemKind::InvalidValue, why),
        }
    }
    Some(algorithms)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_serve::{DpopPolicy, JwtAlgorithm};

    use super::ServeAuth;
    use crate::settings::tests::toml;

    #[test]
    fn a_jwt_table_is_read() {
        let settings = toml(
            r#"
[serve]
auth = { jwt = { issuer = "https://i.example", audience = "https://gw.example/mcp", jwks_url = "https://i.example/jwks", algorithms = ["ES256"], leeway_s = 5, claims = ["groups"] } }
"#,
        )
        .unwrap();
        let Some(ServeAuth::Jwt(jwt)) = &settings.serve.auth else {
            panic!("{:?}", settings.serve.auth)
        };
        assert_eq!(jwt.issuer, "https://i.example");
        assert_eq!(jwt.audience.as_deref(), Some("https://gw.example/mcp"));
        assert_eq!(jwt.jwks_url.as_str(), "https://i.example/jwks");
        assert_eq!(jwt.algorithms, [JwtAlgorithm::Es256]);
        assert_eq!(jwt.leeway, Duration::from_secs(5));
        assert_eq!(jwt.claims, ["groups"]);
        assert_eq!(jwt.dpop, None);
        let settings = toml(
            "[serve]\nauth = { jwt = { issuer = \"https://i.example\", jwks_url = \"https://i.example/jwks\", dpop = \"required\" } }",
        )
        .unwrap();
        let Some(ServeAuth::Jwt(jwt)) = &settings.serve.auth else {
            panic!("a jwt table");
        };
        assert_eq!(jwt.dpop, Some(DpopPolicy::Required));
        let err = toml(
            "[serve]\nauth = { jwt = { issuer = \"https://i.example\", jwks_url = \"https://i.example/jwks\", dpop = \"yes\" } }",
        )
        .unwrap_err();
        assert!(
            err.problems()
                .iter()
                .any(|p| p.path == "serve.auth.jwt.dpop"),
            "{err:?}"
        );
        let err =
            toml("[serve]\nauth = { jwt = { audience = \"a\", claims = [\"\"] } }").unwrap_err();
        let paths: Vec<_> = err.problems().iter().map(|p| p.path.clone()).collect();
        assert!(
            paths.contains(&"serve.auth.jwt.issuer".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"serve.auth.jwt.jwks_url".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"serve.auth.jwt.claims[0]".to_owned()),
            "{paths:?}"
        );
    }

    #[test]
    fn the_defaults_are_rs256_and_es256_with_half_a_minute_of_leeway() {
        let settings = toml(
            "[serve]\nauth = { jwt = { issuer = \"https://auth.example.com\", jwks_url = \"http://127.0.0.1:9/jwks\" } }",
        )
        .unwrap();
        let Some(ServeAuth::Jwt(jwt)) = &settings.serve.auth else {
            panic!("{:?}", settings.serve.auth)
        };
        assert_eq!(jwt.algorithms, [JwtAlgorithm::Rs256, JwtAlgorithm::Es256]);
        assert_eq!(
            (jwt.audience.as_deref(), jwt.leeway),
            (None, Duration::from_secs(30))
        );
    }

    #[test]
    fn an_auth_table_naming_no_way_to_authenticate_is_refused_not_served_open() {
        for text in [
            "[serve]\nauth = {}\n",
            "[serve.auth]\n",
            "[serve]\nauth = { bearer_token = \"never-echoed-token\" }\n",
        ] {
            let err = toml(text).unwrap_err();
            let problem = err
                .problems()
                .iter()
                .find(|p| p.path == "serve.auth")
                .unwrap_or_else(|| panic!("{text}: {err}"));
            assert!(
                problem.message.contains("`bearer_token_env`") && problem.message.contains("`jwt`"),
                "{problem}"
            );
            assert!(!err.to_string().contains("never-echoed-token"), "{err}");
        }
    }

    #[test]
    fn a_leeway_over_five_minutes_and_an_empty_audience_are_refused() {
        let jwt = |extra: &str| {
            toml(&format!(
                "[serve]\nauth = {{ jwt = {{ issuer = \"https://i.example\", jwks_url = \"https://i.example/jwks\"{extra} }} }}"
            ))
        };
        let settings = jwt(", leeway_s = 300").unwrap();
        let Some(ServeAuth::Jwt(ok)) = &settings.serve.auth else {
            panic!("{:?}", settings.serve.auth)
        };
        assert_eq!(ok.leeway, Duration::from_secs(300));
        for (extra, path, words) in [
            (", leeway_s = 301", "serve.auth.jwt.leeway_s", "at most 300"),
            (
                ", leeway_s = 99999999",
                "serve.auth.jwt.leeway_s",
                "at most 300",
            ),
            (", audience = \" \"", "serve.auth.jwt.audience", "empty"),
        ] {
            let err = jwt(extra).unwrap_err();
            let problem = err
                .problems()
                .iter()
                .find(|p| p.path == path)
                .unwrap_or_else(|| panic!("{extra}: {err}"));
            assert!(problem.to_string().contains(words), "{extra}: {problem}");
        }
    }

    #[test]
    fn the_token_is_read_from_the_named_variable_and_must_be_long_enough() {
        let auth = ServeAuth::BearerTokenEnv("GATEWAY_TOKEN".into());
        let token = auth
            .token_from(|_| Some("t-0123456789abcdef".into()))
            .unwrap();
        assert_eq!(token.expose(), "t-0123456789abcdef");
        let short = auth.token_from(|_| Some("t-1".into())).unwrap_err();
        assert!(short.to_string().contains("3 bytes"), "{short}");
        let unset = auth.token_from(|_| None).unwrap_err();
        assert!(unset.to_string().contains("GATEWAY_TOKEN"), "{unset}");
    }
}
