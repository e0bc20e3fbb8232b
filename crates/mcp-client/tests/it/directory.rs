//! Directory reads (`resources/directory/read`) of a run's servers, served by the test kit's
//! server over a real skill directory (two children a page): children and subdirectories, every
//! page followed within the session's bounds, a file or an escaping URI refused, a server that
//! does not declare `directoryRead` named, the skill's `[policy]` rules deciding first.

use std::time::Duration;

use agent_core::{CallOutcome, EventKind, IdentityRules, Rule};
use mcp_client::{FeatureError, ListLimit, McpRunner};
use mcp_config::PolicyConfig;
use mcp_test_kit::{DIRECTORY_PAGE, Observations, SkillHostility};

const SKILL_DIR: &str = "skill://pdf-processing";
const REFERENCES: &str = "skill://pdf-processing/references";

/// A run of server `docs` (identity `acme/docs`) serving the example skills with four more
/// references (and `hostility`), and server `plain` serving no skills, under `policy`.
async fn run(
    policy: PolicyConfig,
    hostility: Option<SkillHostility>,
) -> (McpRunner, Observations, tempfile::TempDir) {
    let references = ["A.md", "B.md", "C.md", "D.md"];
    crate::skills::run_with(policy, hostility, &references, true).await
}

/// The directory reads the server was asked for, in order.
fn directory_reads(observations: &Observations) -> Vec<String> {
    observations
        .snapshot()
        .targets_of("resources/directory/read")
}

#[tokio::test]
async fn a_skill_directory_lists_its_children_and_subdirectories_every_page() {
    let (runner, observations, _dir) = run(PolicyConfig::default(), None).await;
    let mut events = runner.governed().subscribe();
    assert!(runner.sessions()[0].offers_directory_read());

    let children = runner.read_directory("docs", SKILL_DIR).await.unwrap();
    let shown: Vec<(&str, Option<&str>, bool)> = children
        .iter()
        .map(|c| (c.uri.as_str(), c.mime_type.as_deref(), c.is_directory()))
        .collect();
    assert_eq!(
        shown,
        [
            (
                "skill://pdf-processing/SKILL.md",
                Some("text/markdown"),
                false
            ),
            (REFERENCES, Some("inode/directory"), true),
        ]
    );
    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = events.recv().await.unwrap();
            if event.kind == EventKind::SkillRead {
                return event;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(event.outcome, Some(CallOutcome::Ok));
    assert_eq!(event.target.as_deref(), Some(SKILL_DIR));

    // Five references, two a page: three requests, every child once, in order.
    let references = runner.read_directory("docs", REFERENCES).await.unwrap();
    let names: Vec<&str> = references.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["A.md", "B.md", "C.md", "D.md", "FORMS.md"]);
    assert_eq!(DIRECTORY_PAGE, 2);
    assert_eq!(
        directory_reads(&observations),
        [SKILL_DIR, REFERENCES, REFERENCES, REFERENCES]
    );
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_file_is_no_directory_and_an_escaping_uri_is_never_sent() {
    let (runner, observations, _dir) = run(PolicyConfig::default(), None).await;
    let file = runner
        .read_directory("docs", "skill://pdf-processing/SKILL.md")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &file,
            FeatureError::Rpc { server, method: "resources/directory/read", code: -32602, .. }
                if server == "docs"
        ),
        "{file}"
    );
    for escaping in [
        "skill://pdf-processing/../other",
        "skill://pdf-processing/%2e%2e/other",
        "skill://pdf-processing/references/..",
    ] {
        let err = runner.read_directory("docs", escaping).await.unwrap_err();
        assert!(
            matches!(&err, FeatureError::InvalidUri { server, .. } if server == "docs"),
            "{escaping}: {err}"
        );
    }
    assert_eq!(
        directory_reads(&observations),
        ["skill://pdf-processing/SKILL.md"],
        "only the file was asked for"
    );
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_without_directory_reads_is_named_before_anything_is_sent() {
    let (runner, _observations, _dir) = run(PolicyConfig::default(), None).await;
    let err = runner.read_directory("plain", SKILL_DIR).await.unwrap_err();
    assert!(
        matches!(
            &err,
            FeatureError::NotOffered { server, method: "resources/directory/read" }
                if server == "plain"
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "server `plain` does not offer resources/directory/read"
    );
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_refused_skill_has_no_directory_to_read() {
    let rules = IdentityRules::default().deny(Rule::skill("acme/*", "pdf-*"));
    let (runner, observations, _dir) =
        run(PolicyConfig::default().with_identity(rules), None).await;
    for uri in [SKILL_DIR, REFERENCES] {
        let err = runner.read_directory("docs", uri).await.unwrap_err();
        assert!(
            matches!(&err, FeatureError::Denied { what: "skill", target, .. } if target == "pdf-processing"),
            "{uri}: {err}"
        );
    }
    assert!(directory_reads(&observations).is_empty(), "nothing sent");
    runner.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_directory_of_ten_thousand_files_stops_at_the_listing_bounds() {
    let (runner, _observations, _dir) =
        run(PolicyConfig::default(), Some(SkillHostility::ManyFiles)).await;
    let err = runner
        .read_directory("docs", "skill://many-files/f")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            FeatureError::ListLimit {
                method: "resources/directory/read",
                limit: ListLimit::Pages { .. } | ListLimit::Entries { .. },
                ..
            }
        ),
        "{err}"
    );
    runner.shutdown().await.unwrap();
}
