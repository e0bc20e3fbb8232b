//! The `[policy]` table: TOML and JSON files, the environment, precedence, and every problem
//! with its path.

use agent_core::{DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_SPILL_BYTES, Rule};
use mcp_config::{Config, FileFormat, ProblemKind};
use serde_json::json;

fn no_vars() -> std::iter::Empty<(&'static str, &'static str)> {
    std::iter::empty()
}

#[test]
fn a_toml_policy_table_gives_typed_rules_and_the_output_bound() {
    let config = Config::parse(
        r#"
[policy]
allow = [{ server = "mcp-servers/everything", tool = "*" }, { server = "acme/*" }]
deny = [{ server = "*", tool = "delete_*" }]
approve = [{ server = "github*", tool = "create_*" }]
approve_destructive = true
approve_open_world = false
max_output_bytes = 2048
max_spill_bytes = 1048576
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap();
    let policy = &config.policy;
    assert_eq!(
        policy.identity.allow,
        [
            Rule::new("mcp-servers/everything", "*"),
            Rule::new("acme/*", "*")
        ]
    );
    assert_eq!(policy.identity.deny, [Rule::new("*", "delete_*")]);
    assert_eq!(policy.approval.approve, [Rule::new("github*", "create_*")]);
    assert!(policy.approval.approve_destructive);
    assert!(!policy.approval.approve_open_world);
    assert_eq!(policy.max_output_bytes, Some(2048));
    assert_eq!(policy.output_limits().max_output_bytes, 2048);
    assert_eq!(policy.max_spill_bytes, Some(1 << 20));
    assert_eq!(policy.output_limits().max_spill_bytes, 1 << 20);
}

#[test]
fn a_json_policy_object_reads_the_same_and_no_policy_means_no_rules() {
    let config = Config::from_json(&json!({
        "mcpServers": {"git": {"command": "git-mcp"}},
        "policy": {
            "deny": [{"server": "*", "tool": "push"}],
            "approve_open_world": true
        }
    }))
    .unwrap();
    assert_eq!(config.policy.identity.deny, [Rule::new("*", "push")]);
    assert!(config.policy.approval.approve_open_world);
    assert_eq!(config.policy.max_output_bytes, None);

    let plain = Config::from_json(&json!({})).unwrap();
    assert!(plain.policy.identity.is_empty());
    assert_eq!(
        plain.policy.output_limits().max_output_bytes,
        DEFAULT_MAX_OUTPUT_BYTES
    );
    assert_eq!(
        plain.policy.output_limits().max_spill_bytes,
        DEFAULT_MAX_SPILL_BYTES
    );
}

#[test]
fn every_policy_problem_is_reported_at_its_path() {
    let err = Config::from_json(&json!({
        "policy": {
            "alow": [],
            "deny": {"server": "*"},
            "allow": [{"server": "a", "tol": "x"}, {"tool": "x"}, "everything", {"server": ""}],
            "approve": [{"server": 3}],
            "approve_destructive": "yes",
            "max_output_bytes": 10,
            "max_spill_bytes": -1,
            "max_spil_bytes": 1
        }
    }))
    .unwrap_err();
    let found: Vec<(ProblemKind, &str)> = err
        .problems()
        .iter()
        .map(|p| (p.kind, p.path.as_str()))
        .collect();
    for expected in [
        (ProblemKind::UnknownField, "policy.alow"),
        (ProblemKind::WrongType, "policy.deny"),
        (ProblemKind::UnknownField, "policy.allow[0].tol"),
        (ProblemKind::MissingField, "policy.allow[1].server"),
        (ProblemKind::WrongType, "policy.allow[2]"),
        (ProblemKind::InvalidValue, "policy.allow[3].server"),
        (ProblemKind::WrongType, "policy.approve[0].server"),
        (ProblemKind::WrongType, "policy.approve_destructive"),
        (ProblemKind::InvalidValue, "policy.max_output_bytes"),
        (ProblemKind::WrongType, "policy.max_spill_bytes"),
        (ProblemKind::UnknownField, "policy.max_spil_bytes"),
    ] {
        assert!(found.contains(&expected), "{expected:?} not in {found:?}");
    }
    let text = err.to_string();
    assert!(text.contains("did you mean `allow`?"), "{text}");
    assert!(text.contains("did you mean `tool`?"), "{text}");
    assert!(text.contains("at least 1024"), "{text}");
    assert!(text.contains("did you mean `max_spill_bytes`?"), "{text}");
}

#[test]
fn a_policy_that_is_not_a_table_or_a_fractional_bound_is_a_problem() {
    let err = Config::parse("policy = \"strict\"\n", FileFormat::Toml, no_vars()).unwrap_err();
    assert_eq!(err.problems()[0].kind, ProblemKind::WrongType);
    assert_eq!(err.problems()[0].path, "policy");

    let err = Config::from_json(&json!({"policy": {"max_output_bytes": 2048.5}})).unwrap_err();
    assert_eq!(err.problems()[0].kind, ProblemKind::WrongType);
    assert_eq!(err.problems()[0].path, "policy.max_output_bytes");
    assert!(err.to_string().contains("whole number of bytes"), "{err}");

    let err = Config::from_json(&json!({"polcy": {}})).unwrap_err();
    assert!(err.to_string().contains("did you mean `policy`?"), "{err}");
}

#[test]
fn the_environment_sets_policy_keys_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.toml");
    std::fs::write(
        &path,
        "[policy]\ndeny = [{ server = \"*\", tool = \"rm\" }]\nmax_output_bytes = 4096\n",
    )
    .unwrap();
    let config = Config::load_with_vars(
        [(
            "MCP_AGENT__POLICY",
            r#"{"allow": [{"server": "acme/files"}], "max_output_bytes": 8192}"#,
        )],
        Some(&path),
    )
    .unwrap();
    assert_eq!(config.policy.identity.deny, [Rule::new("*", "rm")]);
    assert_eq!(config.policy.identity.allow, [Rule::new("acme/files", "*")]);
    assert_eq!(config.policy.max_output_bytes, Some(8192));

    let err =
        Config::from_env_vars([("MCP_AGENT__POLICY", r#"{"deny": [{"server": 1}]}"#)]).unwrap_err();
    assert_eq!(err.problems()[0].path, "MCP_AGENT__POLICY.deny[0].server");
}

#[test]
fn a_rule_may_name_the_principals_it_is_for_and_each_bad_value_is_reported_at_its_path() {
    let config = Config::parse(
        r#"
[policy]
allow = [
  { server = "*", tool = "*", claims = { groups = "admins" } },
  { server = "files", tool = "read_*", subject = "*@example.com", scopes = ["files:read"] },
]
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap();
    assert_eq!(
        config.policy.identity.allow,
        [
            Rule::new("*", "*").for_claim("groups", "admins"),
            Rule::new("files", "read_*")
                .for_subject("*@example.com")
                .for_scope("files:read"),
        ]
    );
    assert_eq!(
        config.policy.identity.allow[1].to_string(),
        r#"{ server = "files", tool = "read_*", subject = "*@example.com", scopes = ["files:read"] }"#
    );

    let err = Config::parse(
        r#"
[policy]
deny = [{ server = "*", subject = "", scopes = "files:read", claims = { groups = 1 } }]
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap_err();
    let paths: Vec<_> = err.problems().iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "policy.deny[0].subject",
            "policy.deny[0].scopes",
            "policy.deny[0].claims.groups"
        ],
        "{err}"
    );
}

#[test]
fn rules_about_resources_and_prompts_are_read_and_a_rule_names_one_target() {
    let config = Config::parse(
        r#"
[policy]
allow = [{ server = "docs", resource = "file:///public/*" }, { server = "*", prompt = "review_*" }]
deny = [{ server = "docs", resource = "file:///public/secret*" }]
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap();
    assert_eq!(
        config.policy.identity.allow,
        [
            Rule::resource("docs", "file:///public/*"),
            Rule::prompt("*", "review_*")
        ]
    );
    assert_eq!(
        config.policy.identity.deny,
        [Rule::resource("docs", "file:///public/secret*")]
    );

    let err = Config::parse(
        r#"
[policy]
allow = [{ server = "docs", tool = "*", resource = "file:///*" }, { server = "x", prompt = "" }]
approve = [{ server = "docs", resource = "file:///*" }]
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap_err();
    let problems: Vec<_> = err
        .problems()
        .iter()
        .map(|p| (p.kind, p.path.as_str()))
        .collect();
    assert_eq!(
        problems,
        [
            (ProblemKind::ConflictingFields, "policy.allow[0].resource"),
            (ProblemKind::InvalidValue, "policy.allow[1].prompt"),
            (ProblemKind::NotApplicable, "policy.approve[0].resource"),
        ],
        "{err}"
    );
}

#[test]
fn rules_about_skills_are_read_and_refused_where_they_do_not_apply() {
    let config = Config::parse(
        r#"
[policy]
deny = [{ server = "docs", skill = "deploy-*" }]
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap();
    assert_eq!(
        config.policy.identity.deny,
        [Rule::skill("docs", "deploy-*")]
    );
    assert_eq!(
        config.policy.identity.deny[0].to_string(),
        r#"{ server = "docs", skill = "deploy-*" }"#
    );

    let err = Config::parse(
        r#"
[policy]
allow = [{ server = "docs", prompt = "p", skill = "s" }, { server = "x", skill = "" }]
approve = [{ server = "docs", skill = "pdf-*" }]
"#,
        FileFormat::Toml,
        no_vars(),
    )
    .unwrap_err();
    let problems: Vec<_> = err
        .problems()
        .iter()
        .map(|p| (p.kind, p.path.as_str()))
        .collect();
    assert_eq!(
        problems,
        [
            (ProblemKind::ConflictingFields, "policy.allow[0].skill"),
            (ProblemKind::InvalidValue, "policy.allow[1].skill"),
            (ProblemKind::NotApplicable, "policy.approve[0].skill"),
        ],
        "{err}"
    );
}
