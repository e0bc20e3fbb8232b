//! What a server calls itself and its tools (at the session level): a
//! `serverInfo` with terminal escapes and a 100 KB version, 1 MB of instructions, tool names
//! with escapes or 10 KB long. The session keeps its identity bounded and clean; tools whose
//! names are unusable are left out, and the server's connected event names them, escaped.

use crate::in_memory;

use std::sync::Arc;
use std::time::Duration;

use agent_core::{EventKind, RunInput, Runner, ToolCatalog};
use in_memory::{InMemory, builder, spec};
use integration_tests::harness::{Events, bounded};
use mcp_catalog::SkipReason;
use mcp_client::{MAX_INSTRUCTIONS_BYTES, MAX_SERVER_NAME_BYTES, MAX_SERVER_VERSION_BYTES};
use mcp_test_kit::hostile::{HostileOptions, HostileServer, Pages, tool};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn is_clean(text: &str, multiline: bool) -> bool {
    !text
        .chars()
        .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')))
}

#[tokio::test]
async fn a_hostile_identity_is_kept_bounded_and_clean() {
    let osc_name = "\u{1b}]0;pwned\u{7}\u{1b}[2Jevil\r\nserver";
    let options = HostileOptions::new(Pages::Fixed(Vec::new()))
        .with_server_info(osc_name, "9".repeat(100 * 1024))
        .with_instructions(format!("Use me.\n\t{}\u{1b}[31m", "i".repeat(1024 * 1024)));
    let client = builder(
        vec![spec("evil", &[], CONNECT_TIMEOUT)],
        InMemory::new(HostileServer::new(options)),
        Arc::new(Events::default()),
    )
    .build();
    let runner = bounded(client.open_runner(&RunInput::new("s", "q")))
        .await
        .unwrap();
    let identity = runner.sessions()[0].identity();

    let name = identity.name.as_deref().unwrap();
    assert_eq!(name, "]0;pwned[2Jevilserver");
    let version = identity.version.as_deref().unwrap();
    assert!(
        version.len() <= MAX_SERVER_VERSION_BYTES,
        "{}",
        version.len()
    );
    assert!(
        version.starts_with("999") && version.ends_with('…'),
        "{version}"
    );
    let instructions = identity.instructions.as_deref().unwrap();
    assert!(instructions.len() <= MAX_INSTRUCTIONS_BYTES);
    assert!(instructions.starts_with("Use me.\n\tiii"));
    assert!(is_clean(name, false) && is_clean(version, false) && is_clean(instructions, true));
    assert!(name.len() <= MAX_SERVER_NAME_BYTES);
    runner.close().await;
}

#[tokio::test]
async fn escape_laden_and_oversized_tool_names_are_left_out_and_named_escaped() {
    let events = Arc::new(Events::default());
    let injected = "\u{1b}[31mred\r\nINJECTED";
    let long = "n".repeat(10 * 1024);
    let options = HostileOptions::new(Pages::Fixed(vec![
        tool("fine", "A fine tool."),
        tool(injected, "Forges a row."),
        tool(long.clone(), "Too long."),
    ]));
    let client = builder(
        vec![spec("evil", &[], CONNECT_TIMEOUT)],
        InMemory::new(HostileServer::new(options)),
        events.clone(),
    )
    .build();
    let runner = bounded(client.open_runner(&RunInput::new("s", "q")))
        .await
        .unwrap();

    // The usable tools join (`fine` and the three the hostile server always has).
    let catalog = runner.catalog();
    assert!(catalog.lookup("evil__fine").is_some());
    assert_eq!(catalog.len(), 4);
    let shown = catalog
        .entries()
        .iter()
        .map(|t| format!("{}{:?}", t.id, t.descriptor()))
        .collect::<String>();
    assert!(
        !shown.contains('\u{1b}') && !shown.contains(&long),
        "{shown}"
    );
    assert!(runner.tools().iter().all(|t| is_clean(&t.name, false)));

    // The catalog records why the others are out …
    let skipped = catalog.skipped_tools("evil");
    let reasons: Vec<&SkipReason> = skipped.iter().map(|s| &s.reason).collect();
    assert_eq!(
        reasons,
        [
            &SkipReason::NameCharacters,
            &SkipReason::NameTooLong {
                chars: 10 * 1024,
                limit: 128
            }
        ]
    );

    // … and the connected event names them, escaped and cut.
    let connected = events.of_kind(EventKind::ServerConnected);
    let message = connected[0].message.as_deref().unwrap();
    assert!(message.starts_with("6 tools; 2 left out: "), "{message}");
    assert!(
        message.contains(
            "tool `\\u{1b}[31mred\\u{d}\\u{a}INJECTED` (its name holds control characters)"
        ),
        "{message}"
    );
    assert!(message.contains("more than the limit of 128"), "{message}");
    assert!(is_clean(message, false), "{message}");
    assert!(message.len() < 1024, "{}", message.len());
    runner.close().await;
}
