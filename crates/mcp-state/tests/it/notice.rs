//! Notices between replicas against a real Redis: heard on the channel under the prefix only,
//! and heard again after the subscription's connection is cut (told as a gap).

use mcp_state::{Notice, RedisState, StateConfig};
use mcp_test_kit::bounded;

use crate::support::fixture;

#[tokio::test]
async fn a_notice_is_heard_by_subscribers_of_its_channel_and_prefix() {
    let Some(f) = fixture().await else { return };
    let mut heard = bounded(f.state.subscribe("session-ended")).await.unwrap();
    let other_prefix = StateConfig {
        key_prefix: "other:".into(),
        ..StateConfig::new(f.server.url())
    };
    let other = bounded(RedisState::connect(&other_prefix)).await.unwrap();
    let mut not_heard = bounded(other.subscribe("session-ended")).await.unwrap();
    bounded(f.state.publish("another-channel", b"x"))
        .await
        .unwrap();
    bounded(f.state.publish("session-ended", b"42"))
        .await
        .unwrap();
    assert_eq!(
        bounded(heard.recv()).await,
        Some(Notice::Message(b"42".to_vec())),
        "only the channel's message"
    );
    bounded(other.publish("session-ended", b"7")).await.unwrap();
    assert_eq!(
        bounded(not_heard.recv()).await,
        Some(Notice::Message(b"7".to_vec())),
        "the other prefix hears its own, not the first"
    );
}

#[tokio::test]
async fn a_subscription_whose_connection_is_cut_tells_a_gap_and_hears_again() {
    let Some(mut f) = fixture().await else { return };
    let mut heard = bounded(f.state.subscribe("session-ended")).await.unwrap();
    let killed: i64 = f
        .raw(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
        .await;
    assert_eq!(killed, 1, "the subscription's connection");
    assert_eq!(bounded(heard.recv()).await, Some(Notice::Gap));
    // Subscribed again by itself: publish until it hears (bounded), as the new subscription
    // takes a moment to be made.
    let message = bounded(async {
        loop {
            f.state.publish("session-ended", b"after").await.unwrap();
            let next = tokio::time::timeout(std::time::Duration::from_millis(50), heard.recv());
            if let Ok(Some(Notice::Message(message))) = next.await {
                return message;
            }
        }
    })
    .await;
    assert_eq!(message, b"after");
}
