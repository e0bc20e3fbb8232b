//! The rate limiter against a real Redis: one budget per key across connections (replicas),
//! keys that expire, and a failure once the server is gone.

use mcp_state::{RedisState, StateConfig, StateError};
use mcp_test_kit::bounded;

use crate::support::fixture;

#[tokio::test]
async fn a_keys_budget_is_shared_by_every_replica_and_each_key_has_its_own() {
    let Some(mut fx) = fixture().await else {
        return;
    };
    let other = bounded(RedisState::connect(&StateConfig::new(fx.server.url())))
        .await
        .expect("a second replica");
    let replicas = [fx.state.rate_limiter(), other.rate_limiter()];
    for i in 0..5 {
        let taken = bounded(replicas[i % 2].take("sub:alice", 0.001, 5)).await;
        assert_eq!(taken, Ok(Ok(())), "take {i}");
    }
    for replica in &replicas {
        let wait = bounded(replica.take("sub:alice", 0.001, 5))
            .await
            .expect("counted")
            .expect_err("the sixth take, on either replica");
        assert!(
            wait > std::time::Duration::from_secs(900),
            "about one token's time, 1000 s: {wait:?}"
        );
    }
    let bob = bounded(replicas[1].take("sub:bob", 0.001, 5)).await;
    assert_eq!(bob, Ok(Ok(())), "another key");

    let key = replicas[0].key("sub:alice");
    assert_eq!(key, "mcp-agent:rl:sub:alice");
    let ttl: i64 = fx.raw(redis::cmd("PTTL").arg(&key)).await;
    assert!(
        ttl > 0 && ttl <= 5_000_000,
        "the key expires once its bucket is full again: {ttl}"
    );
}

#[tokio::test]
async fn a_refused_take_says_when_the_bucket_has_room_again() {
    let Some(fx) = fixture().await else {
        return;
    };
    let limiter = fx.state.rate_limiter();
    // One a second, burst one: the second take, however late the machine runs it (under a
    // second), is refused with the time left; after that time the bucket has room again.
    assert_eq!(bounded(limiter.take("addr:a", 1.0, 1)).await, Ok(Ok(())));
    let wait = bounded(limiter.take("addr:a", 1.0, 1))
        .await
        .expect("counted")
        .expect_err("burst of one");
    assert!(
        wait > std::time::Duration::ZERO && wait <= std::time::Duration::from_secs(1),
        "{wait:?}"
    );
    tokio::time::sleep(wait).await;
    assert_eq!(bounded(limiter.take("addr:a", 1.0, 1)).await, Ok(Ok(())));
}

#[tokio::test]
async fn a_counted_take_tells_the_room_left_in_the_bucket() {
    let Some(fx) = fixture().await else {
        return;
    };
    let limiter = fx.state.rate_limiter();
    // A slow refill (one token in 1,000 s): the room only falls, by what each take took.
    for left in (6..10).rev() {
        assert_eq!(
            bounded(limiter.take_counted("sub:room", 1, 0.001, 10)).await,
            Ok(Ok(left))
        );
    }
    assert_eq!(
        bounded(limiter.take_counted("sub:room", 4, 0.001, 10)).await,
        Ok(Ok(2))
    );
    assert!(
        bounded(limiter.take_counted("sub:room", 3, 0.001, 10))
            .await
            .expect("counted")
            .is_err(),
        "three at once when two are left: none taken"
    );
    assert_eq!(
        bounded(limiter.take_counted("sub:room", 2, 0.001, 10)).await,
        Ok(Ok(0))
    );
}

#[tokio::test]
async fn a_take_ahead_never_takes_the_bucket_below_what_it_keeps() {
    let Some(fx) = fixture().await else {
        return;
    };
    let limiter = fx.state.rate_limiter();
    // A slow refill (one token in 1,000 s), a bucket of 20 of which 10 are kept.
    let sparing = |count| limiter.take_sparing("sub:ahead", count, 10, 0.001, 20);
    assert_eq!(bounded(sparing(8)).await, Ok(Some((8, 12))));
    assert_eq!(
        bounded(sparing(8)).await,
        Ok(Some((2, 10))),
        "only what leaves 10"
    );
    assert_eq!(bounded(sparing(1)).await, Ok(None), "nothing to spare");
    // A request's own take still goes below what takes ahead keep.
    assert_eq!(
        bounded(limiter.take_counted("sub:ahead", 1, 0.001, 20)).await,
        Ok(Ok(9))
    );
    assert_eq!(bounded(sparing(1)).await, Ok(None));
}

#[tokio::test]
async fn a_stopped_server_is_a_command_error() {
    let Some(fx) = fixture().await else {
        return;
    };
    let limiter = fx.state.rate_limiter();
    drop(fx.raw);
    drop(fx.server);
    let failed = bounded(limiter.take("addr:a", 1.0, 1)).await;
    assert!(
        matches!(
            failed,
            Err(StateError::Command {
                op: "rate limit",
                ..
            })
        ),
        "{failed:?}"
    );
}
