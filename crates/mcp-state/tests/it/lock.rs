//! Leases against a real Redis: one holder at a time across connections (replicas), release
//! by the owner only, expiry of a holder that never releases.

use std::time::Duration;

use mcp_state::{Locks, RedisState, StateConfig, StateError};
use mcp_test_kit::bounded;

use crate::support::fixture;

#[tokio::test]
async fn one_owner_at_a_time_across_replicas_and_only_the_owner_releases() {
    let Some(mut f) = fixture().await else { return };
    let other = bounded(RedisState::connect(&StateConfig::new(f.server.url())))
        .await
        .expect("a second replica");
    let (a, b) = (f.state.locks(), other.locks());
    let (me, you) = (Locks::new_owner(), Locks::new_owner());
    let ttl = Duration::from_secs(60);
    assert!(bounded(a.try_acquire("job", &me, ttl)).await.unwrap());
    assert!(!bounded(b.try_acquire("job", &you, ttl)).await.unwrap());
    assert!(
        !bounded(a.try_acquire("job", &me, ttl)).await.unwrap(),
        "not re-entrant"
    );
    assert!(
        bounded(b.try_acquire("other-job", &you, ttl))
            .await
            .unwrap()
    );
    // Not yours: nothing happens.
    assert!(!bounded(b.release("job", &you)).await.unwrap());
    let holder: Option<String> = f.raw(redis::cmd("GET").arg("mcp-agent:lock:job")).await;
    assert_eq!(holder.as_deref(), Some(me.as_str()));
    assert!(bounded(a.release("job", &me)).await.unwrap());
    assert!(
        !bounded(a.release("job", &me)).await.unwrap(),
        "released once"
    );
    assert!(bounded(b.try_acquire("job", &you, ttl)).await.unwrap());
}

#[tokio::test]
async fn a_lease_nobody_releases_expires_and_its_late_owner_frees_nothing() {
    let Some(f) = fixture().await else { return };
    let locks = f.state.locks();
    let (dead, next) = (Locks::new_owner(), Locks::new_owner());
    assert!(
        bounded(locks.try_acquire("job", &dead, Duration::from_millis(30)))
            .await
            .unwrap()
    );
    // Redis ends the lease by itself: wait for that (polling, bounded).
    bounded(async {
        while !locks
            .try_acquire("job", &next, Duration::from_secs(60))
            .await
            .unwrap()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        !bounded(locks.release("job", &dead)).await.unwrap(),
        "the late owner's release leaves the new lease alone"
    );
    assert!(bounded(locks.release("job", &next)).await.unwrap());
    assert!(matches!(
        bounded(locks.try_acquire("job", &next, Duration::ZERO)).await,
        Err(StateError::BadTtl { .. })
    ));
}
