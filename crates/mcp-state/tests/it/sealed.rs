//! The sealed store against a real Redis: round trip, Redis's own expiry, and entries that do
//! not open (other key, moved, altered) reading as absent.

use std::time::Duration;

use mcp_state::SealKey;
use mcp_test_kit::bounded;

use crate::support::fixture;

#[tokio::test]
async fn a_value_round_trips_sealed_and_is_deleted() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    assert_eq!(bounded(store.get("session:1")).await.unwrap(), None);
    let value = b"claims of session one";
    bounded(store.put("session:1", value, Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(
        bounded(store.get("session:1")).await.unwrap().as_deref(),
        Some(&value[..])
    );
    // Under the default prefix, and not readable there.
    let stored = f.stored("mcp-agent:session:1").await;
    assert!(!stored.windows(value.len()).any(|w| w == value));
    assert!(bounded(store.delete("session:1")).await.unwrap());
    assert!(!bounded(store.delete("session:1")).await.unwrap());
    assert_eq!(bounded(store.get("session:1")).await.unwrap(), None);
    assert_eq!(store.rejected(), 0);
    drop(f.server);
}

#[tokio::test]
async fn entries_expire_by_redis_ttl() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    bounded(store.put("long", b"v", Duration::from_secs(60)))
        .await
        .unwrap();
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:long")).await;
    assert!((1..=60_000).contains(&pttl), "PTTL {pttl}");
    // A sub-millisecond TTL is rounded up, never to "no expiry".
    bounded(store.put("short", b"v", Duration::from_micros(1500)))
        .await
        .unwrap();
    // Redis expires it by itself: wait for that (polling, bounded), then check it is gone
    // from Redis, not merely unreadable.
    bounded(async {
        while bounded(store.get("short")).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:short")).await;
    assert_eq!(pttl, -2, "the key is gone");
    assert!(matches!(
        bounded(store.put("zero", b"v", Duration::ZERO)).await,
        Err(mcp_state::StateError::BadTtl { .. })
    ));
    assert_eq!(store.rejected(), 0);
}

#[tokio::test]
async fn a_value_sealed_with_another_key_reads_as_absent() {
    let Some(f) = fixture().await else { return };
    let writer = f.state.sealed_store(SealKey::from_bytes(&[1; 32]));
    let reader = f.state.sealed_store(SealKey::from_bytes(&[2; 32]));
    bounded(writer.put("token", b"secret", Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(bounded(reader.get("token")).await.unwrap(), None);
    assert_eq!(reader.rejected(), 1);
    // Still there for the right key.
    assert!(bounded(writer.get("token")).await.unwrap().is_some());
}

#[tokio::test]
async fn a_value_copied_to_another_key_reads_as_absent() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    bounded(store.put("session:alice", b"alice", Duration::from_secs(60)))
        .await
        .unwrap();
    let sealed = f.stored("mcp-agent:session:alice").await;
    f.store_raw("mcp-agent:session:mallory", &sealed).await;
    assert_eq!(bounded(store.get("session:mallory")).await.unwrap(), None);
    assert_eq!(store.rejected(), 1);
    assert_eq!(
        bounded(store.get("session:alice"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"alice"[..])
    );
}

#[tokio::test]
async fn altered_bytes_read_as_absent() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    bounded(store.put("k", b"the value", Duration::from_secs(60)))
        .await
        .unwrap();
    let sealed = f.stored("mcp-agent:k").await;
    let mut altered = sealed.clone();
    let last = altered.len() - 1;
    altered[last] ^= 0x80;
    let mut flipped_body = sealed.clone();
    flipped_body[20] ^= 0x01;
    let truncated = sealed[..10].to_vec();
    let garbage = b"not sealed at all".to_vec();
    for (n, bytes) in [altered, flipped_body, truncated, garbage]
        .iter()
        .enumerate()
    {
        f.store_raw("mcp-agent:k", bytes).await;
        assert_eq!(bounded(store.get("k")).await.unwrap(), None, "case {n}");
        assert_eq!(store.rejected(), n as u64 + 1);
    }
    f.store_raw("mcp-agent:k", &sealed).await;
    assert!(bounded(store.get("k")).await.unwrap().is_some());
}

#[tokio::test]
async fn the_prefix_separates_deployments() {
    let Some(mut f) = fixture().await else { return };
    let mut config = mcp_state::StateConfig::new(f.server.url());
    config.key_prefix = "blue:".into();
    let blue = bounded(mcp_state::RedisState::connect(&config))
        .await
        .unwrap();
    let key = SealKey::from_bytes(&[5; 32]);
    let store = blue.sealed_store(key);
    bounded(store.put("s", b"v", Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(!f.stored("blue:s").await.is_empty());
    let default = f.state.sealed_store(SealKey::from_bytes(&[5; 32]));
    assert_eq!(bounded(default.get("s")).await.unwrap(), None);
    assert_eq!(
        default.rejected(),
        0,
        "nothing at mcp-agent:s, so nothing rejected"
    );
}

#[tokio::test]
async fn a_value_is_read_with_the_time_redis_keeps_it() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    assert_eq!(bounded(store.get_with_ttl("t")).await.unwrap(), None);
    bounded(store.put("t", b"v", Duration::from_secs(60)))
        .await
        .unwrap();
    let (value, ttl) = bounded(store.get_with_ttl("t")).await.unwrap().unwrap();
    assert_eq!(value, b"v");
    let ttl = ttl.expect("an expiry");
    assert!(
        ttl <= Duration::from_secs(60) && ttl > Duration::from_secs(50),
        "{ttl:?}"
    );
    // An entry without expiry (written by hand) has none; one that does not open is absent.
    let sealed = f.stored("mcp-agent:t").await;
    f.store_raw("mcp-agent:t", &sealed).await;
    let (_, ttl) = bounded(store.get_with_ttl("t")).await.unwrap().unwrap();
    assert_eq!(ttl, None);
    f.store_raw("mcp-agent:t", b"not sealed").await;
    assert_eq!(bounded(store.get_with_ttl("t")).await.unwrap(), None);
    assert_eq!(store.rejected(), 1);
}

#[tokio::test]
async fn blinded_names_differ_by_key_and_keep_the_name_out_of_redis() {
    let Some(mut f) = fixture().await else { return };
    let one = f.state.sealed_store(SealKey::from_bytes(&[1; 32]));
    let two = f.state.sealed_store(SealKey::from_bytes(&[2; 32]));
    let name = "client:alice@example";
    assert_ne!(one.blind(name), two.blind(name));
    bounded(one.put(&one.blind(name), b"v", Duration::from_secs(60)))
        .await
        .unwrap();
    let keys: Vec<String> = f.raw(redis::cmd("KEYS").arg("*")).await;
    assert_eq!(keys, [format!("mcp-agent:{}", one.blind(name))]);
    assert!(!keys[0].contains("alice"));
    // The other key's store looks elsewhere: nothing rejected, nothing overwritten.
    assert_eq!(bounded(two.get(&two.blind(name))).await.unwrap(), None);
    assert_eq!(two.rejected(), 0);
}

#[tokio::test]
async fn touching_extends_an_entry_and_finds_a_missing_one() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    bounded(store.put("session:t", b"v", Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        bounded(store.touch("session:t", Duration::from_secs(600)))
            .await
            .unwrap()
    );
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:session:t")).await;
    assert!((5_001..=600_000).contains(&pttl), "PTTL {pttl}");
    assert_eq!(
        bounded(store.get("session:t")).await.unwrap().as_deref(),
        Some(&b"v"[..])
    );
    assert!(bounded(store.delete("session:t")).await.unwrap());
    assert!(
        !bounded(store.touch("session:t", Duration::from_secs(600)))
            .await
            .unwrap(),
        "gone"
    );
    let exists: i64 = f.raw(redis::cmd("EXISTS").arg("mcp-agent:session:t")).await;
    assert_eq!(exists, 0, "touching does not make it again");
    assert!(matches!(
        bounded(store.touch("session:t", Duration::ZERO)).await,
        Err(mcp_state::StateError::BadTtl { .. })
    ));
}

#[tokio::test]
async fn reading_and_touching_at_once_extends_the_entry_it_reads() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    bounded(store.put("session:g", b"v", Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(
        bounded(store.get_touched("session:g", Duration::from_secs(600)))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"v"[..])
    );
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:session:g")).await;
    assert!((5_001..=600_000).contains(&pttl), "PTTL {pttl}");
    let other = f.state.sealed_store(SealKey::generate());
    assert_eq!(
        bounded(other.get_touched("session:g", Duration::from_secs(600)))
            .await
            .unwrap(),
        None,
        "sealed with another key"
    );
    assert_eq!(other.rejected(), 1);
    assert_eq!(
        bounded(store.get_touched("session:none", Duration::from_secs(600)))
            .await
            .unwrap(),
        None
    );
    let exists: i64 = f
        .raw(redis::cmd("EXISTS").arg("mcp-agent:session:none"))
        .await;
    assert_eq!(exists, 0, "reading makes nothing");
    assert!(matches!(
        bounded(store.get_touched("session:g", Duration::ZERO)).await,
        Err(mcp_state::StateError::BadTtl { .. })
    ));
}

#[tokio::test]
async fn replacing_keeps_what_is_there_and_makes_nothing_new() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    let ttl = Duration::from_secs(60);
    assert!(
        !bounded(store.replace("session:r", b"v2", ttl))
            .await
            .unwrap()
    );
    let exists: i64 = f.raw(redis::cmd("EXISTS").arg("mcp-agent:session:r")).await;
    assert_eq!(exists, 0, "nothing made");
    bounded(store.put("session:r", b"v1", Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        bounded(store.replace("session:r", b"v2", ttl))
            .await
            .unwrap()
    );
    assert_eq!(
        bounded(store.get("session:r")).await.unwrap().as_deref(),
        Some(&b"v2"[..])
    );
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:session:r")).await;
    assert!((5_001..=60_000).contains(&pttl), "PTTL {pttl}");
}

#[tokio::test]
async fn a_value_gone_is_restored_unless_it_was_retired() {
    let Some(mut f) = fixture().await else { return };
    let store = f.state.sealed_store(SealKey::generate());
    let ttl = Duration::from_secs(60);
    let restore = |value: &'static [u8]| store.restore("session:s", value, ttl, "ended:s");
    // Gone without a mark (a Redis restarted empty): written again, sealed, for the TTL.
    assert!(bounded(restore(b"v1")).await.unwrap());
    assert_eq!(
        bounded(store.get("session:s")).await.unwrap().as_deref(),
        Some(&b"v1"[..])
    );
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:session:s")).await;
    assert!((1..=60_000).contains(&pttl), "PTTL {pttl}");
    // Another holder's restore keeps what is there, for the TTL from now.
    bounded(store.put("session:s", b"v1", Duration::from_secs(2)))
        .await
        .unwrap();
    assert!(bounded(restore(b"v2")).await.unwrap());
    assert_eq!(
        bounded(store.get("session:s")).await.unwrap().as_deref(),
        Some(&b"v1"[..])
    );
    let pttl: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:session:s")).await;
    assert!((2_001..=60_000).contains(&pttl), "PTTL {pttl}");
    // A restore for less time than is left shortens nothing.
    let shorter = store.restore("session:s", b"v2", Duration::from_secs(5), "ended:s");
    assert!(bounded(shorter).await.unwrap());
    let kept: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:session:s")).await;
    assert!((5_001..=pttl).contains(&kept), "PTTL {kept}, {pttl} before");
    // Retired: gone, its mark kept for the TTL, and never made again while the mark lasts.
    assert!(
        bounded(store.retire("session:s", "ended:s", ttl))
            .await
            .unwrap()
    );
    assert_eq!(bounded(store.get("session:s")).await.unwrap(), None);
    let mark: i64 = f.raw(redis::cmd("PTTL").arg("mcp-agent:ended:s")).await;
    assert!((1..=60_000).contains(&mark), "PTTL {mark}");
    assert!(!bounded(restore(b"v3")).await.unwrap());
    let exists: i64 = f.raw(redis::cmd("EXISTS").arg("mcp-agent:session:s")).await;
    assert_eq!(exists, 0, "nothing made");
    assert!(
        !bounded(store.retire("session:s", "ended:s", ttl))
            .await
            .unwrap(),
        "nothing left to retire"
    );
}
