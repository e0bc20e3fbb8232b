//! Every bad input is refused with the right kind of problem at the right path.
//!
//! One data-driven helper, [`check`]: each test gives an input (environment, a config file, or
//! a run against a configuration) beside the exact list of `(kind, path)` it must produce.

use agent_core::RunInput;
use mcp_config::{Config, ConfigError, FileFormat, ProblemKind, ProblemKind::*};
use serde_json::{Value, json};

/// Where the bad input comes from.
enum Input {
    /// `MCP_AGENT__…` variables.
    Env(Vec<(&'static str, &'static str)>),
    /// A config file with this name and text (`HOME` and `EMPTY`, set to the empty string, are
    /// the only variables set).
    File(&'static str, &'static str),
    /// A run with this metadata, against servers configured by `MCP_AGENT__SERVERS` plus
    /// extra variables.
    Run {
        env: &'static [(&'static str, &'static str)],
        metadata: Value,
    },
}

const CONFIGURED: &str = r#"[{"name": "git", "command": "git-mcp"},
                            {"name": "web", "url": "https://web.example.com/mcp"}]"#;

fn run(metadata: Value) -> Input {
    Input::Run { env: &[], metadata }
}

fn load(input: &Input) -> Result<(), ConfigError> {
    match input {
        Input::Env(vars) => Config::from_env_vars(vars.iter().copied()).map(drop),
        Input::File(name, text) => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let result =
                Config::load_with_vars([("HOME", "/home/test"), ("EMPTY", "")], Some(&path));
            if let Err(ConfigError::Invalid { problems }) = &result {
                for p in problems {
                    assert_eq!(p.file.as_deref(), Some(path.as_path()), "{p}");
                }
            }
            result.map(drop)
        }
        Input::Run { env, metadata } => {
            let vars = env
                .iter()
                .copied()
                .chain([("MCP_AGENT__SERVERS", CONFIGURED)]);
            let config = Config::from_env_vars(vars).expect("the configured servers are valid");
            let input = RunInput::new("state", "instruction")
                .with_metadata(json!({ "mcp": metadata }).as_object().unwrap().clone());
            config.resolve(&input).map(drop)
        }
    }
}

/// Loads `input` and asserts it fails with exactly `expected`, in order.
#[track_caller]
fn check(input: Input, expected: &[(ProblemKind, &str)]) {
    let err = load(&input).expect_err("the input should be refused");
    let problems = err.problems();
    let got: Vec<(ProblemKind, &str)> =
        problems.iter().map(|p| (p.kind, p.path.as_str())).collect();
    assert_eq!(got, expected, "all problems: {err}");
    let text = err.to_string();
    for p in problems {
        assert!(!p.message.is_empty());
        assert!(text.contains(&p.path), "`{text}` does not name {}", p.path);
    }
}

fn env_servers(json: &'static str) -> Input {
    Input::Env(vec![("MCP_AGENT__SERVERS", json)])
}

// ---- names ---------------------------------------------------------------------------------

#[test]
fn empty_name() {
    check(
        env_servers(r#"[{"name": "", "command": "x"}]"#),
        &[(EmptyName, "MCP_AGENT__SERVERS[0].name")],
    );
}

#[test]
fn name_with_a_space() {
    check(
        env_servers(r#"[{"name": "my server", "command": "x"}]"#),
        &[(InvalidName, "MCP_AGENT__SERVERS[0].name")],
    );
}

#[test]
fn name_over_the_length_limit() {
    let servers = |name: &str| -> &'static str {
        Box::leak(format!(r#"[{{"name": "{name}", "command": "x"}}]"#).into_boxed_str())
    };
    let long = "s".repeat(mcp_config::MAX_SERVER_NAME_CHARS + 1);
    check(
        env_servers(servers(&long)),
        &[(InvalidName, "MCP_AGENT__SERVERS[0].name")],
    );
    let err = load(&env_servers(servers(&long))).unwrap_err();
    assert!(
        err.to_string()
            .contains("has 65 characters, more than the limit of 64"),
        "{err}"
    );
    let at_limit = "s".repeat(mcp_config::MAX_SERVER_NAME_CHARS);
    load(&env_servers(servers(&at_limit))).expect("64 characters are fine");
}

#[test]
fn name_with_double_underscore() {
    check(
        env_servers(r#"[{"name": "git__hub", "command": "x"}]"#),
        &[(DoubleUnderscore, "MCP_AGENT__SERVERS[0].name")],
    );
}

#[test]
fn missing_name() {
    check(
        env_servers(r#"[{"command": "x"}]"#),
        &[(MissingField, "MCP_AGENT__SERVERS[0].name")],
    );
}

#[test]
fn duplicate_names() {
    check(
        env_servers(
            r#"[{"name": "git", "command": "a"}, {"name": "web", "url": "https://x.example"},
                {"name": "git", "command": "b"}]"#,
        ),
        &[(DuplicateName, "MCP_AGENT__SERVERS[2].name")],
    );
}

#[test]
fn duplicate_names_across_file_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.toml");
    std::fs::write(&path, "[[servers]]\nname = \"git\"\ncommand = \"a\"\n").unwrap();
    let err = Config::load_with_vars(
        [("MCP_AGENT__SERVERS", r#"[{"name": "git", "command": "b"}]"#)],
        Some(&path),
    )
    .unwrap_err();
    let p = &err.problems()[0];
    assert_eq!(
        (p.kind, p.path.as_str()),
        (DuplicateName, "MCP_AGENT__SERVERS[0].name")
    );
    assert!(
        p.message.contains("`git`") && p.message.contains("mcp.toml"),
        "{p}"
    );
}

// ---- transports ----------------------------------------------------------------------------

#[test]
fn stdio_without_command() {
    check(
        env_servers(r#"[{"name": "git", "transport": "stdio", "args": ["x"]}]"#),
        &[(MissingField, "MCP_AGENT__SERVERS[0].command")],
    );
}

#[test]
fn neither_command_nor_url() {
    check(
        env_servers(r#"[{"name": "git"}]"#),
        &[(MissingField, "MCP_AGENT__SERVERS[0]")],
    );
}

#[test]
fn http_without_url() {
    check(
        env_servers(
            r#"[{"name": "web", "transport": "streamable_http", "headers": {"X-A": "b"}}]"#,
        ),
        &[(MissingField, "MCP_AGENT__SERVERS[0].url")],
    );
}

#[test]
fn ftp_url() {
    check(
        env_servers(r#"[{"name": "web", "url": "ftp://files.example.com/mcp"}]"#),
        &[(UnsupportedScheme, "MCP_AGENT__SERVERS[0].url")],
    );
}

#[test]
fn unknown_transport() {
    check(
        env_servers(r#"[{"name": "web", "transport": "sse", "url": "https://x.example"}]"#),
        &[(InvalidTransport, "MCP_AGENT__SERVERS[0].transport")],
    );
}

#[test]
fn near_misses_of_built_in_transports_and_bad_kind_names() {
    // A typo of a built-in kind is a problem, not a custom transport nobody registered.
    check(
        env_servers(r#"[{"name": "git", "transport": "stdoi", "command": "x"}]"#),
        &[(InvalidTransport, "MCP_AGENT__SERVERS[0].transport")],
    );
    check(
        env_servers(r#"[{"name": "git", "transport": "Bad Kind!", "command": "x"}]"#),
        &[(InvalidTransport, "MCP_AGENT__SERVERS[0].transport")],
    );
}

#[test]
fn inline_custom_transport() {
    check(
        run(json!({"servers": [{"name": "bus", "transport": "message_bus", "topic": "t"}]})),
        &[(InlineTransport, "metadata.mcp.servers[0].transport")],
    );
}

#[test]
fn fields_of_the_other_transport() {
    check(
        env_servers(
            r#"[{"name": "git", "transport": "stdio", "command": "x", "url": "https://x.example"}]"#,
        ),
        &[(NotApplicable, "MCP_AGENT__SERVERS[0].url")],
    );
}

#[test]
fn unknown_field_comand() {
    let input = env_servers(r#"[{"name": "git", "transport": "stdio", "comand": "git-mcp"}]"#);
    let err = load(&input).unwrap_err();
    assert!(err.to_string().contains("did you mean `command`?"), "{err}");
    check(
        input,
        &[
            (UnknownField, "MCP_AGENT__SERVERS[0].comand"),
            (MissingField, "MCP_AGENT__SERVERS[0].command"),
        ],
    );
}

#[test]
fn unknown_fields_at_every_level() {
    check(
        env_servers(
            r#"[{"name": "web", "url": "https://x.example",
                 "auth": {"bearer_tokn": "t", "oauth_client_credentials":
                          {"client_id": "c", "client_secret": "s", "scopes": "a"}},
                 "tools": {"allowed": ["x"]}}]"#,
        ),
        &[
            (UnknownField, "MCP_AGENT__SERVERS[0].auth.bearer_tokn"),
            (
                UnknownField,
                "MCP_AGENT__SERVERS[0].auth.oauth_client_credentials.scopes",
            ),
            (UnknownField, "MCP_AGENT__SERVERS[0].tools.allowed"),
        ],
    );
}

// ---- timeouts ------------------------------------------------------------------------------

#[test]
fn negative_timeout() {
    check(
        env_servers(r#"[{"name": "git", "command": "x", "call_timeout_seconds": -5}]"#),
        &[(InvalidTimeout, "MCP_AGENT__SERVERS[0].call_timeout_seconds")],
    );
}

#[test]
fn a_timeout_over_a_year_is_refused_naming_the_bound() {
    check(
        env_servers(r#"[{"name": "git", "command": "x", "call_timeout_seconds": 1e19}]"#),
        &[(InvalidTimeout, "MCP_AGENT__SERVERS[0].call_timeout_seconds")],
    );
    let year = |secs: &str| {
        let vars = [
            ("MCP_AGENT__SERVERS", r#"[{"name": "git", "command": "x"}]"#),
            ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", secs),
        ];
        Config::from_env_vars(vars).map(drop)
    };
    let err = year("31536001").unwrap_err();
    assert!(err.to_string().contains("31536000 s (a year)"), "{err}");
    year("31536000").unwrap();
}

#[test]
fn zero_timeout() {
    check(
        env_servers(r#"[{"name": "git", "command": "x", "connect_timeout_seconds": 0}]"#),
        &[(
            InvalidTimeout,
            "MCP_AGENT__SERVERS[0].connect_timeout_seconds",
        )],
    );
    check(
        Input::Env(vec![("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "0")]),
        &[(InvalidTimeout, "MCP_AGENT__CONNECT_TIMEOUT_SECONDS")],
    );
}

#[test]
fn timeout_that_is_not_a_number() {
    check(
        env_servers(r#"[{"name": "git", "command": "x", "call_timeout_seconds": "60"}]"#),
        &[(WrongType, "MCP_AGENT__SERVERS[0].call_timeout_seconds")],
    );
}

// ---- the environment -----------------------------------------------------------------------

#[test]
fn servers_variable_not_json() {
    let input = Input::Env(vec![("MCP_AGENT__SERVERS", "[{name: git}]")]);
    let err = load(&input).unwrap_err();
    assert!(
        err.to_string()
            .contains("MCP_AGENT__SERVERS is not valid JSON"),
        "{err}"
    );
    check(input, &[(Syntax, "MCP_AGENT__SERVERS")]);
}

#[test]
fn servers_variable_not_an_array() {
    check(
        Input::Env(vec![(
            "MCP_AGENT__SERVERS",
            r#"{"name": "git", "command": "x"}"#,
        )]),
        &[(WrongType, "MCP_AGENT__SERVERS")],
    );
}

#[test]
fn unknown_variable_with_the_prefix() {
    check(
        Input::Env(vec![("MCP_AGENT__CONECT_TIMEOUT_SECONDS", "3")]),
        &[(UnknownField, "MCP_AGENT__CONECT_TIMEOUT_SECONDS")],
    );
}

// ---- files ---------------------------------------------------------------------------------

#[test]
fn unset_variable_without_default() {
    check(
        Input::File(
            "mcp.toml",
            "[[servers]]\nname = \"git\"\ncommand = \"${UNSET}/bin/git-mcp\"\n",
        ),
        &[(UndefinedVariable, "servers[0].command")],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    std::fs::write(
        &path,
        r#"{"servers": [{"name": "git", "command": "${UNSET}"}]}"#,
    )
    .unwrap();
    let err = Config::load_with_vars([("HOME", "/")], Some(&path)).unwrap_err();
    assert!(err.to_string().contains("`UNSET`"), "{err}");
}

#[test]
fn mcp_servers_entry_with_command_and_url() {
    check(
        Input::File(
            "claude_desktop_config.json",
            r#"{"mcpServers": {
                "ok": {"command": "ok-mcp"},
                "git": {"command": "git-mcp", "url": "https://git.example.com/mcp"}
            }}"#,
        ),
        &[(ConflictingFields, "mcpServers.git")],
    );
}

#[test]
fn mcp_servers_bad_key_and_legacy_sse() {
    check(
        Input::File(
            "mcp.json",
            r#"{"mcpServers": {
                "my server": {"command": "x"},
                "old": {"type": "sse", "url": "https://old.example.com/sse"}
            }}"#,
        ),
        &[
            (InvalidName, r#"mcpServers["my server"]"#),
            (InvalidTransport, "mcpServers.old.type"),
        ],
    );
}

#[test]
fn file_syntax_errors() {
    check(
        Input::File("mcp.json", r#"{"servers": [}"#),
        &[(Syntax, "")],
    );
    check(Input::File("mcp.toml", "servers = [\n"), &[(Syntax, "")]);
}

#[test]
fn unknown_top_level_key_in_a_file() {
    check(
        Input::File("mcp.toml", "server = []\n"),
        &[(UnknownField, "server")],
    );
}

#[test]
fn unsupported_file_format_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("mcp.yaml");
    std::fs::write(&yaml, "servers: []").unwrap();
    let err = Config::load_with_vars([("A", "b")], Some(&yaml)).unwrap_err();
    assert!(
        matches!(err, ConfigError::UnsupportedFormat { .. }),
        "{err}"
    );
    let missing = dir.path().join("missing.toml");
    let err = Config::load_with_vars([("A", "b")], Some(&missing)).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
}

// ---- per-run selection ---------------------------------------------------------------------

#[test]
fn unknown_server_name_in_a_run() {
    check(
        run(json!({"servers": ["git", "github"]})),
        &[(UnknownServer, "metadata.mcp.servers[1]")],
    );
}

#[test]
fn inline_spec_shadowing_a_configured_name() {
    check(
        run(json!({"servers": [{"name": "web", "url": "https://evil.example.com/mcp"}]})),
        &[(ShadowsConfigured, "metadata.mcp.servers[0].name")],
    );
}

#[test]
fn same_name_twice_in_one_run() {
    check(
        run(json!({"servers": ["git", "web", "git"]})),
        &[(DuplicateName, "metadata.mcp.servers[2]")],
    );
    check(
        run(json!({"servers": [
            {"name": "t", "url": "https://a.example.com/mcp"},
            {"name": "t", "url": "https://b.example.com/mcp"}
        ]})),
        &[(DuplicateName, "metadata.mcp.servers[1].name")],
    );
}

#[test]
fn bad_run_metadata_shapes() {
    check(
        run(json!({"servers": "git", "partial_failure": "skip", "allow_mcp": "yes", "sever": 1})),
        &[
            (UnknownField, "metadata.mcp.sever"),
            (WrongType, "metadata.mcp.servers"),
            (InvalidValue, "metadata.mcp.partial_failure"),
            (WrongType, "metadata.mcp.allow_mcp"),
        ],
    );
    check(
        run(json!({"servers": [42]})),
        &[(WrongType, "metadata.mcp.servers[0]")],
    );
    check(run(json!(["git"])), &[(WrongType, "metadata.mcp")]);
}

#[test]
fn inline_spec_problems_have_run_paths() {
    check(
        run(json!({"servers": [{"name": "t", "url": "https://t.example.com", "comand": "x"}]})),
        &[(UnknownField, "metadata.mcp.servers[0].comand")],
    );
}

// ---- safe defaults for inline specs --------------------------------------------------------

#[test]
fn inline_stdio_without_opt_in() {
    check(
        run(json!({"servers": [{"name": "sh", "command": "sh", "args": ["-c", "id"]}]})),
        &[(InlineStdio, "metadata.mcp.servers[0].transport")],
    );
    let err = load(&run(json!({"servers": [{"name": "sh", "command": "sh"}]}))).unwrap_err();
    assert!(err.to_string().contains("server `sh`"), "{err}");
}

#[test]
fn inline_stdio_inheriting_the_environment_without_the_secrets_opt_in() {
    // Allowing callers to start stdio servers does not hand them the operator's environment.
    check(
        Input::Run {
            env: &[("MCP_AGENT__ALLOW_INLINE_STDIO", "true")],
            metadata: json!({"servers": [{"name": "sh", "command": "sh", "inherit_env": true}]}),
        },
        &[(InlineEnvSecret, "metadata.mcp.servers[0].inherit_env")],
    );
    let allowed = Input::Run {
        env: &[
            ("MCP_AGENT__ALLOW_INLINE_STDIO", "true"),
            ("MCP_AGENT__ALLOW_INLINE_ENV_SECRETS", "true"),
        ],
        metadata: json!({"servers": [{"name": "sh", "command": "sh", "inherit_env": true}]}),
    };
    load(&allowed).expect("both opt-ins allow it");
}

#[test]
fn inline_bearer_token_env_without_opt_in() {
    check(
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"bearer_token_env": "OPERATOR_TOKEN"}
        }]})),
        &[(
            InlineEnvSecret,
            "metadata.mcp.servers[0].auth.bearer_token_env",
        )],
    );
}

#[test]
fn inline_client_secret_env_without_opt_in() {
    check(
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"oauth_client_credentials": {"client_id": "c", "client_secret_env": "OPERATOR_SECRET"}}
        }]})),
        &[(
            InlineEnvSecret,
            "metadata.mcp.servers[0].auth.oauth_client_credentials.client_secret_env",
        )],
    );
}

#[test]
fn inline_federated_credentials_never_read_this_hosts_files_or_environment() {
    let at = |k: &str| format!("metadata.mcp.servers[0].auth.{k}");
    check(
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"workload_identity": {"token_file": "/var/run/secrets/tokens/mcp"}}
        }]})),
        &[(InlineEnvSecret, &at("workload_identity.token_file"))],
    );
    check(
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"enterprise": {
                "idp_token_url": "http://169.254.169.254/token", "subject_token_env": "ID_TOKEN",
                "client_id": "c", "client_secret_env": "OPERATOR_SECRET"
            }}
        }]})),
        &[
            (InlineEnvSecret, &at("enterprise.client_secret_env")),
            (BlockedAddress, &at("enterprise.idp_token_url")),
            (InlineEnvSecret, &at("enterprise.subject_token_env")),
        ],
    );
}

#[test]
fn inline_urls_to_internal_addresses_with_the_ssrf_guard() {
    for url in [
        "http://127.0.0.1:8080/mcp",
        "http://10.0.0.5/mcp",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:3000/mcp",
        "http://[fe80::1]/mcp",
        "http://[fd12:3456::1]/mcp",
        "http://[::ffff:192.168.0.1]/mcp",
        "http://localhost:3000/mcp",
        "http://0.0.0.0/mcp",
    ] {
        check(
            run(json!({"servers": [{"name": "t", "url": url}]})),
            &[(BlockedAddress, "metadata.mcp.servers[0].url")],
        );
    }
    check(
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"oauth_client_credentials": {
                "client_id": "c", "client_secret": "s", "token_url": "http://169.254.169.254/token"
            }}
        }]})),
        &[(
            BlockedAddress,
            "metadata.mcp.servers[0].auth.oauth_client_credentials.token_url",
        )],
    );
}

#[test]
fn several_inline_problems_at_once() {
    check(
        run(json!({"servers": [
            {"name": "a", "command": "sh"},
            {"name": "b", "url": "http://127.0.0.1/", "auth": {"bearer_token_env": "X"}},
            "nope"
        ]})),
        &[
            (InlineStdio, "metadata.mcp.servers[0].transport"),
            (BlockedAddress, "metadata.mcp.servers[1].url"),
            (
                InlineEnvSecret,
                "metadata.mcp.servers[1].auth.bearer_token_env",
            ),
            (UnknownServer, "metadata.mcp.servers[2]"),
        ],
    );
}

#[test]
fn opt_ins_lift_the_inline_restrictions() {
    let config = Config::from_env_vars([
        ("MCP_AGENT__ALLOW_INLINE_STDIO", "true"),
        ("MCP_AGENT__ALLOW_INLINE_ENV_SECRETS", "true"),
        ("MCP_AGENT__SSRF_GUARD", "false"),
    ])
    .unwrap();
    let input = RunInput::new("s", "i").with_metadata(
        json!({"mcp": {"servers": [
            {"name": "a", "command": "sh"},
            {"name": "b", "url": "http://127.0.0.1:9/mcp", "auth": {"bearer_token_env": "X"}}
        ]}})
        .as_object()
        .unwrap()
        .clone(),
    );
    let run = config.resolve(&input).unwrap();
    assert_eq!(run.servers.len(), 2);
    // The transport learns of the opt-out through the spec.
    assert!(run.servers[1].allow_internal_addresses);
    assert!(!run.servers[1].ssrf_guarded());
}

#[test]
fn inline_specs_carry_the_ssrf_guard_to_the_transport() {
    let metadata = json!({"mcp": {"servers": [
        "configured",
        {"name": "inline", "url": "https://tenant.example.com/mcp"}
    ]}});
    let input = RunInput::new("s", "i").with_metadata(metadata.as_object().unwrap().clone());
    let servers = r#"[{"name": "configured", "url": "https://ops.example.com/mcp"}]"#;
    let config = Config::from_env_vars([("MCP_AGENT__SERVERS", servers)]).unwrap();
    let run = config.resolve(&input).unwrap();
    let guarded: Vec<bool> = run.servers.iter().map(|s| s.ssrf_guarded()).collect();
    assert_eq!(guarded, [false, true]);

    // A caller cannot turn it off in its spec.
    let sneaky = json!({"mcp": {"servers": [
        {"name": "inline", "url": "https://tenant.example.com/mcp", "allow_internal_addresses": true}
    ]}});
    let input = RunInput::new("s", "i").with_metadata(sneaky.as_object().unwrap().clone());
    let err = config.resolve(&input).unwrap_err();
    assert_eq!(err.problems()[0].kind, UnknownField, "{err}");
}

#[test]
fn allowed_issuers_are_urls_and_guarded_for_inline_specs() {
    let config = Config::from_env_vars([(
        "MCP_AGENT__SERVERS",
        r#"[{"name": "crm", "url": "https://crm.example.com/mcp",
             "auth": {"oauth_client_credentials": {"client_id": "c", "client_secret": "s",
                      "allowed_issuers": ["https://login.example.com/tenant"]}}}]"#,
    )])
    .unwrap();
    let oauth = config.servers[0]
        .auth
        .oauth_client_credentials
        .as_ref()
        .unwrap();
    assert_eq!(
        oauth.allowed_issuers[0].as_str(),
        "https://login.example.com/tenant"
    );
    let inline = |issuers: Value| {
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"oauth_client_credentials": {
                "client_id": "c", "client_secret": "s", "allowed_issuers": issuers
            }}
        }]}))
    };
    check(
        inline(json!(["https://login.example.com", "ftp://x"])),
        &[(
            UnsupportedScheme,
            "metadata.mcp.servers[0].auth.oauth_client_credentials.allowed_issuers[1]",
        )],
    );
    check(
        inline(json!(["https://login.example.com", "http://10.1.2.3/"])),
        &[(
            BlockedAddress,
            "metadata.mcp.servers[0].auth.oauth_client_credentials.allowed_issuers[1]",
        )],
    );
}

#[test]
fn operator_specs_are_not_restricted() {
    let config = Config::from_env_vars([(
        "MCP_AGENT__SERVERS",
        r#"[{"name": "local", "url": "http://127.0.0.1:8080/mcp", "auth": {"bearer_token_env": "T"}},
            {"name": "git", "command": "git-mcp"}]"#,
    )])
    .unwrap();
    let run = config.resolve(&RunInput::new("s", "i")).unwrap();
    assert_eq!(run.servers.len(), 2);
}

// ---- blank credentials ---------------------------------------------------------------------

/// The message of the only problem `input` yields.
fn message(input: &Input) -> String {
    let err = load(input).expect_err("the input should be refused");
    assert_eq!(err.problems().len(), 1, "{err}");
    err.problems()[0].message.clone()
}

#[test]
fn blank_inline_bearer_tokens() {
    let input = env_servers(
        r#"[{"name": "web", "url": "https://web.example.com/mcp", "auth": {"bearer_token": " \t "}},
            {"name": "api", "url": "https://api.example.com/mcp", "auth": {"bearer_token": ""}}]"#,
    );
    let err = load(&input).unwrap_err();
    assert!(err.problems()[0].message.contains("`web`"), "{err}");
    assert!(err.problems()[1].message.contains("`api`"), "{err}");
    check(
        input,
        &[
            (InvalidValue, "MCP_AGENT__SERVERS[0].auth.bearer_token"),
            (InvalidValue, "MCP_AGENT__SERVERS[1].auth.bearer_token"),
        ],
    );
}

#[test]
fn bearer_token_with_a_line_break() {
    check(
        env_servers(
            r#"[{"name": "web", "url": "https://web.example.com/mcp",
                 "auth": {"bearer_token": "tok\r\nX-Injected: 1"}}]"#,
        ),
        &[(InvalidValue, "MCP_AGENT__SERVERS[0].auth.bearer_token")],
    );
}

#[test]
fn blank_inline_client_secret() {
    let input = env_servers(
        r#"[{"name": "crm", "url": "https://crm.example.com/mcp",
             "auth": {"oauth_client_credentials": {"client_id": "c", "client_secret": "  "}}}]"#,
    );
    assert!(message(&input).contains("`crm`"));
    check(
        input,
        &[(
            InvalidValue,
            "MCP_AGENT__SERVERS[0].auth.oauth_client_credentials.client_secret",
        )],
    );
}

#[test]
fn blank_auth_header_values() {
    let input = env_servers(
        r#"[{"name": "web", "url": "https://web.example.com/mcp",
             "headers": {"Authorization": "Bearer ", "X-Team": ""},
             "auth": {"headers": {"X-Api-Key": " ", "X-Other": "ok"}}}]"#,
    );
    check(
        input,
        &[
            (InvalidValue, "MCP_AGENT__SERVERS[0].headers.Authorization"),
            (InvalidValue, "MCP_AGENT__SERVERS[0].auth.headers.X-Api-Key"),
        ],
    );
    check(
        env_servers(
            r#"[{"name": "web", "url": "https://web.example.com/mcp",
                 "headers": {"proxy-authorization": "  "}}]"#,
        ),
        &[(
            InvalidValue,
            "MCP_AGENT__SERVERS[0].headers.proxy-authorization",
        )],
    );
}

#[test]
fn blank_credentials_in_inline_specs_of_a_run() {
    check(
        run(json!({"servers": [{
            "name": "t", "url": "https://t.example.com/mcp",
            "auth": {"bearer_token": "   "}
        }]})),
        &[(InvalidValue, "metadata.mcp.servers[0].auth.bearer_token")],
    );
}

#[test]
fn credentials_from_an_empty_variable_in_mcp_servers() {
    let input = Input::File(
        "mcp.json",
        r#"{"mcpServers": {
            "web": {"url": "https://web.example.com/mcp",
                    "headers": {"Authorization": "Bearer ${EMPTY}", "X-Key": "${EMPTY}"}},
            "api": {"url": "https://api.example.com/mcp", "auth": {"bearer_token": "${EMPTY}"}},
            "ok": {"url": "https://ok.example.com/mcp", "headers": {"X-Team": "${EMPTY:-core}"}}
        }}"#,
    );
    let err = load(&input).unwrap_err();
    for p in err.problems() {
        assert!(p.message.contains("`EMPTY`"), "{p}");
    }
    assert!(err.problems()[0].message.contains("`web`"), "{err}");
    check(
        input,
        &[
            (InvalidValue, "mcpServers.web.headers.Authorization"),
            (InvalidValue, "mcpServers.web.headers.X-Key"),
            (InvalidValue, "mcpServers.api.auth.bearer_token"),
        ],
    );
}

#[test]
fn credentials_from_an_empty_variable_in_toml() {
    check(
        Input::File(
            "mcp.toml",
            r#"[[servers]]
name = "crm"
url = "https://crm.example.com/mcp"
auth = { oauth_client_credentials = { client_id = "c", client_secret = "${EMPTY:-}" } }
"#,
        ),
        &[(
            InvalidValue,
            "servers[0].auth.oauth_client_credentials.client_secret",
        )],
    );
}

// ---- duplicate keys ------------------------------------------------------------------------

#[test]
fn duplicate_keys_in_a_json_file() {
    let input = Input::File(
        "mcp.json",
        r#"{"servers": [{"name": "git", "command": "a", "command": "b"}],
            "connect_timeout_seconds": 5,
            "connect_timeout_seconds": 6}"#,
    );
    assert!(
        load(&input)
            .unwrap_err()
            .to_string()
            .contains("duplicate key")
    );
    check(
        input,
        &[
            (DuplicateKey, "servers[0].command"),
            (DuplicateKey, "connect_timeout_seconds"),
        ],
    );
}

#[test]
fn duplicate_keys_in_mcp_servers() {
    check(
        Input::File(
            "claude_desktop_config.json",
            r#"{"mcpServers": {
                "git": {"command": "git-mcp"},
                "web": {"url": "https://web.example.com/mcp", "headers": {"X-A": "1", "X-A": "2"}},
                "git": {"command": "other-git-mcp"}
            }}"#,
        ),
        &[
            (DuplicateKey, "mcpServers.web.headers.X-A"),
            (DuplicateKey, "mcpServers.git"),
        ],
    );
}

#[test]
fn duplicate_keys_in_the_servers_variable() {
    check(
        env_servers(
            r#"[{"name": "a", "command": "x"},
                {"name": "b", "name": "c", "url": "https://c.example.com", "comand": "y"}]"#,
        ),
        &[
            (DuplicateKey, "MCP_AGENT__SERVERS[1].name"),
            (UnknownField, "MCP_AGENT__SERVERS[1].comand"),
        ],
    );
}

#[test]
fn duplicate_keys_in_toml_are_syntax_errors() {
    check(
        Input::File(
            "mcp.toml",
            "connect_timeout_seconds = 5\nconnect_timeout_seconds = 6\n",
        ),
        &[(Syntax, "")],
    );
}

// ---- variable references -------------------------------------------------------------------

#[test]
fn nested_defaults_expand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.toml");
    std::fs::write(
        &path,
        "[[servers]]\nname = \"git\"\ncommand = \"${GIT_MCP:-${TOOLS:-/opt}/bin/git-mcp}\"\n\
         args = [\"${UNSET:-${HOME}}\", \"${HOME:-${UNSET}}\", \"${A:-${B:-${C:-deep}}}}\"]\n",
    )
    .unwrap();
    let config =
        Config::load_with_vars([("HOME", "/home/me"), ("TOOLS", "")], Some(&path)).unwrap();
    let mcp_config::TransportSpec::Stdio(stdio) = &config.servers[0].transport else {
        panic!("git is stdio")
    };
    assert_eq!(stdio.command, "/opt/bin/git-mcp");
    assert_eq!(stdio.args, ["/home/me", "/home/me", "deep}"]);
}

#[test]
fn bad_nested_references() {
    check(
        Input::File(
            "mcp.toml",
            r#"[[servers]]
name = "git"
command = "${UNSET:-${HOME}"
args = ["${UNSET:-${ALSO_UNSET}}", "${HOME:-${1BAD}}", "${HOME", "ok", "${UNSET:-${EMPTY"]
"#,
        ),
        &[
            (UndefinedVariable, "servers[0].args[0]"),
            (InvalidValue, "servers[0].args[1]"),
            (InvalidValue, "servers[0].args[2]"),
            (InvalidValue, "servers[0].args[4]"),
            (InvalidValue, "servers[0].command"),
        ],
    );
}

#[test]
fn references_nested_too_deep() {
    let deep = format!("{}x{}", "${A:-".repeat(40), "}".repeat(40));
    let err = Config::parse(
        &format!("[[servers]]\nname = \"git\"\ncommand = \"{deep}\"\n"),
        FileFormat::Toml,
        [("HOME", "/")],
    )
    .unwrap_err();
    let p = &err.problems()[0];
    assert_eq!(
        (p.kind, p.path.as_str()),
        (InvalidValue, "servers[0].command")
    );
    assert!(p.message.contains("nested"), "{p}");
}

// ---- what a config file may be -------------------------------------------------------------

#[test]
fn a_config_file_over_the_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(Config::MAX_FILE_BYTES + 1).unwrap();
    let err = Config::load_with_vars([("HOME", "/")], Some(&path)).unwrap_err();
    assert!(matches!(err, ConfigError::TooLarge { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&path.display().to_string()) && text.contains("4 MiB"),
        "{text}"
    );

    // At the limit it is read (and here refused for its content).
    std::fs::File::create(&path)
        .unwrap()
        .set_len(Config::MAX_FILE_BYTES)
        .unwrap();
    let err = Config::load_with_vars([("HOME", "/")], Some(&path)).unwrap_err();
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
}

#[cfg(unix)]
#[test]
fn a_symlink_to_an_endless_device_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let started = std::time::Instant::now();
    let err = Config::load_with_vars([("HOME", "/")], Some(&path)).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(matches!(err, ConfigError::NotAFile { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_directory_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mcp.toml");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let err = Config::load_with_vars([("HOME", "/")], Some(&fifo)).unwrap_err();
    assert!(matches!(err, ConfigError::NotAFile { .. }), "{err}");

    let sub = dir.path().join("conf.d.json");
    std::fs::create_dir(&sub).unwrap();
    let err = Config::from_file(&sub).unwrap_err();
    assert!(matches!(err, ConfigError::NotAFile { .. }), "{err}");
}

#[test]
fn blank_credentials_in_specs_built_in_code() {
    use mcp_config::{HttpSpec, Secret, SecretSource, ServerSpec, SpecOrigin, TransportSpec};

    let mut http = HttpSpec::new("https://web.example.com/mcp".parse().unwrap());
    http.headers
        .insert("Authorization".into(), Secret::new("Basic"));
    let mut web = ServerSpec::new("web", TransportSpec::StreamableHttp(http));
    web.auth
        .headers
        .insert("X-Api-Key".into(), Secret::new(" "));
    let mut api = ServerSpec::new(
        "api",
        TransportSpec::StreamableHttp(HttpSpec::new(
            "https://api.example.com/mcp".parse().unwrap(),
        )),
    );
    api.auth.bearer = Some(SecretSource::Inline(Secret::new("\t")));
    let mut crm = ServerSpec::from_json(
        &json!({"name": "crm", "url": "https://crm.example.com/mcp",
                "auth": {"oauth_client_credentials": {"client_id": "c", "client_secret": "s"}}}),
        SpecOrigin::Operator,
    )
    .unwrap();
    crm.auth
        .oauth_client_credentials
        .as_mut()
        .unwrap()
        .client_secret = SecretSource::Inline(Secret::new(""));
    let err = mcp_config::validate_specs(&[web, api, crm]).unwrap_err();
    let got: Vec<_> = err
        .problems()
        .iter()
        .map(|p| (p.kind, p.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (InvalidValue, "servers[0].headers.Authorization"),
            (InvalidValue, "servers[0].auth.headers.X-Api-Key"),
            (InvalidValue, "servers[1].auth.bearer_token"),
            (
                InvalidValue,
                "servers[2].auth.oauth_client_credentials.client_secret"
            ),
        ]
    );
    assert!(err.problems()[2].message.contains("`api`"), "{err}");
}
