//! Where the fleet-wide rate limit is counted: [`RateLimitStore`], a bucket per key taken from
//! atomically; [`InProcessStore`] keeps them in this process (a fleet of one), other stores
//! (Redis, in `mcp-state`) are wired by the gateway. [`SharedRateLimit`] is a store with what
//! to do when it fails.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::limit::{Buckets, RateLimit};

/// A store of rate-limit buckets, shared by the replicas of a gateway: [`take`](Self::take)
/// takes one token of `key`'s bucket atomically, whichever replica asks.
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::{InProcessStore, RateLimit, RateLimitStore, StoreError};
///
/// # async fn demo() -> Result<(), StoreError> {
/// let store = InProcessStore::default();
/// let limit = RateLimit::new(0.001, 1);
/// assert_eq!(store.take("sub:alice", limit).await?, Ok(()));
/// assert!(store.take("sub:alice", limit).await?.is_err()); // retry after ~1000 s
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait RateLimitStore: Send + Sync + 'static {
    /// Takes a token of `key`'s bucket under `limit`: `Ok(Ok(()))` when it had one,
    /// `Ok(Err(wait))` when it has one again after `wait`, `Err` when the store failed.
    async fn take(&self, key: &str, limit: RateLimit) -> Result<Result<(), Duration>, StoreError>;

    /// [`take`](Self::take) of up to `count` tokens at once, all or none, telling what it
    /// took and, when the store can tell, how many tokens the bucket held right after. A
    /// replica takes tokens ahead ([`take_sparing`](Self::take_sparing)), off the request
    /// path, only while that room is more than half the burst; the default takes one token
    /// and tells no room, so every request waits for its own take.
    async fn take_counted(
        &self,
        key: &str,
        limit: RateLimit,
        _count: u32,
    ) -> Result<Result<Taken, Duration>, StoreError> {
        Ok(self.take(key, limit).await?.map(|()| Taken {
            tokens: 1,
            room: None,
        }))
    }

    /// Takes up to `count` tokens of `key`'s bucket ahead of the requests that will use them,
    /// only as many as leave `keep` in it: `Ok(Some(taken))`, at least one token, or
    /// `Ok(None)` when the bucket holds no more than `keep`. However many replicas take ahead
    /// at once, none takes the bucket below `keep`. The default takes none; a store that tells
    /// its room from [`take_counted`](Self::take_counted) implements this too.
    async fn take_sparing(
        &self,
        _key: &str,
        _limit: RateLimit,
        _count: u32,
        _keep: u32,
    ) -> Result<Option<Taken>, StoreError> {
        Ok(None)
    }
}

/// What [`RateLimitStore::take_counted`] took.
///
/// ```
/// let taken = mcp_serve::Taken { tokens: 8, room: Some(40) };
/// assert_eq!(taken.tokens, 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The tokens taken (at least 1).
    pub tokens: u32,
    /// The tokens the bucket held right after, when the store can tell.
    pub room: Option<u32>,
}

/// A shared store (of rate limits, of sessions) that failed (unreachable, timed out, refused
/// the command).
///
/// ```
/// let e = mcp_serve::StoreError::new("Redis at 10.0.0.5:6379", "connection refused");
/// assert_eq!(e.to_string(), "the shared store Redis at 10.0.0.5:6379 failed: connection refused");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared store {store} failed: {reason}")]
pub struct StoreError {
    /// Which store (its address, never its credentials).
    pub store: String,
    /// Why.
    pub reason: String,
}

impl StoreError {
    /// The failure of `store` for `reason`.
    ///
    /// ```
    /// let e = mcp_serve::StoreError::new("in-process", "poisoned");
    /// assert_eq!(e.store, "in-process");
    /// ```
    pub fn new(store: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            store: store.into(),
            reason: reason.into(),
        }
    }
}

/// The buckets in this process's memory: the store of a gateway running alone.
///
/// ```
/// let store = mcp_serve::InProcessStore::default();
/// # let _ = store;
/// ```
#[derive(Debug, Default)]
pub struct InProcessStore {
    buckets: Mutex<Buckets<String>>,
}

#[async_trait]
impl RateLimitStore for InProcessStore {
    async fn take(&self, key: &str, limit: RateLimit) -> Result<Result<(), Duration>, StoreError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(buckets.take(key.to_owned(), limit, Instant::now()))
    }
}

/// What the front does with a request when the store fails.
///
/// ```
/// assert_eq!(mcp_serve::OnStoreError::default(), mcp_serve::OnStoreError::Closed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnStoreError {
    /// Refuse it, `503 Service Unavailable` (the default): no replica lets more through than
    /// the fleet's budget.
    #[default]
    Closed,
    /// Let it through, uncounted by the store (the per-address limit in memory still counts).
    Open,
}

/// The fleet-wide rate limit: [`HttpOptions::rate_limit`](super::HttpOptions::rate_limit)
/// counted in `store` too, per JWT subject or client address (see
/// [`HttpOptions::shared_rate_limit`](super::HttpOptions::shared_rate_limit)).
///
/// ```
/// use std::sync::Arc;
/// use mcp_serve::{HttpOptions, InProcessStore, OnStoreError, RateLimit, SharedRateLimit};
///
/// let shared = SharedRateLimit::new(Arc::new(InProcessStore::default()), OnStoreError::Open);
/// let options = HttpOptions::default()
///     .with_rate_limit(RateLimit::new(10.0, 20))
///     .with_shared_rate_limit(shared);
/// assert_eq!(options.shared_rate_limit.unwrap().on_error(), OnStoreError::Open);
/// ```
#[derive(Clone)]
pub struct SharedRateLimit {
    store: Arc<dyn RateLimitStore>,
    on_error: OnStoreError,
}

impl SharedRateLimit {
    /// Counts in `store`; when it fails, does `on_error`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_serve::{InProcessStore, OnStoreError, SharedRateLimit};
    ///
    /// let shared = SharedRateLimit::new(Arc::new(InProcessStore::default()), OnStoreError::Closed);
    /// # let _ = shared;
    /// ```
    pub fn new(store: Arc<dyn RateLimitStore>, on_error: OnStoreError) -> Self {
        Self { store, on_error }
    }

    /// What is done when the store fails.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use mcp_serve::{InProcessStore, OnStoreError, SharedRateLimit};
    /// let shared = SharedRateLimit::new(Arc::new(InProcessStore::default()), OnStoreError::Closed);
    /// assert_eq!(shared.on_error(), OnStoreError::Closed);
    /// ```
    pub fn on_error(&self) -> OnStoreError {
        self.on_error
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn RateLimitStore> {
        &self.store
    }
}

impl fmt::Debug for SharedRateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedRateLimit")
            .field("on_error", &self.on_error)
            .finish_non_exhaustive()
    }
}
