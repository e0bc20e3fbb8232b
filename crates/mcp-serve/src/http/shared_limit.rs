//! The fleet-wide rate limit's layer, just below authentication: each request takes a token
//! of its key's bucket in the shared store — `sub:<JWT subject>` when authentication named
//! one, else `addr:<client address>`. Out of budget: `429` with `Retry-After`; the store
//! failing: `503` (closed) or through (open), the failure logged at most once per
//! [`LOG_INTERVAL`]. While a bucket is far from empty, a few of the key's next tokens are taken
//! ahead in the background ([`super::limit_ahead`]), so a client's next requests skip the
//! round trip; those that come while such a take is out wait for it rather than sending their
//! own.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_core::Principal;
use http::{Request, StatusCode};

use super::answer::{Answer, ClientAddr, plain, too_many};
use super::check::{Gate, GateLayer};
use super::limit::RateLimit;
use super::limit_ahead::{Ahead, FIRST_LEASE, HOLD, Held, TAKE_BOUND, Taking, lease};
use super::limit_store::{OnStoreError, SharedRateLimit, StoreError};

/// At most one warning about a failing store per this interval.
const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The answer when the store fails and `on_error` is closed.
const UNREACHABLE: &str = "Service Unavailable: the shared rate-limit store is unreachable";

/// The layer of [`SharedLimit`].
pub(crate) type SharedLimitLayer = GateLayer<SharedLimit>;

/// `limit` counted in `shared`'s store.
#[derive(Debug)]
pub(crate) struct SharedLimit {
    shared: SharedRateLimit,
    limit: RateLimit,
    failures: FailureLog,
    ahead: Ahead,
    /// How long a request waits for a take ahead out for its key ([`HOLD`]).
    wait: Duration,
}

impl SharedLimit {
    /// The layer counting `limit` in `shared`'s store.
    pub(crate) fn layer(shared: SharedRateLimit, limit: RateLimit) -> SharedLimitLayer {
        GateLayer::new(Self {
            shared,
            limit,
            failures: FailureLog::new("shared rate limit"),
            ahead: Ahead::default(),
            wait: HOLD,
        })
    }

    /// Takes `count` of `key`'s next tokens in the background, unless tokens are held or
    /// being taken for it.
    fn take_ahead(self: &Arc<Self>, key: String, count: u32) {
        if count == 0 {
            return;
        }
        let Some(id) = self.ahead.begin(&key, count, Instant::now()) else {
            return;
        };
        let this = Arc::clone(self);
        tokio::spawn(async move {
            // Reports even if the take fails to finish (a store that panics or never answers).
            let taking = Taking::new(&this.ahead, key.clone(), id);
            let keep = this.limit.burst / 2;
            let take = this
                .shared
                .store()
                .take_sparing(&key, this.limit, count, keep);
            let taken = match tokio::time::timeout(TAKE_BOUND, take).await {
                Ok(Ok(taken)) => taken,
                // Failed or unanswered: the next request takes its own and hears why.
                Ok(Err(_)) | Err(_) => None,
            };
            taking.end(taken);
        });
    }
}

/// The key of `request`'s bucket: its subject when authenticated, else its address.
fn key<B>(request: &Request<B>) -> String {
    match request.extensions().get::<Principal>() {
        Some(principal) => format!("sub:{}", principal.subject()),
        None => format!("addr:{}", ClientAddr::of(request)),
    }
}

/// What fails (`shared rate limit`), when a failure was last logged, and how many were not
/// since.
#[derive(Debug)]
pub(crate) struct FailureLog(&'static str, Mutex<(Option<Instant>, u64)>);

impl FailureLog {
    /// The log of `what`'s failures.
    pub(crate) fn new(what: &'static str) -> Self {
        Self(what, Mutex::default())
    }

    /// Logs `error` unless one was logged less than [`LOG_INTERVAL`] before `now`.
    pub(crate) fn note(&self, error: &StoreError, on_error: OnStoreError, now: Instant) -> bool {
        let mut last = self.1.lock().unwrap_or_else(PoisonError::into_inner);
        if last
            .0
            .is_some_and(|at| now.duration_since(at) < LOG_INTERVAL)
        {
            last.1 += 1;
            return false;
        }
        let unlogged = std::mem::take(&mut last.1);
        *last = (Some(now), 0);
        let action = match on_error {
            OnStoreError::Closed => "refusing requests (503)",
            OnStoreError::Open => "letting requests through uncounted",
        };
        tracing::warn!(%error, unlogged, "{}: {action}", self.0);
        true
    }
}

impl Gate for SharedLimit {
    async fn pass<B: Send + 'static>(
        self: Arc<Self>,
        request: Request<B>,
    ) -> Result<Request<B>, Answer> {
        let on_error = self.shared.on_error();
        let key = key(&request);
        let mut held = self.ahead.take_held(&key, Instant::now(), self.limit, true);
        if let Held::Pending(pending) = held {
            // A take ahead is on its way: its tokens are likely enough for this one too.
            pending.ended(self.wait).await;
            held = self
                .ahead
                .take_held(&key, Instant::now(), self.limit, false);
        }
        if let Held::Taken { next } = held {
            self.take_ahead(key, next);
            return Ok(request);
        }
        match self.shared.store().take_counted(&key, self.limit, 1).await {
            Ok(Ok(taken)) => {
                self.take_ahead(key, lease(taken.room, self.limit, FIRST_LEASE));
                Ok(request)
            }
            Ok(Err(wait)) => Err(too_many(wait, "Too Many Requests")),
            Err(error) => {
                self.failures.note(&error, on_error, Instant::now());
                match on_error {
                    OnStoreError::Closed => {
                        Err(plain(StatusCode::SERVICE_UNAVAILABLE, UNREACHABLE))
                    }
                    OnStoreError::Open => Ok(request),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::*;
    use crate::http::answer::testing::through;
    use crate::http::limit_store::{InProcessStore, RateLimitStore, Taken};

    fn from(client: &str, subject: Option<&str>) -> Request<()> {
        let mut request = Request::new(());
        request
            .extensions_mut()
            .insert(ClientAddr(client.parse().unwrap()));
        if let Some(subject) = subject {
            request.extensions_mut().insert(Principal::new(subject));
        }
        request
    }

    fn layer(store: impl RateLimitStore, on_error: OnStoreError) -> SharedLimitLayer {
        let shared = SharedRateLimit::new(Arc::new(store), on_error);
        SharedLimit::layer(shared, RateLimit::new(0.001, 2))
    }

    #[tokio::test]
    async fn each_subject_and_each_anonymous_address_has_its_own_budget() {
        let layer = layer(InProcessStore::default(), OnStoreError::Closed);
        for _ in 0..2 {
            let (answer, reached) = through(&layer, from("10.0.0.1", Some("alice"))).await;
            assert_eq!((answer.status.as_u16(), reached), (200, 1));
        }
        let (answer, reached) = through(&layer, from("10.0.0.9", Some("alice"))).await;
        assert_eq!(
            (answer.status.as_u16(), reached),
            (429, 0),
            "the subject's budget, from any address"
        );
        assert!(answer.headers.contains_key("retry-after"));
        let (answer, _) = through(&layer, from("10.0.0.1", Some("bob"))).await;
        assert_eq!(answer.status.as_u16(), 200, "another subject, same address");
        let (answer, _) = through(&layer, from("10.0.0.1", None)).await;
        assert_eq!(answer.status.as_u16(), 200, "the address, unauthenticated");
    }

    struct Down;

    #[async_trait]
    impl RateLimitStore for Down {
        async fn take(&self, _: &str, _: RateLimit) -> Result<Result<(), Duration>, StoreError> {
            Err(StoreError::new("test store", "down"))
        }
    }

    #[tokio::test]
    async fn a_failing_store_refuses_when_closed_and_lets_through_when_open() {
        let (answer, reached) =
            through(&layer(Down, OnStoreError::Closed), from("10.0.0.1", None)).await;
        assert_eq!((answer.status.as_u16(), reached), (503, 0));
        assert_eq!(answer.body, UNREACHABLE);
        let (answer, reached) =
            through(&layer(Down, OnStoreError::Open), from("10.0.0.1", None)).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 1));
    }

    /// What the tests wait at most for something that happens at once.
    const BOUND: Duration = Duration::from_secs(10);

    /// Tells `room` after every take and counts them (`asked`: every take asked for, `takes`:
    /// those answered); once `stalled`, a take waits until `released`.
    #[derive(Default)]
    struct Roomy {
        room: u32,
        asked: std::sync::atomic::AtomicUsize,
        takes: std::sync::atomic::AtomicUsize,
        stalled: std::sync::atomic::AtomicBool,
        released: tokio::sync::watch::Sender<bool>,
        /// What the last take ahead asked to leave in the bucket.
        kept: std::sync::atomic::AtomicU32,
    }

    #[async_trait]
    impl RateLimitStore for Roomy {
        async fn take(
            &self,
            key: &str,
            limit: RateLimit,
        ) -> Result<Result<(), Duration>, StoreError> {
            Ok(self.take_counted(key, limit, 1).await?.map(|_| ()))
        }

        async fn take_counted(
            &self,
            _: &str,
            _: RateLimit,
            count: u32,
        ) -> Result<Result<Taken, Duration>, StoreError> {
            use std::sync::atomic::Ordering;
            self.asked.fetch_add(1, Ordering::SeqCst);
            if self.stalled.load(Ordering::SeqCst) {
                let _ = self.released.subscribe().wait_for(|r| *r).await;
            }
            self.takes.fetch_add(1, Ordering::SeqCst);
            Ok(Ok(Taken {
                tokens: count,
                room: Some(self.room),
            }))
        }

        async fn take_sparing(
            &self,
            key: &str,
            limit: RateLimit,
            count: u32,
            keep: u32,
        ) -> Result<Option<Taken>, StoreError> {
            // The room it tells stays: whatever is asked beyond `keep` can be spared.
            self.kept.store(keep, std::sync::atomic::Ordering::SeqCst);
            let spare = self.room.saturating_sub(keep);
            if spare == 0 {
                return Ok(None);
            }
            Ok(self.take_counted(key, limit, count.min(spare)).await?.ok())
        }
    }

    /// A gate of `burst` tokens (one a second) over a store that tells `room` after each
    /// take, whose requests wait `wait` at most for a take ahead.
    fn gate(room: u32, burst: u32, wait: Duration) -> (Arc<SharedLimit>, Arc<Roomy>) {
        let store = Arc::new(Roomy {
            room,
            ..Roomy::default()
        });
        let shared = SharedRateLimit::new(store.clone(), OnStoreError::Closed);
        let gate = Arc::new(SharedLimit {
            shared,
            limit: RateLimit::new(1.0, burst),
            failures: FailureLog::new("shared rate limit"),
            ahead: Ahead::default(),
            wait,
        });
        (gate, store)
    }

    #[tokio::test]
    async fn a_bucket_far_from_empty_lets_the_next_requests_through_without_a_take() {
        use std::sync::atomic::Ordering;
        // 9 of a burst of 10 left after the first take: 4 are taken ahead, leaving 5.
        let (gate, store) = gate(9, 10, HOLD);
        let passed = gate.clone().pass(from("10.0.0.1", None)).await;
        assert!(passed.is_ok());
        // The take ahead runs in the background; then tokens are held for the address.
        let held = async {
            while store.takes.load(Ordering::SeqCst) < 2 || gate.ahead.len() == 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(BOUND, held)
            .await
            .expect("tokens held");
        assert_eq!(
            store.kept.load(Ordering::SeqCst),
            5,
            "the store is told to leave half the burst, whatever the replicas hold"
        );
        // The store stops answering: the 4 held tokens still let 4 requests through.
        store.stalled.store(true, Ordering::SeqCst);
        for _ in 0..4 {
            let passed = tokio::time::timeout(BOUND, gate.clone().pass(from("10.0.0.1", None)))
                .await
                .expect("through without the store");
            assert!(passed.is_ok());
        }
        assert_eq!(
            store.takes.load(Ordering::SeqCst),
            2,
            "no take on their path"
        );
        // The fifth has none held (it waits for the next take ahead, then its own), nor has
        // another address (it waits for its own): both stalled in the store.
        for client in ["10.0.0.1", "10.0.0.2"] {
            let own = gate.clone().pass(from(client, None));
            assert!(
                tokio::time::timeout(Duration::from_millis(50), own)
                    .await
                    .is_err(),
                "a take stalled"
            );
        }
    }

    #[tokio::test]
    async fn requests_that_come_while_a_take_ahead_is_out_wait_for_it() {
        use std::sync::atomic::Ordering;
        // 19 of a burst of 20 left after the first take: 8 are taken ahead, held back. However
        // slow the machine, the requests wait for that take: the test releases it.
        let (gate, store) = gate(19, 20, BOUND);
        assert!(gate.clone().pass(from("10.0.0.1", None)).await.is_ok());
        // The take ahead is out (its slot claimed), stalled in the store.
        store.stalled.store(true, Ordering::SeqCst);
        let out = async {
            while gate.ahead.len() == 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(BOUND, out)
            .await
            .expect("a take ahead");
        let waiting: Vec<_> = (0..3)
            .map(|_| tokio::spawn(gate.clone().pass(from("10.0.0.1", None))))
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            waiting.iter().all(|w| !w.is_finished()),
            "they wait for the take ahead"
        );
        // The first request's take and the take ahead: none of their own.
        assert_eq!(store.asked.load(Ordering::SeqCst), 2);
        // The take ends with its 8 tokens: all three pass on them.
        store.released.send_replace(true);
        for w in waiting {
            let passed = tokio::time::timeout(BOUND, w).await.expect("through");
            assert!(passed.unwrap().is_ok());
        }
        assert_eq!(
            store.asked.load(Ordering::SeqCst),
            2,
            "still none of their own"
        );
    }

    #[tokio::test]
    async fn near_the_limit_every_request_takes_its_own_token() {
        use std::sync::atomic::Ordering;
        // Half the burst of 10 left: nothing is taken ahead.
        let (gate, store) = gate(5, 10, HOLD);
        for _ in 0..3 {
            assert!(gate.clone().pass(from("10.0.0.1", None)).await.is_ok());
            tokio::task::yield_now().await;
        }
        assert_eq!(store.takes.load(Ordering::SeqCst), 3);
        assert_eq!(gate.ahead.len(), 0);
    }

    #[test]
    fn failures_are_logged_at_most_once_per_interval() {
        let log = FailureLog::new("shared rate limit");
        let error = StoreError::new("test store", "down");
        let t0 = Instant::now();
        assert!(log.note(&error, OnStoreError::Closed, t0));
        assert!(!log.note(&error, OnStoreError::Closed, t0 + Duration::from_secs(1)));
        assert!(!log.note(&error, OnStoreError::Closed, t0 + Duration::from_secs(9)));
        assert!(log.note(&error, OnStoreError::Closed, t0 + LOG_INTERVAL));
    }
}
