//! Client-credentials tokens shared by replicas: one token request in the fleet, whatever the
//! number of replicas and concurrent calls; sealed under names that say nothing.

use std::sync::Arc;
use std::time::Duration;

use mcp_agent::auth::AuthProvider;
use mcp_test_kit::bounded;
use mcp_test_kit::oauth::{CLIENT_ID, CLIENT_SECRET};

use crate::fleet::{KEY, bearer, concurrent, fleet};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_with_fifty_calls_each_on_an_expired_token_send_one_request() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.cc_spec();
    let replicas = [
        fleet.replica(KEY).await,
        fleet.replica(KEY).await,
        fleet.replica(KEY).await,
    ];
    // One replica obtains a token that lives 2 s; it is shared.
    fleet.auth.set_expires_in(2);
    let first = replicas[0].registry().provider(&spec).unwrap();
    let got = bounded(first.credentials()).await.unwrap();
    assert_eq!(bearer(&got), "Bearer at-1");
    assert_eq!(fleet.auth.token_requests(), 1);
    assert_eq!(fleet.entries().await.len(), 1, "shared");
    // Redis drops the entry when the token's lifetime is over: then it has expired for
    // every replica (replica 0 holds it in memory too).
    bounded(async {
        while !fleet.entries().await.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    fleet.auth.set_expires_in(3600);
    // A slow token endpoint: every replica's calls arrive while the one request is out.
    fleet.auth.set_delay(Duration::from_millis(200));
    let hooks: Vec<Arc<dyn AuthProvider>> = replicas
        .iter()
        .map(|r| r.registry().provider(&spec).unwrap())
        .collect();
    let got = concurrent(&hooks, 50).await;
    assert_eq!(got.len(), 150);
    assert!(got.iter().all(|b| b == "Bearer at-2"), "{got:?}");
    assert_eq!(
        fleet.auth.token_requests(),
        2,
        "one token request for 3 replicas × 50 calls on an expired token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cold_fleet_sends_one_request_and_a_later_replica_none() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.cc_spec();
    fleet.auth.set_delay(Duration::from_millis(100));
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(fleet.replica(KEY).await);
    }
    let hooks: Vec<Arc<dyn AuthProvider>> = replicas
        .iter()
        .map(|r| r.registry().provider(&spec).unwrap())
        .collect();
    let got = concurrent(&hooks, 20).await;
    assert!(got.iter().all(|b| b == "Bearer at-1"), "{got:?}");
    assert_eq!(fleet.auth.token_requests(), 1);

    let late = fleet.replica(KEY).await;
    let hook = late.registry().provider(&spec).unwrap();
    assert_eq!(
        bearer(&bounded(hook.credentials()).await.unwrap()),
        "Bearer at-1"
    );
    assert_eq!(fleet.auth.token_requests(), 1, "taken from the fleet");

    // Sealed under a name that says nothing of the credential; no lease left behind.
    let keys: Vec<String> = fleet.raw(redis::cmd("KEYS").arg("*")).await;
    assert_eq!(keys, fleet.entries().await, "only the entry: {keys:?}");
    for key in &keys {
        assert!(
            !key.contains(CLIENT_ID) && !key.contains(CLIENT_SECRET),
            "{key}"
        );
        let value: Vec<u8> = fleet.raw(redis::cmd("GET").arg(key)).await;
        let text = String::from_utf8_lossy(&value);
        assert!(!text.contains("at-1") && !text.contains("Bearer"), "{text}");
    }
}
