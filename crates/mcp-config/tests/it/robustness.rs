//! Robustness of config parsing: arbitrary documents shaped like configurations never
//! panic, every refusal names a path, and a secret planted anywhere never shows in what a
//! loaded configuration prints. A coverage-guided fuzz target over the same entry points is in
//! `crates/mcp-config/fuzz` (`cargo +nightly fuzz run config_parse`).

use mcp_config::{Config, ConfigError, FileFormat, RunSelection, ServerSpec, SpecOrigin, adapters};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const SECRET: &str = "s3cr3t-PLANTED-7731";

/// Keys the loaders know, plus near-misses, so generated documents reach deep validation paths.
const KEYS: &[&str] = &[
    "name",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "auth",
    "bearer_token",
    "bearer_token_env",
    "oauth_client_credentials",
    "token_url",
    "client_id",
    "client_secret",
    "client_secret_env",
    "scope",
    "resource",
    "audience",
    "token_endpoint_auth_method",
    "allowed_issuers",
    "connect_timeout_seconds",
    "call_timeout_seconds",
    "tools",
    "allow",
    "deny",
    "pinned",
    "inherit_env",
    "servers",
    "mcpServers",
    "partial_failure",
    "ssrf_guard",
    "allow_inline_stdio",
    "mcp",
    "comand",
    "type",
    "disabled",
    "",
];

const WORDS: &[&str] = &[
    "stdio",
    "streamable_http",
    "http://127.0.0.1/mcp",
    "https://mcp.example.com/x",
    "ftp://x",
    "fail_fast",
    "skip_unavailable",
    "a__b",
    "ok-name",
    "with space",
    "${UNSET}",
    "${HOME:-/x}",
    "client_secret_post",
    "*",
    "",
    SECRET,
    "é☃",
    "\u{0}",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..100).prop_map(|n| json!(n)),
        (-1.0f64..1e6).prop_map(|f| json!(f)),
        proptest::sample::select(WORDS).prop_map(|w| json!(w)),
        "[a-z_]{0,8}".prop_map(Value::String),
    ]
}

fn document() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |pairs| {
                    Value::Object(
                        pairs
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect::<Map<_, _>>(),
                    )
                }
            ),
        ]
    })
}

fn assert_paths(result: Result<impl std::fmt::Debug, ConfigError>) {
    if let Err(ConfigError::Invalid { problems }) = &result {
        assert!(!problems.is_empty());
        for problem in problems {
            assert!(!problem.message.is_empty(), "{problem:?}");
            assert!(
                !problem.message.contains(SECRET),
                "a problem echoes a secret: {problem:?}"
            );
            assert!(
                !problem.to_string().contains(SECRET),
                "a problem's cause echoes a secret: {problem:?}"
            );
        }
    }
    if let Ok(value) = &result {
        assert!(
            !format!("{value:?}").contains(SECRET),
            "Debug shows a secret"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_json_document_is_loaded_or_refused_with_paths(doc in document()) {
        let loaded = Config::from_json(&doc);
        if let Ok(config) = &loaded {
            let printed = serde_json::to_string(config).unwrap();
            prop_assert!(!printed.contains(SECRET), "Serialize shows a secret: {printed}");
        }
        assert_paths(loaded);
        assert_paths(Config::parse(&doc.to_string(), FileFormat::Json, [("HOME", "/root")]));
        assert_paths(ServerSpec::from_json(&doc, SpecOrigin::Inline));
        if let Value::Object(map) = &doc {
            assert_paths(RunSelection::from_metadata(map));
        }
        assert_paths(adapters::from_ag_ui_forwarded_props(&doc));
    }

    #[test]
    fn any_text_is_loaded_or_refused_without_panicking(text in ".{0,200}") {
        assert_paths(Config::parse(&text, FileFormat::Toml, [("A", "b")]));
        assert_paths(Config::parse(&text, FileFormat::Json, [("A", "b")]));
    }

    #[test]
    fn any_json_document_rendered_as_toml_is_handled(doc in document()) {
        if let Ok(text) = toml::to_string(&doc) {
            assert_paths(Config::parse(&text, FileFormat::Toml, std::iter::empty::<(&str, &str)>()));
        }
    }
}
