//! `mcp-agent serve` serving its upstreams' skills (the skills extension): two test-kit
//! upstreams (`kit` and `twin`) serving a skill directory, each with a record of what reached
//! it, raw HTTP. Skills are listed and got as `skill://server/…` (their files too), a file
//! read routes back to its server alone, a skill the `[policy]` refuses is neither listed nor
//! readable (nothing of it reaches the upstream), a `skill://` URI that names another server or
//! escapes its own reaches no upstream, and a file whose digest is not its manifest's is
//! refused, named.

use serde_json::{Value, json};

use crate::support::gateway::{Gateway, kit_config_with, open_session, rpc};

/// The gateway over `kit` (the example skill and one named `escapes`, which the `[policy]`
/// refuses) and `twin` (the example skill, its manifest's digests wrong); the records of both.
fn gateway() -> (
    [tempfile::TempDir; 2],
    Gateway,
    mcp_test_kit::RecordFile,
    mcp_test_kit::RecordFile,
) {
    skills_gateway(0, &["--skills-hostile", "wrong-digest"])
}

/// The gateway over `kit` (the example skill with `references` more files `Rnn.md` in its
/// `references` folder, and one named `escapes`, which the `[policy]` refuses) and `twin` (the
/// same skills, started with `twin_args` too); the records of both.
pub(crate) fn skills_gateway(
    references: usize,
    twin_args: &[&str],
) -> (
    [tempfile::TempDir; 2],
    Gateway,
    mcp_test_kit::RecordFile,
    mcp_test_kit::RecordFile,
) {
    let skills = tempfile::tempdir().unwrap();
    mcp_test_kit::write_example_skills(skills.path()).unwrap();
    for n in 0..references {
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

pub(crate) fn count(record: &mcp_test_kit::RecordFile, method: &str) -> usize {
    record.snapshot().requests_of(method)
}

pub(crate) fn uris(listed: &Value, key: &str) -> Vec<String> {
    listed["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn skills_are_listed_got_and_read_through_their_server_alone() {
    let (_dir, gateway, kit, twin) = gateway();
    let addr = gateway.addr();
    let session = open_session(&addr);

    // Listed per server as `skill://server/…`, files too; the refused skill is not there.
    let listed = rpc(&addr, &session, 2, "skills/list", json!({}));
    let skills = uris(&listed, "skills");
    assert_eq!(
        skills,
        [
            "skill://kit/pdf-processing/SKILL.md",
            "skill://twin/pdf-processing/SKILL.md"
        ],
        "{listed}"
    );
    let first = &listed["result"]["skills"][0];
    assert_eq!(first["frontmatter"]["name"], "pdf-processing", "{listed}");
    assert_eq!(first["frontmatter"]["license"], "MIT", "{listed}");
    let files: Vec<&str> = first["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["uri"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"skill://kit/pdf-processing/references/FORMS.md"),
        "{files:?}"
    );
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");

    // The SKILL.md resources of the refused skill are not listed either.
    let resources = uris(
        &rpc(&addr, &session, 3, "resources/list", json!({})),
        "resources",
    );
    assert!(
        resources.contains(&"skill://kit/pdf-processing/SKILL.md".to_owned()),
        "{resources:?}"
    );
    assert!(
        resources.iter().all(|u| !u.contains("escapes")),
        "{resources:?}"
    );

    // Got by its URI as listed: the same entry.
    let got = rpc(
        &addr,
        &session,
        4,
        "skills/get",
        json!({"uri": "skill://kit/pdf-processing/SKILL.md"}),
    );
    assert_eq!(got["result"]["skill"], *first, "{got}");

    // A file read goes to its server, as its own URI, and comes back under the client's.
    let read = rpc(
        &addr,
        &session,
        5,
        "resources/read",
        json!({"uri": "skill://kit/pdf-processing/references/FORMS.md"}),
    );
    let content = &read["result"]["contents"][0];
    assert_eq!(
        content["text"], "# Forms\n\nFill every field; sign last.\n",
        "{read}"
    );
    assert_eq!(
        content["uri"], "skill://kit/pdf-processing/references/FORMS.md",
        "{read}"
    );
    let skill_md = rpc(
        &addr,
        &session,
        6,
        "resources/read",
        json!({"uri": "skill://kit/pdf-processing/SKILL.md"}),
    );
    assert!(
        skill_md["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("---\nname: pdf-processing\n")),
        "{skill_md}"
    );
    assert_eq!(
        (
            count(&kit, "resources/read"),
            count(&twin, "resources/read")
        ),
        (2, 0)
    );

    // The refused skill: neither got nor read, and nothing of it reaches the upstream.
    let kit_gets = count(&kit, "skills/get");
    for (id, method, params) in [
        (
            7,
            "skills/get",
            json!({"uri": "skill://kit/escapes/SKILL.md"}),
        ),
        (
            8,
            "resources/read",
            json!({"uri": "skill://kit/escapes/SKILL.md"}),
        ),
    ] {
        let answer = rpc(&addr, &session, id, method, params);
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("escapes")),
            "{answer}"
        );
    }
    assert_eq!(count(&kit, "skills/get"), kit_gets);
    assert_eq!(count(&kit, "resources/read"), 2, "a refused read was sent");

    // URIs that name another server, or leave their own, reach no upstream.
    let long = format!("skill://kit/{}/SKILL.md", "x".repeat(5000));
    for (id, uri) in [
        "skill://kit/../twin/pdf-processing/SKILL.md",
        "skill://kit/%2E%2e/twin/pdf-processing/SKILL.md",
        "skill://kit/pdf-processing/../../twin/pdf-processing/SKILL.md",
        "skill://nobody/pdf-processing/SKILL.md",
        "skill://KIT/pdf-processing/SKILL.md",
        "skill://k%69t/pdf-processing/SKILL.md",
        "skill://pdf-processing/SKILL.md",
        "skill://kit",
        long.as_str(),
    ]
    .into_iter()
    .enumerate()
    {
        for (n, method) in ["resources/read", "skills/get"].into_iter().enumerate() {
            let answer = rpc(
                &addr,
                &session,
                20 + 2 * id as u64 + n as u64,
                method,
                json!({"uri": uri}),
            );
            assert_eq!(answer["error"]["code"], -32602, "{method} {uri}: {answer}");
        }
    }
    assert_eq!(
        (
            count(&kit, "resources/read"),
            count(&twin, "resources/read")
        ),
        (2, 0),
        "a refused URI reached an upstream"
    );
    assert_eq!(count(&twin, "skills/get"), 0);

    // A cursor this gateway did not give is refused.
    let answer = rpc(&addr, &session, 60, "skills/list", json!({"cursor": "64x"}));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[test]
fn a_file_whose_digest_is_not_its_manifests_is_refused_named() {
    let (_dir, gateway, _kit, twin) = gateway();
    let addr = gateway.addr();
    let session = open_session(&addr);
    let uri = "skill://twin/pdf-processing/references/FORMS.md";
    let answer = rpc(&addr, &session, 2, "resources/read", json!({"uri": uri}));
    let message = answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("the read was not refused: {answer}"));
    for part in ["twin", "pdf-processing", "FORMS.md", "digest"] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    assert_eq!(count(&twin, "resources/read"), 1, "read once, then refused");
}
