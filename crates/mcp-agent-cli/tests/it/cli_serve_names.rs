//! `mcp-agent serve` with `tool_names = "upstream"`: upstream tools listed under their own
//! names where no other tool has them, `server__tool` where two servers share a name (or the
//! name is another tool's `server__tool`, or one of the gateway's own), and a listed name always
//! calls the tool it was listed for. Two test-kit upstreams (`kit`, recording its calls, with the
//! conformance suite's tools; `twin`, without), raw HTTP.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::gateway::{Gateway, LIMIT, kit_config_with, open_session, rpc};

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn call(addr: &str, session: &str, id: u64, name: &str, arguments: Value) -> Value {
    rpc(
        addr,
        session,
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

#[test]
fn upstream_names_where_unique_and_server_prefixed_names_where_shared() {
    let (_dir, file, record) = kit_config_with(
        "expose = \"eager\"\ntool_names = \"upstream\"",
        &["--suite-tools"],
    );
    let twin = format!(
        "\n[[servers]]\nname = \"twin\"\ncommand = {:?}\n",
        mcp_test_kit::stdio::binary().display().to_string()
    );
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&twin);
    std::fs::write(&file, text).unwrap();
    let gateway = Gateway::start(&file, &[]);
    let addr = gateway.addr();
    let session = open_session(&addr);

    let listed = names(&rpc(&addr, &session, 2, "tools/list", json!({})));
    for name in [
        "test_simple_text",
        "json_schema_2020_12_tool",
        "kit__echo",
        "twin__echo",
    ] {
        assert!(listed.iter().any(|n| n == name), "{name} not in {listed:?}");
    }
    // Both servers have `echo`: neither is listed by it alone.
    assert!(!listed.iter().any(|n| n == "echo"), "{listed:?}");

    // A tool's own name and its `server__tool` name call the same tool.
    for (id, name) in [(3, "test_simple_text"), (4, "kit__test_simple_text")] {
        let answer = call(&addr, &session, id, name, json!({}));
        let result = &answer["result"];
        assert_ne!(result["isError"], true, "{name}: {answer}");
        assert_eq!(
            result["content"][0]["text"], "This is a simple text response for testing.",
            "{name}: {answer}"
        );
    }
    assert_eq!(record.snapshot().calls_of("test_simple_text"), 2);
    // A shared name calls nothing; the error names it.
    let answer = call(&addr, &session, 5, "echo", json!({"x": 1}));
    assert!(answer.to_string().contains("echo"), "{answer}");
    assert!(
        answer["error"].is_object() || answer["result"]["isError"] == true,
        "{answer}"
    );
    assert_eq!(record.snapshot().calls_of("echo"), 0);

    // Tools whose own names are taken: one of the gateway's, and another tool's `server__tool`.
    for (id, name) in [(6, "mcp_read_output"), (7, "twin__echo")] {
        let answer = call(&addr, &session, id, "kit__add_tool", json!({"name": name}));
        assert_ne!(answer["result"]["isError"], true, "{answer}");
    }
    // The gateway lists the upstream's tools again once it hears they changed.
    let deadline = Instant::now() + LIMIT;
    let listed = loop {
        let listed = names(&rpc(&addr, &session, 8, "tools/list", json!({})));
        if listed.iter().any(|n| n == "kit__twin__echo") {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "kit's new tools never listed: {listed:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        listed.iter().any(|n| n == "kit__mcp_read_output"),
        "{listed:?}"
    );
    assert_eq!(
        listed.iter().filter(|n| *n == "twin__echo").count(),
        1,
        "{listed:?}"
    );
    // `twin__echo` is twin's echo, whatever kit lists; kit's tool of that name is
    // `kit__twin__echo`.
    call(&addr, &session, 9, "twin__echo", json!({"to": "twin"}));
    assert_eq!(record.snapshot().calls_of("twin__echo"), 0);
    call(&addr, &session, 10, "kit__twin__echo", json!({"to": "kit"}));
    assert_eq!(record.snapshot().calls_of("twin__echo"), 1);
}
