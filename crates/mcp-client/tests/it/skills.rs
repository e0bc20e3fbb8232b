//! Skills (the skills extension) of a run's servers, served by the test kit's server from a
//! real skill directory: listed without reading a file, loaded and read lazily with every read
//! checked against the manifest, hostile servers refused by name, governed by `[policy]`.

use std::time::Duration;

use agent_core::{CallOutcome, Event, EventKind, IdentityRules, Rule, RunInput};
use mcp_client::{FeatureError, MAX_SKILL_FILES, McpClient, McpRunner, SkillData, SkillProblem};
use mcp_config::{Config, PolicyConfig, ServerSpec};
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::{
    Observations, SkillHostility, Skills, TestServer, TestServerOptions, serve_in_memory,
    write_example_skills,
};

const SKILL_MD: &str = "skill://pdf-processing/SKILL.md";
const FORMS: &str = "skill://pdf-processing/references/FORMS.md";

/// A run of server `docs` (identity `acme/docs`) serving the example skills (with
/// `hostility`), under `policy`.
async fn run(
    policy: PolicyConfig,
    hostility: Option<SkillHostility>,
) -> (McpRunner, Observations, tempfile::TempDir) {
    run_with(policy, hostility, &[], false).await
}

/// [`run`], the skill `pdf-processing` with files `references` more in its `references`
/// folder, and with `plain` a second server, `plain`, serving no skills.
pub(crate) async fn run_with(
    policy: PolicyConfig,
    hostility: Option<SkillHostility>,
    references: &[&str],
    plain: bool,
) -> (McpRunner, Observations, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    write_example_skills(dir.path()).unwrap();
    for name in references {
        let file = dir.path().join("pdf-processing/references").join(name);
        std::fs::write(file, "# A reference\n").unwrap();
    }
    let mut skills = Skills::from_dir(dir.path()).unwrap();
    if let Some(hostility) = hostility {
        skills = skills.with_hostility(hostility);
    }
    let (runner, observations) = run_on(spec("docs"), skills, policy, plain).await;
    (runner, observations, dir)
}

/// A run of server `docs` (spec `docs`, identity `acme/docs`) serving `skills`, under
/// `policy`; with `plain` a second server, `plain`, serving no skills.
async fn run_on(
    docs: ServerSpec,
    skills: Skills,
    policy: PolicyConfig,
    plain: bool,
) -> (McpRunner, Observations) {
    let observations = Observations::new();
    let seen = observations.clone();
    let mut memory = InMemoryConnector::new().server("docs", move || {
        let options = TestServerOptions::default()
            .with_name("acme/docs")
            .with_skills(skills.clone())
            .with_observations(seen.clone());
        serve_in_memory(TestServer::new(options))
    });
    let mut specs = vec![docs];
    if plain {
        memory = memory.server("plain", || {
            serve_in_memory(TestServer::new(TestServerOptions::default()))
        });
        specs.push(spec("plain"));
    }
    let config = Config::new(specs).expect("valid specs").with_policy(policy);
    let runner = McpClient::builder(config)
        .connectors(Connectors::new().with(memory))
        .build()
        .open_runner(&RunInput::new("s", "i"))
        .await
        .expect("the run opens");
    (runner, observations)
}

/// What `mcp_search_tools` finds for `query` (50 at most).
async fn search(runner: &McpRunner, query: &str) -> serde_json::Value {
    use agent_core::ToolDispatcher as _;
    runner
        .dispatch(model_call(
            "search",
            "mcp_search_tools",
            serde_json::json!({"query": query, "limit": 50}),
        ))
        .await
        .unwrap()
        .structured
        .unwrap()
}

/// The URIs the server was asked to read, in order.
fn reads(observations: &Observations) -> Vec<String> {
    observations.snapshot().targets_of("resources/read")
}

async fn next_of(events: &mut agent_core::EventReceiver, kind: EventKind) -> Event {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = events.recv().await.expect("the bus is open");
            if event.kind == kind {
                return event;
            }
        }
    })
    .await
    .expect("the event within 10 s")
}

#[tokio::test]
async fn skills_are_listed_without_a_read_and_files_are_read_on_first_use_only() {
    let (runner, observations, _dir) = run(PolicyConfig::default(), None).await;
    let mut events = runner.governed().subscribe();

    let listed = runner.list_skills("docs").await.unwrap();
    assert_eq!(listed.len(), 1);
    let entry = &listed[0];
    assert_eq!(entry.uri, SKILL_MD);
    assert_eq!(entry.name, "pdf-processing");
    assert_eq!(
        entry.description,
        "Extract, fill, and assemble PDF documents"
    );
    assert_eq!(entry.refused, None);
    let files: Vec<&str> = entry
        .files
        .listed()
        .iter()
        .map(|f| f.uri.as_str())
        .collect();
    assert_eq!(files, [SKILL_MD, FORMS]);
    let all = runner.list_all_skills().await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0, "docs");
    assert!(reads(&observations).is_empty(), "listing read no file");

    let skill = runner.load_skill("docs", "pdf-processing").await.unwrap();
    assert!(
        skill.instructions.contains("# PDF processing"),
        "{}",
        skill.instructions
    );
    assert_eq!(
        reads(&observations),
        [SKILL_MD],
        "loading read the SKILL.md alone"
    );
    let event = next_of(&mut events, EventKind::SkillRead).await;
    assert_eq!(event.outcome, Some(CallOutcome::Ok));
    assert_eq!(event.target.as_deref(), Some(SKILL_MD));
    assert_eq!(event.server_identity.as_deref(), Some("acme/docs"));

    let forms = runner.read_skill_file(&skill, FORMS).await.unwrap();
    assert_eq!(
        forms.data,
        SkillData::Text("# Forms\n\nFill every field; sign last.\n".into())
    );
    let event = next_of(&mut events, EventKind::SkillRead).await;
    assert_eq!(event.target.as_deref(), Some(FORMS));
    assert_eq!(event.output_bytes, Some(forms.bytes as u64));
    // A second use is served from what was read.
    runner.read_skill_file(&skill, FORMS).await.unwrap();
    assert_eq!(reads(&observations), [SKILL_MD, FORMS]);
    assert_eq!(skill.files_read(), [FORMS]);

    // A file the manifest does not list is refused without a request.
    let outside = runner
        .read_skill_file(&skill, "skill://pdf-processing/../secrets.md")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &outside,
            FeatureError::Skill {
                problem: SkillProblem::NotListed,
                ..
            }
        ),
        "{outside}"
    );
    assert_eq!(reads(&observations).len(), 2);

    // By URI too (`skills/get`).
    let by_uri = runner.skill("docs", SKILL_MD).await.unwrap();
    assert_eq!(by_uri.name, "pdf-processing");
    runner.shutdown().await.unwrap();
}

/// A file whose bytes are not what the manifest promises is refused, naming the server, the
/// skill, the file and both values; nothing of it is returned or kept.
async fn assert_file_refused(hostility: SkillHostility) -> SkillProblem {
    let (runner, observations, _dir) = run(PolicyConfig::default(), Some(hostility)).await;
    let mut events = runner.governed().subscribe();
    let skill = runner.load_skill("docs", "pdf-processing").await.unwrap();
    let err = runner.read_skill_file(&skill, FORMS).await.unwrap_err();
    let FeatureError::Skill {
        server,
        skill: name,
        file,
        problem,
    } = &err
    else {
        panic!("not a skill error: {err}");
    };
    assert_eq!(server, "docs");
    assert_eq!(name, "pdf-processing");
    assert_eq!(file.as_deref(), Some(FORMS));
    assert!(err.to_string().contains(FORMS), "{err}");
    assert!(
        skill.files_read().is_empty(),
        "unverified content is not kept"
    );
    assert_eq!(reads(&observations), [SKILL_MD, FORMS]);
    next_of(&mut events, EventKind::SkillRead).await;
    let event = next_of(&mut events, EventKind::SkillRead).await;
    assert_eq!(event.outcome, Some(CallOutcome::Transport));
    assert_eq!(event.target.as_deref(), Some(FORMS));
    runner.shutdown().await.unwrap();
    problem.clone()
}

#[tokio::test]
async fn a_file_with_another_digest_is_refused() {
    let problem = assert_file_refused(SkillHostility::WrongDigest).await;
    let SkillProblem::Digest { expected, actual } = problem else {
        panic!("{problem}");
    };
    assert_ne!(expected, actual);
    assert!(actual.starts_with("sha256:"), "{actual}");
}

#[tokio::test]
async fn a_file_of_another_size_is_refused() {
    let problem = assert_file_refused(SkillHostility::WrongSize).await;
    let len = "# Forms\n\nFill every field; sign last.\n".len() as u64;
    assert_eq!(
        problem,
        SkillProblem::Size {
            expected: len + 1,
            actual: len
        }
    );
}

#[tokio::test]
async fn a_skill_of_ten_thousand_files_is_listed_refused_and_never_read() {
    let (runner, observations, _dir) =
        run(PolicyConfig::default(), Some(SkillHostility::ManyFiles)).await;
    let listed = runner.list_skills("docs").await.unwrap();
    let many = listed.iter().find(|s| s.name == "many-files").unwrap();
    assert_eq!(
        many.refused,
        Some(SkillProblem::TooManyFiles {
            count: 10_001,
            limit: MAX_SKILL_FILES
        })
    );
    assert!(many.files.listed().is_empty(), "the manifest is not kept");
    let err = runner.load_skill("docs", "many-files").await.unwrap_err();
    assert!(
        matches!(
            &err,
            FeatureError::Skill { problem: SkillProblem::TooManyFiles { .. }, skill, .. }
                if skill == "many-files"
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("10001 files, more than 512"),
        "{err}"
    );
    assert!(reads(&observations).is_empty());
    // The other skills of the server are untouched.
    runner.load_skill("docs", "pdf-processing").await.unwrap();
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn escape_sequences_are_removed_from_names_descriptions_and_instructions() {
    let (runner, _observations, _dir) =
        run(PolicyConfig::default(), Some(SkillHostility::Escapes)).await;
    let listed = runner.list_skills("docs").await.unwrap();
    let escapes = listed.iter().find(|s| s.name == "escapes").unwrap();
    assert!(
        !escapes.description.chars().any(char::is_control),
        "{:?}",
        escapes.description
    );
    assert_eq!(escapes.description, "red text with  escapes");
    let skill = runner.load_skill("docs", "escapes").await.unwrap();
    assert!(
        !skill
            .instructions
            .chars()
            .any(|c| c.is_control() && c != '\n'),
        "{:?}",
        skill.instructions
    );
    assert!(skill.instructions.contains("The body styles the terminal."));
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn policy_rules_hide_and_refuse_skills_before_anything_is_sent() {
    let rules = IdentityRules::default().deny(Rule::skill("acme/*", "pdf-*"));
    let (runner, observations, _dir) =
        run(PolicyConfig::default().with_identity(rules), None).await;
    let mut events = runner.governed().subscribe();
    assert!(runner.list_skills("docs").await.unwrap().is_empty());
    let denied = runner
        .load_skill("docs", "pdf-processing")
        .await
        .unwrap_err();
    assert!(
        matches!(&denied, FeatureError::Denied { what: "skill", .. }),
        "{denied}"
    );
    assert!(denied.to_string().contains("policy.deny[0]"), "{denied}");
    let event = next_of(&mut events, EventKind::SkillRead).await;
    assert_eq!(event.outcome, Some(CallOutcome::Denied));
    assert_eq!(event.target.as_deref(), Some("pdf-processing"));
    assert!(reads(&observations).is_empty());
    let by_uri = runner.load_skill("docs", SKILL_MD).await.unwrap_err();
    assert!(matches!(by_uri, FeatureError::Denied { .. }), "{by_uri}");
    // A URI that names no skill (a query, or no `SKILL.md`) is refused before it is asked
    // for, rather than asked for and refused by the name that comes back.
    for nameless in [
        "skill://pdf-processing/SKILL.md?v=1",
        "skill://pdf-processing/",
    ] {
        let refused = runner.load_skill("docs", nameless).await.unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("not the URI of a skill's `SKILL.md`"),
            "{nameless}: {refused}"
        );
    }
    // Nor read one through the library's plain read, nor under another spelling.
    let read = runner.read_resource("docs", FORMS).await.unwrap_err();
    assert!(
        matches!(&read, FeatureError::Denied { what: "skill", .. }),
        "{read}"
    );
    let spelled = "skill://pdf-processing%2Freferences%2FFORMS.md";
    let read = runner.read_resource("docs", spelled).await.unwrap_err();
    assert!(
        matches!(&read, FeatureError::Denied { what: "skill", .. }),
        "{read}"
    );
    for other in [
        "SKILL://pdf-processing/references/FORMS.md",
        " skill://pdf-processing/SKILL.md",
    ] {
        let read = runner.read_resource("docs", other).await.unwrap_err();
        assert!(
            matches!(&read, FeatureError::InvalidUri { .. }),
            "{other:?}: {read}"
        );
    }
    // Nor may the run subscribe to a file of the refused skill.
    let subscribed = runner.subscribe_resource("docs", FORMS).await.unwrap_err();
    assert!(
        matches!(&subscribed, FeatureError::Denied { what: "skill", .. }),
        "{subscribed}"
    );
    let asked = observations.snapshot().targets_of("skills/get");
    assert!(asked.is_empty(), "{asked:?}");
    assert!(reads(&observations).is_empty(), "nothing read when refused");
    runner.shutdown().await.unwrap();
}

/// A model's call of `name` with `args`.
fn model_call(id: &str, name: &str, args: serde_json::Value) -> agent_core::ToolCall {
    agent_core::ToolCall::new(id, name, args.as_object().unwrap().clone())
}

#[tokio::test]
async fn the_model_finds_skills_in_search_and_reads_their_files_with_mcp_read_lazily() {
    use agent_core::ToolDispatcher as _;
    let (runner, observations, _dir) = run(PolicyConfig::default(), None).await;
    // Listed at open, nothing read.
    assert_eq!(reads(&observations), Vec::<String>::new());
    let found = search(&runner, "extract text from pdf files").await;
    let skill = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "skill")
        .unwrap_or_else(|| panic!("no skill found: {found}"));
    assert_eq!(skill["name"], "pdf-processing", "{skill}");
    assert!(
        runner
            .system_prompt_addendum()
            .is_some_and(|text| text.contains("pdf-processing"))
    );

    let read = |id: &'static str, file: &'static str| {
        model_call(
            id,
            "mcp_read",
            serde_json::json!({"server": "docs", "skill": "pdf-processing", "file": file}),
        )
    };
    let instructions = runner.dispatch(read("2", "SKILL.md")).await.unwrap();
    assert!(
        instructions.to_model_text().contains("pdf"),
        "{instructions:?}"
    );
    assert_eq!(reads(&observations), [SKILL_MD]);
    let forms = runner
        .dispatch(read("3", "references/FORMS.md"))
        .await
        .unwrap();
    assert!(!forms.to_model_text().is_empty());
    assert_eq!(reads(&observations), [SKILL_MD, FORMS]);
    // Read again, both come from what the session kept: nothing more is asked of the server.
    let again = runner.dispatch(read("5", "SKILL.md")).await.unwrap();
    assert_eq!(again.to_model_text(), instructions.to_model_text());
    let again = runner
        .dispatch(read("6", "references/FORMS.md"))
        .await
        .unwrap();
    assert_eq!(again.to_model_text(), forms.to_model_text());
    assert_eq!(reads(&observations), [SKILL_MD, FORMS]);
    let missing = runner.dispatch(read("4", "../other/SKILL.md")).await;
    assert!(missing.is_err(), "{missing:?}");
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_rule_refuses_mcp_read_of_its_files() {
    use agent_core::ToolDispatcher as _;
    let rules = IdentityRules::default().deny(Rule::skill("acme/*", "pdf-*"));
    let (runner, observations, _dir) =
        run(PolicyConfig::default().with_identity(rules), None).await;
    let denied = runner
        .dispatch(model_call(
            "1",
            "mcp_read",
            serde_json::json!({"server": "docs", "skill": "pdf-processing"}),
        ))
        .await
        .unwrap_err();
    assert!(denied.to_string().contains("pdf-*"), "{denied}");
    assert!(reads(&observations).is_empty());
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skills_file_is_neither_offered_nor_read_as_a_plain_resource() {
    use agent_core::ToolDispatcher as _;
    // A deny rule for the skill, none for resources: a file of the skill named by its URI is
    // still the skill's, so the skill's rule (not the resources') decides it.
    let rules = IdentityRules::default().deny(Rule::skill("acme/*", "pdf-*"));
    let (runner, observations, _dir) =
        run(PolicyConfig::default().with_identity(rules), None).await;
    for uri in [SKILL_MD, FORMS] {
        let refused = runner
            .dispatch(model_call(
                "1",
                "mcp_read",
                serde_json::json!({"server": "docs", "uri": uri}),
            ))
            .await
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("a file of the skill `pdf-processing`"),
            "{uri}: {refused}"
        );
    }
    assert!(
        reads(&observations).is_empty(),
        "{:?}",
        reads(&observations)
    );
    // Nor does search offer them as resources to read by URI.
    let found = search(&runner, "forms fill every field sign pdf").await;
    let offered: Vec<&serde_json::Value> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "resource")
        .filter(|r| {
            r["read_with"]["uri"]
                .as_str()
                .is_some_and(|u| u.starts_with("skill://"))
        })
        .collect();
    assert!(offered.is_empty(), "{offered:?}");
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_named_after_a_secret_of_the_run_is_left_out_with_its_files() {
    const SECRET: &str = "k3y-0f-th3-run-8f2a61c9";
    let dir = tempfile::tempdir().unwrap();
    write_example_skills(dir.path()).unwrap();
    let leaky = dir.path().join(SECRET);
    std::fs::create_dir_all(&leaky).unwrap();
    std::fs::write(
        leaky.join("SKILL.md"),
        format!("---\nname: {SECRET}\ndescription: Deploys with the key\n---\n\n# Deploy\n"),
    )
    .unwrap();
    // A secret parameter of the server's spec: a secret of the run.
    let mut docs = spec("docs");
    if let mcp_config::TransportSpec::Custom(custom) = &mut docs.transport {
        custom.params.insert("api_key".into(), SECRET.into());
    }
    let skills = Skills::from_dir(dir.path()).unwrap();
    let (runner, _observations) = run_on(docs, skills, PolicyConfig::default(), false).await;
    let names: Vec<String> = runner
        .list_skills("docs")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["pdf-processing"]);
    let shown = search(&runner, "deploys with the key skill")
        .await
        .to_string();
    assert!(!shown.contains(SECRET), "{shown}");
    // Nor are its files offered as resources: what the catalog holds of the server.
    let offered = format!("{:?}", runner.catalog().features("docs"));
    assert!(!offered.contains(SECRET), "{offered}");
    assert!(offered.contains("pdf-processing"), "{offered}");
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_nested_skills_files_are_not_read_as_the_outer_skills() {
    use agent_core::ToolDispatcher as _;
    // `pdf-processing/deploy-prod` is a skill of its own inside `pdf-processing`, whose
    // manifest lists the inner skill's files too; the rules refuse only the inner one.
    let dir = tempfile::tempdir().unwrap();
    write_example_skills(dir.path()).unwrap();
    let inner = dir.path().join("pdf-processing/deploy-prod");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(
        inner.join("SKILL.md"),
        "---\nname: deploy-prod\ndescription: Deploys to production\n---\n\n# Deploy\n",
    )
    .unwrap();
    let skills = Skills::from_dir(dir.path()).unwrap();
    let rules = IdentityRules::default().deny(Rule::skill("acme/*", "deploy-*"));
    let policy = PolicyConfig::default().with_identity(rules);
    let (runner, observations) = run_on(spec("docs"), skills, policy, false).await;
    let read = |file: &str| {
        model_call(
            "1",
            "mcp_read",
            serde_json::json!({"server": "docs", "skill": "pdf-processing", "file": file}),
        )
    };
    let refused = runner
        .dispatch(read("deploy-prod/SKILL.md"))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("lies within another skill"),
        "{refused}"
    );
    let inner_md = "skill://pdf-processing/deploy-prod/SKILL.md".to_owned();
    assert!(
        !reads(&observations).contains(&inner_md),
        "{:?}",
        reads(&observations)
    );
    // The outer skill's own files are read as before.
    runner.dispatch(read("references/FORMS.md")).await.unwrap();
    // Nor by its URI, which is the inner skill's (the innermost), not the outer one's.
    let read = runner.read_resource("docs", &inner_md).await.unwrap_err();
    assert!(
        matches!(&read, FeatureError::Denied { what: "skill", .. }),
        "{read}"
    );
    // Through the library too: a loaded outer skill does not read the inner one's file.
    let outer = runner.load_skill("docs", "pdf-processing").await.unwrap();
    let refused = runner.read_skill_file(&outer, &inner_md).await.unwrap_err();
    assert!(
        refused.to_string().contains("lies within another skill"),
        "{refused}"
    );
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn skills_are_served_on_as_listed_and_their_files_only_once_checked() {
    let (runner, observations, _dir) = run(PolicyConfig::default(), None).await;
    let mut events = runner.governed().subscribe();
    let entry = runner.skill("docs", "pdf-processing").await.unwrap();
    let served = runner
        .served_skill(&entry)
        .expect("an entry that is not refused");
    assert_eq!(served.uri, SKILL_MD);
    assert_eq!(served.frontmatter.extra["license"], "MIT");
    assert!(served.validate().is_ok());
    assert!(reads(&observations).is_empty(), "listing reads no file");

    let read = runner.read_skill_resource("docs", FORMS).await.unwrap();
    let contents = read.expect("a file of the skill");
    assert_eq!(
        contents,
        [
            rmcp::model::ResourceContents::text("# Forms\n\nFill every field; sign last.\n", FORMS)
                .with_mime_type("text/markdown")
        ]
    );
    let event = next_of(&mut events, EventKind::SkillRead).await;
    assert_eq!(event.outcome, Some(CallOutcome::Ok));
    assert_eq!(event.target.as_deref(), Some(FORMS));

    // Not a skill's: left to a plain read. Within its directory but not in its manifest:
    // refused before anything is read.
    assert!(
        runner
            .read_skill_resource("docs", "test://elsewhere")
            .await
            .unwrap()
            .is_none()
    );
    let unlisted = runner
        .read_skill_resource("docs", "skill://pdf-processing/secret.md")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &unlisted,
            FeatureError::Skill {
                problem: SkillProblem::NotListed,
                ..
            }
        ),
        "{unlisted}"
    );
    assert_eq!(reads(&observations), [FORMS]);
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_refused_skill_is_served_neither_listed_nor_read() {
    let rules = IdentityRules::default().deny(Rule::skill("acme/*", "pdf-*"));
    let (runner, observations, _dir) =
        run(PolicyConfig::default().with_identity(rules), None).await;
    let mut events = runner.governed().subscribe();
    let refused = runner.refused_skills("docs").await.unwrap();
    assert_eq!(refused.len(), 1);
    assert!(refused[0].owns(SKILL_MD) && refused[0].owns(FORMS));
    let denied = runner.read_skill_resource("docs", FORMS).await.unwrap_err();
    assert!(
        matches!(&denied, FeatureError::Denied { what: "skill", .. }),
        "{denied}"
    );
    let event = next_of(&mut events, EventKind::SkillRead).await;
    assert_eq!(event.outcome, Some(CallOutcome::Denied));
    assert!(reads(&observations).is_empty(), "nothing read when refused");
    runner.shutdown().await.unwrap();
}
