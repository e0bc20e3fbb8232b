//! Valid configurations load as expected: environment, files (own schema and `mcpServers`),
//! precedence, per-run selection, the resolver, the boundary adapters and redaction.

use std::time::Duration;

use agent_core::RunInput;
use mcp_config::{
    Config, DefaultResolver, FileFormat, PartialFailure, SecretSource, ServerResolver, SpecOrigin,
    TokenEndpointAuthMethod, TransportKind, TransportSpec, adapters,
};
use serde_json::{Value, json};

const BEARER: &str = "bearer-SECRET-1f9a";
const CLIENT_SECRET: &str = "client-SECRET-7c2e";
const ENV_VALUE: &str = "ghp_SECRET-0b3d";
const HEADER_VALUE: &str = "header-SECRET-55aa";

fn write(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn metadata(value: Value) -> RunInput {
    RunInput::new("state", "instruction").with_metadata(value.as_object().unwrap().clone())
}

#[test]
fn toml_file_in_the_own_schema() {
    let (_dir, path) = write(
        "mcp.toml",
        r#"
connect_timeout_seconds = 12
partial_failure = "skip_unavailable"
ssrf_guard = false

[tool_server]
name = "support-agent"

[[servers]]
name = "github"
command = "github-mcp-server"
args = ["stdio", "--read-only"]
env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
cwd = "${HOME}/work"
call_timeout_seconds = 120

[[servers]]
name = "linear"
url = "https://mcp.example.com/linear"
headers = { X-Team = "${TEAM:-core}" }
connect_timeout_seconds = 3.5

[servers.auth.oauth_client_credentials]
token_url = "https://auth.example.com/token"
client_id = "agent"
client_secret_env = "LINEAR_CLIENT_SECRET"
scope = "read write"
resource = "https://mcp.example.com"
token_endpoint_auth_method = "client_secret_basic"

[servers.tools]
deny = ["delete_*"]
pinned = ["search_issues"]
"#,
    );
    let config = Config::load_with_vars(
        [("GITHUB_TOKEN", ENV_VALUE), ("HOME", "/home/me")],
        Some(&path),
    )
    .unwrap();
    assert_eq!(config.connect_timeout, Duration::from_secs(12));
    assert_eq!(config.partial_failure, PartialFailure::SkipUnavailable);
    assert!(!config.inline.ssrf_guard);
    assert_eq!(config.tool_server.name, "support-agent");

    let github = config.server("github").unwrap();
    let TransportSpec::Stdio(stdio) = &github.transport else {
        panic!("github is stdio")
    };
    assert_eq!(stdio.command, "github-mcp-server");
    assert_eq!(stdio.args, ["stdio", "--read-only"]);
    assert_eq!(stdio.env["GITHUB_TOKEN"].expose(), ENV_VALUE);
    assert_eq!(
        stdio.cwd.as_deref(),
        Some(std::path::Path::new("/home/me/work"))
    );
    assert_eq!(github.call_timeout, Duration::from_secs(120));
    assert_eq!(github.origin, SpecOrigin::Operator);

    let linear = config.server("linear").unwrap();
    let TransportSpec::StreamableHttp(http) = &linear.transport else {
        panic!("linear is HTTP")
    };
    assert_eq!(http.url.as_str(), "https://mcp.example.com/linear");
    assert_eq!(http.headers["X-Team"].expose(), "core");
    assert_eq!(linear.connect_timeout, Some(Duration::from_millis(3500)));
    let oauth = linear.auth.oauth_client_credentials.as_ref().unwrap();
    assert_eq!(
        oauth.client_secret,
        SecretSource::Env("LINEAR_CLIENT_SECRET".into())
    );
    assert_eq!(oauth.scope.as_deref(), Some("read write"));
    assert_eq!(
        oauth.token_endpoint_auth_method,
        Some(TokenEndpointAuthMethod::ClientSecretBasic)
    );
    assert!(!linear.tools.allows("delete_issue"));
    assert!(linear.tools.allows("search_issues"));
    assert!(linear.tools.is_pinned("search_issues"));
}

#[test]
fn json_file_with_mcp_servers() {
    let (_dir, path) = write(
        "claude_desktop_config.json",
        r#"{"mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "off": {"command": "whatever", "disabled": true, "unknown_but_skipped": 1}
        }}"#,
    );
    let config = Config::load_with_vars([("TOKEN", BEARER)], Some(&path)).unwrap();
    let names: Vec<_> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "remote"]);
    assert_eq!(config.servers[0].kind(), TransportKind::Stdio);
    assert_eq!(config.servers[1].kind(), TransportKind::StreamableHttp);
    let TransportSpec::StreamableHttp(http) = &config.servers[1].transport else {
        unreachable!()
    };
    assert_eq!(
        http.headers["Authorization"].expose(),
        format!("Bearer {BEARER}")
    );
}

#[test]
fn environment_wins_over_the_file_and_servers_accumulate() {
    let (_dir, path) = write(
        "mcp.json",
        r#"{"servers": [{"name": "a", "command": "a-mcp"}],
            "connect_timeout_seconds": 10, "partial_failure": "skip_unavailable"}"#,
    );
    let config = Config::load_with_vars(
        [
            (
                "MCP_AGENT__SERVERS",
                r#"[{"name": "b", "url": "https://b.example.com"}]"#,
            ),
            ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "4"),
        ],
        Some(&path),
    )
    .unwrap();
    let names: Vec<_> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(config.connect_timeout, Duration::from_secs(4));
    assert_eq!(config.partial_failure, PartialFailure::SkipUnavailable);
}

#[test]
fn raw_tables_are_read_key_by_key_the_environment_winning_and_every_problem_joins() {
    use mcp_config::ProblemKind;
    use mcp_config::read::{Problems, as_str, whole_number};

    let (_dir, path) = write(
        "mcp.toml",
        "[serve]\nhttp = \"127.0.0.1:1\"\nmax_sessions = 3\n[model]\nheaders = { X = \"hv-SECRET\" }\n",
    );
    let read = |config: &Config, p: &mut Problems| {
        let http = config
            .serve
            .read("http", p, |v, at, p| as_str(v, at, p).map(str::to_owned));
        let max = config
            .serve
            .read("max_sessions", p, |v, at, p| whole_number(v, at, 1, p));
        (http, max)
    };
    let vars = [("MCP_AGENT__SERVE", r#"{"http": "127.0.0.1:2"}"#)];
    let (config, (http, max)) = Config::load_with_vars_and(vars, Some(&path), read).unwrap();
    assert_eq!(http.as_deref(), Some("127.0.0.1:2"), "the environment wins");
    assert_eq!(max, Some(3), "the file's other keys stay");
    assert_eq!(config.serve.merged()["http"], "127.0.0.1:2");
    let shown = format!("{config:?} {}", serde_json::to_string(&config).unwrap());
    assert!(!shown.contains("hv-SECRET"), "{shown}");

    // A key set in both sources is checked in both, each problem in its source.
    let vars = [
        ("MCP_AGENT__SERVE", r#"{"max_sessions": 0, "http": 5}"#),
        ("MCP_AGENT__SERVERS", "[{}]"),
    ];
    let err = Config::load_with_vars_and(vars, Some(&path), |config: &Config, p: &mut Problems| {
        config.serve.reject_unknown(&["max_sessions"], p);
        read(config, p)
    })
    .unwrap_err();
    let found: Vec<_> = err
        .problems()
        .iter()
        .map(|p| (p.kind, p.path.as_str(), p.file.is_some()))
        .collect();
    for expected in [
        (
            ProblemKind::MissingField,
            "MCP_AGENT__SERVERS[0].name",
            false,
        ),
        (ProblemKind::UnknownField, "serve.http", true),
        (ProblemKind::UnknownField, "MCP_AGENT__SERVE.http", false),
        (ProblemKind::WrongType, "MCP_AGENT__SERVE.http", false),
        (
            ProblemKind::InvalidValue,
            "MCP_AGENT__SERVE.max_sessions",
            false,
        ),
    ] {
        assert!(found.contains(&expected), "{expected:?} not in {found:?}");
    }

    let err = Config::from_env_vars([("MCP_AGENT__MODEL", "[1]")]).unwrap_err();
    assert_eq!(err.problems()[0].path, "MCP_AGENT__MODEL");
    assert_eq!(err.problems()[0].kind, ProblemKind::WrongType);
}

#[test]
fn selection_semantics() {
    let config = Config::from_env_vars([
        (
            "MCP_AGENT__SERVERS",
            r#"[{"name": "git", "command": "git-mcp", "connect_timeout_seconds": 2},
                {"name": "web", "url": "https://web.example.com/mcp"}]"#,
        ),
        ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "9"),
    ])
    .unwrap();
    let names = |input: RunInput| -> Vec<String> {
        config
            .resolve(&input)
            .unwrap()
            .servers
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    assert_eq!(
        names(RunInput::new("s", "i")),
        ["git", "web"],
        "omitted: all"
    );
    assert_eq!(
        names(metadata(json!({"mcp": {}}))),
        ["git", "web"],
        "no servers key: all"
    );
    assert!(
        names(metadata(json!({"mcp": {"servers": []}}))).is_empty(),
        "[]: none"
    );
    assert_eq!(
        names(metadata(json!({"mcp": {"servers": ["web", "git"]}}))),
        ["web", "git"]
    );
    assert!(names(metadata(json!({"mcp": {"allow_mcp": false}}))).is_empty());

    let run = config
        .resolve(&metadata(json!({"mcp": {"servers": [
            "git",
            {"name": "tenant", "url": "https://tenant.example.com/mcp",
             "auth": {"bearer_token": BEARER}, "origin": null}
        ]}})))
        .unwrap_err();
    // `origin` is not a field a caller can set.
    assert_eq!(run.problems()[0].path, "metadata.mcp.servers[1].origin");

    let run = config
        .resolve(&metadata(json!({"mcp": {"servers": [
            "git",
            {"name": "tenant", "url": "https://tenant.example.com/mcp", "auth": {"bearer_token": BEARER}}
        ]}})))
        .unwrap();
    assert_eq!(run.servers[0].origin, SpecOrigin::Operator);
    assert_eq!(run.servers[1].origin, SpecOrigin::Inline);
    assert_eq!(run.servers[0].connect_timeout, Some(Duration::from_secs(2)));
    assert_eq!(
        run.servers[1].connect_timeout,
        Some(Duration::from_secs(9)),
        "the global default is filled in"
    );
    assert_eq!(run.options.connect_timeout, Duration::from_secs(9));

    let by_name = config.select_names(["web"]).unwrap();
    assert_eq!(by_name[0].name, "web");
    assert!(config.select_names(["nope"]).is_err());
}

#[test]
fn allow_mcp_and_partial_failure_per_run() {
    let config = Config::from_env_vars([
        (
            "MCP_AGENT__SERVERS",
            r#"[{"name": "git", "command": "git-mcp"}]"#,
        ),
        ("MCP_AGENT__REQUIRE_ALLOW_MCP", "true"),
    ])
    .unwrap();
    let run = config.resolve(&RunInput::new("s", "i")).unwrap();
    assert!(
        !run.options.allow_mcp && run.servers.is_empty(),
        "opt-in required"
    );
    let run = config
        .resolve(&metadata(
            json!({"mcp": {"allow_mcp": true, "partial_failure": "skip_unavailable"}}),
        ))
        .unwrap();
    assert!(run.options.allow_mcp);
    assert_eq!(run.servers.len(), 1);
    assert_eq!(run.options.partial_failure, PartialFailure::SkipUnavailable);
    assert_eq!(
        config
            .resolve(&RunInput::new("s", "i"))
            .unwrap()
            .options
            .partial_failure,
        PartialFailure::FailFast
    );
}

#[tokio::test]
async fn the_default_resolver_is_replaceable() {
    let config = Config::from_env_vars([(
        "MCP_AGENT__SERVERS",
        r#"[{"name": "git", "command": "git-mcp"}]"#,
    )])
    .unwrap();
    let resolver: Box<dyn ServerResolver> = Box::new(DefaultResolver::new(config));
    let run = resolver
        .resolve("agent", &metadata(json!({"mcp": {"servers": ["git"]}})))
        .await
        .unwrap();
    assert_eq!(run.servers[0].name, "git");
    let err = resolver
        .resolve("agent", &metadata(json!({"mcp": {"servers": ["nope"]}})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`nope`"), "{err}");
}

#[test]
fn boundary_adapters_give_the_same_metadata() {
    let mcp = json!({"servers": ["git", {"name": "t", "url": "https://t.example.com/mcp"}],
                     "partial_failure": "skip_unavailable"});
    let from_ag_ui =
        adapters::from_ag_ui_forwarded_props(&json!({"mcp": mcp.clone(), "other": 1})).unwrap();
    let from_a2a = adapters::from_a2a_parts(&[
        json!({"kind": "text", "text": "hello"}),
        json!({"kind": "data", "data": {"mcp": mcp.clone()}}),
    ])
    .unwrap();
    assert_eq!(from_ag_ui, from_a2a);
    assert_eq!(Value::Object(from_ag_ui.clone()), json!({ "mcp": mcp }));

    let config = Config::from_env_vars([(
        "MCP_AGENT__SERVERS",
        r#"[{"name": "git", "command": "git-mcp"}]"#,
    )])
    .unwrap();
    let mut input = RunInput::new("s", "i");
    input.metadata.insert("trace".into(), json!("abc"));
    input.metadata.extend(from_ag_ui);
    let run = config.resolve(&input).unwrap();
    assert_eq!(run.servers.len(), 2);
    assert_eq!(run.options.partial_failure, PartialFailure::SkipUnavailable);
}

#[test]
fn parse_from_text() {
    let config = Config::parse(
        "[[servers]]\nname = \"x\"\nurl = \"https://x.example.com\"\n",
        FileFormat::Toml,
        std::iter::empty::<(String, String)>(),
    )
    .unwrap();
    assert_eq!(config.servers[0].name, "x");
    let config = Config::from_json(&json!({"servers": [], "require_allow_mcp": true})).unwrap();
    assert!(config.require_allow_mcp);
}

// ---- redaction -----------------------------------------------------------------------------

fn config_with_secrets() -> Config {
    let (_dir, path) = write(
        "mcp.json",
        &json!({"servers": [
            {"name": "bearer", "url": "https://a.example.com/mcp",
             "headers": {"X-Api-Key": HEADER_VALUE},
             "auth": {"bearer_token": BEARER, "headers": {"X-Other": HEADER_VALUE}}},
            {"name": "oauth", "url": "https://b.example.com/mcp",
             "auth": {"oauth_client_credentials": {"client_id": "c", "client_secret": "${CLIENT_SECRET}"}}},
            {"name": "stdio", "command": "x", "env": {"TOKEN": ENV_VALUE}}
        ]})
        .to_string(),
    );
    Config::load_with_vars([("CLIENT_SECRET", CLIENT_SECRET)], Some(&path)).unwrap()
}

fn assert_no_secret(text: &str) {
    for secret in [BEARER, CLIENT_SECRET, ENV_VALUE, HEADER_VALUE] {
        assert!(!text.contains(secret), "{secret} leaked in: {text}");
    }
}

#[test]
fn debug_and_serialize_never_show_secrets() {
    let config = config_with_secrets();
    // The secrets are there…
    let oauth = config
        .server("oauth")
        .unwrap()
        .auth
        .oauth_client_credentials
        .as_ref()
        .unwrap();
    assert_eq!(
        oauth.client_secret,
        SecretSource::Inline(CLIENT_SECRET.into())
    );
    // …and never printed.
    assert_no_secret(&format!("{config:?}"));
    assert_no_secret(&format!("{config:#?}"));
    let json = serde_json::to_string(&config).unwrap();
    assert_no_secret(&json);
    assert!(json.contains("[REDACTED]"));
    let run = config.resolve(&RunInput::new("s", "i")).unwrap();
    assert_no_secret(&format!("{run:?}"));
}

#[test]
fn error_messages_never_show_secrets() {
    let err = Config::from_env_vars([(
        "MCP_AGENT__SERVERS",
        json!([
            {"name": "a b", "url": format!("https://x.example.com/?k={BEARER}"),
             "headers": {"X-Key": format!("{HEADER_VALUE}\r\nInjected: 1")},
             "auth": {"bearer_token": BEARER, "bearer_token_env": "T"}},
            {"name": "c", "url": format!("ftp://{CLIENT_SECRET}@x.example.com/")},
            {"name": "d", "command": "x", "env": {"TOKEN": ENV_VALUE}, "transport": ENV_VALUE}
        ])
        .to_string(),
    )])
    .unwrap_err();
    assert!(err.problems().len() >= 4, "{err}");
    assert_no_secret(&err.to_string());
    assert_no_secret(&format!("{err:?}"));
}

#[test]
fn a_custom_transport_keeps_its_parameters_and_shows_them_redacted() {
    let config = Config::from_env_vars([(
        "MCP_AGENT__SERVERS",
        r#"[{"name": "bus", "transport": "message_bus", "topic": "tools", "token": "tok-abcdef",
             "partition": 3, "call_timeout_seconds": 5}]"#,
    )])
    .unwrap();
    let spec = &config.servers[0];
    assert_eq!(spec.kind(), TransportKind::Other("message_bus".into()));
    assert_eq!(spec.kind().to_string(), "message_bus");
    assert_eq!(spec.call_timeout, std::time::Duration::from_secs(5));
    let TransportSpec::Custom(custom) = &spec.transport else {
        panic!("{spec:?}")
    };
    assert_eq!(custom.params.len(), 3, "{:?}", custom.params);
    assert_eq!(custom.params["token"], "tok-abcdef");
    let shown = serde_json::to_value(spec).unwrap();
    assert_eq!(shown["transport"], "message_bus");
    assert_eq!(shown["token"], "[REDACTED]");
    assert_eq!(shown["partition"], 3);
}

#[test]
fn values_expanded_into_args_url_and_headers_are_secrets() {
    const ARG: &str = "arg-SECRET-91d0";
    const URL_KEY: &str = "urlkey-SECRET-3e7f";
    const HEADER: &str = "hdr-SECRET-c4a2";
    let (_dir, path) = write(
        "mcp.toml",
        r#"
[[servers]]
name = "local"
command = "server"
args = ["--token=${ARG_TOKEN}", "--plain", "${SHORT}"]

[[servers]]
name = "remote"
url = "https://mcp.example.com/mcp?key=${URL_KEY}"
headers = { X-Tenant = "t-${TENANT}" }
"#,
    );
    let config = Config::load_with_vars(
        [
            ("ARG_TOKEN", ARG),
            ("URL_KEY", URL_KEY),
            ("TENANT", HEADER),
            ("SHORT", "abc"),
        ],
        Some(&path),
    )
    .unwrap();
    // The values are used as they are…
    let TransportSpec::Stdio(stdio) = &config.server("local").unwrap().transport else {
        panic!("stdio");
    };
    assert_eq!(
        stdio.args,
        [format!("--token={ARG}"), "--plain".into(), "abc".into()]
    );
    // …and are secrets of their spec: scrubbed wherever a server echoes them.
    let secrets = |name: &str| -> Vec<String> {
        config
            .server(name)
            .unwrap()
            .secret_values()
            .iter()
            .map(|s| s.expose().to_owned())
            .collect()
    };
    assert!(
        secrets("local").contains(&ARG.to_owned()),
        "{:?}",
        secrets("local")
    );
    assert!(secrets("remote").contains(&URL_KEY.to_owned()));
    assert!(secrets("remote").contains(&HEADER.to_owned()));
    let scrubber = mcp_config::Redactor::new()
        .with_secrets(config.servers.iter().flat_map(|s| s.secret_values()));
    assert_eq!(
        scrubber.scrub(&format!(
            "the server says: I got --token={ARG} and key {URL_KEY}"
        )),
        "the server says: I got --token=[REDACTED] and key [REDACTED]"
    );
    // What `config check` prints redacts them, and keeps the rest of the values readable.
    let json = serde_json::to_string(&config).unwrap();
    for secret in [ARG, URL_KEY, HEADER] {
        assert!(!json.contains(secret), "{secret} in {json}");
    }
    assert!(json.contains(r#""--token=[REDACTED]","--plain""#), "{json}");
    assert!(
        json.contains("https://mcp.example.com/mcp?key=[REDACTED]"),
        "{json}"
    );
}
