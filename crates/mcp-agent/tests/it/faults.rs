//! What replicas do when the shared store is not what it should be: entries sealed with
//! another key, altered entries, clocks that disagree, and Redis gone in the middle.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_agent::auth::{AuthError, AuthProvider, OnUnauthorized};
use mcp_agent::state::{OnError, RedisState, SealKey, StateConfig};
use mcp_test_kit::bounded;

use crate::fleet::{KEY, OTHER_KEY, bearer, fleet, store_with};

#[tokio::test]
async fn replicas_with_another_key_or_none_fetch_their_own_and_overwrite_nothing() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.cc_spec();
    let token = async |replica: &crate::fleet::Replica| {
        let hook = replica.registry().provider(&spec).unwrap();
        bearer(&bounded(hook.credentials()).await.unwrap())
    };
    assert_eq!(token(&fleet.replica(KEY).await).await, "Bearer at-1");
    let other = fleet.replica(OTHER_KEY).await;
    assert_eq!(token(&other).await, "Bearer at-2", "its own");
    assert_eq!(fleet.entries().await.len(), 2, "each key its own name");
    assert_eq!(
        other.tokens.as_ref().unwrap().rejected(),
        0,
        "nothing to refuse"
    );
    // Each group still reads its own.
    assert_eq!(token(&fleet.replica(KEY).await).await, "Bearer at-1");
    assert_eq!(token(&fleet.replica(OTHER_KEY).await).await, "Bearer at-2");
    let alone = fleet.replica_with(None, OnError::Closed, None).await;
    assert_eq!(token(&alone).await, "Bearer at-3", "no key, nothing shared");
    assert_eq!(fleet.entries().await.len(), 2);
    assert_eq!(fleet.auth.token_requests(), 3);
}

#[tokio::test]
async fn an_entry_sealed_with_another_key_or_altered_is_ignored_and_fetched_again() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.cc_spec();
    let token = async |replica: &crate::fleet::Replica| {
        let hook = replica.registry().provider(&spec).unwrap();
        bearer(&bounded(hook.credentials()).await.unwrap())
    };
    assert_eq!(token(&fleet.replica(KEY).await).await, "Bearer at-1");
    let [key] = <[String; 1]>::try_from(fleet.entries().await).unwrap();
    let name = key.strip_prefix("mcp-agent:").unwrap();

    // A foreign entry under the fleet's name: another key sealed it (for that very name).
    let state = bounded(RedisState::connect(&StateConfig::new(fleet.redis.url())))
        .await
        .unwrap();
    let foreign = state.sealed_store(SealKey::from_bytes(&OTHER_KEY));
    let forged =
        br#"{"v":1,"access_token":"forged","expires_at_ms":99999999999999,"lifetime_ms":3600000}"#;
    bounded(foreign.put(name, forged, Duration::from_secs(3600)))
        .await
        .unwrap();
    let reader = fleet.replica(KEY).await;
    assert_eq!(
        token(&reader).await,
        "Bearer at-2",
        "ignored, fetched again"
    );
    // Refused at the first look and at the second (under the lease).
    assert_eq!(reader.tokens.as_ref().unwrap().rejected(), 2);
    assert_eq!(
        token(&fleet.replica(KEY).await).await,
        "Bearer at-2",
        "and shared"
    );

    // Altered bytes (the expiry kept).
    let mut sealed: Vec<u8> = fleet.raw(redis::cmd("GET").arg(&key)).await;
    let last = sealed.len() - 1;
    sealed[last] ^= 1;
    let _: () = fleet
        .raw(redis::cmd("SET").arg(&key).arg(sealed).arg("KEEPTTL"))
        .await;
    let reader = fleet.replica(KEY).await;
    assert_eq!(token(&reader).await, "Bearer at-3");
    assert_eq!(reader.tokens.as_ref().unwrap().rejected(), 2);
    assert_eq!(fleet.auth.token_requests(), 3);
}

#[tokio::test]
async fn replicas_with_skewed_clocks_use_no_expired_token_and_renew_at_most_once() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.cc_spec();
    let token = async |replica: &crate::fleet::Replica| {
        let hook = replica.registry().provider(&spec).unwrap();
        bearer(&bounded(hook.credentials()).await.unwrap())
    };
    let two_hours = 7200;
    assert_eq!(token(&fleet.replica(KEY).await).await, "Bearer at-1");
    // Two hours behind: by its clock the token has three hours left of a one-hour lifetime.
    // It trusts Redis's expiry instead, and uses it.
    let behind = fleet
        .replica_with(Some(KEY), OnError::Closed, Some(-two_hours))
        .await;
    assert_eq!(token(&behind).await, "Bearer at-1");
    assert_eq!(fleet.auth.token_requests(), 1);
    // Two hours ahead: the token expired by its clock; it is not used. One renewal...
    let ahead = fleet
        .replica_with(Some(KEY), OnError::Closed, Some(two_hours))
        .await;
    assert_eq!(token(&ahead).await, "Bearer at-2");
    assert_eq!(fleet.auth.token_requests(), 2);
    // ...and no more: the replicas behind and on time read its entry by Redis's expiry, and
    // it reads its own.
    for skew in [None, Some(-two_hours), Some(two_hours)] {
        let replica = fleet.replica_with(Some(KEY), OnError::Closed, skew).await;
        assert_eq!(token(&replica).await, "Bearer at-2", "{skew:?}");
    }
    assert_eq!(fleet.auth.token_requests(), 2);
}

/// Counts the warnings logged (on this thread).
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut Visit(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
}

struct Visit<'a>(&'a mut String);

impl tracing::field::Visit for Visit<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

#[tokio::test]
async fn with_redis_gone_client_credentials_are_fetched_alone_and_it_is_logged_once() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let warnings = Warnings::default();
    // While a single dispatcher exists, tracing-core decides a callsite's interest by the
    // dispatcher of the thread that reaches it first: another test's thread, without one,
    // would mark this test's warnings uninteresting for good. A second dispatcher makes it
    // ask every one.
    let _second = tracing::Dispatch::new(tracing_subscriber::registry());
    let _log =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.cc_spec();
    let (a, b) = (fleet.replica(KEY).await, fleet.replica(KEY).await);
    let hooks: Vec<Arc<dyn AuthProvider>> = [&a, &b]
        .iter()
        .map(|r| r.registry().provider(&spec).unwrap())
        .collect();
    for hook in &hooks {
        assert_eq!(
            bearer(&bounded(hook.credentials()).await.unwrap()),
            "Bearer at-1"
        );
    }
    assert_eq!(fleet.auth.token_requests(), 1);
    let crate::fleet::Fleet { redis, auth } = fleet;
    drop(redis);
    // The server refuses the token: each replica renews, alone, and gets a token.
    for (n, hook) in hooks.iter().enumerate() {
        let sent = bounded(hook.credentials()).await.unwrap();
        let retry = bounded(hook.on_unauthorized(&sent, None)).await.unwrap();
        assert_eq!(retry, OnUnauthorized::Retry);
        let got = bearer(&bounded(hook.credentials()).await.unwrap());
        assert_eq!(got, format!("Bearer at-{}", n + 2));
    }
    assert_eq!(auth.token_requests(), 3);
    let logged = warnings.0.lock().unwrap().clone();
    let outages = logged
        .iter()
        .filter(|w| w.contains("shared OAuth tokens unavailable"))
        .count();
    // Each replica's registry logs its own outage once.
    assert_eq!(outages, 2, "{logged:#?}");
}

#[tokio::test]
async fn with_redis_gone_a_login_refresh_waits_unless_on_error_is_open() {
    let Some(fleet) = fleet().await else { return };
    let spec = fleet.login_spec();
    let login = fleet.stored_login("at-stored", 5);
    let closed = fleet.replica(KEY).await;
    closed.registry().use_token_store(store_with(&login).await);
    let open = fleet.replica_with(Some(KEY), OnError::Open, None).await;
    open.registry().use_token_store(store_with(&login).await);
    let crate::fleet::Fleet { redis, auth } = fleet;
    drop(redis);

    let hook = closed.registry().provider(&spec).unwrap();
    let err = bounded(hook.credentials()).await.unwrap_err();
    assert!(matches!(err, AuthError::TokenShare { .. }), "{err:?}");
    assert!(
        err.to_string().contains("no refresh token is sent twice"),
        "{err}"
    );
    assert_eq!(auth.refresh_requests(), 0, "nothing sent");

    let hook = open.registry().provider(&spec).unwrap();
    let got = bearer(&bounded(hook.credentials()).await.unwrap());
    assert_eq!(got, "Bearer at-1", "refreshed alone");
    assert_eq!(auth.refresh_requests(), 1);
}
