//! Messages over the size or depth limit end the session at once with an error naming the
//! server and the limit, instead of being dropped while the client waits for its timeout.
//!
//! The hostile servers stay up after their bad answer (they read stdin until it closes), so a
//! quick failure here comes from the transport, not from the process ending.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use mcp_transport_stdio::{
    MAX_NESTING_DEPTH, StdioConnector, StdioError, StdioHandle, StdioOptions,
};
use serde_json::json;

/// Failing "at once" means well under the default connect and call timeouts (before the
/// bounds, each case below waited them out whole). The time is mostly the debug-built server
/// writing its 20 or 50 MB; the transport stops after 16 MiB.
const AT_ONCE: Duration = Duration::from_secs(10);

/// Levels of the `deep-tools` answer around the schema's arrays: the message, `result`,
/// `tools`, the tool, `inputSchema`, `properties`, `deep`.
const ENVELOPE_LEVELS: usize = 7;

async fn spawn(
    connector: &StdioConnector,
    name: &str,
    args: &StdioServerArgs,
) -> (mcp_transport_stdio::StdioTransport, StdioHandle) {
    bounded(connector.spawn(&spec(name, args))).await.unwrap()
}

async fn close(handle: &StdioHandle) {
    bounded(mcp_connector::ConnectionHandle::shutdown(
        handle,
        Duration::ZERO,
    ))
    .await;
    assert_all_gone(handle.process_id()).await;
}

#[tokio::test]
async fn a_50_mb_initialize_answer_fails_the_handshake_at_once() {
    let args = StdioServerArgs::new(Mode::OversizedInitialize).with_message_bytes(50_000_000);
    let (transport, handle) = spawn(&connector(), "bloated", &args).await;

    let started = Instant::now();
    let handshake = bounded(rmcp::serve_client((), transport)).await;
    let took = started.elapsed();
    eprintln!("oversized initialize answer: failed after {took:?}");
    assert!(handshake.is_err(), "the handshake succeeded");
    assert!(took < AT_ONCE, "{took:?}");

    let error = handle.read_error().expect("the transport recorded why");
    assert!(
        matches!(error, StdioError::MessageTooLarge { limit, .. } if limit == 16 << 20),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "server `bloated` sent a message larger than the limit of 16 MiB (16777216 bytes); the \
         session was closed"
    );
    let diagnostics = mcp_connector::ConnectionHandle::diagnostics(&handle).unwrap();
    assert!(
        diagnostics.contains(
            "[stopped reading stdout: a message larger than the limit of 16 MiB (16777216 bytes)]"
        ),
        "{diagnostics}"
    );
    close(&handle).await;
}

#[tokio::test]
async fn a_20_mb_tool_result_fails_the_call_at_once_and_the_session_ends() {
    let Started {
        handle,
        pid,
        client,
    } = start("huge", &StdioServerArgs::new(Mode::Test)).await;

    let started = Instant::now();
    let result = call(&client, "huge", json!({"bytes": 20_000_000})).await;
    let took = started.elapsed();
    eprintln!("20 MB tool result: failed after {took:?}");
    assert!(
        matches!(result, Err(rmcp::ServiceError::TransportClosed)),
        "{result:?}"
    );
    assert!(took < AT_ONCE, "{took:?}");
    let diagnostics = handle.diagnostics().unwrap();
    assert!(
        diagnostics.contains("a message larger than the limit of 16 MiB"),
        "{diagnostics}"
    );
    // The session is over: later requests fail at once too.
    let later = call(&client, "echo", json!({})).await;
    assert!(later.is_err(), "{later:?}");

    bounded(handle.shutdown(Duration::ZERO)).await;
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn the_size_limit_is_the_connectors_option() {
    let connector =
        StdioConnector::with_options(StdioOptions::default().with_max_message_bytes(1 << 20));
    let (transport, handle) = spawn(&connector, "small", &StdioServerArgs::new(Mode::Test)).await;
    let client = bounded(rmcp::serve_client((), transport)).await.unwrap();

    // A text of 1,000,000 bytes is a message of about that size: within 1 MiB.
    let within = call(&client, "huge", json!({"bytes": 1_000_000}))
        .await
        .unwrap();
    assert_eq!(within.content[0].as_text().unwrap().text.len(), 1_000_000);
    assert!(handle.read_error().is_none());

    let over = call(&client, "huge", json!({"bytes": 1 << 20})).await;
    assert!(over.is_err(), "{over:?}");
    assert!(
        matches!(
            handle.read_error(),
            Some(StdioError::MessageTooLarge { limit, .. }) if limit == 1 << 20
        ),
        "{:?}",
        handle.read_error()
    );
    close(&handle).await;
}

#[tokio::test]
async fn a_schema_nested_10_000_deep_fails_tools_list_at_once() {
    let args = StdioServerArgs::new(Mode::DeepTools).with_depth(10_000);
    let (transport, handle) = spawn(&connector(), "abyss", &args).await;
    let client = bounded(rmcp::serve_client((), transport)).await.unwrap();

    let started = Instant::now();
    let listed = bounded(client.list_all_tools()).await;
    let took = started.elapsed();
    eprintln!("tools/list nested 10,000 deep: failed after {took:?}");
    assert!(listed.is_err(), "{listed:?}");
    assert!(took < AT_ONCE, "{took:?}");
    let error = handle.read_error().expect("the transport recorded why");
    assert_eq!(
        error.to_string(),
        format!(
            "server `abyss` sent a message nested deeper than the limit of {MAX_NESTING_DEPTH} \
             levels; the session was closed"
        )
    );
    close(&handle).await;
}

#[tokio::test]
async fn nesting_up_to_the_limit_is_read_one_more_level_is_not() {
    let limit = 20;
    let connector =
        StdioConnector::with_options(StdioOptions::default().with_max_nesting_depth(limit));

    let args = StdioServerArgs::new(Mode::DeepTools).with_depth(limit - ENVELOPE_LEVELS);
    let (transport, handle) = spawn(&connector, "deep-enough", &args).await;
    let client = bounded(rmcp::serve_client((), transport)).await.unwrap();
    let tools = bounded(client.list_all_tools()).await.unwrap();
    assert_eq!(tools[0].name, "deep");
    assert!(handle.read_error().is_none());
    drop(client);
    close(&handle).await;

    let args = StdioServerArgs::new(Mode::DeepTools).with_depth(limit - ENVELOPE_LEVELS + 1);
    let (transport, handle) = spawn(&connector, "too-deep", &args).await;
    let client = bounded(rmcp::serve_client((), transport)).await.unwrap();
    assert!(bounded(client.list_all_tools()).await.is_err());
    assert!(
        matches!(
            handle.read_error(),
            Some(StdioError::MessageTooDeep { limit: 20, .. })
        ),
        "{:?}",
        handle.read_error()
    );
    close(&handle).await;
}

#[tokio::test]
async fn the_deepest_message_the_parser_reads_passes_by_default() {
    let args =
        StdioServerArgs::new(Mode::DeepTools).with_depth(MAX_NESTING_DEPTH - ENVELOPE_LEVELS);
    let (transport, handle) = spawn(&connector(), "deepest", &args).await;
    let client = bounded(rmcp::serve_client((), transport)).await.unwrap();
    let tools = bounded(client.list_all_tools()).await.unwrap();
    assert_eq!(tools.len(), 1);
    drop(client);
    close(&handle).await;
}
