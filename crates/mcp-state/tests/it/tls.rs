//! `rediss://` against a real Redis that speaks TLS only, with a certificate issued by a CA
//! made for the test: trusted through `ca_file`, the state stores sealed values and counts
//! rate limits; a certificate of another CA is refused naming the server; a password in the
//! URL is sent over TLS and never shown. They need the TLS-built Redis peer
//! (`MCP_AGENT_PEER_REDIS_TLS`).

use std::time::Duration;

use mcp_state::{RedisState, SealKey, StateConfig, StateError};
use mcp_test_kit::bounded;
use mcp_test_kit::redis::RedisServer;
use mcp_test_kit::tls::TestCa;

const PASSWORD: &str = "tls-s3cret-pw-17";

/// Settings for `server` (its `rediss://` URL) trusting `ca_file`.
fn config(url: String, ca_file: std::path::PathBuf) -> StateConfig {
    StateConfig {
        ca_file: Some(ca_file),
        ..StateConfig::new(url)
    }
}

#[tokio::test]
async fn rediss_with_the_ca_file_stores_sealed_values_and_counts_limits() {
    let Some(server) = bounded(RedisServer::start_tls(None)).await else {
        return;
    };
    assert!(server.url().starts_with("rediss://"), "{}", server.url());
    let config = config(server.url(), server.ca_file().unwrap());
    let state = bounded(RedisState::connect(&config))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; server output:\n{}", server.log()));
    assert_eq!(state.addr(), server.addr().to_string());

    let store = state.sealed_store(SealKey::generate());
    bounded(store.put("session:tls", b"over TLS", Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(
        bounded(store.get("session:tls")).await.unwrap().as_deref(),
        Some(&b"over TLS"[..])
    );

    let limiter = state.rate_limiter();
    assert_eq!(
        bounded(limiter.take("tls", 0.001, 1)).await.unwrap(),
        Ok(())
    );
    assert!(
        bounded(limiter.take("tls", 0.001, 1))
            .await
            .unwrap()
            .is_err()
    );
    bounded(state.ping()).await.unwrap();
}

#[tokio::test]
async fn a_certificate_of_another_ca_is_refused_naming_the_server_without_the_password() {
    let Some(server) = bounded(RedisServer::start_tls(Some(PASSWORD))).await else {
        return;
    };
    let addr = server.addr().to_string();
    let stranger = TestCa::new();
    for config in [
        config(server.url(), stranger.ca_file()),
        // Without `ca_file`: the web roots, which know no test CA either.
        StateConfig::new(server.url()),
    ] {
        let e = bounded(RedisState::connect(&config)).await.unwrap_err();
        assert!(
            matches!(&e, StateError::Unreachable { addr: a, .. } if *a == addr),
            "{e:?}"
        );
        let shown = format!("{e} {e:?}");
        assert!(shown.contains(&addr), "{shown}");
        assert!(shown.to_lowercase().contains("certificate"), "{shown}");
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
}

#[tokio::test]
async fn a_password_in_the_rediss_url_is_sent_over_tls_and_never_shown() {
    let Some(server) = bounded(RedisServer::start_tls(Some(PASSWORD))).await else {
        return;
    };
    let ca = server.ca_file().unwrap();
    let right = config(server.url(), ca.clone());
    assert!(right.url.as_deref().unwrap().contains(PASSWORD));
    let state = bounded(RedisState::connect(&right))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; server output:\n{}", server.log()));
    let store = state.sealed_store(SealKey::generate());
    bounded(store.put("k", b"v", Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(
        bounded(store.get("k")).await.unwrap().as_deref(),
        Some(&b"v"[..])
    );
    for shown in [format!("{right:?}"), format!("{state:?}")] {
        assert!(!shown.contains(PASSWORD), "{shown}");
    }

    let wrong = config(
        format!("rediss://:not-{PASSWORD}@{}/", server.addr()),
        ca.clone(),
    );
    let e = bounded(RedisState::connect(&wrong)).await.unwrap_err();
    assert_eq!(
        e,
        StateError::AuthFailed {
            addr: server.addr().to_string()
        }
    );
    let none = config(format!("rediss://{}/", server.addr()), ca);
    let e = bounded(RedisState::connect(&none)).await.unwrap_err();
    assert!(matches!(e, StateError::AuthFailed { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains(PASSWORD));
}

#[tokio::test]
async fn a_ca_file_for_plain_redis_or_unreadable_is_named() {
    let ca = TestCa::new();
    let plain = config("redis://:pw@127.0.0.1:1/".into(), ca.ca_file());
    let e = bounded(RedisState::connect(&plain)).await.unwrap_err();
    assert!(
        matches!(&e, StateError::CaFile { path, .. } if *path == ca.ca_file()),
        "{e:?}"
    );
    let missing = ca.dir().join("nowhere.pem");
    let e = bounded(RedisState::connect(&config(
        format!("rediss://:{PASSWORD}@127.0.0.1:1/"),
        missing.clone(),
    )))
    .await
    .unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains(&missing.display().to_string()) && shown.contains("`ca_file`"),
        "{shown}"
    );
    assert!(!shown.contains(PASSWORD), "{shown}");
}
