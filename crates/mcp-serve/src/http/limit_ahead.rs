//! Tokens taken ahead: while a client's bucket in the shared store is far from empty, the
//! replica takes a few of that client's next tokens at once, in the background, so the
//! client's next requests on this replica are let through without a round trip to the store.
//!
//! Bounds, so the fleet-wide limit stays what it says:
//! - tokens are taken ahead only when the store said the bucket kept more than half its burst
//!   after the last take ([`lease`]), and the store itself takes only as many as leave it half
//!   its burst ([`RateLimitStore::take_sparing`](super::limit_store::RateLimitStore::take_sparing)),
//!   however many replicas take ahead at once: near the limit every request waits for its own
//!   take, and tokens held here, used or not, leave the bucket at least half its burst for the
//!   client's requests on other replicas (those not used count against it for at most
//!   [`HOLD`]);
//! - at most [`MAX_LEASE`] tokens per key, held at most [`HOLD`], then dropped (the bucket
//!   refills them in its time): a held token is a token the store counted, let through at most
//!   `HOLD` late. A client's first take ahead asks for [`FIRST_LEASE`]; each next one, asked
//!   when the last token of the one before is let through, for twice what that one brought
//!   when they lasted less than a quarter of `HOLD`, half when they lasted more than half of
//!   it ([`renewal`]), so a busy client costs a round trip per many requests. Tokens not let
//!   through within `HOLD` are dropped and the client's next take starts at `FIRST_LEASE`
//!   again: at most `MAX_LEASE` a replica go stale when a busy client stops;
//! - at most [`MAX_KEYS`] keys: a client beyond them waits for its own take.
//!
//! A request that finds a take ahead out for its key waits for that take rather than sending
//! one of its own, as long as fewer requests wait for it than it takes tokens: the take is
//! already on its way, so under concurrent requests one round trip to the store serves them
//! (the bucket is counted exactly the same). A request waits at most [`HOLD`]; once the take
//! ended (or the wait did), a request that found no token left takes its own. A take that
//! never reports (its task panicked or was dropped) ends as one that got nothing
//! ([`Taking`]), so no request waits on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::limit::RateLimit;
use super::limit_store::Taken;

/// How long tokens taken ahead are kept for their client.
pub(crate) const HOLD: Duration = Duration::from_secs(1);

/// The tokens a key's first take ahead asks for.
pub(crate) const FIRST_LEASE: u32 = 8;

/// The most tokens taken ahead at once for a key.
pub(crate) const MAX_LEASE: u32 = 64;

/// The keys tokens are held or being taken for, at most.
pub(crate) const MAX_KEYS: usize = 4096;

/// How long a take ahead may take: one the store has not answered by then ends as a take that
/// got nothing (a store without a bound of its own would otherwise keep its key's claim).
pub(crate) const TAKE_BOUND: Duration = Duration::from_secs(10);

/// How many tokens to take ahead from a bucket that had `room` left after a take: `wanted`, at
/// most what leaves it half its burst (rounded down); none when the store did not tell.
pub(crate) fn lease(room: Option<u32>, limit: RateLimit, wanted: u32) -> u32 {
    room.map_or(0, |room| room.saturating_sub(limit.burst / 2).min(wanted))
}

/// The tokens the next take ahead asks for, after one that brought `leased` tokens which were
/// all let through within `lasted`: twice as many when they lasted less than a quarter of
/// [`HOLD`], half when more than half of it, between 1 and [`MAX_LEASE`].
pub(crate) fn renewal(leased: u32, lasted: Duration) -> u32 {
    let wanted = if lasted < HOLD / 4 {
        leased.saturating_mul(2)
    } else if lasted > HOLD / 2 {
        leased / 2
    } else {
        leased
    };
    wanted.clamp(1, MAX_LEASE)
}

/// The tokens held, per key.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    slots: Mutex<HashMap<String, Slot>>,
    /// The id of the next take claimed.
    next: AtomicU64,
}

#[derive(Debug)]
enum Slot {
    /// A take of `count` tokens is out for the key, `waiting` requests wait for it; it ends
    /// when `ended` is dropped (the slot replaced or removed).
    Taking {
        /// Which claim: only its own report ends it.
        id: u64,
        ended: watch::Sender<()>,
        count: u32,
        waiting: u32,
    },
    /// `tokens` left of the `leased` taken at `at`; the bucket's room right after.
    Held {
        at: Instant,
        tokens: u32,
        leased: u32,
        room: Option<u32>,
    },
}

/// What [`Ahead::take_held`] found.
#[derive(Debug)]
pub(crate) enum Held {
    /// No fresh token for the key: the request takes its own.
    None,
    /// A token: let the request through; when it was the last, take `next` more ahead.
    Taken { next: u32 },
    /// A take ahead is out for the key: [`Pending::ended`], then look again.
    Pending(Pending),
}

/// A take ahead under way, as a request waiting for it sees it.
#[derive(Debug)]
pub(crate) struct Pending(watch::Receiver<()>);

impl Pending {
    /// Resolves once the take has ended (its tokens held, or none), or after `within` (the
    /// layer waits [`HOLD`]).
    pub(crate) async fn ended(mut self, within: Duration) {
        // The take's sender never sends: `changed` returns once it is dropped.
        let ended = async { while self.0.changed().await.is_ok() {} };
        let _ = tokio::time::timeout(within, ended).await;
    }
}

/// A take ahead claimed with [`Ahead::begin`], until it reports with [`Taking::end`]; dropped
/// without reporting (its task panicked or was cancelled), it ends as a take that got
/// nothing, so the requests waiting for it go on.
pub(crate) struct Taking<'a> {
    ahead: &'a Ahead,
    key: String,
    /// The claim's id, until it reported.
    id: Option<u64>,
}

impl<'a> Taking<'a> {
    /// The claim `id` on `key`'s take ahead, from [`Ahead::begin`].
    pub(crate) fn new(ahead: &'a Ahead, key: String, id: u64) -> Self {
        Self {
            ahead,
            key,
            id: Some(id),
        }
    }

    /// Reports what the take got: what was taken is held from now; `None` (refused or
    /// failed) holds nothing. The requests waiting for it look again.
    pub(crate) fn end(mut self, taken: Option<Taken>) {
        if let Some(id) = self.id.take() {
            self.ahead.end(&self.key, id, taken, Instant::now());
        }
    }
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.ahead.end(&self.key, id, None, Instant::now());
        }
    }
}

impl Ahead {
    /// Takes a token held for `key`, if they were taken less than [`HOLD`] before `now`; or,
    /// when a take is out for it and the request `may_wait`, has it wait (unless as many wait
    /// as the take brings tokens).
    pub(crate) fn take_held(
        &self,
        key: &str,
        now: Instant,
        limit: RateLimit,
        may_wait: bool,
    ) -> Held {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, tokens, leased, room) = match slots.get_mut(key) {
            Some(Slot::Held {
                at,
                tokens,
                leased,
                room,
            }) => (at, tokens, leased, room),
            Some(Slot::Taking {
                ended,
                count,
                waiting,
                ..
            }) => {
                if !may_wait || *waiting >= *count {
                    return Held::None;
                }
                *waiting += 1;
                return Held::Pending(Pending(ended.subscribe()));
            }
            None => return Held::None,
        };
        if now.saturating_duration_since(*at) >= HOLD {
            slots.remove(key);
            return Held::None;
        }
        *tokens -= 1;
        if *tokens > 0 {
            return Held::Taken { next: 0 };
        }
        let next = lease(
            *room,
            limit,
            renewal(*leased, now.saturating_duration_since(*at)),
        );
        slots.remove(key);
        Held::Taken { next }
    }

    /// Claims the take ahead of `count` tokens for `key`, returning the claim's id (for
    /// [`Taking::new`]): `None` when one is out or tokens are held already, or when
    /// [`MAX_KEYS`] keys are (after dropping the tokens held past [`HOLD`]).
    pub(crate) fn begin(&self, key: &str, count: u32, now: Instant) -> Option<u64> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.contains_key(key) {
            return None;
        }
        if slots.len() >= MAX_KEYS {
            slots.retain(|_, slot| match slot {
                Slot::Taking { .. } => true,
                Slot::Held { at, .. } => now.saturating_duration_since(*at) < HOLD,
            });
            if slots.len() >= MAX_KEYS {
                return None;
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let taking = Slot::Taking {
            id,
            ended: watch::Sender::new(()),
            count,
            waiting: 0,
        };
        slots.insert(key.to_owned(), taking);
        Some(id)
    }

    /// Ends the take ahead `id` for `key` (nothing when the key's slot is not that claim):
    /// what was taken is held from `now`; `None` (refused or failed) holds nothing.
    fn end(&self, key: &str, id: u64, taken: Option<Taken>, now: Instant) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(slots.get(key), Some(Slot::Taking { id: claim, .. }) if *claim == id) {
            return;
        }
        match taken {
            Some(taken) if taken.tokens > 0 => {
                let held = Slot::Held {
                    at: now,
                    tokens: taken.tokens,
                    leased: taken.tokens,
                    room: taken.room,
                };
                slots.insert(key.to_owned(), held);
            }
            _ => {
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

    const LIMIT: RateLimit = RateLimit {
        per_second: 1.0,
        burst: 20,
    };

    fn taken(tokens: u32, room: u32) -> Option<Taken> {
        Some(Taken {
            tokens,
            room: Some(room),
        })
    }

    /// Claims `key`'s take ahead of `count` tokens and reports `taken` for it at `at`.
    fn take(ahead: &Ahead, key: &str, count: u32, taken: Option<Taken>, at: Instant) {
        let id = ahead.begin(key, count, at).expect("a claim");
        ahead.end(key, id, taken, at);
    }

    #[test]
    fn a_lease_keeps_the_bucket_more_than_half_full() {
        assert_eq!(lease(Some(19), LIMIT, 8), 8, "what was wanted");
        assert_eq!(lease(Some(13), LIMIT, 8), 3, "down to half the burst");
        assert_eq!(lease(Some(10), LIMIT, 8), 0);
        assert_eq!(lease(None, LIMIT, 8), 0, "a store that cannot tell");
        assert_eq!(lease(Some(0), RateLimit::new(1.0, 1), 8), 0);
    }

    #[test]
    fn a_lease_used_up_quickly_is_renewed_larger_and_one_used_slowly_smaller() {
        assert_eq!(renewal(8, Duration::ZERO), 16);
        assert_eq!(renewal(8, HOLD / 5), 16);
        assert_eq!(renewal(48, HOLD / 10), MAX_LEASE, "at most MAX_LEASE");
        assert_eq!(
            renewal(8, HOLD / 3),
            8,
            "between a quarter and half of HOLD"
        );
        assert_eq!(renewal(8, HOLD * 3 / 4), 4);
        assert_eq!(renewal(1, HOLD * 3 / 4), 1, "never below one");
        // From the first lease, a busy client reaches the most in three renewals.
        let grown = (0..3).fold(FIRST_LEASE, |leased, _| renewal(leased, Duration::ZERO));
        assert_eq!(grown, MAX_LEASE);
    }

    #[tokio::test]
    async fn held_tokens_are_taken_one_a_request_and_only_while_fresh() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        assert!(matches!(ahead.take_held("k", t0, LIMIT, true), Held::None));
        let id = ahead.begin("k", 4, t0).expect("a claim");
        assert!(ahead.begin("k", 4, t0).is_none(), "one take ahead per key");
        let Held::Pending(pending) = ahead.take_held("k", t0, LIMIT, true) else {
            panic!("still being taken: wait for it");
        };
        assert!(
            matches!(ahead.take_held("k", t0, LIMIT, false), Held::None),
            "one that waited already takes its own"
        );
        Taking::new(&ahead, "k".to_owned(), id).end(taken(2, 15));
        tokio::time::timeout(HOLD / 2, pending.ended(HOLD))
            .await
            .expect("the wait ends with the take");
        assert!(ahead.begin("k", 4, t0).is_none(), "tokens held already");
        assert!(matches!(
            ahead.take_held("k", t0, LIMIT, true),
            Held::Taken { next: 0 }
        ));
        assert!(
            matches!(
                ahead.take_held("k", t0, LIMIT, true),
                Held::Taken { next: 4 }
            ),
            "the last, at once: take twice as many (the bucket keeps half its burst)"
        );
        assert!(
            matches!(ahead.take_held("k", t0, LIMIT, true), Held::None),
            "all taken"
        );

        take(&ahead, "k", 4, taken(3, 15), t0);
        assert!(
            matches!(ahead.take_held("k", t0 + HOLD, LIMIT, true), Held::None),
            "held too long"
        );
        assert_eq!(ahead.len(), 0, "the stale tokens are dropped");

        take(&ahead, "k", 4, None, t0);
        assert_eq!(ahead.len(), 0, "a refused take holds nothing");
    }

    #[test]
    fn the_next_take_ahead_follows_how_fast_the_last_one_was_used() {
        let ahead = Ahead::default();
        let roomy = RateLimit::new(1.0, 200);
        let t0 = Instant::now();
        let last_of = |tokens: u32, at: Instant| {
            take(&ahead, "k", tokens, taken(tokens, 190), t0);
            for _ in 1..tokens {
                ahead.take_held("k", t0, roomy, true);
            }
            match ahead.take_held("k", at, roomy, true) {
                Held::Taken { next } => next,
                other => panic!("a held token, not {other:?}"),
            }
        };
        assert_eq!(last_of(8, t0 + HOLD / 10), 16, "used up quickly");
        assert_eq!(last_of(8, t0 + HOLD / 3), 8);
        assert_eq!(last_of(8, t0 + HOLD * 3 / 4), 4, "used up slowly");
        assert_eq!(last_of(64, t0), MAX_LEASE);
        take(&ahead, "k", 8, taken(8, 14), t0);
        for _ in 1..8 {
            ahead.take_held("k", t0, LIMIT, true);
        }
        assert!(
            matches!(
                ahead.take_held("k", t0, LIMIT, true),
                Held::Taken { next: 4 }
            ),
            "no more than leaves the bucket half its burst"
        );
    }

    #[test]
    fn no_more_requests_wait_for_a_take_than_it_takes_tokens() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        ahead.begin("k", 2, t0).expect("a claim");
        for _ in 0..2 {
            let held = ahead.take_held("k", t0, LIMIT, true);
            assert!(matches!(held, Held::Pending(_)));
        }
        assert!(
            matches!(ahead.take_held("k", t0, LIMIT, true), Held::None),
            "a third takes its own"
        );
    }

    #[tokio::test]
    async fn a_take_dropped_without_reporting_ends_as_one_that_got_nothing() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        let id = ahead.begin("k", 4, t0).expect("a claim");
        let taking = Taking::new(&ahead, "k".to_owned(), id);
        let Held::Pending(pending) = ahead.take_held("k", t0, LIMIT, true) else {
            panic!("a take is out");
        };
        drop(taking);
        // The waiter goes on at once, not after its bound.
        tokio::time::timeout(HOLD / 2, pending.ended(HOLD))
            .await
            .expect("the wait ended with the take");
        assert_eq!(ahead.len(), 0, "the claim is gone");
        assert!(
            ahead.begin("k", 4, t0).is_some(),
            "a new take can be claimed"
        );
    }

    #[test]
    fn a_claim_is_ended_only_by_its_own_report() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        let old = ahead.begin("k", 4, t0).expect("a claim");
        Taking::new(&ahead, "k".to_owned(), old).end(None);
        let new = ahead.begin("k", 4, t0).expect("a new claim");
        // The old claim's report again (a guard dropped late): the new claim stands.
        drop(Taking::new(&ahead, "k".to_owned(), old));
        assert!(ahead.begin("k", 4, t0).is_none(), "the new claim is out");
        Taking::new(&ahead, "k".to_owned(), new).end(taken(2, 15));
        assert!(matches!(
            ahead.take_held("k", t0, LIMIT, true),
            Held::Taken { .. }
        ));
    }

    #[test]
    fn at_most_max_keys_are_held_and_stale_ones_make_room() {
        let ahead = Ahead::default();
        let t0 = Instant::now();
        for i in 0..MAX_KEYS {
            take(&ahead, &format!("k{i}"), 4, taken(1, 19), t0);
        }
        assert!(
            ahead.begin("one-more", 4, t0 + HOLD / 2).is_none(),
            "full of fresh tokens"
        );
        assert!(
            ahead.begin("one-more", 4, t0 + HOLD).is_some(),
            "the stale ones dropped"
        );
        assert_eq!(ahead.len(), 1);
    }
}
