//! Idle sessions parked: a session with no request in progress (an open event stream is one)
//! for [`HttpOptions::park_after`](super::HttpOptions::park_after) is closed on this replica,
//! its record kept in the session store (and by the keeper, to write back should the store lose
//! it), so that an idle session costs its record rather than its handler, its tools and rmcp's
//! session. Its next request restores it as a replica that does not hold a session does (the
//! handshake replayed, bound to the stored principal).
//!
//! Each session this replica has seen has a [`Slot`]: a lock every request of the session
//! holds for reading until its answer is sent whole, and when it was last active. Parking
//! takes the lock for writing without waiting, so a session with a request in progress is
//! never parked, and a request that comes while it is being parked waits for the park to end
//! (then rmcp no longer holds the session and restores it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The sessions this replica has seen, and when each was last active.
#[derive(Debug)]
pub(crate) struct Parking {
    after: Duration,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One session's lock and activity.
#[derive(Debug)]
struct Slot {
    lock: Arc<RwLock<()>>,
    last: Mutex<Instant>,
    parked: AtomicBool,
}

impl Slot {
    fn new(now: Instant) -> Arc<Self> {
        Arc::new(Self {
            lock: Arc::new(RwLock::new(())),
            last: Mutex::new(now),
            parked: AtomicBool::new(false),
        })
    }

    fn last(&self) -> Instant {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }
}

/// A request of a session in progress: the session is not parked meanwhile. Dropped when the
/// answer is sent whole, which makes the session active now.
#[derive(Debug)]
pub(crate) struct Active {
    slot: Arc<Slot>,
    _reading: OwnedRwLockReadGuard<()>,
}

impl Drop for Active {
    fn drop(&mut self) {
        self.slot.touch();
    }
}

/// A session being parked: held while it is closed, so that its requests wait.
#[derive(Debug)]
pub(crate) struct Parked {
    pub(crate) id: String,
    slot: Arc<Slot>,
    _writing: OwnedRwLockWriteGuard<()>,
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.slot.parked.store(true, Ordering::Release);
        self.slot.touch();
    }
}

impl Parking {
    /// Sessions idle for `after` are due to be parked.
    pub(crate) fn new(after: Duration) -> Self {
        Self {
            after,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// How long a session stays idle before it is parked.
    pub(crate) fn after(&self) -> Duration {
        self.after
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of session `id` begins: waits while the session is being parked.
    pub(crate) async fn enter(&self, id: &str) -> Active {
        let slot = self
            .slots()
            .entry(id.to_owned())
            .or_insert_with(|| Slot::new(Instant::now()))
            .clone();
        let reading = slot.lock.clone().read_owned().await;
        slot.parked.store(false, Ordering::Release);
        Active {
            slot,
            _reading: reading,
        }
    }

    /// Session `id` was just opened: active now.
    pub(crate) fn opened(&self, id: &str) {
        self.slots()
            .entry(id.to_owned())
            .or_insert_with(|| Slot::new(Instant::now()))
            .touch();
    }

    /// Session `id` ended (deleted, or ended elsewhere): no longer tracked.
    pub(crate) fn forget(&self, id: &str) {
        self.slots().remove(id);
    }

    /// The sessions idle for [`after`](Self::after) with no request in progress, each locked
    /// against its requests until its [`Parked`] is dropped; slots parked and idle for
    /// `expired` (the session's record is gone by then) are forgotten.
    pub(crate) fn due(&self, now: Instant, expired: Duration) -> Vec<Parked> {
        let mut slots = self.slots();
        slots.retain(|_, slot| {
            !(slot.parked.load(Ordering::Acquire)
                && now.saturating_duration_since(slot.last()) >= expired
                && slot.lock.try_write().is_ok())
        });
        slots
            .iter()
            .filter(|(_, slot)| {
                !slot.parked.load(Ordering::Acquire)
                    && now.saturating_duration_since(slot.last()) >= self.after
            })
            .filter_map(|(id, slot)| {
                let writing = slot.lock.clone().try_write_owned().ok()?;
                Some(Parked {
                    id: id.clone(),
                    slot: slot.clone(),
                    _writing: writing,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    const AFTER: Duration = Duration::from_secs(10);
    const EXPIRED: Duration = Duration::from_secs(300);

    fn ids(parked: &[Parked]) -> Vec<&str> {
        parked.iter().map(|p| p.id.as_str()).collect()
    }

    #[tokio::test]
    async fn an_idle_session_is_due_once_and_a_busy_one_never() {
        let parking = Parking::new(AFTER);
        parking.opened("idle");
        let busy = parking.enter("busy").await;
        let later = Instant::now() + AFTER;
        assert_eq!(
            ids(&parking.due(Instant::now(), EXPIRED)),
            Vec::<&str>::new()
        );
        let parked = parking.due(later, EXPIRED);
        assert_eq!(ids(&parked), ["idle"]);
        drop(parked);
        // Parked already: not due again, and the busy session is still in progress.
        assert!(parking.due(later + AFTER, EXPIRED).is_empty());
        drop(busy);
        assert_eq!(ids(&parking.due(Instant::now() + AFTER, EXPIRED)), ["busy"]);
    }

    #[tokio::test]
    async fn a_request_waits_for_the_park_then_makes_the_session_active_again() {
        let parking = Parking::new(AFTER);
        parking.opened("s");
        let mut parked = parking.due(Instant::now() + AFTER, EXPIRED);
        let mut waiting = Box::pin(parking.enter("s"));
        assert!(
            (&mut waiting).now_or_never().is_none(),
            "a request waits while its session is parked"
        );
        parked.clear();
        let active = waiting.await;
        assert!(parking.due(Instant::now() + AFTER, EXPIRED).is_empty());
        drop(active);
        assert_eq!(ids(&parking.due(Instant::now() + AFTER, EXPIRED)), ["s"]);
    }

    #[tokio::test]
    async fn a_parked_slot_is_forgotten_once_its_record_expired() {
        let parking = Parking::new(AFTER);
        parking.opened("s");
        drop(parking.due(Instant::now() + AFTER, EXPIRED));
        assert_eq!(parking.slots().len(), 1);
        assert!(parking.due(Instant::now() + EXPIRED, EXPIRED).is_empty());
        assert!(parking.slots().is_empty());
        parking.opened("t");
        parking.forget("t");
        assert!(parking.slots().is_empty());
    }
}
