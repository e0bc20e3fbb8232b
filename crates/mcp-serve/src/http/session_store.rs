//! Where the sessions of a fleet are kept, so that any replica serves a session another one
//! opened: [`SessionStore`], records with a time to live under a key per session, and the
//! notices of sessions ended; [`InProcessSessions`] keeps them in this process (replicas in one
//! process, tests), other stores (Redis, in `mcp-state`) are wired by the gateway.
//! [`SharedSessions`] is a store with what to do when it fails.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::limit_store::{OnStoreError, StoreError};

/// How many notices a replica may fall behind before it is told it missed some.
const NOTICES: usize = 1024;

/// What a replica hears from a [`SessionStore`] about sessions ended on other replicas.
///
/// ```
/// use mcp_serve::SessionNotice;
///
/// let notice = SessionNotice::Ended("3f…".into());
/// assert!(matches!(notice, SessionNotice::Ended(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionNotice {
    /// The session under this key was ended (`DELETE`): a replica holding it drops it.
    Ended(String),
    /// Notices may have been lost (the store's connection was cut, or the replica fell
    /// behind): a replica checks every session it holds against the store.
    Missed,
}

/// A store of session records shared by the replicas of a gateway. A record is opaque bytes
/// under a key naming one session (64 hex digits: a digest of its id, which is never stored);
/// it holds the principal the session is bound to, so a store that anyone else can write to
/// must authenticate what it returns (seal it): what does not open reads as absent.
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::{InProcessSessions, SessionStore, StoreError};
///
/// # async fn demo() -> Result<(), StoreError> {
/// let store = InProcessSessions::default();
/// let mut notices = store.notices();
/// store.put("ab12", b"record", Duration::from_secs(300)).await?;
/// assert!(store.replace("ab12", b"record, again", Duration::from_secs(300)).await?);
/// assert!(store.touch("ab12", Duration::from_secs(300)).await?);
/// store.end("ab12", Duration::from_secs(300)).await?;
/// assert_eq!(store.get("ab12").await?, None);
/// assert!(!store.touch("ab12", Duration::from_secs(300)).await?);
/// assert!(!store.replace("ab12", b"record", Duration::from_secs(300)).await?);
/// assert!(!store.restore("ab12", b"record", Duration::from_secs(300)).await?);
/// assert_eq!(notices.recv().await.unwrap(), mcp_serve::SessionNotice::Ended("ab12".into()));
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Keeps `record` under `key` for `ttl`, replacing what was there.
    async fn put(&self, key: &str, record: &[u8], ttl: Duration) -> Result<(), StoreError>;

    /// Replaces the record under `key` with `record`, kept for `ttl`, only if there is one:
    /// `false` when there is none (so that a session ended meanwhile is not made again).
    async fn replace(&self, key: &str, record: &[u8], ttl: Duration) -> Result<bool, StoreError>;

    /// The record under `key`: `None` when there is none, it expired, or it does not open.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Keeps the record under `key` for `ttl` from now: `false` when there is none (ended or
    /// expired).
    async fn touch(&self, key: &str, ttl: Duration) -> Result<bool, StoreError>;

    /// The record under `key` like [`get`](Self::get), kept for `ttl` from now like
    /// [`touch`](Self::touch): what a replica reads when it restores a session. A store may
    /// keep a record it reads as absent (one that does not open) for `ttl` too. The default
    /// does one after the other, and a touch that fails still returns the record read (the
    /// session's next check touches it again); a store that can do both in one round trip
    /// should.
    async fn get_touched(&self, key: &str, ttl: Duration) -> Result<Option<Vec<u8>>, StoreError> {
        let record = self.get(key).await?;
        if record.is_some() {
            let _ = self.touch(key, ttl).await;
        }
        Ok(record)
    }

    /// Removes the record under `key`, remembers for `ttl` that the session ended (so that
    /// [`restore`](Self::restore) does not make it again), and tells every replica
    /// ([`SessionNotice::Ended`]).
    async fn end(&self, key: &str, ttl: Duration) -> Result<(), StoreError>;

    /// Writes `record` under `key` for `ttl` again, for a replica that holds (or parked) the
    /// session and found its record gone although nobody ended it (a store restarted empty),
    /// unless the session was [ended](Self::end) within its `ttl`. A record another replica
    /// wrote meanwhile is kept, for at least `ttl` (a longer time it had left stays). `true`
    /// when the session goes on, `false` when it ended.
    async fn restore(&self, key: &str, record: &[u8], ttl: Duration) -> Result<bool, StoreError>;

    /// The notices of sessions ended, from now on.
    fn notices(&self) -> broadcast::Receiver<SessionNotice>;
}

/// The session records in this process's memory: the store of replicas running in one
/// process.
///
/// ```
/// let store = mcp_serve::InProcessSessions::default();
/// # let _ = store;
/// ```
pub struct InProcessSessions {
    records: Mutex<Records>,
    notices: broadcast::Sender<SessionNotice>,
}

/// The records, and the sessions ended, each with when it expires.
#[derive(Default)]
struct Records {
    live: HashMap<String, (Vec<u8>, Instant)>,
    ended: HashMap<String, Instant>,
}

impl Default for InProcessSessions {
    fn default() -> Self {
        Self {
            records: Mutex::default(),
            notices: broadcast::channel(NOTICES).0,
        }
    }
}

impl fmt::Debug for InProcessSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("InProcessSessions")
            .field("records", &records.live.len())
            .finish()
    }
}

impl InProcessSessions {
    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets every record and every session ended, and tells every replica that notices
    /// may have been missed ([`SessionNotice::Missed`]): what a store restarted empty does.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use mcp_serve::{InProcessSessions, SessionNotice, SessionStore};
    ///
    /// let store = InProcessSessions::default();
    /// let mut notices = store.notices();
    /// store.put("ab12", b"record", Duration::from_secs(300)).await.unwrap();
    /// store.clear();
    /// assert_eq!(store.get("ab12").await.unwrap(), None);
    /// assert_eq!(notices.recv().await.unwrap(), SessionNotice::Missed);
    /// # });
    /// ```
    pub fn clear(&self) {
        *self.records() = Records::default();
        let _ = self.notices.send(SessionNotice::Missed);
    }
}

#[async_trait]
impl SessionStore for InProcessSessions {
    async fn put(&self, key: &str, record: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut records = self.records();
        records.live.retain(|_, (_, until)| *until > now);
        records.ended.retain(|_, until| *until > now);
        records
            .live
            .insert(key.to_owned(), (record.to_vec(), now + ttl));
        Ok(())
    }

    async fn replace(&self, key: &str, record: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        match self.records().live.get_mut(key) {
            Some(kept) if kept.1 > now => {
                *kept = (record.to_vec(), now + ttl);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let now = Instant::now();
        Ok(self
            .records()
            .live
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(record, _)| record.clone()))
    }

    async fn touch(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        match self.records().live.get_mut(key) {
            Some((_, until)) if *until > now => {
                *until = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn end(&self, key: &str, ttl: Duration) -> Result<(), StoreError> {
        {
            let mut records = self.records();
            records.live.remove(key);
            records.ended.insert(key.to_owned(), Instant::now() + ttl);
        }
        let _ = self.notices.send(SessionNotice::Ended(key.to_owned()));
        Ok(())
    }

    async fn restore(&self, key: &str, record: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut records = self.records();
        if records.ended.get(key).is_some_and(|until| *until > now) {
            return Ok(false);
        }
        match records.live.get_mut(key) {
            Some((_, until)) if *until > now => *until = (*until).max(now + ttl),
            _ => {
                records
                    .live
                    .insert(key.to_owned(), (record.to_vec(), now + ttl));
            }
        }
        Ok(true)
    }

    fn notices(&self) -> broadcast::Receiver<SessionNotice> {
        self.notices.subscribe()
    }
}

/// Sessions kept in `store` so that every replica sharing it serves them (see
/// [`HttpOptions::shared_sessions`](super::HttpOptions::shared_sessions)), and what is done
/// when it fails.
///
/// ```
/// use std::sync::Arc;
/// use mcp_serve::{HttpOptions, InProcessSessions, OnStoreError, SharedSessions};
///
/// let sessions = SharedSessions::new(Arc::new(InProcessSessions::default()), OnStoreError::Closed);
/// let options = HttpOptions::default().with_shared_sessions(sessions);
/// assert_eq!(options.shared_sessions.unwrap().on_error(), OnStoreError::Closed);
/// ```
#[derive(Clone)]
pub struct SharedSessions {
    store: Arc<dyn SessionStore>,
    on_error: OnStoreError,
}

impl SharedSessions {
    /// Sessions kept in `store`; when it fails, `on_error`: [`OnStoreError::Closed`] answers
    /// `503` to what needs it (a new session, a session this replica does not hold yet, a
    /// `DELETE`, the periodic check of a session held), [`OnStoreError::Open`] goes on with
    /// this replica's own sessions alone.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_serve::{InProcessSessions, OnStoreError, SharedSessions};
    ///
    /// let sessions = SharedSessions::new(Arc::new(InProcessSessions::default()), OnStoreError::Open);
    /// # let _ = sessions;
    /// ```
    pub fn new(store: Arc<dyn SessionStore>, on_error: OnStoreError) -> Self {
        Self { store, on_error }
    }

    /// What is done when the store fails.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use mcp_serve::{InProcessSessions, OnStoreError, SharedSessions};
    /// let sessions = SharedSessions::new(Arc::new(InProcessSessions::default()), OnStoreError::Open);
    /// assert_eq!(sessions.on_error(), OnStoreError::Open);
    /// ```
    pub fn on_error(&self) -> OnStoreError {
        self.on_error
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }
}

impl fmt::Debug for SharedSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSessions")
            .field("on_error", &self.on_error)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_expire_and_touching_keeps_them() {
        let store = InProcessSessions::default();
        store
            .put("a", b"1", Duration::from_millis(1))
            .await
            .unwrap();
        store.put("b", b"2", Duration::from_secs(60)).await.unwrap();
        let expired = Instant::now() + Duration::from_millis(1);
        while Instant::now() <= expired {
            tokio::task::yield_now().await;
        }
        assert_eq!(store.get("a").await.unwrap(), None);
        assert!(!store.touch("a", Duration::from_secs(60)).await.unwrap());
        assert!(store.touch("b", Duration::from_secs(60)).await.unwrap());
        assert_eq!(store.get("b").await.unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[tokio::test]
    async fn a_restore_for_less_time_than_a_record_has_left_shortens_nothing() {
        let store = InProcessSessions::default();
        store.put("a", b"1", Duration::from_secs(60)).await.unwrap();
        assert!(
            store
                .restore("a", b"2", Duration::from_millis(1))
                .await
                .unwrap()
        );
        let shorter = Instant::now() + Duration::from_millis(1);
        while Instant::now() <= shorter {
            tokio::task::yield_now().await;
        }
        assert_eq!(store.get("a").await.unwrap().as_deref(), Some(&b"1"[..]));
    }
}
