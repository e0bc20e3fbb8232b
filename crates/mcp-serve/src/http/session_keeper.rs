//! rmcp's session store ([`rmcp`'s `SessionStore`]) over a fleet's [`SessionStore`](super::session_store::SessionStore): rmcp keeps
//! a session's `initialize` when the handshake is done, reads it back on a replica that does
//! not hold the session (and replays the handshake there), and removes it on `DELETE`. The
//! [`Keeper`] adds what rmcp does not keep:
//!
//! - the principal the session is bound to, in the same record (rmcp's replay carries the
//!   request of whoever presents the id; the restored session is bound to the stored
//!   principal instead, through [`Restoring`]), and the tools it promoted, written again when
//!   they change ([`Records`]) and promoted again where it is restored;
//! - the key: a SHA-256 digest of the session id, so the store never holds an id a reader
//!   could present; an id that is not one this server could have made is not looked up;
//! - the sessions this replica holds, with when each was last checked against the store (its
//!   record's time to live extended, or found gone: ended elsewhere, or expired) and the
//!   record last written or read, which a holder writes again when the store lost it (a
//!   store restarted empty) rather than lose the session; a session ended is marked ended in
//!   the store for a record's time to live, so that it is never made again;
//! - the sessions this replica parked: their records, until they would expire, written back
//!   the same way (for the time they have left) since no request of theirs comes to check them.
//!
//! rmcp calls the store from the request's own task, so what the request carries (its
//! principal; a store failure to answer for) travels in a task-local [`Exchange`], set by the
//! front's session layer around each request.
//!
//! [`rmcp`'s `SessionStore`]: rmcp::transport::streamable_http_server::session::SessionStore

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agent_core::Principal;
use async_trait::async_trait;
use rmcp::model::InitializeRequestParams;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore as RmcpStore, SessionStoreError,
};
use serde::{Deserialize, Serialize};

use super::limit_store::{OnStoreError, StoreError};
use super::parked_records::{Due, ParkedRecords};
use super::session_store::SharedSessions;
use crate::restore::{Records, Restored, Restoring, digest};

/// The largest record kept: a session whose `initialize` is larger stays on its replica.
pub(crate) const MAX_RECORD: usize = 64 * 1024;

/// The longest session id looked up (rmcp's are UUIDs, 36 characters).
const MAX_ID: usize = 128;

/// The format of a record.
const VERSION: u8 = 1;

/// At most this many promoted tools are kept in a record, each name at most [`MAX_NAME`] bytes.
const MAX_PROMOTED: usize = 64;

/// The longest promoted tool's name kept.
const MAX_NAME: usize = 256;

/// At most this many sessions ended here while the store failed are remembered, to be ended
/// there once it answers (the oldest forgotten first).
const MAX_UNENDED: usize = 4096;

tokio::task_local! {
    /// The exchange of the request being answered.
    static EXCHANGE: Arc<Exchange>;
}

/// What the request being answered carries to the store, and what the store reports back.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// Who the request acts for.
    principal: Option<Principal>,
    /// The store's failure while answering it.
    failed: Mutex<Option<StoreError>>,
    /// Whether a session it named had no record in the store.
    missing: AtomicBool,
}

impl Exchange {
    /// The exchange of a request acting for `principal`.
    pub(crate) fn new(principal: Option<Principal>) -> Arc<Self> {
        Arc::new(Self {
            principal,
            failed: Mutex::default(),
            missing: AtomicBool::new(false),
        })
    }

    /// Runs `answering` with this exchange in scope.
    pub(crate) async fn scope<F: Future>(self: Arc<Self>, answering: F) -> F::Output {
        EXCHANGE.scope(self, answering).await
    }

    /// The store's failure while the request was answered.
    pub(crate) fn failure(&self) -> Option<StoreError> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Whether a session the request named had no record in the store.
    pub(crate) fn missing(&self) -> bool {
        self.missing.load(Ordering::Relaxed)
    }

    fn note_missing() {
        let _ = EXCHANGE.try_with(|exchange| exchange.missing.store(true, Ordering::Relaxed));
    }

    fn fail(error: &StoreError) {
        let _ = EXCHANGE.try_with(|exchange| {
            *exchange
                .failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(error.clone());
        });
    }
}

/// A session's record: the principal it is bound to, its client's `initialize` and the tools
/// it promoted.
#[derive(Serialize, Deserialize)]
struct Record {
    v: u8,
    /// The principal, whole (its scopes and kept claims decide which rules apply); a record
    /// of an earlier release holds its subject alone.
    #[serde(deserialize_with = "principal_or_subject")]
    principal: Option<Principal>,
    initialize: InitializeRequestParams,
    #[serde(default)]
    promoted: Vec<String>,
}

/// A record's principal: an object, or (written by an earlier release) its subject alone.
fn principal_or_subject<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Principal>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Subject(String),
        Whole(Principal),
    }
    Ok(
        Option::<Stored>::deserialize(deserializer)?.map(|stored| match stored {
            Stored::Subject(subject) => Principal::new(subject),
            Stored::Whole(principal) => principal,
        }),
    )
}

impl Record {
    /// The record's bytes, or why it is not kept (over [`MAX_RECORD`]).
    fn bytes(&self) -> Result<Vec<u8>, SessionStoreError> {
        let bytes = serde_json::to_vec(self)?;
        if bytes.len() > MAX_RECORD {
            return Err(format!(
                "a session record of {} bytes is over the {MAX_RECORD}-byte bound: the session \
                 stays on this replica",
                bytes.len()
            )
            .into());
        }
        Ok(bytes)
    }
}

/// A session this replica holds.
#[derive(Debug)]
struct Held {
    id: String,
    /// When its record was last found (or written, or read).
    checked: Instant,
    /// Its record as last written or read; `None` when it has none (a store failing at its
    /// start, open, leaves it without one).
    record: Option<Arc<[u8]>>,
    /// When its record expires unless a replica uses the session: the time to live this
    /// replica last gave it.
    expires: Instant,
}

/// What checking a session held against the store found.
#[derive(Debug)]
pub(crate) enum Checked {
    /// Not due, not held, or its record is there (and kept for another time to live), or was
    /// written again after the store lost it.
    Live,
    /// Its record is gone: ended on another replica, or expired.
    Gone,
    /// The store failed.
    Failed(StoreError),
}

/// The session store rmcp is given, over the fleet's store.
#[derive(Debug)]
pub(crate) struct Keeper {
    shared: SharedSessions,
    /// A record's time to live: the idle timeout and one check interval.
    ttl: Duration,
    /// How often a session held is checked against the store, at most.
    every: Duration,
    /// The sessions held, by key.
    held: Mutex<HashMap<String, Held>>,
    /// The records of the sessions parked here, until they would expire: written back like
    /// those held when the store lost them.
    parked: Mutex<ParkedRecords>,
    /// Whether parked sessions' records are kept here: not for a store that cannot lose them.
    keeps_parked: bool,
    /// Sessions ended here (`DELETE`) while the store failed, by key, with when their end
    /// no longer matters (their records would have expired): ended there once it answers.
    unended: Mutex<HashMap<String, Instant>>,
    restoring: Arc<Restoring>,
}

impl Keeper {
    /// The keeper of sessions idle for at most `idle`, in `shared`; restored principals go
    /// to `restoring`.
    pub(crate) fn new(shared: SharedSessions, idle: Duration, restoring: Arc<Restoring>) -> Self {
        let every = (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(30));
        Self {
            shared,
            ttl: idle + every,
            every,
            held: Mutex::default(),
            parked: Mutex::default(),
            keeps_parked: true,
            unended: Mutex::default(),
            restoring,
        }
    }

    /// The keeper of sessions in a store that cannot lose them (one in this process): no copy
    /// of a parked session's record is kept to write back.
    pub(crate) fn keeping_no_parked(mut self) -> Self {
        self.keeps_parked = false;
        self
    }

    /// How long a record lives after its session was last checked.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often a session held is checked against the store, at most.
    pub(crate) fn every(&self) -> Duration {
        self.every
    }

    pub(crate) fn on_error(&self) -> OnStoreError {
        self.shared.on_error()
    }

    pub(crate) fn shared(&self) -> &SharedSessions {
        &self.shared
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn parked(&self) -> MutexGuard<'_, ParkedRecords> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds session `id` (opened or restored here), its record just kept for a time to live.
    fn hold(&self, key: String, id: &str, record: Option<Arc<[u8]>>) {
        let now = Instant::now();
        self.parked().remove(&key);
        self.held().insert(
            key,
            Held {
                id: id.to_owned(),
                checked: now,
                record,
                expires: now + self.ttl,
            },
        );
    }

    /// Checks session `id` against the store when it is held, has a record and was not
    /// checked for an interval. A record gone although the session was not ended (the store
    /// lost it) is written again; a session ended is no longer held.
    pub(crate) async fn check(&self, id: &str) -> Checked {
        let Some(key) = key_of(id) else {
            return Checked::Live;
        };
        let now = Instant::now();
        let record = {
            let mut held = self.held();
            match held.get_mut(&key) {
                Some(Held {
                    checked,
                    record: Some(record),
                    ..
                }) if now - *checked >= self.every => {
                    // Concurrent requests of the session do not check it again meanwhile.
                    *checked = now;
                    record.clone()
                }
                _ => return Checked::Live,
            }
        };
        let store = self.shared.store();
        let found = match store.touch(&key, self.ttl).await {
            Ok(false) => {
                let restored = store.restore(&key, &record, self.ttl).await;
                if matches!(restored, Ok(true)) {
                    tracing::info!(
                        key,
                        "a session's record was missing from the store; written again"
                    );
                }
                restored
            }
            touched => touched,
        };
        match found {
            Ok(true) => {
                if let Some(session) = self.held().get_mut(&key) {
                    session.expires = now + self.ttl;
                }
                Checked::Live
            }
            Ok(false) => {
                self.held().remove(&key);
                // Parked meanwhile: its copy is not written back either.
                self.parked().remove(&key);
                Checked::Gone
            }
            Err(error) => {
                // Checked again at its next request.
                if let Some(session) = self.held().get_mut(&key) {
                    session.checked = now.checked_sub(self.every).unwrap_or(now);
                }
                Checked::Failed(error)
            }
        }
    }

    /// Ends in the store the sessions ended here while it failed (see [`Keeper::delete`]):
    /// `false` when it still fails for any of them (they are tried again next time).
    pub(crate) async fn end_unended(&self) -> bool {
        let now = Instant::now();
        let keys: Vec<String> = {
            let mut unended = self.unended.lock().unwrap_or_else(PoisonError::into_inner);
            unended.retain(|_, until| *until > now);
            unended.keys().cloned().collect()
        };
        let mut all = true;
        for key in keys {
            match self.shared.store().end(&key, self.ttl).await {
                Ok(()) => {
                    self.unended
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&key);
                }
                Err(_) => all = false,
            }
        }
        all
    }

    /// Notes that the session under `key` was ended here but not in the store.
    fn unended(&self, key: String) {
        let mut unended = self.unended.lock().unwrap_or_else(PoisonError::into_inner);
        if unended.len() >= MAX_UNENDED
            && let Some(oldest) = unended
                .iter()
                .min_by_key(|(_, until)| **until)
                .map(|(key, _)| key.clone())
        {
            unended.remove(&oldest);
        }
        unended.insert(key, Instant::now() + self.ttl);
    }

    /// The ids of the sessions held that have a record.
    pub(crate) fn shared_ids(&self) -> Vec<String> {
        self.held()
            .values()
            .filter(|session| session.record.is_some())
            .map(|session| session.id.clone())
            .collect()
    }

    /// The id of the session held or parked under `key`, no longer either (it ended).
    pub(crate) fn forget(&self, key: &str) -> Option<String> {
        let parked = self.parked().remove(key);
        self.held().remove(key).map(|session| session.id).or(parked)
    }

    /// Session `id` is parked: no longer held, its record kept here until it would expire (or
    /// the bound of [`ParkedRecords`] lets it go), to be written back if the store loses it
    /// ([`write_back_parked`](Self::write_back_parked)).
    pub(crate) fn park(&self, id: &str) {
        let Some(key) = key_of(id) else {
            return;
        };
        let Some(held) = self.held().remove(&key) else {
            return;
        };
        if let Some(record) = held.record.filter(|_| self.keeps_parked) {
            self.parked().insert(key, held.id, record, held.expires);
        }
    }

    /// The records of the sessions parked here, with the time each has left at `now`, for
    /// [`write_back_parked`](Self::write_back_parked); those expired are forgotten.
    pub(crate) fn parked_due(&self, now: Instant) -> Vec<Due> {
        self.parked().due(now)
    }

    /// Writes back the `record` of the session parked here under `key` if the store lost it,
    /// for the time `left` it has (a record there is kept, for at least as long); forgets it
    /// when the session was ended meanwhile. `true` when the session goes on.
    pub(crate) async fn write_back_parked(
        &self,
        key: &str,
        record: &[u8],
        left: Duration,
    ) -> Result<bool, StoreError> {
        let goes_on = self.shared.store().restore(key, record, left).await?;
        if !goes_on {
            self.parked().remove(key);
        }
        Ok(goes_on)
    }

    /// Forgets the parked sessions whose records have expired by `now`.
    pub(crate) fn forget_expired_parked(&self, now: Instant) {
        self.parked().forget_expired(now);
    }

    /// The record of the session parked here under `key`, which the store lost, written back
    /// first (or the one another replica wrote meanwhile): `None` when it was not parked here,
    /// has expired, or was ended.
    async fn restore_parked(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some((record, left)) = self.parked().get(key, Instant::now()) else {
            return Ok(None);
        };
        if !self.write_back_parked(key, &record, left).await? {
            return Ok(None);
        }
        let written = self.shared.store().get_touched(key, self.ttl).await?;
        Ok(Some(written.unwrap_or_else(|| record.to_vec())))
    }

    /// Every session held is checked against the store at its next request.
    pub(crate) fn recheck_all(&self) {
        let now = Instant::now();
        let due = now.checked_sub(self.every).unwrap_or(now);
        for session in self.held().values_mut() {
            session.checked = session.checked.min(due);
        }
    }

    /// The ids of the sessions held and not checked for an interval (to see whether this
    /// replica still has them).
    pub(crate) fn stale(&self) -> Vec<String> {
        let now = Instant::now();
        self.held()
            .values()
            .filter(|session| now - session.checked >= self.every)
            .map(|session| session.id.clone())
            .collect()
    }

    /// Session `id` is no longer held nor parked (this replica ended it).
    pub(crate) fn release(&self, id: &str) {
        if let Some(key) = key_of(id) {
            self.held().remove(&key);
            self.parked().remove(&key);
        }
    }

    /// A failure of the store, for the request being answered: an error for rmcp when
    /// closed, `None` (go on without the store) when open.
    fn failed(&self, error: StoreError) -> Option<SessionStoreError> {
        Exchange::fail(&error);
        match self.on_error() {
            OnStoreError::Closed => Some(Box::new(error)),
            OnStoreError::Open => None,
        }
    }
}

/// The store's key of session `id`: its SHA-256 digest in hex; `None` for an id this server
/// could not have made (too long, or other than letters, digits and `-`).
pub(crate) fn key_of(id: &str) -> Option<String> {
    let plausible = !id.is_empty()
        && id.len() <= MAX_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !plausible {
        return None;
    }
    Some(digest(id))
}

#[async_trait]
impl RmcpStore for Keeper {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(key) = key_of(session_id) else {
            return Ok(None);
        };
        // Restoring is using: the record is kept for another time to live as it is read.
        let bytes = match self.shared.store().get_touched(&key, self.ttl).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => match self.restore_parked(&key).await {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    Exchange::note_missing();
                    return Ok(None);
                }
                Err(error) => return self.failed(error).map_or(Ok(None), Err),
            },
            Err(error) => return self.failed(error).map_or(Ok(None), Err),
        };
        let record = match serde_json::from_slice::<Record>(&bytes) {
            Ok(record) if record.v == VERSION => record,
            _ => {
                tracing::warn!(key, "a session record of another format; read as absent");
                return Ok(None);
            }
        };
        let mut promoted = record.promoted;
        promoted.truncate(MAX_PROMOTED);
        self.restoring.put(
            session_id,
            Restored {
                principal: record.principal,
                promoted,
            },
        );
        self.hold(key, session_id, Some(Arc::from(bytes)));
        Ok(Some(SessionState::new(record.initialize)))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let Some(key) = key_of(session_id) else {
            return Err(format!("a session id of {} bytes is not stored", session_id.len()).into());
        };
        let Ok(principal) = EXCHANGE.try_with(|exchange| exchange.principal.clone()) else {
            // Never without the front's layer: a session whose principal is unknown is not
            // shared rather than shared unbound.
            self.hold(key, session_id, None);
            return Err("no request in scope: the session is not shared".into());
        };
        let record = Record {
            v: VERSION,
            principal,
            initialize: state.initialize_params.clone(),
            promoted: Vec::new(),
        };
        let bytes = match record.bytes() {
            Ok(bytes) => bytes,
            Err(e) => {
                self.hold(key, session_id, None);
                return Err(e);
            }
        };
        match self.shared.store().put(&key, &bytes, self.ttl).await {
            Ok(()) => {
                self.hold(key, session_id, Some(Arc::from(bytes)));
                Ok(())
            }
            Err(error) => {
                self.hold(key, session_id, None);
                self.failed(error).map_or(Ok(()), Err)
            }
        }
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let Some(key) = key_of(session_id) else {
            return Ok(());
        };
        self.held().remove(&key);
        self.parked().remove(&key);
        match self.shared.store().end(&key, self.ttl).await {
            Ok(()) => Ok(()),
            Err(error) => {
                // Ended there once the store answers, before any replica writes it back.
                self.unended(key);
                self.failed(error).map_or(Ok(()), Err)
            }
        }
    }
}

#[async_trait]
impl Records for Keeper {
    async fn promoted(
        &self,
        id: &str,
        principal: Option<&Principal>,
        initialize: &InitializeRequestParams,
        promoted: &[String],
    ) {
        let Some(key) = key_of(id) else {
            return;
        };
        if self
            .held()
            .get(&key)
            .is_none_or(|session| session.record.is_none())
        {
            return;
        }
        let record = Record {
            v: VERSION,
            principal: principal.cloned(),
            initialize: initialize.clone(),
            promoted: promoted
                .iter()
                .filter(|name| name.len() <= MAX_NAME)
                .take(MAX_PROMOTED)
                .cloned()
                .collect(),
        };
        let bytes: Arc<[u8]> = match record.bytes() {
            Ok(bytes) => Arc::from(bytes),
            Err(e) => {
                tracing::warn!(key, error = %e, "a session's promoted tools are not shared");
                return;
            }
        };
        if let Some(session) = self.held().get_mut(&key) {
            session.record = Some(bytes.clone());
        }
        let written = self.shared.store().replace(&key, &bytes, self.ttl).await;
        // A record gone meanwhile is not made here: the session's next check tells an ended
        // session (dropped) from a record the store lost (written again, with these tools).
        if let Err(error) = written {
            tracing::warn!(key, %error, "a session's promoted tools could not be shared");
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, Implementation};

    use super::*;
    use crate::http::session_store::{InProcessSessions, SessionStore};

    fn keeper(store: &Arc<InProcessSessions>, idle: Duration) -> Keeper {
        let shared = SharedSessions::new(store.clone(), OnStoreError::Closed);
        Keeper::new(shared, idle, Arc::default())
    }

    fn state() -> SessionState {
        SessionState::new(InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("t", "1"),
        ))
    }

    #[test]
    fn keys_are_digests_of_plausible_ids_only() {
        let id = "0b6c3a3e-5d0f-4c55-9a43-7f2d9c1b8e11";
        let key = key_of(id).unwrap();
        assert_eq!(key.len(), 64);
        assert!(!key.contains(id));
        assert_eq!(key_of(id), Some(key));
        for forged in ["", "a b", "ä", "a/b", &"a".repeat(MAX_ID + 1)] {
            assert_eq!(key_of(forged), None, "{forged:?}");
        }
    }

    #[tokio::test]
    async fn a_record_holds_the_principal_of_the_request_that_opened_the_session() {
        let store = Arc::new(InProcessSessions::default());
        let a = keeper(&store, Duration::from_secs(60));
        Exchange::new(Some(Principal::new("alice")))
            .scope(a.store("s-1", &state()))
            .await
            .unwrap();
        // Another replica reads it back, and the principal waits for the handler.
        let b = keeper(&store, Duration::from_secs(60));
        let loaded = b.load("s-1").await.unwrap().expect("the record");
        assert_eq!(loaded.initialize_params.client_info.name, "t");
        assert_eq!(
            b.restoring.take("s-1"),
            Some(Restored {
                principal: Some(Principal::new("alice")),
                promoted: Vec::new(),
            })
        );
        // Promotions on A reach a replica restoring it later.
        let params = state().initialize_params;
        let alice = Principal::new("alice");
        let promoted = vec!["kit__add".to_owned()];
        a.promoted("s-1", Some(&alice), &params, &promoted).await;
        let c = keeper(&store, Duration::from_secs(60));
        c.load("s-1").await.unwrap().expect("the record");
        assert_eq!(c.restoring.take("s-1").unwrap().promoted, promoted);
        // A session ended meanwhile is not made again.
        store
            .end(&key_of("s-1").unwrap(), Duration::from_secs(60))
            .await
            .unwrap();
        a.promoted("s-1", Some(&alice), &params, &promoted).await;
        assert!(c.load("s-1").await.unwrap().is_none());
        assert!(b.load("s-2").await.unwrap().is_none(), "another id");
        assert!(b.load("s 1").await.unwrap().is_none(), "an implausible id");
        // Without a request in scope nothing is shared.
        assert!(a.store("s-3", &state()).await.is_err());
        assert!(b.load("s-3").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_session_is_checked_once_per_interval_and_found_gone_once_ended() {
        let store = Arc::new(InProcessSessions::default());
        let a = keeper(&store, Duration::from_secs(1));
        Exchange::new(None)
            .scope(a.store("s-1", &state()))
            .await
            .unwrap();
        assert!(matches!(a.check("s-1").await, Checked::Live), "not due");
        a.recheck_all();
        assert!(matches!(a.check("s-1").await, Checked::Live), "touched");
        a.recheck_all();
        let key = key_of("s-1").unwrap();
        store.end(&key, Duration::from_secs(60)).await.unwrap();
        assert!(matches!(a.check("s-1").await, Checked::Gone));
        assert!(a.forget(&key).is_none(), "no longer held");
        assert!(
            matches!(a.check("never-held").await, Checked::Live),
            "rmcp answers it"
        );
    }

    #[tokio::test]
    async fn a_record_the_store_lost_is_written_again_by_its_holder_but_never_an_ended_one() {
        let store = Arc::new(InProcessSessions::default());
        let a = keeper(&store, Duration::from_secs(1));
        let alice = Principal::new("alice");
        for id in ["s-1", "s-2"] {
            Exchange::new(Some(alice.clone()))
                .scope(a.store(id, &state()))
                .await
                .unwrap();
        }
        let promoted = vec!["kit__add".to_owned()];
        a.promoted("s-1", Some(&alice), &state().initialize_params, &promoted)
            .await;
        // The store restarts empty: at its next check, each held session is written again,
        // with the principal and the tools it promoted, for another replica to read.
        store.clear();
        let b = keeper(&store, Duration::from_secs(1));
        assert!(b.load("s-1").await.unwrap().is_none(), "lost");
        a.recheck_all();
        assert!(matches!(a.check("s-1").await, Checked::Live));
        assert!(b.load("s-1").await.unwrap().is_some(), "written again");
        assert_eq!(
            b.restoring.take("s-1"),
            Some(Restored {
                principal: Some(alice.clone()),
                promoted,
            })
        );
        // Ended on B (A missed the notice): A's check finds it ended and does not make it again.
        b.delete("s-1").await.unwrap();
        a.recheck_all();
        assert!(matches!(a.check("s-1").await, Checked::Gone));
        assert!(store.get(&key_of("s-1").unwrap()).await.unwrap().is_none());
        assert!(a.shared_ids() == ["s-2"], "{:?}", a.shared_ids());
    }

    /// A store that tells the times to live it was asked to restore records for, and whose
    /// `touch`, when gated, says it started and waits to be let go.
    struct Restores {
        inner: Arc<InProcessSessions>,
        ttls: Mutex<Vec<(String, Duration)>>,
        gate: Option<(tokio::sync::Notify, tokio::sync::Notify)>,
    }

    impl Restores {
        fn over(inner: &Arc<InProcessSessions>, gated: bool) -> Arc<Self> {
            let gate = gated.then(|| (tokio::sync::Notify::new(), tokio::sync::Notify::new()));
            Arc::new(Self {
                inner: inner.clone(),
                ttls: Mutex::default(),
                gate,
            })
        }
    }

    #[async_trait]
    impl SessionStore for Restores {
        async fn put(&self, key: &str, record: &[u8], ttl: Duration) -> Result<(), StoreError> {
            self.inner.put(key, record, ttl).await
        }
        async fn replace(
            &self,
            key: &str,
            record: &[u8],
            ttl: Duration,
        ) -> Result<bool, StoreError> {
            self.inner.replace(key, record, ttl).await
        }
        async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.get(key).await
        }
        async fn touch(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
            if let Some((started, go)) = &self.gate {
                started.notify_one();
                go.notified().await;
            }
            self.inner.touch(key, ttl).await
        }
        async fn end(&self, key: &str, ttl: Duration) -> Result<(), StoreError> {
            self.inner.end(key, ttl).await
        }
        async fn restore(
            &self,
            key: &str,
            record: &[u8],
            ttl: Duration,
        ) -> Result<bool, StoreError> {
            self.ttls.lock().unwrap().push((key.to_owned(), ttl));
            self.inner.restore(key, record, ttl).await
        }
        fn notices(
            &self,
        ) -> tokio::sync::broadcast::Receiver<super::super::session_store::SessionNotice> {
            self.inner.notices()
        }
    }

    /// Writes back every record `keeper` parked, as at `now`.
    async fn write_back_all(keeper: &Keeper, now: Instant) {
        for (key, record, left) in keeper.parked_due(now) {
            let _ = keeper.write_back_parked(&key, &record, left).await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_parked_record_is_written_back_for_the_time_it_has_left_unless_ended() {
        let store = Arc::new(InProcessSessions::default());
        let restores = Restores::over(&store, false);
        let shared = SharedSessions::new(restores.clone(), OnStoreError::Closed);
        let a = Keeper::new(shared, Duration::from_secs(10), Arc::default());
        let alice = Principal::new("alice");
        for id in ["s-1", "s-2", "s-3", "s-4", "s-6"] {
            Exchange::new(Some(alice.clone()))
                .scope(a.store(id, &state()))
                .await
                .unwrap();
            a.park(id);
        }
        assert!(a.shared_ids().is_empty(), "parked sessions are not held");
        // On B: s-2 restored, s-3 ended (A hears it), s-4 ended (A does not).
        let b = keeper(&store, Duration::from_secs(10));
        assert!(b.load("s-2").await.unwrap().is_some());
        b.delete("s-3").await.unwrap();
        assert_eq!(a.forget(&key_of("s-3").unwrap()).as_deref(), Some("s-3"));
        b.delete("s-4").await.unwrap();
        write_back_all(&a, Instant::now()).await;
        assert_eq!(a.parked().len(), 3, "s-4's end stands: its copy is dropped");
        assert!(b.load("s-4").await.unwrap().is_none(), "not made again");

        // The store restarts empty: A writes s-1 back, bound to its principal, for the time
        // it has left (here as if 4 s later).
        store.clear();
        restores.ttls.lock().unwrap().clear();
        write_back_all(&a, Instant::now() + Duration::from_secs(4)).await;
        let s1 = key_of("s-1").unwrap();
        let ttls = restores.ttls.lock().unwrap().clone();
        let (_, left) = ttls.iter().find(|(key, _)| *key == s1).unwrap();
        assert!(*left <= a.ttl() - Duration::from_secs(4), "{left:?}");
        assert!(b.load("s-1").await.unwrap().is_some(), "written back");
        assert_eq!(b.restoring.take("s-1").unwrap().principal, Some(alice));

        // Lost again, and asked for here before any write-back: served from the copy, which
        // is written back first; the session is held here again, no longer parked.
        store.clear();
        assert!(a.load("s-1").await.unwrap().is_some());
        assert!(store.get(&s1).await.unwrap().is_some());
        assert_eq!(a.shared_ids(), ["s-1"]);
        assert_eq!(a.parked().len(), 2);

        // Ended on B meanwhile (A does not hear), then asked for here: not made again from
        // the copy, which is dropped.
        b.delete("s-6").await.unwrap();
        assert!(a.load("s-6").await.unwrap().is_none());
        assert!(store.get(&key_of("s-6").unwrap()).await.unwrap().is_none());
        assert_eq!(a.parked().len(), 1);

        // Past the time it had left, nothing more is written, and the copy is forgotten.
        store.clear();
        write_back_all(&a, Instant::now() + a.ttl()).await;
        assert!(store.get(&key_of("s-2").unwrap()).await.unwrap().is_none());
        assert_eq!(a.parked().len(), 0);

        // A store that cannot lose records (this process's own): no copy kept.
        let c = keeper(&store, Duration::from_secs(10)).keeping_no_parked();
        Exchange::new(None)
            .scope(c.store("s-5", &state()))
            .await
            .unwrap();
        c.park("s-5");
        assert_eq!(c.parked().len(), 0);
    }

    #[tokio::test]
    async fn a_session_parked_while_its_check_finds_it_ended_keeps_no_copy() {
        let store = Arc::new(InProcessSessions::default());
        let gated = Restores::over(&store, true);
        let shared = SharedSessions::new(gated.clone(), OnStoreError::Closed);
        let a = Arc::new(Keeper::new(shared, Duration::from_secs(10), Arc::default()));
        Exchange::new(None)
            .scope(a.store("s-1", &state()))
            .await
            .unwrap();
        a.recheck_all();
        let (started, go) = gated.gate.as_ref().unwrap();
        let checking = tokio::spawn({
            let a = a.clone();
            async move { a.check("s-1").await }
        });
        // While the check waits on the store: parked here, and ended on another replica.
        started.notified().await;
        a.park("s-1");
        assert_eq!(a.parked().len(), 1);
        keeper(&store, Duration::from_secs(10))
            .delete("s-1")
            .await
            .unwrap();
        go.notify_one();
        assert!(matches!(checking.await.unwrap(), Checked::Gone));
        assert_eq!(a.parked().len(), 0, "no copy of an ended session is kept");
    }
}
