//! Streamable HTTP servers through the runner, next to a stdio one: listing, calls, identity,
//! a hung call cancelled on the server, a server that dies mid-call, and close.
//!
//! Session expiry (HTTP 404 → one re-initialisation) is tested by `mcp-transport-http`
//! against a scripted server: the test kit's HTTP server has no way to forget a session.

use std::time::{Duration, Instant};

use agent_core::{Runner, ToolError};
use integration_tests::harness::{Harness, bounded, call_tool, chain, search, stdio_server};
use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use mcp_test_kit::{Observations, TestServerOptions, serve_http};
use serde_json::json;

fn http_spec(name: &str, url: &str) -> ServerSpec {
    ServerSpec::new(
        name,
        TransportSpec::StreamableHttp(HttpSpec::new(url.parse().unwrap())),
    )
}

#[tokio::test]
async fn http_and_stdio_servers_in_one_run() {
    let seen = Observations::new();
    let server = serve_http(
        TestServerOptions::default()
            .with_name("kit-over-http")
            .with_extra_tools(250)
            .with_page_size(40)
            .with_observations(seen.clone()),
    )
    .await
    .unwrap();
    let harness = Harness::new();
    let mut remote = http_spec("remote", server.url());
    remote.call_timeout = Duration::from_millis(700);
    let client = harness.client(vec![
        remote,
        stdio_server("local", &StdioServerArgs::new(Mode::Test)),
    ]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    let remote = &runner.sessions()[0];
    assert_eq!(remote.pid(), None);
    assert_eq!(remote.identity().name.as_deref(), Some("kit-over-http"));
    // Every page was listed.
    assert_eq!(runner.catalog().len(), (13 + 250) + 13);
    assert!(runner.catalog().lookup("remote__tool_0249").is_some());

    let found = search(&runner, "adds two numbers", None, 10).await;
    assert!(found.contains(&"remote__add".to_owned()), "{found:?}");
    assert!(found.contains(&"local__add".to_owned()), "{found:?}");
    let out = call_tool(&runner, "remote__echo", json!({"over": "http"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"over": "http"})));
    let out = call_tool(&runner, "local__echo", json!({"over": "stdio"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"over": "stdio"})));

    // A hung call times out on time and is cancelled on the server.
    let started = Instant::now();
    let err = call_tool(&runner, "remote__slow", json!({"ms": 600_000}))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(1_700),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&err, ToolError::Timeout { server: Some(s), .. } if s == "remote"),
        "{err:?}"
    );
    let cancelled = seen.wait_for_cancelled(1, Duration::from_secs(10)).await;
    assert!(cancelled.is_some(), "{:?}", seen.snapshot());

    bounded(runner.close()).await;
    assert!(call_tool(&runner, "remote__echo", json!({})).await.is_err());
    harness.assert_no_process_left().await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_http_server_dying_mid_call() {
    let server = serve_http(TestServerOptions::default()).await.unwrap();
    let harness = Harness::new();
    let mut remote = http_spec("remote", server.url());
    remote.call_timeout = Duration::from_secs(20);
    let client = harness.client(vec![
        remote,
        stdio_server("local", &StdioServerArgs::new(Mode::Test)),
    ]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();

    // `crash` stops the whole HTTP server, as if its process died.
    let started = Instant::now();
    let err = call_tool(&runner, "remote__crash", json!({}))
        .await
        .unwrap_err();
    // Reported once reconnecting the call's event stream fails (after the server's SSE
    // `retry` hint), well before the call timeout.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&err, ToolError::Transport { server: Some(s), .. } if s == "remote"),
        "{err:?}"
    );
    assert!(chain(&err).contains("server `remote`"), "{}", chain(&err));
    let out = call_tool(&runner, "local__echo", json!({"alive": true}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"alive": true})));

    bounded(runner.close()).await;
    harness.assert_no_process_left().await;
}
