//! `[serve] state` for sessions: mcp-state's sealed store as mcp-serve's [`SessionStore`], so
//! that a session opened on one replica is served by any other. A record (the principal the
//! session is bound to, the client's `initialize`) lives under `<prefix>session:<digest of the
//! id>`, sealed with the seal key and bound to its key, with the idle timeout as its time to
//! live; `DELETE` removes it and publishes its key on `<prefix>session-ended`, which every
//! replica hears.
//!
//! The seal key is required: a record names the principal a session acts for, and a record
//! that anyone with access to Redis could write would let them bind a session to anyone.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_serve::{OnStoreError, SessionNotice, SessionStore, SharedSessions, StoreError};
use mcp_state::{Notice, OnError, RedisState, SealKey, SealedStore, StateConfig, StateError};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// The channel ended sessions are announced on, under the prefix.
const ENDED: &str = "session-ended";

/// How many notices a replica may fall behind before it checks every session it holds.
const BACKLOG: usize = 1024;

/// Session records in the fleet's Redis.
struct RedisSessions {
    state: RedisState,
    records: SealedStore,
    notices: broadcast::Sender<SessionNotice>,
    hearing: JoinHandle<()>,
}

impl Drop for RedisSessions {
    fn drop(&mut self) {
        self.hearing.abort();
    }
}

impl RedisSessions {
    fn failed(&self, e: &StateError) -> StoreError {
        StoreError::new(format!("Redis at {}", self.state.addr()), e.to_string())
    }
}

/// The name of the record under `key` (a digest of the session id), below the prefix.
fn record(key: &str) -> String {
    format!("session:{key}")
}

/// A key as announced: 64 hex digits, else nothing this gateway announced.
fn announced(message: &[u8]) -> Option<String> {
    let key = std::str::from_utf8(message).ok()?;
    (key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit())).then(|| key.to_owned())
}

#[async_trait]
impl SessionStore for RedisSessions {
    async fn put(&self, key: &str, bytes: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.records
            .put(&record(key), bytes, ttl)
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.records
            .get(&record(key))
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn touch(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.records
            .touch(&record(key), ttl)
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn end(&self, key: &str) -> Result<(), StoreError> {
        self.records
            .delete(&record(key))
            .await
            .map_err(|e| self.failed(&e))?;
        self.state
            .publish(ENDED, key.as_bytes())
            .await
            .map_err(|e| self.failed(&e))
    }

    fn notices(&self) -> broadcast::Receiver<SessionNotice> {
        self.notices.subscribe()
    }
}

/// Connects to the state of `config` (checked: reachable, credentials accepted, the seal key
/// set) and keeps the gateway's sessions there, doing what `on_error` says when Redis fails
/// later. Fails with [`StateError::SealKey`] when `seal_key_env` is unset or its variable
/// holds no key.
pub(crate) async fn shared_sessions(config: &StateConfig) -> Result<SharedSessions, StateError> {
    let key = SealKey::from_config(config)?;
    let state = RedisState::connect(config).await?;
    let mut subscription = state.subscribe(ENDED).await?;
    let (notices, _) = broadcast::channel(BACKLOG);
    let heard = notices.clone();
    let hearing = tokio::spawn(async move {
        while let Some(notice) = subscription.recv().await {
            let notice = match notice {
                Notice::Message(message) => match announced(&message) {
                    Some(key) => SessionNotice::Ended(key),
                    None => continue,
                },
                Notice::Gap => SessionNotice::Missed,
            };
            let _ = heard.send(notice);
        }
    });
    let on_error = match state.on_error() {
        OnError::Open => OnStoreError::Open,
        OnError::Closed => OnStoreError::Closed,
    };
    let sessions = RedisSessions {
        records: state.sealed_store(key),
        state,
        notices,
        hearing,
    };
    Ok(SharedSessions::new(Arc::new(sessions), on_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keys_are_heard_as_announcements() {
        let key = "ab".repeat(32);
        assert_eq!(announced(key.as_bytes()), Some(key.clone()));
        for other in [
            &b"ab"[..],
            b"not hex at all, but sixty-four bytes long: 0123456789abcdef012",
            &[0xff; 64],
        ] {
            assert_eq!(announced(other), None);
        }
    }
}
