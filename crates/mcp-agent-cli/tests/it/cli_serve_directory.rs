//! `mcp-agent serve` serving its upstreams' directory reads (`resources/directory/read`, the
//! skills extension's `directoryRead`): two test-kit upstreams (`kit` and `twin`) serving a
//! skill directory whose `references` hold 71 files, raw HTTP. The gateway declares
//! `directoryRead`; a directory read routes to its server alone and its children come back as
//! `skill://server/…`, subdirectories as `inode/directory`, paged with cursors the gateway gave
//! (any other refused); a file is no directory (-32602); a URI that names another server or
//! escapes its own, or a directory of a skill the `[policy]` refuses, reaches no upstream. An
//! upstream serving skills without `directoryRead` has its skills' folders listed from their
//! manifests.

use serde_json::{Value, json};

use crate::cli_serve_skills::{count, rpc, uris};
use crate::support::gateway::{Gateway, kit_config_with, open_session, request};

const METHOD: &str = "resources/directory/read";

/// The gateway over `kit` (the example skill with 70 more references, and one named `escapes`,
/// which the `[policy]` refuses) and `twin` (the same skill); the records of both.
fn gateway() -> (
    [tempfile::TempDir; 2],
    Gateway,
    mcp_test_kit::RecordFile,
    mcp_test_kit::RecordFile,
) {
    gateway_with_twin(&[])
}

/// [`gateway`], `twin` started with `twin_args` too.
fn gateway_with_twin(
    twin_args: &[&str],
) -> (
    [tempfile::TempDir; 2],
    Gateway,
    mcp_test_kit::RecordFile,
    mcp_test_kit::RecordFile,
) {
    let skills = tempfile::tempdir().unwrap();
    mcp_test_kit::write_example_skills(skills.path()).unwrap();
    for n in 0..70 {
        let file = skills
            .path()
            .join(format!("pdf-processing/references/R{n:02}.md"));
        std::fs::write(file, "# A reference\n").unwrap();
    }
    let skills_dir = skills.path().display().to_string();
    let (dir, file, kit) = kit_config_with(
        "expose = \"eager\"",
        &["--skills", &skills_dir, "--skills-hostile", "escapes"],
    );
    let twin = mcp_test_kit::RecordFile::new(dir.path().join("twin.jsonl"));
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!(
        "\n[[servers]]\nname = \"twin\"\ncommand = {:?}\nargs = [\"--record\", {:?}, \"--skills\", {skills_dir:?}{}]\n\n[policy]\ndeny = [{{ server = \"*\", skill = \"escapes\" }}]\n",
        mcp_test_kit::stdio::binary().display().to_string(),
        twin.path().display().to_string(),
        twin_args
            .iter()
            .map(|a| format!(", {a:?}"))
            .collect::<String>(),
    ));
    std::fs::write(&file, text).unwrap();
    let gateway = Gateway::start(&file, &[]);
    ([dir, skills], gateway, kit, twin)
}

/// The capabilities a fresh `initialize` answers with.
fn capabilities(addr: &str) -> Value {
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    });
    let (status, _, text) = request(addr, "POST", &[], init.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|d| d.starts_with('{'))
        .unwrap_or(&text);
    let answer: Value = serde_json::from_str(data).unwrap();
    answer["result"]["capabilities"].clone()
}

#[test]
fn a_directory_is_read_through_its_server_alone_paged_by_the_gateway() {
    let (_dir, gateway, kit, twin) = gateway();
    let addr = gateway.addr();
    let declared = capabilities(&addr);
    assert_eq!(
        declared["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true}),
        "{declared}"
    );
    let session = open_session(&addr);

    // The skill's directory: its SKILL.md and its subdirectory, as the client knows them.
    let read = rpc(
        &addr,
        &session,
        2,
        METHOD,
        json!({"uri": "skill://kit/pdf-processing"}),
    );
    let children = read["result"]["resources"].as_array().unwrap();
    let shown: Vec<(&str, &str)> = children
        .iter()
        .map(|c| (c["uri"].as_str().unwrap(), c["mimeType"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        [
            ("skill://kit/pdf-processing/SKILL.md", "text/markdown"),
            ("skill://kit/pdf-processing/references", "inode/directory"),
        ],
        "{read}"
    );
    assert!(read["result"].get("nextCursor").is_none(), "{read}");
    assert_eq!((count(&kit, METHOD), count(&twin, METHOD)), (1, 0));

    // 71 references: a page of 64, then the cursor the gateway gave for the rest.
    let first = rpc(
        &addr,
        &session,
        3,
        METHOD,
        json!({"uri": "skill://twin/pdf-processing/references"}),
    );
    let mut all = uris(&first, "resources");
    assert_eq!(all.len(), mcp_serve::DIRECTORY_PAGE, "{first}");
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let rest = rpc(
        &addr,
        &session,
        4,
        METHOD,
        json!({"uri": "skill://twin/pdf-processing/references", "cursor": cursor}),
    );
    assert!(rest["result"].get("nextCursor").is_none(), "{rest}");
    all.extend(uris(&rest, "resources"));
    assert_eq!(all.len(), 71);
    assert!(
        all.iter()
            .all(|u| u.starts_with("skill://twin/pdf-processing/references/")),
        "{all:?}"
    );
    assert!(all.contains(&"skill://twin/pdf-processing/references/FORMS.md".to_owned()));

    // A cursor the gateway did not give, and a file, are -32602.
    let reached = (count(&kit, METHOD), count(&twin, METHOD));
    let stale = rpc(
        &addr,
        &session,
        5,
        METHOD,
        json!({"uri": "skill://twin/pdf-processing/references", "cursor": "63"}),
    );
    assert_eq!(stale["error"]["code"], -32602, "{stale}");
    assert_eq!((count(&kit, METHOD), count(&twin, METHOD)), reached);
    let file = rpc(
        &addr,
        &session,
        6,
        METHOD,
        json!({"uri": "skill://kit/pdf-processing/SKILL.md"}),
    );
    assert_eq!(file["error"]["code"], -32602, "{file}");
}

#[test]
fn no_directory_read_escapes_its_server_or_reaches_a_refused_skill() {
    let (_dir, gateway, kit, twin) = gateway();
    let addr = gateway.addr();
    let session = open_session(&addr);
    for (id, uri) in [
        "skill://kit/../twin/pdf-processing",
        "skill://kit/%2E%2e/twin/pdf-processing",
        "skill://kit/pdf-processing/../../twin/pdf-processing",
        "skill://kit/pdf-processing/references/..",
        "skill://nobody/pdf-processing",
        "skill://KIT/pdf-processing",
        "skill://pdf-processing",
        "upstream://twin/skill://pdf-processing/../../x",
        "skill://kit/escapes",
    ]
    .into_iter()
    .enumerate()
    {
        let answer = rpc(&addr, &session, 10 + id as u64, METHOD, json!({"uri": uri}));
        assert_eq!(answer["error"]["code"], -32602, "{uri}: {answer}");
    }
    let refused = rpc(
        &addr,
        &session,
        30,
        METHOD,
        json!({"uri": "skill://kit/escapes"}),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("escapes") && m.contains("refused")),
        "{refused}"
    );
    assert_eq!(
        (count(&kit, METHOD), count(&twin, METHOD)),
        (0, 0),
        "a refused directory read reached an upstream"
    );
}

#[test]
fn an_upstream_without_directory_reads_has_its_skill_folders_listed_from_their_manifests() {
    let (_dir, gateway, _kit, twin) = gateway_with_twin(&["--skills-hostile", "no-directory-read"]);
    let addr = gateway.addr();
    let session = open_session(&addr);
    let read = rpc(
        &addr,
        &session,
        2,
        METHOD,
        json!({"uri": "skill://twin/pdf-processing"}),
    );
    let children = read["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{read}"));
    let shown: Vec<(&str, Option<&str>)> = children
        .iter()
        .map(|c| (c["uri"].as_str().unwrap(), c["mimeType"].as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            ("skill://twin/pdf-processing/SKILL.md", None),
            (
                "skill://twin/pdf-processing/references",
                Some("inode/directory")
            ),
        ],
        "{read}"
    );
    let references = rpc(
        &addr,
        &session,
        3,
        METHOD,
        json!({"uri": "skill://twin/pdf-processing/references"}),
    );
    assert_eq!(
        uris(&references, "resources").len(),
        mcp_serve::DIRECTORY_PAGE
    );
    assert!(
        references["result"]["nextCursor"].is_string(),
        "{references}"
    );
    for (id, uri) in [
        "skill://twin/pdf-processing/SKILL.md",
        "skill://twin/pdf-processing/refs",
        "skill://twin/escapes",
    ]
    .into_iter()
    .enumerate()
    {
        let answer = rpc(&addr, &session, 10 + id as u64, METHOD, json!({"uri": uri}));
        assert_eq!(answer["error"]["code"], -32602, "{uri}: {answer}");
    }
    assert_eq!(count(&twin, METHOD), 0, "nothing was asked of the upstream");
}
