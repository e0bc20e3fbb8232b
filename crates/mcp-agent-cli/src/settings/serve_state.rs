//! `[serve] state`: the shared state of a gateway fleet, read into mcp-state's
//! [`StateConfig`]: `state = { redis = { url_env = "REDIS_URL", key_prefix = "mcp-agent:",
//! seal_key_env = "VAR", ca_file = "/etc/redis/ca.pem" }, on_error = "closed" }`. A URL is
//! never repeated in a problem (it may hold a password); the CA file is read when the gateway
//! connects.

use mcp_agent::config::ProblemKind;
use mcp_agent::config::read::{
    JsonPath, Problems, as_str, expect_object, field, reject_unknown, shown,
};
use mcp_state::{OnError, StateConfig};
use serde_json::Value;

/// The keys of `state`.
const STATE_FIELDS: &[&str] = &["redis", "on_error"];

/// The keys of `state.redis`.
const REDIS_FIELDS: &[&str] = &["url", "url_env", "key_prefix", "seal_key_env", "ca_file"];

/// Reads `state` at `path`.
pub(super) fn read(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<StateConfig> {
    let what = "`state` (`{ redis = { url_env = \"VAR\" }, on_error = \"closed\" }`)";
    let obj = expect_object(value, path, what, p)?;
    reject_unknown(obj, STATE_FIELDS, path, p);
    let on_error = field(obj, "on_error").and_then(|v| {
        let at = path.key("on_error");
        let word = as_str(v, &at, p)?;
        let parsed = match word {
            "closed" => Some(OnError::Closed),
            "open" => Some(OnError::Open),
            _ => None,
        };
        if parsed.is_none() {
            p.push(
                &at,
                ProblemKind::InvalidValue,
                format!("unknown action {}: use `closed` or `open`", shown(word)),
            );
        }
        parsed
    });
    let at = path.key("redis");
    let Some(redis) = field(obj, "redis") else {
        p.push(
            &at,
            ProblemKind::MissingField,
            "`redis` is required (`{ url_env = \"VAR\" }`)",
        );
        return None;
    };
    let mut config = redis_table(redis, &at, p)?;
    config.on_error = on_error.unwrap_or_default();
    Some(config)
}

/// Reads `state.redis` at `path`.
fn redis_table(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<StateConfig> {
    let obj = expect_object(value, path, "`redis`", p)?;
    reject_unknown(obj, REDIS_FIELDS, path, p);
    let url = field(obj, "url").and_then(|v| redis_url(v, &path.key("url"), p));
    let url_env = field(obj, "url_env").and_then(|v| env_var(v, &path.key("url_env"), p));
    let seal_key_env =
        field(obj, "seal_key_env").and_then(|v| env_var(v, &path.key("seal_key_env"), p));
    let ca_file = field(obj, "ca_file").and_then(|v| {
        let at = path.key("ca_file");
        let file = as_str(v, &at, p)?;
        if file.trim().is_empty() {
            p.push(
                &at,
                ProblemKind::InvalidValue,
                "the CA file is empty: name a PEM file of the CAs that issued the \
                 `rediss://` server's certificate",
            );
            return None;
        }
        Some(std::path::PathBuf::from(file))
    });
    let key_prefix = field(obj, "key_prefix").and_then(|v| {
        let at = path.key("key_prefix");
        let prefix = as_str(v, &at, p)?;
        if prefix.is_empty() {
            p.push(&at, ProblemKind::InvalidValue, "the key prefix is empty");
            return None;
        }
        Some(prefix.to_owned())
    });
    if field(obj, "url").is_none() && field(obj, "url_env").is_none() {
        p.push(
            &path.key("url_env"),
            ProblemKind::MissingField,
            "`url_env` (the variable holding the Redis URL) or `url` is required",
        );
        return None;
    }
    let mut config = match (url, url_env) {
        (Some(url), url_env) => StateConfig {
            url_env,
            ..StateConfig::new(url)
        },
        (None, url_env) => StateConfig::from_env(url_env?),
    };
    config.seal_key_env = seal_key_env;
    config.ca_file = ca_file;
    if let Some(prefix) = key_prefix {
        config.key_prefix = prefix;
    }
    Some(config)
}

/// A URL a connection takes ([`StateConfig::check_url`]); the problem never repeats it.
fn redis_url(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<String> {
    let text = as_str(value, at, p)?.trim();
    if let Err(e) = StateConfig::check_url(text) {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!(
                "{e}: write `redis://[:password@]host[:port][/db]` or `rediss://…` (the value \
                 is not shown: it may hold a password; prefer `url_env`)"
            ),
        );
        return None;
    }
    Some(text.to_owned())
}

/// An environment variable's name: not blank, no `=`, NUL or space.
pub(super) fn env_var(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<String> {
    let name = as_str(value, at, p)?.trim();
    if name.is_empty() || name.contains(['=', '\0', ' ']) {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!("{} is not a valid environment variable name", shown(name)),
        );
        return None;
    }
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use mcp_agent::config::ProblemKind;
    use mcp_state::OnError;

    use crate::settings::tests::{kinds, toml};

    #[test]
    fn the_state_table_is_read_with_its_defaults() {
        let settings = toml(
            r#"
[serve]
state = { redis = { url_env = "REDIS_URL", key_prefix = "gw-a:", seal_key_env = "SEAL", ca_file = "/etc/redis/ca.pem" }, on_error = "open" }
"#,
        )
        .unwrap();
        let state = settings.serve.state.unwrap();
        assert_eq!(
            state.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/redis/ca.pem"))
        );
        assert_eq!(state.url, None);
        assert_eq!(state.url_env.as_deref(), Some("REDIS_URL"));
        assert_eq!(state.key_prefix, "gw-a:");
        assert_eq!(state.seal_key_env.as_deref(), Some("SEAL"));
        assert_eq!(state.on_error, OnError::Open);

        let settings =
            toml("[serve.state.redis]\nurl = \"redis://:hunter2@10.0.0.5:6380/1\"\n").unwrap();
        let state = settings.serve.state.as_ref().unwrap();
        assert_eq!(
            (state.key_prefix.as_str(), state.on_error),
            ("mcp-agent:", OnError::Closed)
        );
        assert_eq!(state.ca_file, None, "the web roots by default");
        let shown = format!("{:?}", settings.serve);
        assert!(
            shown.contains("10.0.0.5:6380") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(
            toml("").unwrap().serve.state.is_none(),
            "nothing shared by default"
        );
    }

    #[test]
    fn every_bad_state_key_is_named_and_no_url_is_repeated() {
        let err = toml(
            r#"
[serve]
state = { redis = { url = "http://:hunter2@cache:6379", url_env = "A=B", key_prefix = "", seal_key_env = 3, ca_file = " ", password = "x" }, on_error = "maybe", colour = 1 }
"#,
        )
        .unwrap_err();
        let problems = kinds(&err);
        for (kind, path) in [
            (ProblemKind::InvalidValue, "serve.state.redis.url"),
            (ProblemKind::InvalidValue, "serve.state.redis.url_env"),
            (ProblemKind::InvalidValue, "serve.state.redis.key_prefix"),
            (ProblemKind::WrongType, "serve.state.redis.seal_key_env"),
            (ProblemKind::InvalidValue, "serve.state.redis.ca_file"),
            (ProblemKind::UnknownField, "serve.state.redis.password"),
            (ProblemKind::InvalidValue, "serve.state.on_error"),
            (ProblemKind::UnknownField, "serve.state.colour"),
        ] {
            assert!(
                problems.contains(&(kind, path.to_owned())),
                "{kind:?} {path} not in {problems:?}"
            );
        }
        assert!(!err.to_string().contains("hunter2"), "{err}");

        // `#insecure` would ask the client to check no certificate.
        let err = toml(
            "[serve]\nstate = { redis = { url = \"rediss://:hunter2@cache:6380/#insecure\" } }\n",
        )
        .unwrap_err();
        let problem = err
            .problems()
            .iter()
            .find(|p| p.path == "serve.state.redis.url")
            .unwrap_or_else(|| panic!("{err}"));
        assert!(problem.message.contains("fragment"), "{problem}");
        assert!(!err.to_string().contains("hunter2"), "{err}");

        for (text, path) in [
            (
                "[serve]\nstate = { on_error = \"open\" }\n",
                "serve.state.redis",
            ),
            (
                "[serve.state.redis]\nkey_prefix = \"x:\"\n",
                "serve.state.redis.url_env",
            ),
            ("[serve]\nstate = \"redis\"\n", "serve.state"),
        ] {
            let problems = kinds(&toml(text).unwrap_err());
            assert!(
                problems.iter().any(|(_, at)| at == path),
                "{path} not in {problems:?}"
            );
        }
    }
}
