//! `[serve] auth = { jwt = { ... } }`: the issuer, audience and keys of inbound JWTs.

use serde::Serialize;
use serde_json::Value;

use super::integer;
use crate::ProblemKind;
use crate::parse::{as_str, expect_object, field, reject_unknown, shown};
use crate::path::{JsonPath, Problems};

/// The keys of `auth.jwt`.
const JWT_FIELDS: &[&str] = &["issuer", "audience", "jwks_url", "algorithms", "leeway_s"];

/// The signature algorithms `auth.jwt.algorithms` may name (asymmetric only).
pub const JWT_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
];

/// The largest `auth.jwt.leeway_s`: a larger clock skew would let expired tokens pass.
const MAX_LEEWAY_S: u64 = 300;

/// `auth.jwt`: which tokens the gateway accepts.
///
/// ```
/// use mcp_config::{Config, FileFormat, ServeAuth};
///
/// let config = Config::parse(
///     r#"
/// [serve]
/// auth = { jwt = { issuer = "https://auth.example.com", jwks_url = "https://auth.example.com/jwks" } }
/// "#,
///     FileFormat::Toml,
///     std::iter::empty::<(&str, &str)>(),
/// )?;
/// let Some(ServeAuth::Jwt(jwt)) = &config.serve.auth else { panic!() };
/// assert_eq!(jwt.algorithms, ["RS256", "ES256"]);
/// assert_eq!((jwt.audience.as_deref(), jwt.leeway_s), (None, 30));
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ServeJwt {
    /// The exact `iss` of accepted tokens.
    pub issuer: String,
    /// What `aud` must include; `None`: the gateway's URL.
    pub audience: Option<String>,
    /// The issuer's JWKS (`https`, or `http` on a loopback host).
    pub jwks_url: String,
    /// Allowed algorithms (names from [`JWT_ALGORITHMS`]). Default RS256 and ES256.
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds. Default 30, at most 300.
    pub leeway_s: u64,
}

pub(super) fn jwt(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<ServeJwt> {
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
        match parsed.as_ref().map(url::Url::scheme) {
            Some("https") => Some(u),
            Some("http") if loopback => Some(u),
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
    let mut algorithms = vec!["RS256".to_owned(), "ES256".to_owned()];
    if let Some(v) = field(obj, "algorithms") {
        let at = path.key("algorithms");
        match v.as_array() {
            Some(items) if !items.is_empty() => {
                algorithms.clear();
                for (i, item) in items.iter().enumerate() {
                    let Some(name) = as_str(item, &at.index(i), p) else {
                        continue;
                    };
                    if JWT_ALGORITHMS.contains(&name) {
                        algorithms.push(name.to_owned());
                    } else {
                        let why = if name.eq_ignore_ascii_case("none")
                            || name.to_ascii_uppercase().starts_with("HS")
                        {
                            "is never accepted (unsigned, or HMAC keyed with a public key)"
                        } else {
                            "is not a supported algorithm"
                        };
                        p.push(
                            &at.index(i),
                            ProblemKind::InvalidValue,
                            format!("{} {why}: use {}", shown(name), JWT_ALGORITHMS.join(", ")),
                        );
                    }
                }
            }
            _ => p.push(
                &at,
                ProblemKind::InvalidValue,
                "must be a non-empty array of algorithm names",
            ),
        }
    }
    let leeway_s = match field(obj, "leeway_s") {
        Some(v) => {
            let at = path.key("leeway_s");
            let leeway = integer(v, &at, 0, p)?;
            if leeway > MAX_LEEWAY_S {
                // More would let long-expired tokens pass.
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!("must be at most {MAX_LEEWAY_S} (seconds)"),
                );
                return None;
            }
            leeway
        }
        None => 30,
    };
    Some(ServeJwt {
        issuer: issuer?,
        audience,
        jwks_url: jwks_url?,
        algorithms,
        leeway_s,
    })
}

#[cfg(test)]
mod tests {
    use crate::{Config, FileFormat, ServeAuth};

    fn toml(text: &str) -> Result<Config, crate::ConfigError> {
        Config::parse(text, FileFormat::Toml, std::iter::empty::<(&str, &str)>())
    }

    #[test]
    fn a_jwt_table_is_read() {
        let config = toml(
            r#"
[serve]
auth = { jwt = { issuer = "https://i.example", audience = "https://gw.example/mcp", jwks_url = "https://i.example/jwks", algorithms = ["ES256"], leeway_s = 5 } }
"#,
        )
        .unwrap();
        let Some(ServeAuth::Jwt(jwt)) = &config.serve.auth else {
            panic!("{:?}", config.serve.auth)
        };
        assert_eq!(jwt.issuer, "https://i.example");
        assert_eq!(jwt.audience.as_deref(), Some("https://gw.example/mcp"));
        assert_eq!(jwt.algorithms, ["ES256"]);
        assert_eq!(jwt.leeway_s, 5);
        let err = toml("[serve]\nauth = { jwt = { audience = \"a\" } }").unwrap_err();
        let paths: Vec<_> = err.problems().iter().map(|p| p.path.clone()).collect();
        assert!(
            paths.contains(&"serve.auth.jwt.issuer".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"serve.auth.jwt.jwks_url".to_owned()),
            "{paths:?}"
        );
    }

    #[test]
    fn a_leeway_over_five_minutes_and_an_empty_audience_are_refused() {
        let jwt = |extra: &str| {
            toml(&format!(
                "[serve]\nauth = {{ jwt = {{ issuer = \"https://i.example\", jwks_url = \"https://i.example/jwks\"{extra} }} }}"
            ))
        };
        let config = jwt(", leeway_s = 300").unwrap();
        let Some(ServeAuth::Jwt(ok)) = &config.serve.auth else {
            panic!("{:?}", config.serve.auth)
        };
        assert_eq!(ok.leeway_s, 300);
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
}
