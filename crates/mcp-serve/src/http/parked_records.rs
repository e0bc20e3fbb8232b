//! The records of the sessions this replica parked, kept until they would expire so that the
//! replica can write them back when the shared store loses them (a Redis restarted empty): a
//! parked session has no request in progress to check it, and may have no other holder.
//!
//! Bounded by the records' bytes (the keys, ids and map add about a fifth): past
//! [`MAX_PARKED_BYTES`], the records that expire soonest are let go first (their sessions then
//! live in the store alone, as they did before parking kept them).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most record bytes kept for parked sessions (records are at most 64 KiB, about 1 KiB
/// usually).
pub(crate) const MAX_PARKED_BYTES: usize = 64 * 1024 * 1024;

/// A record due to be written back: the store's key, the record, and the time it has left.
pub(crate) type Due = (String, Arc<[u8]>, Duration);

/// The records of parked sessions, by the store's key.
#[derive(Debug)]
pub(crate) struct ParkedRecords {
    by_key: HashMap<String, Parked>,
    /// The bytes of every record kept.
    bytes: usize,
    /// The most bytes kept.
    max_bytes: usize,
}

/// One parked session.
#[derive(Debug)]
struct Parked {
    id: String,
    /// Its record as last written or read.
    record: Arc<[u8]>,
    /// When its record expires, as far as this replica knows.
    expires: Instant,
}

impl Default for ParkedRecords {
    fn default() -> Self {
        Self::with_max_bytes(MAX_PARKED_BYTES)
    }
}

impl ParkedRecords {
    /// Records kept up to `max_bytes`.
    pub(crate) fn with_max_bytes(max_bytes: usize) -> Self {
        Self {
            by_key: HashMap::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// Keeps the `record` of session `id` under `key` until `expires`. When it does not fit,
    /// the records that expire sooner than it are let go, soonest first, as far as that makes
    /// room; when even all of them would not, nothing is let go and this one is not kept.
    pub(crate) fn insert(&mut self, key: String, id: String, record: Arc<[u8]>, expires: Instant) {
        self.remove(&key);
        let over = (self.bytes + record.len()).saturating_sub(self.max_bytes);
        if over > 0 {
            let mut sooner: Vec<(Instant, &String, usize)> = self
                .by_key
                .iter()
                .filter(|(_, parked)| parked.expires < expires)
                .map(|(key, parked)| (parked.expires, key, parked.record.len()))
                .collect();
            sooner.sort_unstable_by_key(|(at, _, _)| *at);
            let mut freed = 0;
            let mut going = Vec::new();
            for (_, key, len) in sooner {
                if freed >= over {
                    break;
                }
                freed += len;
                going.push(key.clone());
            }
            if freed < over {
                return;
            }
            for key in going {
                self.remove(&key);
            }
        }
        self.bytes += record.len();
        let parked = Parked {
            id,
            record,
            expires,
        };
        self.by_key.insert(key, parked);
    }

    /// The id of the session parked under `key`, no longer kept.
    pub(crate) fn remove(&mut self, key: &str) -> Option<String> {
        let parked = self.by_key.remove(key)?;
        self.bytes -= parked.record.len();
        Some(parked.id)
    }

    /// The record under `key` and the time it has left at `now`, unless it expired.
    pub(crate) fn get(&self, key: &str, now: Instant) -> Option<(Arc<[u8]>, Duration)> {
        let parked = self.by_key.get(key)?;
        let left = parked.expires.checked_duration_since(now)?;
        (!left.is_zero()).then(|| (parked.record.clone(), left))
    }

    /// Forgets the records expired by `now`, and returns the others with the time each has
    /// left.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<Due> {
        self.forget_expired(now);
        self.by_key
            .iter()
            .map(|(key, parked)| (key.clone(), parked.record.clone(), parked.expires - now))
            .collect()
    }

    /// Forgets the records expired by `now`.
    pub(crate) fn forget_expired(&mut self, now: Instant) {
        let mut freed = 0;
        self.by_key.retain(|_, parked| {
            let kept = parked.expires > now;
            if !kept {
                freed += parked.record.len();
            }
            kept
        });
        self.bytes -= freed;
    }

    /// How many records are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The bytes of the records kept.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(len: usize) -> Arc<[u8]> {
        Arc::from(vec![7u8; len])
    }

    #[test]
    fn records_are_kept_until_they_expire_with_the_time_they_have_left() {
        let now = Instant::now();
        let mut parked = ParkedRecords::default();
        parked.insert(
            "k1".into(),
            "s-1".into(),
            record(10),
            now + Duration::from_secs(5),
        );
        parked.insert(
            "k2".into(),
            "s-2".into(),
            record(20),
            now + Duration::from_secs(1),
        );
        assert_eq!(parked.bytes(), 30);
        let (_, left) = parked.get("k1", now + Duration::from_secs(2)).unwrap();
        assert_eq!(left, Duration::from_secs(3));
        assert!(
            parked.get("k2", now + Duration::from_secs(1)).is_none(),
            "expired"
        );
        let due = parked.due(now + Duration::from_secs(2));
        assert_eq!(due.len(), 1);
        assert_eq!(
            (due[0].0.as_str(), due[0].2),
            ("k1", Duration::from_secs(3))
        );
        assert_eq!(
            (parked.len(), parked.bytes()),
            (1, 10),
            "the expired one forgotten"
        );
        assert_eq!(parked.remove("k1").as_deref(), Some("s-1"));
        assert_eq!((parked.len(), parked.bytes()), (0, 0));
    }

    #[test]
    fn past_the_bound_the_records_that_expire_soonest_go_first() {
        let now = Instant::now();
        let at = |secs| now + Duration::from_secs(secs);
        let mut parked = ParkedRecords::with_max_bytes(100);
        parked.insert("soon".into(), "s-1".into(), record(40), at(1));
        parked.insert("late".into(), "s-2".into(), record(40), at(9));
        parked.insert("mid".into(), "s-3".into(), record(40), at(5));
        assert!(parked.get("soon", now).is_none(), "let go for the newcomer");
        assert!(parked.get("late", now).is_some() && parked.get("mid", now).is_some());
        assert_eq!(parked.bytes(), 80);
        // One that expires sooner than every record kept is not kept in their place.
        parked.insert("sooner".into(), "s-4".into(), record(40), at(2));
        assert!(parked.get("sooner", now).is_none());
        assert_eq!((parked.len(), parked.bytes()), (2, 80));
        // Nor one that letting go of all the sooner ones would not make room for: none goes.
        parked.insert("big".into(), "s-5".into(), record(70), at(7));
        assert!(parked.get("big", now).is_none());
        assert!(parked.get("mid", now).is_some(), "not let go for nothing");
        assert_eq!((parked.len(), parked.bytes()), (2, 80));
        // Parked again under the same key: replaced, not counted twice.
        parked.insert("mid".into(), "s-3".into(), record(50), at(6));
        assert_eq!((parked.len(), parked.bytes()), (2, 90));
    }
}
