//! `mcp-agent serve` reached by the MCP Inspector in CLI mode: `@modelcontextprotocol/inspector-cli`
//! 1.0.3 (what `inspector --cli` runs), pinned in `peers/npm` and run on the Node 22 binary
//! from there, listing, searching and calling through the gateway over stdio (the Inspector
//! spawns the gateway) and over streamable HTTP with a bearer token.
//!
//! The tests need `MCP_AGENT_PEER_NODE22` and `MCP_AGENT_PEER_INSPECTOR` (`cargo xtask
//! peers`): they fail without them under `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`, and skip
//! with a note otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mcp_test_kit::{Event, RecordFile};
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, kit_config};

const TOKEN: &str = "inspector-test-token-51c9";

/// The Node 22 binary and the Inspector's CLI client, or `None` (with a note) when peers are
/// not required.
fn inspector() -> Option<(PathBuf, PathBuf)> {
    let required = ["CI", "MCP_AGENT_REQUIRE_PEERS"].iter().any(|var| {
        std::env::var(var).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    });
    let peer = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.exists())
    };
    match (
        peer("MCP_AGENT_PEER_NODE22"),
        peer("MCP_AGENT_PEER_INSPECTOR"),
    ) {
        (Some(node), Some(inspector)) => Some((node, inspector)),
        _ => {
            assert!(
                !required,
                "MCP_AGENT_PEER_NODE22 / MCP_AGENT_PEER_INSPECTOR are not set; run `cargo xtask peers`"
            );
            eprintln!("note: skipping: MCP_AGENT_PEER_INSPECTOR is not set");
            None
        }
    }
}

/// Runs the Inspector's CLI with `args` (its home in `home`, so it writes nothing elsewhere).
///
/// It runs in its own `build` directory: it looks for `../package.json` (its name and version)
/// relative to the working directory but imports it relative to its script, so from anywhere
/// else it finds the file only where some unrelated `package.json` happens to lie one level
/// up, and otherwise fails to start.
fn run(node: &Path, inspector: &Path, home: &Path, args: &[&str]) -> Output {
    let build = inspector
        .parent()
        .expect("the Inspector's script is in a directory");
    Command::new(node)
        .arg(inspector)
        .args(args)
        .env("HOME", home)
        .env("GW_TOKEN", TOKEN)
        .current_dir(build)
        .stdin(Stdio::null())
        .output()
        .expect("run the Inspector")
}

/// What a successful run printed, as JSON.
fn printed(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Inspector failed ({}): {stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn tool_names(listed: &Value) -> Vec<&str> {
    listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn upstream_calls(record: &RecordFile) -> usize {
    record
        .snapshot()
        .events
        .iter()
        .filter(|e| matches!(e, Event::Call { .. }))
        .count()
}

#[test]
fn the_inspector_lists_searches_and_calls_through_the_gateway_over_stdio() {
    let Some((node, inspector)) = inspector() else {
        return;
    };
    let (dir, file, record) = kit_config("");
    let file = file.to_string_lossy().into_owned();
    let gateway = env!("CARGO_BIN_EXE_mcp-agent");
    let serve = [gateway, "serve", "--stdio", "--file", file.as_str()];
    let inspect = |extra: &[&str]| {
        let args: Vec<&str> = serve.iter().chain(extra).copied().collect();
        run(&node, &inspector, dir.path(), &args)
    };

    // The lazy surface, not the upstream's tools.
    let listed = printed(&inspect(&["--method", "tools/list"]));
    let names = tool_names(&listed);
    assert!(names.contains(&"mcp_search_tools"), "{listed}");
    assert!(names.contains(&"mcp_call_tool"), "{listed}");
    assert!(!names.contains(&"kit__add"), "{listed}");

    let found = printed(&inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "mcp_search_tools",
        "--tool-arg",
        "query=add two numbers",
    ]));
    assert_eq!(found["isError"], json!(false), "{found}");
    let best = &found["structuredContent"]["tools"][0];
    assert_eq!(best["name"], "kit__add", "{found}");
    assert!(
        best["input_schema"]["properties"]["a"].is_object(),
        "{found}"
    );

    let called = printed(&inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "mcp_call_tool",
        "--tool-arg",
        "tool_name=kit__add",
        r#"arguments={"a": 40, "b": 2}"#,
    ]));
    assert_eq!(called["isError"], json!(false), "{called}");
    assert_eq!(called["structuredContent"], json!({"sum": 42}), "{called}");
    assert_eq!(
        upstream_calls(&record),
        1,
        "only the call reached the upstream"
    );
}

#[test]
fn the_inspector_lists_and_calls_through_the_gateway_over_http_with_a_token() {
    let Some((node, inspector)) = inspector() else {
        return;
    };
    let (dir, file, record) =
        kit_config("expose = \"eager\"\nauth = { bearer_token_env = \"GW_TOKEN\" }");
    let gateway = Gateway::start(&file, &[("GW_TOKEN", TOKEN)]);
    let authorization = format!("Authorization: Bearer {TOKEN}");
    let inspect = |extra: &[&str]| {
        let mut args = vec![
            gateway.url.as_str(),
            "--transport",
            "http",
            "--header",
            authorization.as_str(),
        ];
        args.extend(extra);
        run(&node, &inspector, dir.path(), &args)
    };

    let listed = printed(&inspect(&["--method", "tools/list"]));
    let names = tool_names(&listed);
    assert!(names.contains(&"kit__add"), "{listed}");
    assert!(!names.contains(&"mcp_search_tools"), "{listed}");

    let called = printed(&inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "kit__add",
        "--tool-arg",
        "a=2",
        "b=3",
    ]));
    assert_eq!(called["isError"], json!(false), "{called}");
    assert_eq!(called["structuredContent"], json!({"sum": 5}), "{called}");

    // Without the token the Inspector is refused, and nothing reaches the upstream.
    let refused = run(
        &node,
        &inspector,
        dir.path(),
        &[
            gateway.url.as_str(),
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
            "kit__add",
            "--tool-arg",
            "a=1",
            "b=1",
        ],
    );
    assert!(!refused.status.success(), "the Inspector was not refused");
    let said = String::from_utf8_lossy(&refused.stdout);
    assert!(!said.contains("\"sum\""), "{said}");
    assert!(!said.contains(TOKEN) && !String::from_utf8_lossy(&refused.stderr).contains(TOKEN));
    assert_eq!(
        upstream_calls(&record),
        1,
        "only the authorised call reached the upstream"
    );
}
