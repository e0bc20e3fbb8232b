//! Connecting: typed errors that name 127.0.0.1:port and never the password, and a `Debug`
//! that hides it.

use mcp_state::{RedisState, StateConfig, StateError};
use mcp_test_kit::bounded;
use mcp_test_kit::redis::RedisServer;

const PASSWORD: &str = "s3cret-pw-42";

#[tokio::test]
async fn an_unreachable_server_is_named_without_the_password() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = StateConfig::new(format!("redis://:{PASSWORD}@127.0.0.1:{port}/"));
    let e = bounded(RedisState::connect(&config)).await.unwrap_err();
    let addr = format!("127.0.0.1:{port}");
    assert!(
        matches!(&e, StateError::Unreachable { addr: a, .. } if *a == addr),
        "{e:?}"
    );
    assert!(e.to_string().contains(&addr), "{e}");
    assert!(!e.to_string().contains(PASSWORD) && !format!("{e:?}").contains(PASSWORD));
}

#[tokio::test]
async fn a_wrong_password_is_an_auth_error() {
    let Some(server) = bounded(RedisServer::start_with_password(PASSWORD)).await else {
        return;
    };
    let wrong = format!("redis://:not-{PASSWORD}@{}/", server.addr());
    let e = bounded(RedisState::connect(&StateConfig::new(wrong)))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        StateError::AuthFailed {
            addr: server.addr().to_string()
        }
    );
    assert!(!e.to_string().contains(PASSWORD));
    // No password at all where one is required: the same.
    let none = format!("redis://{}/", server.addr());
    let e = bounded(RedisState::connect(&StateConfig::new(none)))
        .await
        .unwrap_err();
    assert!(matches!(e, StateError::AuthFailed { .. }), "{e:?}");
    // The right one connects.
    let state = bounded(RedisState::connect(&StateConfig::new(server.url())))
        .await
        .unwrap();
    assert_eq!(state.addr(), server.addr().to_string());
}

#[test]
fn debug_of_the_config_hides_the_password() {
    let config = StateConfig::new(format!("redis://user:{PASSWORD}@127.0.0.1:6390/0"));
    let shown = format!("{config:?}");
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(
        shown.contains("redis://user:***@127.0.0.1:6390/0"),
        "{shown}"
    );
    let pretty = format!("{config:#?}");
    assert!(!pretty.contains(PASSWORD), "{pretty}");
}

#[tokio::test]
async fn bad_urls_and_missing_urls_are_typed() {
    let e = bounded(RedisState::connect(&StateConfig::new(format!(
        "http://:{PASSWORD}@127.0.0.1:1/"
    ))))
    .await
    .unwrap_err();
    assert!(matches!(e, StateError::BadUrl { .. }), "{e:?}");
    assert!(!e.to_string().contains(PASSWORD), "{e}");
    let e = bounded(RedisState::connect(&StateConfig::from_env(
        "MCP_STATE_TEST_NO_SUCH_VARIABLE",
    )))
    .await
    .unwrap_err();
    assert!(
        matches!(&e, StateError::MissingUrl(m) if m.contains("MCP_STATE_TEST_NO_SUCH_VARIABLE"))
    );
}

#[test]
fn config_reads_from_toml_with_defaults() {
    let config: StateConfig =
        toml::from_str("url_env = \"REDIS_URL\"\non_error = \"open\"\n").unwrap();
    assert_eq!(config.key_prefix, "mcp-agent:");
    assert_eq!(config.on_error, mcp_state::OnError::Open);
    assert!(toml::from_str::<StateConfig>("urll = \"x\"\n").is_err());
}

#[tokio::test]
async fn a_server_gone_after_connect_fails_commands_by_address() {
    let Some(server) = bounded(RedisServer::start_with_password(PASSWORD)).await else {
        return;
    };
    let addr = server.addr().to_string();
    let state = bounded(RedisState::connect(&StateConfig::new(server.url())))
        .await
        .unwrap();
    let store = state.sealed_store(mcp_state::SealKey::generate());
    drop(server);
    let e = bounded(store.get("k")).await.unwrap_err();
    assert!(
        matches!(&e, StateError::Command { addr: a, op: "get", .. } if *a == addr),
        "{e:?}"
    );
    assert!(!format!("{e} {e:?}").contains(PASSWORD), "{e}");
}

#[tokio::test]
async fn ping_answers_while_the_server_does_and_each_failure_is_counted() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let Some(fixture) = crate::support::fixture().await else {
        return;
    };
    let errors = || state_errors(&handle);
    bounded(fixture.state.ping()).await.unwrap();
    assert_eq!(errors(), 0);
    let state = fixture.state.clone();
    drop(fixture);
    let e = bounded(state.ping()).await.unwrap_err();
    assert!(
        matches!(&e, StateError::Command { op: "ping", .. }),
        "{e:?}"
    );
    assert_eq!(errors(), 1, "{}", handle.render());
}

#[tokio::test]
async fn a_server_that_stops_answering_fails_a_bounded_ping_and_it_is_counted() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let Some(fixture) = crate::support::fixture().await else {
        return;
    };
    let errors = || state_errors(&handle);
    let within = std::time::Duration::from_millis(200);
    bounded(fixture.state.ping_within(std::time::Duration::from_secs(5)))
        .await
        .unwrap();
    // Stopped, not gone: the connection stays open and nothing answers.
    let signal = |name: &str| {
        let status = std::process::Command::new("kill")
            .args([name, &fixture.server.pid().to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill {name}");
    };
    signal("-STOP");
    let e = bounded(fixture.state.ping_within(within))
        .await
        .unwrap_err();
    signal("-CONT");
    assert!(
        matches!(&e, StateError::Command { op: "ping", reason, .. } if reason.contains("no answer within 200ms")),
        "{e:?}"
    );
    assert_eq!(errors(), 1, "{}", handle.render());
    bounded(fixture.state.ping_within(std::time::Duration::from_secs(5)))
        .await
        .unwrap();
}

/// What [`mcp_state::STATE_ERRORS`] counts in `handle`'s recorder (0 before anything is).
fn state_errors(handle: &metrics_exporter_prometheus::PrometheusHandle) -> u64 {
    handle
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{} ", mcp_state::STATE_ERRORS)))
        .map_or(0, |v| v.parse::<u64>().unwrap())
}
