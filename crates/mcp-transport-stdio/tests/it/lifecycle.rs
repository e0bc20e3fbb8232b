//! A stdio server's life: connect, use, close; and every way it ends.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
use mcp_connector::{ConnectError, Connector as _};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

#[tokio::test]
async fn connects_lists_calls_and_closes() {
    let connection = bounded(connector().connect(&spec("kit", &StdioServerArgs::new(Mode::Test))))
        .await
        .unwrap();
    let pid = connection.handle.pid().unwrap();
    assert_eq!(
        group_of(pid),
        Some(pid),
        "the server leads its own process group"
    );

    let client = bounded(rmcp::serve_client((), connection.transport))
        .await
        .unwrap();
    let tools = bounded(client.list_all_tools()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    let echoed = call(&client, "echo", json!({"hello": "world"}))
        .await
        .unwrap();
    assert_eq!(echoed.structured_content, Some(json!({"hello": "world"})));

    // Closing the transport closes stdin: the server exits well within the grace period.
    bounded(client.cancel()).await.unwrap();
    let started = Instant::now();
    bounded(connection.handle.shutdown(Duration::from_secs(10))).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let diagnostics = connection.handle.diagnostics().unwrap();
    assert!(
        diagnostics.ends_with(&format!("[process {pid} exited with status 0]")),
        "{diagnostics}"
    );
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn paginated_tools_and_huge_results_cross_the_pipes() {
    let args = StdioServerArgs::new(Mode::Paginated);
    let Started {
        handle,
        pid,
        client,
    } = start("many", &args).await;
    let tools = bounded(client.list_all_tools()).await.unwrap();
    assert!(tools.len() > 1_000, "{}", tools.len());
    let huge = call(&client, "huge", json!({"bytes": 8 << 20}))
        .await
        .unwrap();
    assert_eq!(huge.content[0].as_text().unwrap().text.len(), 8 << 20);
    bounded(client.cancel()).await.unwrap();
    bounded(handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn stderr_tail_appears_in_diagnostics() {
    let Started {
        handle,
        pid,
        client,
    } = start("talky", &StdioServerArgs::new(Mode::Test)).await;
    call(
        &client,
        "stderr",
        json!({"text": "a line only stderr knows"}),
    )
    .await
    .unwrap();
    let handle = &handle;
    let seen = eventually(LIMIT, || {
        handle
            .diagnostics()
            .is_some_and(|d| d.contains("a line only stderr knows"))
    })
    .await;
    assert!(seen, "{:?}", handle.diagnostics());
    assert!(
        handle
            .diagnostics()
            .unwrap()
            .starts_with("mcp-test-server: mode Test")
    );

    bounded(client.cancel()).await.unwrap();
    bounded(handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn closing_kills_what_the_server_left_in_its_group() {
    let Started {
        handle,
        pid,
        client,
    } = start("parent", &StdioServerArgs::new(Mode::Test)).await;
    let spawned = call(&client, "spawn_child", json!({})).await.unwrap();
    let child = spawned.structured_content.unwrap()["pid"].as_u64().unwrap() as u32;
    assert_eq!(
        group_of(child),
        Some(pid),
        "the grandchild is in the server's group"
    );
    assert!(state(child).is_some_and(|s| s != 'Z'));

    bounded(client.cancel()).await.unwrap();
    bounded(handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(pid).await;
    assert_not_running(child).await;
}

#[tokio::test]
async fn dropping_the_handle_kills_the_group() {
    let Started {
        handle,
        pid,
        client,
    } = start("dropped", &StdioServerArgs::new(Mode::Test)).await;
    let spawned = call(&client, "spawn_child", json!({})).await.unwrap();
    let child = spawned.structured_content.unwrap()["pid"].as_u64().unwrap() as u32;

    // No shutdown: a cancelled or panicking run just drops what it holds.
    drop(handle);
    assert_all_gone(pid).await;
    assert_not_running(child).await;
    let after = call(&client, "echo", json!({})).await;
    assert!(after.is_err(), "{after:?}");
}

#[tokio::test]
async fn a_server_ignoring_stdin_close_and_sigterm_is_killed_after_the_grace() {
    let args = StdioServerArgs::new(Mode::IgnoresStdinClose);
    let Started {
        handle,
        pid,
        client,
    } = start("stubborn", &args).await;
    bounded(client.cancel()).await.unwrap();

    let grace = Duration::from_millis(300);
    let started = Instant::now();
    bounded(handle.shutdown(grace)).await;
    let took = started.elapsed();
    // grace, then the connector's 300 ms between SIGTERM and SIGKILL.
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let diagnostics = handle.diagnostics().unwrap();
    assert!(diagnostics.contains("staying up anyway"), "{diagnostics}");
    assert!(
        diagnostics.ends_with("was killed by SIGKILL]"),
        "{diagnostics}"
    );
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn a_server_ignoring_stdin_close_ends_on_sigterm() {
    let mut args = StdioServerArgs::new(Mode::Test);
    args.ignore_stdin_close = true;
    let Started {
        handle,
        pid,
        client,
    } = start("sleepy", &args).await;
    bounded(client.cancel()).await.unwrap();

    let grace = Duration::from_millis(200);
    let started = Instant::now();
    bounded(handle.shutdown(grace)).await;
    assert!(started.elapsed() >= grace);
    let diagnostics = handle.diagnostics().unwrap();
    assert!(
        diagnostics.ends_with("was killed by SIGTERM]"),
        "{diagnostics}"
    );
    assert_all_gone(pid).await;
}

#[tokio::test]
async fn a_missing_program_is_a_connect_error_naming_server_and_command() {
    let spec = ServerSpec::new(
        "ghost",
        TransportSpec::Stdio(StdioSpec::new("/nonexistent/mcp-ghost-server", ["--stdio"])),
    );
    let error = bounded(connector().connect(&spec)).await.unwrap_err();
    assert!(matches!(error, ConnectError::Io { .. }), "{error:?}");
    assert_eq!(error.server(), "ghost");
    let text = chain(&error);
    assert!(text.contains("/nonexistent/mcp-ghost-server"), "{text}");
    assert!(text.contains("server `ghost`"), "{text}");
}

#[tokio::test]
async fn a_missing_working_directory_is_a_connect_error() {
    let mut stdio = StdioSpec::new(
        mcp_test_kit::stdio::binary().display().to_string(),
        Vec::<String>::new(),
    );
    stdio.cwd = Some("/nonexistent/dir".into());
    let error =
        bounded(connector().connect(&ServerSpec::new("nowhere", TransportSpec::Stdio(stdio))))
            .await
            .unwrap_err();
    let text = chain(&error);
    assert!(
        text.contains("working directory `/nonexistent/dir`"),
        "{text}"
    );
}
