//! `mcp-agent serve` serving its upstreams' resources, templates, prompts, completions and
//! subscriptions through the governed layer: two test-kit upstreams (`kit` and `twin`, each
//! with `--features` and a record of what reached it), raw HTTP. URIs are shown as
//! `upstream://server/uri` and route back to that server only; a URI that tries to escape its
//! server reaches no upstream; `[policy]` refuses a resource before it is read; a prompt without
//! its required argument is answered with an error naming it; a flood of updates leaves the
//! session working.

use serde_json::json;

use crate::support::gateway::{Gateway, kit_config_with, open_session, rpc};

/// The gateway over `kit` and `twin`, with `policy` as the config's `[policy]` table; the
/// records of both upstreams.
fn gateway(
    policy: &str,
) -> (
    tempfile::TempDir,
    Gateway,
    mcp_test_kit::RecordFile,
    mcp_test_kit::RecordFile,
) {
    let (dir, file, kit) = kit_config_with("expose = \"eager\"", &["--features"]);
    let twin = mcp_test_kit::RecordFile::new(dir.path().join("twin.jsonl"));
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!(
        "\n[[servers]]\nname = \"twin\"\ncommand = {:?}\nargs = [\"--record\", {:?}, \"--features\"]\n\n[policy]\n{policy}\n",
        mcp_test_kit::stdio::binary().display().to_string(),
        twin.path().display().to_string(),
    ));
    std::fs::write(&file, text).unwrap();
    let gateway = Gateway::start(&file, &[]);
    (dir, gateway, kit, twin)
}

fn reads(record: &mcp_test_kit::RecordFile) -> usize {
    record.snapshot().requests_of("resources/read")
}

#[test]
fn resources_are_shown_per_server_and_route_back_to_it_alone() {
    let (_dir, gateway, kit, twin) = gateway("");
    let addr = gateway.addr();
    let session = open_session(&addr);

    let listed = rpc(&addr, &session, 2, "resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    for uri in [
        "upstream://kit/test://text/hello",
        "upstream://twin/test://text/hello",
    ] {
        assert!(uris.contains(&uri), "{uri} not in {uris:?}");
    }
    // The upstream's hostile entries (a control character, an overlong URI) are left out.
    assert!(
        uris.iter().all(|u| !u.contains('\u{7}') && u.len() < 4096),
        "{uris:?}"
    );
    let templates = rpc(&addr, &session, 3, "resources/templates/list", json!({}));
    assert!(
        templates
            .to_string()
            .contains("upstream://twin/test://items/{id}"),
        "{templates}"
    );

    let read = rpc(
        &addr,
        &session,
        4,
        "resources/read",
        json!({"uri": "upstream://twin/test://items/7"}),
    );
    let content = &read["result"]["contents"][0];
    assert_eq!(content["text"], "test://items/7", "{read}");
    assert_eq!(content["uri"], "upstream://twin/test://items/7", "{read}");
    assert_eq!((reads(&kit), reads(&twin)), (0, 1));

    // Escapes: another server's prefix inside the path, dot segments (plain and
    // percent-encoded), an authority that is no server's name, an overlong URI, a control
    // character, the upstream's own URI without the prefix.
    let long = format!("upstream://kit/test://{}", "x".repeat(5000));
    for (id, uri) in [
        "upstream://kit/../twin/test://text/hello",
        "upstream://kit/%2e%2e/twin/test://text/hello",
        "upstream://k%69t/test://text/hello",
        "upstream://KIT/test://text/hello",
        "upstream://nobody/test://text/hello",
        "upstream://kit",
        "test://text/hello",
        "upstream://kit/test://a\u{1b}b",
        long.as_str(),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = rpc(
            &addr,
            &session,
            10 + id as u64,
            "resources/read",
            json!({"uri": uri}),
        );
        assert_eq!(answer["error"]["code"], -32602, "{uri}: {answer}");
    }
    assert_eq!(
        (reads(&kit), reads(&twin)),
        (0, 1),
        "a refused URI reached an upstream"
    );

    // A missing resource of a server: -32002 (this session is 2025-11-25) with its URI.
    let missing = "upstream://kit/test://none";
    let answer = rpc(
        &addr,
        &session,
        30,
        "resources/read",
        json!({"uri": missing}),
    );
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert_eq!(answer["error"]["data"]["uri"], missing, "{answer}");

    // Prompts as `server__prompt`; a missing required argument is named, and not sent.
    let prompts = rpc(&addr, &session, 31, "prompts/list", json!({}));
    assert!(prompts.to_string().contains("\"kit__greet\""), "{prompts}");
    let answer = rpc(
        &addr,
        &session,
        32,
        "prompts/get",
        json!({"name": "kit__greet", "arguments": {"greeting": "Hi"}}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("name"),
        "{answer}"
    );
    assert_eq!(kit.snapshot().requests_of("prompts/get"), 0);
    let answer = rpc(
        &addr,
        &session,
        33,
        "prompts/get",
        json!({"name": "twin__greet", "arguments": {"name": "bob"}}),
    );
    assert_eq!(
        answer["result"]["messages"][0]["content"]["text"], "Hello, bob!",
        "{answer}"
    );
    for (id, name) in [(34, "greet"), (35, "nobody__greet"), (36, "kit__")] {
        let answer = rpc(&addr, &session, id, "prompts/get", json!({"name": name}));
        assert_eq!(answer["error"]["code"], -32602, "{name}: {answer}");
    }

    // Completions go to the server of the prompt or template.
    let answer = rpc(
        &addr,
        &session,
        37,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "upstream://kit/test://items/{id}"},
               "argument": {"name": "id", "value": "1"}}),
    );
    assert_eq!(
        answer["result"]["completion"]["values"],
        json!(["1", "10"]),
        "{answer}"
    );
}

#[test]
fn policy_refuses_a_resource_before_it_is_read() {
    let (_dir, gateway, kit, _twin) =
        gateway("deny = [{ server = \"*\", resource = \"test://blob/*\" }]");
    let addr = gateway.addr();
    let session = open_session(&addr);
    let listed = rpc(&addr, &session, 2, "resources/list", json!({}));
    assert!(!listed.to_string().contains("test://blob/"), "{listed}");
    let answer = rpc(
        &addr,
        &session,
        3,
        "resources/read",
        json!({"uri": "upstream://kit/test://blob/ok"}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{answer}"
    );
    assert_eq!(reads(&kit), 0);
    // Other resources still read.
    let answer = rpc(
        &addr,
        &session,
        4,
        "resources/read",
        json!({"uri": "upstream://kit/test://text/hello"}),
    );
    assert_eq!(answer["result"]["contents"][0]["text"], "hello", "{answer}");
}

#[test]
fn a_flood_of_updates_leaves_the_session_working() {
    let (_dir, gateway, kit, _twin) = gateway("");
    let addr = gateway.addr();
    let session = open_session(&addr);
    let uri = "upstream://kit/test://text/hello";
    let answer = rpc(
        &addr,
        &session,
        2,
        "resources/subscribe",
        json!({"uri": uri}),
    );
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(kit.snapshot().requests_of("resources/subscribe"), 1);
    let answer = rpc(
        &addr,
        &session,
        3,
        "tools/call",
        json!({"name": "kit__flood_updates", "arguments": {"uri": "test://text/hello", "count": 20000}}),
    );
    assert_eq!(
        answer["result"]["structuredContent"]["sent"], 20000,
        "{answer}"
    );
    let answer = rpc(&addr, &session, 4, "resources/read", json!({"uri": uri}));
    assert_eq!(answer["result"]["contents"][0]["text"], "hello", "{answer}");
    let answer = rpc(
        &addr,
        &session,
        5,
        "resources/unsubscribe",
        json!({"uri": uri}),
    );
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(kit.snapshot().requests_of("resources/unsubscribe"), 1);
}
