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

use crate::cli_serve_skills::{count, skills_gateway, uris};
use crate::support::gateway::{message, open_session, request, rpc};

const METHOD: &str = "resources/directory/read";

/// The files the gateway's skill has in its `references` folder beyond the example's: `kit`
/// serves it, with one more skill named `escapes` which the `[policy]` refuses, and so does
/// `twin` ([`skills_gateway`]).
const REFERENCES: usize = 70;

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
    let answer = message(&text);
    answer["result"]["capabilities"].clone()
}

#[test]
fn a_directory_is_read_through_its_server_alone_paged_by_the_gateway() {
    let (_dir, gateway, kit, twin) = skills_gateway(REFERENCES, &[]);
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
    let (_dir, gateway, kit, twin) = skills_gateway(REFERENCES, &[]);
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
    let (_dir, gateway, _kit, twin) =
        skills_gateway(REFERENCES, &["--skills-hostile", "no-directory-read"]);
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
