//! A spec whose built-in transport the build leaves out (the registry knows it as disabled,
//! as the facade registers it) is refused with an error naming the cargo feature that adds
//! it, and nothing is spawned.

use integration_tests::harness::{Harness, RecordingStdio, Spawned, bounded, chain, stdio_server};
use mcp_client::{ClientError, Connectors, SessionError};
use mcp_config::{Config, HttpSpec, ServerSpec, TransportKind, TransportSpec};
use mcp_connector::ConnectError;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use mcp_transport_http::{HttpConnector, HttpOptions};
use mcp_transport_stdio::StdioConnector;

fn http_spec() -> ServerSpec {
    ServerSpec::new(
        "remote",
        TransportSpec::StreamableHttp(HttpSpec::new("http://127.0.0.1:9/mcp".parse().unwrap())),
    )
}

#[tokio::test]
async fn an_http_spec_without_the_http_transport() {
    let harness = Harness::new();
    let spawned = Spawned::default();
    let stdio_only = Connectors::new()
        .with(RecordingStdio::new(StdioConnector::new(), spawned.clone()))
        .disabled(TransportKind::StreamableHttp, "http");
    let config = Config::new(vec![
        stdio_server("local", &StdioServerArgs::new(Mode::Test)),
        http_spec(),
    ])
    .unwrap();
    let client = harness.builder(config).connectors(stdio_only).build();

    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    match &err {
        ClientError::Server(SessionError::Connect(ConnectError::Unsupported {
            server,
            kind,
            feature,
        })) => {
            assert_eq!(server, "remote");
            assert_eq!(*kind, TransportKind::StreamableHttp);
            assert_eq!(*feature, "http");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let text = chain(&err);
    assert!(text.contains("enable the `http` feature"), "{text}");
    integration_tests::procs::assert_gone(&spawned.pids()).await;
}

#[tokio::test]
async fn a_stdio_spec_without_the_stdio_transport() {
    let harness = Harness::new();
    let http_only = Connectors::new()
        .with(HttpConnector::new(HttpOptions::default()).unwrap())
        .disabled(TransportKind::Stdio, "stdio");
    let config = Config::new(vec![stdio_server(
        "local",
        &StdioServerArgs::new(Mode::Test),
    )])
    .unwrap();
    let client = harness.builder(config).connectors(http_only).build();

    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    let text = chain(&err);
    assert!(
        matches!(
            &err,
            ClientError::Server(SessionError::Connect(ConnectError::Unsupported {
                feature: "stdio",
                ..
            }))
        ),
        "{err:?}"
    );
    assert!(text.contains("server `local`"), "{text}");
    assert!(text.contains("enable the `stdio` feature"), "{text}");
    assert!(harness.spawned.pids().is_empty());
}
