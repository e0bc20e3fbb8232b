//! A server slower to initialize than the connect timeout: a connect-timeout error naming the
//! server, on time, and its process is gone.

use std::time::{Duration, Instant};

use integration_tests::harness::{Harness, bounded, chain, stdio_server};
use mcp_client::{ClientError, SessionError};
use mcp_config::Config;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};

const CONNECT_TIMEOUT: Duration = Duration::from_millis(800);

#[tokio::test]
async fn initialize_slower_than_the_connect_timeout() {
    let harness = Harness::new();
    let spec = stdio_server(
        "sluggish",
        &StdioServerArgs::new(Mode::SlowInitialize).with_init_delay(Duration::from_secs(30)),
    );
    // The run's default connect timeout, which the spec does not override.
    let config = Config::new(vec![spec])
        .unwrap()
        .with_connect_timeout(CONNECT_TIMEOUT);
    let client = harness.builder(config).build();

    let started = Instant::now();
    let err = bounded(client.open_runner(&harness.input()))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        took >= CONNECT_TIMEOUT && took < CONNECT_TIMEOUT + Duration::from_secs(2),
        "{took:?}"
    );
    match &err {
        ClientError::Server(SessionError::ConnectTimeout { server, after, .. }) => {
            assert_eq!(server, "sluggish");
            assert_eq!(*after, CONNECT_TIMEOUT);
        }
        other => panic!("expected a connect timeout, got {other:?}"),
    }
    let text = chain(&err);
    assert!(text.contains("server `sluggish`"), "{text}");
    assert!(text.contains("connect timeout"), "{text}");
    assert_eq!(harness.spawned.pids_of("sluggish").len(), 1);
    harness.assert_no_process_left().await;
}
