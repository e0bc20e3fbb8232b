//! Tokens taken ahead: while a client's bucket in the shared store is far from empty, the
//! replica takes that client's next token in the background, so the client's next request on
//! this replica is let through without a round trip to the store.
//!
//! Bounds, so the fleet-wide limit stays what it says:
//! - a token is taken ahead only when the store said the bucket kept more than half its burst
//!   after the last take: near the limit every request waits for its own take, and a token
//!   held here never makes another replica refuse a request the bucket had room for;
//! - one token per key at most, held at most [`HOLD`], then dropped (the bucket refills it in
//!   its time): a held token is a token the store counted, let through at most `HOLD` late;
//! - at most [`MAX_KEYS`] keys: a client beyond them waits for its own take.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::limit::RateLimit;

/// How long a token taken ahead is kept for its client.
pub(crate) const HOLD: Duration = Duration::from_secs(1);

/// The keys tokens are held or being taken for, at most.
pub(crate) const MAX_KEYS: usize = 4096;

/// Whether a bucket with `room` tokens left after a take is far enough from empty for the
/// next token to be taken ahead: more than half of `limit`'s burst.
pub(crate) fn ample(room: Option<u32>, limit: RateLimit) -> bool {
    room.is_some_and(|room| room > limit.burst / 2)
}

/// The tokens held, per key.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    slots: Mutex<HashMap<String, Slot>>,
}

#[derive(Debug)]
enum Slot {
    /// A take is out for the key.
    Taking,
    /// A token taken at this instant; whether the bucket was still ample then.
    Held { at: Instant, ample: bool },
}

/// What [`Ahead::take_held`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// No fresh token for the key: the request takes its own.
    None,
    /// A token, let the request through; `ample`: take the next one ahead.
    Taken { ample: bool },
}

impl Ahead {
    /// Takes the token held for `key`, if one was taken less than [`HOLD`] before `now`.
    pub(crate) fn take_held(&self, key: &str, now: Instant) -> Held {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        match slots.get(key) {
            Some(&Slot::Held { at, ample }) => {
                slots.remove(key);
                if now.saturating_duration_since(at) < HOLD {
                    Held::Taken { ample }
                } else {
                    Held::None
                }
            }
            Some(Slot::Taking) | None => Held::None,
        }
    }

    /// Claims the take ahead for `key`: false when one is out or held already, or when
    /// [`MAX_KEYS`] keys are (after dropping the tokens held past [`HOLD`]).
    pub(crate) fn begin(&self, key: &str, now: Instant) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.contains_key(key) {
            return false;
        }
        if slots.len() >= MAX_KEYS {
            slots.retain(|_, slot| match slot {
                Slot::Taking => true,
                Slot::Held { at, .. } => now.saturating_duration_since(*at) < HOLD,
            });
            if slots.len() >= MAX_KEYS {
                return false;
            }
        }
        slots.insert(key.to_owned(), Slot::Taking);
        true
    }

    /// Ends the take ahead for `key`: `Some(ample)` holds the token taken at `now`; `None`
    /// (refused or failed) holds nothing.
    pub(crate) fn end(&self, key: &str, taken: Option<bool>, now: Instant) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        match taken {
            Some(ample) => {
                slots.insert(key.to_owned(), Slot::Held { at: now, ample });
            }
            None => {
                slots.remove(key);
            }
        }
    }

    /// The keys held or being taken for.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bucket_more_than_half_full_is_taken_ahead_from() {
        let limit = RateLimit::new(1.0, 10);
        assert!(ample(Some(6), limit));
        assert!(!ample(Some(5), limit));
        assert!(!ample(None, limit), "a store that cannot tell");
        assert!(!ample(Some(0), RateLimit::new(1.0, 1)));
    }

    #[test]
    fn a_held_token_is_taken_once_and_only_while_fresh() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        assert_eq!(ahead.take_held("k", t0), Held::None);
        assert!(ahead.begin("k", t0));
        assert!(!ahead.begin("k", t0), "one take ahead per key");
        assert_eq!(ahead.take_held("k", t0), Held::None, "still being taken");
        ahead.end("k", Some(true), t0);
        assert!(!ahead.begin("k", t0), "one token held per key");
        assert_eq!(ahead.take_held("k", t0), Held::Taken { ample: true });
        assert_eq!(ahead.take_held("k", t0), Held::None, "taken once");

        assert!(ahead.begin("k", t0));
        ahead.end("k", Some(false), t0);
        assert_eq!(ahead.take_held("k", t0 + HOLD), Held::None, "held too long");
        assert_eq!(ahead.len(), 0, "the stale token is dropped");

        assert!(ahead.begin("k", t0));
        ahead.end("k", None, t0);
        assert_eq!(ahead.len(), 0, "a refused take holds nothing");
    }

    #[test]
    fn at_most_max_keys_are_held_and_stale_ones_make_room() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        for i in 0..MAX_KEYS {
            assert!(ahead.begin(&format!("k{i}"), t0));
            ahead.end(&format!("k{i}"), Some(true), t0);
        }
        assert!(
            !ahead.begin("one-more", t0 + HOLD / 2),
            "full of fresh tokens"
        );
        assert!(ahead.begin("one-more", t0 + HOLD), "the stale ones dropped");
        assert_eq!(ahead.len(), 1);
    }
}
