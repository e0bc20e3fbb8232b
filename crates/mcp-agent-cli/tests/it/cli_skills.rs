//! `mcp-agent skills` against the test kit's stdio server (a real process) serving a skill
//! directory and hostile skills: listed and shown checked, terminal-safe, a skill over the
//! file bound refused by name.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::mcp_agent;

fn servers(dir: &Path) -> String {
    json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": [
            "--skills", dir.display().to_string(),
            "--skills-hostile", "escapes",
            "--skills-hostile", "many-files",
        ],
    }])
    .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Nothing a terminal would act on.
fn assert_terminal_safe(what: &str, bytes: &[u8]) {
    let shown = text(bytes);
    assert!(
        shown
            .chars()
            .all(|c| c == '\n' || c == '\t' || !c.is_control()),
        "{what}: a control character in {shown:?}"
    );
}

#[test]
fn skills_are_listed_and_shown_checked_and_terminal_safe() {
    let dir = tempfile::tempdir().unwrap();
    mcp_test_kit::write_example_skills(dir.path()).unwrap();
    let servers = servers(dir.path());
    let env = [("MCP_AGENT__SERVERS", servers.as_str())];

    let listed = mcp_agent(&["skills", "list"], &env);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    assert_terminal_safe("stdout", &listed.stdout);
    assert_terminal_safe("stderr", &listed.stderr);
    let stdout = text(&listed.stdout);
    assert!(
        stdout.contains("kit\tpdf-processing\tExtract, fill, and assemble PDF documents\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("kit\tmany-files\t(refused: it lists 10001 files, more than 512"),
        "{stdout}"
    );
    assert!(stdout.contains("kit\tescapes\tred text with"), "{stdout}");
    assert!(text(&listed.stderr).contains("3 skills from 1 servers"));

    let as_json = mcp_agent(&["skills", "list", "kit", "--json"], &env);
    assert_eq!(as_json.status.code(), Some(0), "{}", text(&as_json.stderr));
    let value: Value = serde_json::from_slice(&as_json.stdout).unwrap();
    let pdf = value
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "pdf-processing")
        .unwrap();
    assert_eq!(pdf["uri"], "skill://pdf-processing/SKILL.md");
    assert_eq!(pdf["files"].as_array().unwrap().len(), 2);
    assert_eq!(pdf["refused"], Value::Null);

    let shown = mcp_agent(&["skills", "show", "kit", "pdf-processing"], &env);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown.stderr));
    assert!(text(&shown.stdout).contains("# PDF processing"));
    let stderr = text(&shown.stderr);
    assert!(
        stderr.contains("skill://pdf-processing/references/FORMS.md"),
        "{stderr}"
    );

    let escapes = mcp_agent(&["skills", "show", "kit", "escapes"], &env);
    assert_eq!(escapes.status.code(), Some(0), "{}", text(&escapes.stderr));
    assert_terminal_safe("stdout", &escapes.stdout);
    assert!(text(&escapes.stdout).contains("The body styles the terminal."));

    let refused = mcp_agent(&["skills", "show", "kit", "many-files"], &env);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("server `kit`: skill `many-files`: it lists 10001 files"),
        "{stderr}"
    );
}
