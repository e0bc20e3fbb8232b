//! A user's login shared by replicas: one refresh in the fleet, and a rotating refresh token
//! never sent twice, each replica's token store kept current; a newer login of one replica
//! wins.

use std::sync::Arc;
use std::time::Duration;

use mcp_agent::auth::{AuthProvider, OnUnauthorized, TokenStore};
use mcp_test_kit::bounded;

use crate::fleet::{KEY, MCP_URL, bearer, concurrent, fleet, store_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_refresh_a_rotating_login_once_and_never_send_a_refresh_token_twice() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.login_spec();
    // Every replica holds the same login (copied to each), its access token about to expire.
    let login = fleet.stored_login("at-stored", 5);
    let first_refresh = login.refresh_token.clone().unwrap();
    let mut replicas = Vec::new();
    let mut stores: Vec<Arc<dyn TokenStore>> = Vec::new();
    for _ in 0..3 {
        let replica = fleet.replica(KEY).await;
        let store = store_with(&login).await;
        replica.registry().use_token_store(store.clone());
        replicas.push(replica);
        stores.push(store);
    }
    fleet.auth.set_delay(Duration::from_millis(100));
    let hooks: Vec<Arc<dyn AuthProvider>> = replicas
        .iter()
        .map(|r| r.registry().provider(&spec).unwrap())
        .collect();
    let got = concurrent(&hooks, 20).await;
    assert!(got.iter().all(|b| b == "Bearer at-1"), "{got:?}");
    assert_eq!(fleet.auth.refresh_requests(), 1);

    // The server refuses at-1 on every replica at once: one refresh, with the rotated token.
    let mut tasks = Vec::new();
    for hook in &hooks {
        let hook = hook.clone();
        tasks.push(tokio::spawn(async move {
            let sent = hook.credentials().await.unwrap();
            hook.on_unauthorized(&sent, None).await.unwrap()
        }));
    }
    for task in tasks {
        assert_eq!(bounded(task).await.unwrap(), OnUnauthorized::Retry);
    }
    for hook in &hooks {
        assert_eq!(
            bearer(&bounded(hook.credentials()).await.unwrap()),
            "Bearer at-2"
        );
    }
    assert_eq!(fleet.auth.refresh_requests(), 2);
    assert_eq!(
        fleet.auth.refresh_reuses(),
        0,
        "no refresh token sent twice"
    );
    let sent = fleet.auth.refresh_tokens_sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], first_refresh.expose());
    assert_ne!(sent[0], sent[1]);

    // Each replica's own store holds the fleet's latest login, rotated refresh token included.
    for store in &stores {
        let kept = bounded(store.find(MCP_URL)).await.unwrap();
        assert_eq!(kept[0].access_token.expose(), "at-2");
        let refresh = kept[0].refresh_token.as_ref().unwrap().expose().to_owned();
        assert!(!sent.contains(&refresh), "a live one: {refresh}");
    }
}

#[tokio::test]
async fn a_newer_login_of_one_replica_wins_over_the_fleets() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.login_spec();
    let login = fleet.stored_login("at-stored", 5);
    let a = fleet.replica(KEY).await;
    a.registry().use_token_store(store_with(&login).await);
    let hook = a.registry().provider(&spec).unwrap();
    assert_eq!(
        bearer(&bounded(hook.credentials()).await.unwrap()),
        "Bearer at-1"
    );

    // Replica b still has the old login (its refresh token spent by the fleet): the fleet's.
    let b = fleet.replica(KEY).await;
    b.registry().use_token_store(store_with(&login).await);
    let hook = b.registry().provider(&spec).unwrap();
    assert_eq!(
        bearer(&bounded(hook.credentials()).await.unwrap()),
        "Bearer at-1"
    );

    // Replica c's user logged in again after the fleet's refresh: its own login wins.
    let mut newer = fleet.stored_login("at-new-login", 3600);
    newer.obtained_at += 5;
    let c = fleet.replica(KEY).await;
    c.registry().use_token_store(store_with(&newer).await);
    let hook = c.registry().provider(&spec).unwrap();
    assert_eq!(
        bearer(&bounded(hook.credentials()).await.unwrap()),
        "Bearer at-new-login"
    );
    assert_eq!(fleet.auth.refresh_requests(), 1);
    assert_eq!(fleet.auth.refresh_reuses(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_refresh_token_is_sent_once_and_every_replica_asks_for_a_login() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.login_spec();
    let mut login = fleet.stored_login("at-stored", 5);
    login.refresh_token = Some("rt-revoked".into());
    fleet.auth.set_delay(Duration::from_millis(100));
    let mut hooks: Vec<Arc<dyn AuthProvider>> = Vec::new();
    for _ in 0..3 {
        let replica = fleet.replica(KEY).await;
        replica.registry().use_token_store(store_with(&login).await);
        hooks.push(replica.registry().provider(&spec).unwrap());
    }
    let mut tasks = Vec::new();
    for hook in &hooks {
        for _ in 0..10 {
            let hook = hook.clone();
            tasks.push(tokio::spawn(async move { hook.credentials().await }));
        }
    }
    for task in tasks {
        let err = bounded(task).await.unwrap().unwrap_err();
        assert!(err.is_login_required(), "{err}");
    }
    assert_eq!(
        fleet.auth.refresh_requests(),
        1,
        "sent once, by one replica"
    );
    assert_eq!(fleet.auth.refresh_tokens_sent(), ["rt-revoked"]);
}
