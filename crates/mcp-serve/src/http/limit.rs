//! Request rate limiting: a token bucket per client address, and the front's layer that takes
//! a token per request.
//!
//! What is counted where, with [`RateLimit`] set:
//!
//! - every request, per client address, in this replica's memory, before anything else
//!   ([`Limiter`], the front's first check): a flood is refused without a round trip anywhere;
//! - with a shared store ([`SharedRateLimit`](super::limit_store::SharedRateLimit)) too: every
//!   request that passed authentication, once more against the fleet-wide budget in the store
//!   ([`SharedLimitLayer`](super::shared_limit::SharedLimitLayer), just below authentication),
//!   keyed by the JWT subject when the request has one, else by the client address. One client
//!   then has the same budget however many replicas it reaches;
//! - requests failing authentication, per client address, in memory (the authentication
//!   layer's own budget).
//!
//! The bucket is this crate's own rather than `governor`'s keyed limiter: the limit on failed
//! authentications must look whether an address has a token left *without* taking one (a
//! request with valid credentials costs nothing, yet an address out of budget is refused before
//! its credentials are checked), and `governor` has no such look
//! (<https://github.com/boinkor-net/governor/issues/15>). One bucket serves both limits.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::Request;

use super::answer::{Answer, ClientAddr, too_many};
use super::check::Check;

/// A token bucket per client address (the TCP peer's IP): `per_second` tokens refill each
/// second, up to `burst`; each HTTP request takes one. A request finding its bucket empty is
/// answered `429 Too Many Requests` with `Retry-After`, and reaches nothing else.
///
/// ```
/// use mcp_serve::{HttpOptions, RateLimit};
///
/// let options = HttpOptions::default().with_rate_limit(RateLimit::new(10.0, 20));
/// assert_eq!(options.rate_limit.unwrap().burst, 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RateLimit {
    /// Tokens refilled per second (sustained requests per second). At least
    /// [`Self::MIN_PER_SECOND`].
    pub per_second: f64,
    /// The bucket's size: requests at once after an idle spell. At least 1.
    pub burst: u32,
}

impl RateLimit {
    /// The slowest refill taken: one request in a thousand seconds.
    pub const MIN_PER_SECOND: f64 = 0.001;

    /// `per_second` requests a second per client (at least [`Self::MIN_PER_SECOND`]), in
    /// bursts of up to `burst` (at least 1).
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self {
            per_second: if per_second.is_finite() {
                per_second.max(Self::MIN_PER_SECOND)
            } else {
                Self::MIN_PER_SECOND
            },
            burst: burst.max(1),
        }
    }
}

/// How many client buckets are kept; beyond, full (idle) buckets are forgotten first.
const MAX_CLIENTS: usize = 4096;

/// How often a full table is swept of its full buckets, at most: a sweep reads every bucket
/// under the lock every request takes.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// One key's tokens, as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(limit: RateLimit, now: Instant) -> Self {
        Self {
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Its tokens at `now`, refilled under `limit` (not capped).
    fn refilled(&self, limit: RateLimit, now: Instant) -> f64 {
        self.tokens + now.saturating_duration_since(self.at).as_secs_f64() * limit.per_second
    }

    /// Its tokens at `now`, at most the burst.
    fn tokens(&self, limit: RateLimit, now: Instant) -> f64 {
        self.refilled(limit, now).min(f64::from(limit.burst))
    }

    /// Whether `tokens` hold one: `Ok` when they do, else how long until they do.
    fn one_of(tokens: f64, limit: RateLimit) -> Result<(), Duration> {
        if tokens >= 1.0 {
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - tokens) / limit.per_second))
        }
    }

    /// Whether it has a token at `now`: `Ok` when it has, else how long until it has.
    fn available(&self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        Self::one_of(self.tokens(limit, now), limit)
    }

    /// Takes a token at `now`: `Ok` when it had one, else how long until it has.
    fn take(&mut self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        let tokens = self.tokens(limit, now);
        let answer = Self::one_of(tokens, limit);
        self.tokens = if answer.is_ok() { tokens - 1.0 } else { tokens };
        self.at = now;
        answer
    }
}

/// The token buckets of one limit, by key, at most [`MAX_CLIENTS`] of them.
///
/// A new key past that bound makes room by forgetting full buckets (idle clients, whose next
/// request would find a full bucket anyway), at most once per [`SWEEP_INTERVAL`]. When that
/// leaves no room, the new key shares one overflow bucket with every other key that found no
/// room, until a sweep makes some: a flood of new keys never makes the table forget a client
/// that spent its budget (it comes back with its bucket as it left it), it spends one budget
/// however many keys it uses, and each new key costs a look-up, not a read of the whole table.
#[derive(Debug)]
pub(crate) struct Buckets<K> {
    map: HashMap<K, Bucket>,
    swept: Option<Instant>,
    /// The budget of the keys that found no room.
    overflow: Option<Bucket>,
}

impl<K> Default for Buckets<K> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            swept: None,
            overflow: None,
        }
    }
}

impl<K: Hash + Eq> Buckets<K> {
    /// Takes a token from `key`'s bucket under `limit` at `now`: `Ok` when it had one, else
    /// how long until it has.
    pub(crate) fn take(&mut self, key: K, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        if self.map.len() >= MAX_CLIENTS && !self.map.contains_key(&key) {
            let due = self
                .swept
                .is_none_or(|at| now.saturating_duration_since(at) >= SWEEP_INTERVAL);
            if due {
                self.swept = Some(now);
                let burst = f64::from(limit.burst);
                self.map.retain(|_, b| b.refilled(limit, now) < burst);
            }
            if self.map.len() >= MAX_CLIENTS {
                return self
                    .overflow
                    .get_or_insert_with(|| Bucket::full(limit, now))
                    .take(limit, now);
            }
        }
        self.map
            .entry(key)
            .or_insert_with(|| Bucket::full(limit, now))
            .take(limit, now)
    }

    /// Whether `key` has a token under `limit` at `now`, without taking it: `Ok` when it has,
    /// else how long until it has.
    fn available(&self, key: &K, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        let bucket = match self.map.get(key) {
            Some(bucket) => bucket,
            // Its next take goes to the overflow bucket, unless a sweep makes room first.
            None if self.map.len() >= MAX_CLIENTS => match &self.overflow {
                Some(overflow) => overflow,
                None => return Ok(()),
            },
            None => return Ok(()),
        };
        bucket.available(limit, now)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// The buckets of one endpoint, by client address.
#[derive(Debug)]
pub(crate) struct Limiter {
    limit: RateLimit,
    buckets: Mutex<Buckets<IpAddr>>,
}

impl Limiter {
    pub(crate) fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: Mutex::new(Buckets::default()),
        }
    }

    /// Takes a token for `client`: `Ok` when it had one, else how long until it has.
    pub(crate) fn take(&self, client: IpAddr) -> Result<(), Duration> {
        self.take_at(client, Instant::now())
    }

    /// Whether `client` has a token, without taking it: `Ok` when it has, else how long
    /// until it has.
    pub(crate) fn available(&self, client: IpAddr) -> Result<(), Duration> {
        self.available_at(client, Instant::now())
    }

    fn available_at(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.available(&client, self.limit, now)
    }

    fn take_at(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.take(client, self.limit, now)
    }
}

/// The per-client request limit, the front's first check: a request whose client has no
/// token left is answered `429 Too Many Requests` with `Retry-After`, and reaches nothing else.
impl<B> Check<B> for Limiter {
    type Kept = ();

    fn check(&self, request: &Request<B>) -> Result<(), Answer> {
        self.take(ClientAddr::of(request))
            .map_err(|wait| too_many(wait, "Too Many Requests"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::testing::through;
    use crate::http::check::CheckLayer;

    /// The `i`-th of many distinct client addresses.
    fn address(i: usize) -> IpAddr {
        IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8])
    }

    fn from(client: &str) -> Request<()> {
        let mut request = Request::new(());
        request
            .extensions_mut()
            .insert(ClientAddr(client.parse().unwrap()));
        request
    }

    #[tokio::test]
    async fn a_client_past_its_burst_is_refused_before_anything_else() {
        let layer = CheckLayer::new(Limiter::new(RateLimit::new(0.01, 2)));
        for _ in 0..2 {
            let (answer, reached) = through(&layer, from("10.0.0.1")).await;
            assert_eq!((answer.status.as_u16(), reached), (200, 1));
        }
        let (answer, reached) = through(&layer, from("10.0.0.1")).await;
        assert_eq!((answer.status.as_u16(), reached), (429, 0));
        assert_eq!(answer.body, "Too Many Requests");
        let retry: u64 = answer.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry >= 1, "{retry}");
        let (answer, reached) = through(&layer, from("10.0.0.2")).await;
        assert_eq!(
            (answer.status.as_u16(), reached),
            (200, 1),
            "another client"
        );
    }

    #[test]
    fn a_flood_of_new_clients_never_refills_one_that_spent_its_budget() {
        // Failed logins: a burst of 10, one a second.
        let limiter = Limiter::new(RateLimit::new(1.0, 10));
        let t0 = Instant::now();
        let guesser: IpAddr = "192.0.2.1".parse().unwrap();
        while limiter.take_at(guesser, t0).is_ok() {}
        // More new addresses than the table holds, each spending a token at once.
        for i in 0..(MAX_CLIENTS + 64) {
            let _ = limiter.take_at(address(i), t0);
        }
        assert!(
            limiter.take_at(guesser, t0).is_err(),
            "the spent bucket was forgotten"
        );
        let kept = limiter.buckets.lock().unwrap().len();
        assert!(kept <= MAX_CLIENTS, "{kept}");
    }

    #[test]
    fn a_full_table_is_swept_of_idle_buckets_at_most_once_a_second() {
        // A token a millisecond: a bucket that spent one is full again 1 ms later.
        let limit = RateLimit::new(1000.0, 10);
        let mut buckets = Buckets::default();
        let t0 = Instant::now();
        for i in 0..MAX_CLIENTS {
            buckets.take(address(i), limit, t0).unwrap();
        }
        // Every bucket is full again: the first new key sweeps them all away.
        let t1 = t0 + Duration::from_millis(10);
        buckets.take(address(MAX_CLIENTS), limit, t1).unwrap();
        assert_eq!(buckets.len(), 1, "the idle buckets were forgotten");
        for i in 0..MAX_CLIENTS - 1 {
            buckets
                .take(address(MAX_CLIENTS + 1 + i), limit, t1)
                .unwrap();
        }
        assert_eq!(buckets.len(), MAX_CLIENTS);
        // Full again, but within a second of the sweep: a new key finds no room.
        let t2 = t1 + Duration::from_millis(500);
        buckets.take(address(3 * MAX_CLIENTS), limit, t2).unwrap();
        assert_eq!(
            buckets.len(),
            MAX_CLIENTS,
            "no second sweep within the interval"
        );
        // A second after the sweep, the next new key sweeps again.
        let t3 = t1 + SWEEP_INTERVAL;
        buckets
            .take(address(3 * MAX_CLIENTS + 1), limit, t3)
            .unwrap();
        assert_eq!(buckets.len(), 1);
    }

    #[test]
    fn keys_finding_no_room_share_one_budget_and_no_spent_bucket_is_forgotten() {
        let limit = RateLimit::new(1.0, 10);
        let mut buckets = Buckets::default();
        let t0 = Instant::now();
        // A table of clients that spent their whole budget.
        for i in 0..MAX_CLIENTS {
            while buckets.take(address(i), limit, t0).is_ok() {}
        }
        // Half a second on (nothing refilled to full), a flood of new addresses: they share
        // one budget of a burst.
        let t1 = t0 + Duration::from_millis(500);
        let let_through = (0..1000)
            .filter(|i| buckets.take(address(MAX_CLIENTS + i), limit, t1).is_ok())
            .count();
        assert_eq!(let_through, 10, "one burst for all the keys without room");
        assert!(
            buckets
                .available(&address(MAX_CLIENTS + 5000), limit, t1)
                .is_err(),
            "a look sees the shared budget too"
        );
        // Not one client that spent its budget came back with a fresh one.
        let refreshed = (0..MAX_CLIENTS)
            .filter(|i| buckets.take(address(*i), limit, t1).is_ok())
            .count();
        assert_eq!(refreshed, 0);
        assert_eq!(buckets.len(), MAX_CLIENTS);
    }

    #[test]
    fn a_burst_then_the_sustained_rate_per_client() {
        let limiter = Limiter::new(RateLimit::new(2.0, 3));
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take_at(a, t0).is_ok());
        }
        let wait = limiter.take_at(a, t0).unwrap_err();
        assert!(wait <= Duration::from_millis(500), "{wait:?}");
        assert!(
            limiter.take_at(b, t0).is_ok(),
            "another client has its own bucket"
        );
        assert!(
            limiter.available_at(a, t0).is_err(),
            "looking takes nothing"
        );
        assert!(
            limiter
                .available_at(a, t0 + Duration::from_millis(500))
                .is_ok()
        );
        assert!(limiter.take_at(a, t0 + Duration::from_millis(500)).is_ok());
        assert!(limiter.take_at(a, t0 + Duration::from_millis(500)).is_err());
        assert!(
            limiter
                .available_at("127.0.0.9".parse().unwrap(), t0)
                .is_ok()
        );
    }
}
