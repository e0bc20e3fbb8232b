//! The seam to a store of tokens shared by a fleet's replicas ([`SharedTokens`]), and the
//! single flight across processes built on it ([`ShareHandle::single_flight`]).
//!
//! Each credential (client credentials) or login has one entry, named by a digest of what
//! identifies it (the client secret included, never in the clear), and one lease of the same
//! name. A replica that finds no usable entry takes the lease (owner token, expiry), reads the
//! entry again (another replica may have finished meanwhile), and only then asks the
//! authorization server; it stores the answer before it releases the lease. The others poll
//! the entry, with a short backoff, until it changes or the lease is free; their wait is
//! bounded, and then the caller decides (client credentials: fetch alone; a login: fail for
//! now, never send a refresh token another replica may be sending).
//!
//! When the store fails the replica goes on alone, logging it once per outage.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::time::Instant;

use super::failure::Failure;
use crate::ShareError;

/// The first pause between two looks at an entry another replica is renewing.
const POLL_FIRST: Duration = Duration::from_millis(5);

/// The longest pause between two looks.
const POLL_MAX: Duration = Duration::from_millis(100);

/// What a lease lives beyond the attempt it guards: the holder's attempt is bounded by its
/// deadline, so the lease never runs out while its holder still works.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// A store of tokens shared by the replicas of a fleet (gateways behind one load balancer,
/// an agent service's instances), so that they hold one token per credential and renew it
/// once: see [`AuthRegistry::use_shared_tokens`](crate::AuthRegistry::use_shared_tokens).
///
/// Values are opaque to the store; they hold tokens, so a store must seal them (an
/// authenticated cipher under a key the replicas share) and read what does not open (another
/// key, altered bytes, moved from another name) as absent. Names are digests, but a store may
/// blind them further (keyed by its seal key, so that replicas with different keys never meet
/// on one name). Leases are named like entries; a store keeps them apart.
///
/// `mcp-state`'s Redis store implements it (the facade's `state::RedisTokens`, feature
/// `redis`).
///
/// ```
/// use std::time::Duration;
/// use async_trait::async_trait;
/// use mcp_auth::{ShareError, SharedEntry, SharedTokens};
///
/// /// Shares nothing: every call fails, so each replica goes on alone.
/// #[derive(Debug)]
/// struct Offline;
///
/// #[async_trait]
/// impl SharedTokens for Offline {
///     async fn get(&self, _: &str) -> Result<Option<SharedEntry>, ShareError> {
///         Err(ShareError::new("offline", "no store"))
///     }
///     async fn put(&self, _: &str, _: &[u8], _: Duration) -> Result<(), ShareError> {
///         Err(ShareError::new("offline", "no store"))
///     }
///     async fn try_lock(&self, _: &str, _: &str, _: Duration) -> Result<bool, ShareError> {
///         Err(ShareError::new("offline", "no store"))
///     }
///     async fn unlock(&self, _: &str, _: &str) -> Result<(), ShareError> {
///         Err(ShareError::new("offline", "no store"))
///     }
/// }
/// ```
#[async_trait]
pub trait SharedTokens: Send + Sync + fmt::Debug {
    /// The entry `name` and how long the store keeps it still; `None` when there is none, it
    /// expired, or it does not open.
    async fn get(&self, name: &str) -> Result<Option<SharedEntry>, ShareError>;

    /// Stores `value` under `name` for `ttl`, replacing what was there.
    async fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), ShareError>;

    /// Takes the lease `name` for `owner` for `ttl`: `true` when it was free and is now
    /// `owner`'s.
    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, ShareError>;

    /// Releases the lease `name` if `owner` still holds it (one that expired and was taken by
    /// another stays the other's).
    async fn unlock(&self, name: &str, owner: &str) -> Result<(), ShareError>;

    /// Whether a login's refresh may go ahead without the store while it fails. `false` (the
    /// default) waits for the store: two replicas refreshing alone could both send the same
    /// refresh token, which a rotating authorization server answers by revoking the login.
    /// Client-credentials tokens are always fetched alone then (they spend nothing).
    fn refresh_alone_on_error(&self) -> bool {
        false
    }

    /// The wall clock this replica writes and reads entries' expiry by: the system's.
    /// (Another only to test what a replica with a skewed clock does.)
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// An entry read from a [`SharedTokens`] store.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedEntry {
    /// What was stored (opened, when the store seals).
    pub value: Vec<u8>,
    /// How long the store keeps it still, by the store's own clock (`None`: no expiry).
    pub ttl: Option<Duration>,
}

impl SharedEntry {
    /// An entry of `value` that the store keeps `ttl` longer.
    pub fn new(value: Vec<u8>, ttl: Option<Duration>) -> Self {
        Self { value, ttl }
    }
}

impl fmt::Debug for SharedEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedEntry")
            .field("bytes", &self.value.len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// The name of the entry of what `parts` identify, for `kind` (`cc`, `login`): the kind and
/// the hex SHA-256 of the parts, each length-prefixed (so no two lists give one text).
pub(super) fn entry_name(kind: &str, parts: &[&[u8]]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part);
    }
    format!("oauth-{kind}:{}", hex(context.finish().as_ref()))
}

/// `bytes` as lower-case hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

/// A store in use by a registry: the store, and whether it is failing now (so that an outage
/// is logged once, and its end once).
pub(crate) struct ShareHandle {
    pub(super) tokens: Arc<dyn SharedTokens>,
    failing: AtomicBool,
    skew_logged: AtomicBool,
}

impl fmt::Debug for ShareHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShareHandle")
            .field("tokens", &self.tokens)
            .field("failing", &self.failing.load(Ordering::Relaxed))
            .finish()
    }
}

/// How a single flight across replicas ended.
pub(super) enum Flight<T> {
    /// A usable entry: another replica's (or this one's, earlier).
    Found(T),
    /// This replica held the lease and acted: the outcome.
    Acted(Result<T, Failure>),
    /// Nothing shared: the store failed (logged once), or another replica held the lease for
    /// longer than the wait. The caller goes on alone, or not.
    Alone(Option<ShareError>),
}

/// What the holder of a lease obtained, and what to store for the others.
pub(super) struct Acted<T> {
    pub(super) value: T,
    /// The entry's new value and how long to keep it; `None` stores nothing.
    pub(super) put: Option<(Vec<u8>, Duration)>,
}

impl ShareHandle {
    pub(super) fn new(tokens: Arc<dyn SharedTokens>) -> Self {
        Self {
            tokens,
            failing: AtomicBool::new(false),
            skew_logged: AtomicBool::new(false),
        }
    }

    /// The store's wall clock.
    pub(super) fn now(&self) -> SystemTime {
        self.tokens.now()
    }

    /// Logs, once per outage, that the store failed.
    pub(super) fn failed(&self, error: &ShareError) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %error,
                "shared OAuth tokens unavailable; this replica goes on alone until the store \
                 answers (client credentials: its own tokens; a login's refresh: as the store says)"
            );
        }
    }

    fn answered(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!("the shared OAuth token store answers again");
        }
    }

    /// Logs, once, that an entry's expiry disagrees with this replica's clock.
    pub(super) fn skewed(&self) {
        if !self.skew_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "a shared OAuth token expires later than its lifetime allows by this replica's \
                 clock: the clocks of the replicas disagree; the store's own expiry is used"
            );
        }
    }

    async fn get(&self, name: &str) -> Result<Option<SharedEntry>, ShareError> {
        let got = self.tokens.get(name).await;
        match &got {
            Ok(_) => self.answered(),
            Err(error) => self.failed(error),
        }
        got
    }

    /// The single flight of the entry `name` across replicas: the entry when `usable` finds
    /// it so; else `act` once in the fleet (in whichever replica takes the lease, after it
    /// looked again), its value stored for the others. Waiting for another replica ends after
    /// `wait`; the lease lives `attempt` (the bound of `act`) and a margin.
    pub(super) async fn single_flight<T, F, Fut>(
        &self,
        name: &str,
        wait: Duration,
        attempt: Duration,
        usable: impl Fn(Option<&SharedEntry>) -> Option<T>,
        act: F,
    ) -> Flight<T>
    where
        F: FnOnce(Option<SharedEntry>) -> Fut,
        Fut: Future<Output = Result<Acted<T>, Failure>>,
    {
        let until = Instant::now() + wait;
        let mut pause = POLL_FIRST;
        loop {
            let entry = match self.get(name).await {
                Ok(entry) => entry,
                Err(error) => return Flight::Alone(Some(error)),
            };
            if let Some(found) = usable(entry.as_ref()) {
                return Flight::Found(found);
            }
            let owner = new_owner();
            match self
                .tokens
                .try_lock(name, &owner, attempt + LEASE_MARGIN)
                .await
            {
                Err(error) => {
                    self.failed(&error);
                    return Flight::Alone(Some(error));
                }
                Ok(true) => {
                    let lease = Lease {
                        tokens: self.tokens.clone(),
                        name: name.to_owned(),
                        owner: Some(owner),
                    };
                    return self.hold(lease, usable, act).await;
                }
                Ok(false) => {}
            }
            // Another replica holds the lease: look again after a pause, until its entry
            // changes, or its lease is free (it failed, or died) and this replica takes it.
            let now = Instant::now();
            if now >= until {
                tracing::debug!(
                    ?wait,
                    "another replica held the lease of a shared OAuth token too long"
                );
                return Flight::Alone(None);
            }
            tokio::time::sleep(pause.min(until - now)).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// With the lease: look again, else act and store what `act` obtained, then release.
    async fn hold<T, F, Fut>(
        &self,
        lease: Lease,
        usable: impl Fn(Option<&SharedEntry>) -> Option<T>,
        act: F,
    ) -> Flight<T>
    where
        F: FnOnce(Option<SharedEntry>) -> Fut,
        Fut: Future<Output = Result<Acted<T>, Failure>>,
    {
        let entry = match self.get(&lease.name).await {
            Ok(entry) => entry,
            Err(error) => {
                lease.release().await;
                return Flight::Alone(Some(error));
            }
        };
        if let Some(found) = usable(entry.as_ref()) {
            lease.release().await;
            return Flight::Found(found);
        }
        let outcome = match act(entry).await {
            Ok(Acted { value, put }) => {
                if let Some((bytes, ttl)) = put
                    && let Err(error) = self.tokens.put(&lease.name, &bytes, ttl).await
                {
                    // The token is good; the others fetch their own.
                    self.failed(&error);
                }
                Ok(value)
            }
            Err(failure) => Err(failure),
        };
        lease.release().await;
        Flight::Acted(outcome)
    }
}

/// A lease held: released by [`release`](Self::release), or, when the attempt holding it is
/// dropped (a timeout, a cancelled request), by a task of its own.
struct Lease {
    tokens: Arc<dyn SharedTokens>,
    name: String,
    /// `None` once released.
    owner: Option<String>,
}

impl Lease {
    async fn release(mut self) {
        if let Some(owner) = self.owner.take() {
            // A failure leaves the lease to expire by itself.
            let _ = self.tokens.unlock(&self.name, &owner).await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(owner) = self.owner.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (tokens, name) = (self.tokens.clone(), std::mem::take(&mut self.name));
            runtime.spawn(async move {
                let _ = tokens.unlock(&name, &owner).await;
            });
        }
    }
}

/// A fresh lease owner: 128 random bits as hex.
fn new_owner() -> String {
    let mut bytes = [0u8; 16];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source");
    hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_digests_of_length_prefixed_parts() {
        let a = entry_name("cc", &[b"ab", b"c"]);
        assert_eq!(a.len(), "oauth-cc:".len() + 64);
        assert!(a.starts_with("oauth-cc:"));
        assert_ne!(a, entry_name("cc", &[b"a", b"bc"]));
        assert_ne!(a, entry_name("login", &[b"ab", b"c"]));
        assert_eq!(a, entry_name("cc", &[b"ab", b"c"]));
        assert!(!entry_name("cc", &[b"secret-123"]).contains("secret"));
    }

    #[test]
    fn owners_are_random() {
        let (a, b) = (new_owner(), new_owner());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
