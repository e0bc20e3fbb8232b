//! What a shared entry holds (a client-credentials token, or a login's tokens), and how long a
//! replica may use it when the replicas' clocks disagree.
//!
//! # Clocks
//!
//! An entry carries its token's absolute expiry by the writer's wall clock (`expires_at_ms`,
//! counted from before the token request was sent, so never late) and the lifetime the
//! authorization server gave (`lifetime_ms`). The store keeps the entry exactly that long (a
//! login's entry `keep_ms` longer: its refresh token outlives the access token), measured by
//! the store's own clock from when it was written: that measure involves no replica's clock.
//!
//! A reader takes the shorter of the two, the expiry by its own clock and the store's time
//! left, so that a token expired by either is never used. One case is told apart: when the
//! expiry by the reader's clock is further away than the whole lifetime the token was issued
//! with, the reader's clock is behind the writer's, its arithmetic is worthless, and only the
//! store's time left counts (logged once). A reader whose clock is ahead sees tokens expire
//! early and renews once; what it then writes is by its own clock, which the others read
//! through the store's time left. So a skewed replica costs at most one extra request per
//! token, and never uses an expired one or renews in a loop.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_config::Secret;
use serde::{Deserialize, Serialize};

use super::login::{LoginRecord, StoredLogin};
use super::share::{SharedEntry, hex};

/// The entry format written (and the only one read).
const VERSION: u32 = 1;

/// How far an expiry may lie beyond the issued lifetime before the reader's clock is taken
/// for skewed (the writer's and the store's milliseconds, rounding).
const TOLERANCE: Duration = Duration::from_secs(2);

/// How many refresh tokens a login entry remembers as spent.
const SPENT_KEPT: usize = 16;

/// A token's validity as its writer saw it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Validity {
    /// Expiry, ms since the Unix epoch, by the writer's clock.
    expires_at_ms: u64,
    /// The lifetime the token was issued with, ms.
    lifetime_ms: u64,
    /// How much longer than the token the store keeps the entry, ms.
    #[serde(default)]
    keep_ms: u64,
}

/// What remains of a shared token for one reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Left {
    /// Time left (zero once expired).
    pub(super) remaining: Duration,
    /// The lifetime it was issued with.
    pub(super) lifetime: Duration,
    /// The reader's clock disagreed with the writer's (only the store's measure was used).
    pub(super) skewed: bool,
}

impl Validity {
    /// A token with `remaining` left at `now` (the writer's clock) of the `lifetime` it was
    /// issued with, its entry kept `keep` beyond it.
    pub(super) fn new(
        now: SystemTime,
        remaining: Duration,
        lifetime: Duration,
        keep: Duration,
    ) -> Self {
        Self {
            expires_at_ms: millis(unix(now).saturating_add(remaining)),
            lifetime_ms: millis(lifetime),
            keep_ms: millis(keep),
        }
    }

    /// How long the store keeps the entry of a token with `remaining` left.
    pub(super) fn store_ttl(&self, remaining: Duration) -> Duration {
        remaining.saturating_add(Duration::from_millis(self.keep_ms))
    }

    /// What is left for a reader at `now` (its clock), the store keeping the entry `ttl` more.
    pub(super) fn left(&self, now: SystemTime, ttl: Option<Duration>) -> Left {
        let lifetime = Duration::from_millis(self.lifetime_ms);
        let by_clock = Duration::from_millis(self.expires_at_ms).saturating_sub(unix(now));
        let by_store = ttl.map(|ttl| ttl.saturating_sub(Duration::from_millis(self.keep_ms)));
        let skewed = by_clock > lifetime.saturating_add(TOLERANCE);
        let remaining = match (skewed, by_store) {
            (true, by_store) => by_store.unwrap_or(Duration::ZERO),
            (false, Some(by_store)) => by_clock.min(by_store),
            (false, None) => by_clock,
        };
        Left {
            remaining: remaining.min(lifetime),
            lifetime,
            skewed,
        }
    }
}

/// A client-credentials token as shared.
#[derive(Serialize, Deserialize)]
pub(super) struct TokenEntry {
    v: u32,
    /// The access token (sent as `Bearer`).
    pub(super) access_token: String,
    #[serde(flatten)]
    pub(super) validity: Validity,
}

impl TokenEntry {
    pub(super) fn new(access_token: String, validity: Validity) -> Self {
        Self {
            v: VERSION,
            access_token,
            validity,
        }
    }

    /// The entry in `entry`, if it is one of this version.
    pub(super) fn decode(entry: &SharedEntry) -> Option<Self> {
        serde_json::from_slice::<Self>(&entry.value)
            .ok()
            .filter(|e| e.v == VERSION)
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an entry serializes")
    }
}

/// A login's tokens as shared, with the refresh tokens the fleet has spent.
#[derive(Serialize, Deserialize)]
pub(super) struct LoginEntry {
    v: u32,
    login: LoginRecord,
    /// Digests of the refresh tokens spent to reach this login, the latest last.
    spent: Vec<String>,
    #[serde(flatten)]
    pub(super) validity: Validity,
}

/// A login read from the store.
pub(super) struct SharedLogin {
    pub(super) login: StoredLogin,
    pub(super) spent: Vec<String>,
    pub(super) left: Left,
}

impl SharedLogin {
    /// True when the fleet spent `refresh` (so a login holding it is behind this one).
    pub(super) fn has_spent(&self, refresh: &Secret) -> bool {
        self.spent.contains(&spent_digest(refresh))
    }
}

impl LoginEntry {
    /// `login`, reached by spending `spent_now` after the `spent` ones, valid as `validity`.
    pub(super) fn new(
        login: &StoredLogin,
        mut spent: Vec<String>,
        spent_now: &Secret,
        validity: Validity,
    ) -> Self {
        let digest = spent_digest(spent_now);
        spent.retain(|d| *d != digest);
        spent.push(digest);
        let over = spent.len().saturating_sub(SPENT_KEPT);
        spent.drain(..over);
        Self {
            v: VERSION,
            login: LoginRecord::from(login),
            spent,
            validity,
        }
    }

    /// The login in `entry` as a reader at `now` sees it, if the entry is one of this version.
    pub(super) fn decode(entry: &SharedEntry, now: SystemTime) -> Option<SharedLogin> {
        let parsed = serde_json::from_slice::<Self>(&entry.value)
            .ok()
            .filter(|e| e.v == VERSION)?;
        Some(SharedLogin {
            login: parsed.login.into(),
            spent: parsed.spent,
            left: parsed.validity.left(now, entry.ttl),
        })
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an entry serializes")
    }
}

/// What a spent refresh token is remembered by: 128 bits of its SHA-256.
fn spent_digest(refresh: &Secret) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, refresh.expose().as_bytes());
    hex(&digest.as_ref()[..16])
}

/// Time since the Unix epoch (zero before it).
fn unix(now: SystemTime) -> Duration {
    now.duration_since(UNIX_EPOCH).unwrap_or_default()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    #[test]
    fn agreeing_clocks_take_the_shorter_of_clock_and_store() {
        let v = Validity::new(at(0), HOUR, HOUR, Duration::ZERO);
        let left = v.left(at(600), Some(HOUR - Duration::from_secs(600)));
        assert_eq!(left.remaining, Duration::from_secs(3000));
        assert!(!left.skewed);
        // The store expires it sooner (say it was written late): the store wins.
        let left = v.left(at(600), Some(Duration::from_secs(100)));
        assert_eq!(left.remaining, Duration::from_secs(100));
        // Expired by the reader's clock: expired, whatever the store says.
        let left = v.left(at(4000), Some(HOUR));
        assert_eq!(left.remaining, Duration::ZERO);
    }

    #[test]
    fn a_reader_behind_the_writer_trusts_the_store_alone() {
        // Written at 10 000 by a clock 2 h ahead of the reader's: by the reader's clock the
        // token has 3 h left of a 1 h lifetime.
        let v = Validity::new(at(10_000 + 7200), HOUR, HOUR, Duration::ZERO);
        let left = v.left(at(10_000), Some(Duration::from_secs(1200)));
        assert!(left.skewed);
        assert_eq!(left.remaining, Duration::from_secs(1200));
        // Gone from the store (or no store expiry): nothing left.
        assert_eq!(v.left(at(10_000), None).remaining, Duration::ZERO);
        // Within the tolerance: not skewed.
        let v = Validity::new(at(1), HOUR, HOUR, Duration::ZERO);
        assert!(!v.left(at(0), Some(HOUR)).skewed);
    }

    #[test]
    fn a_login_entry_is_kept_beyond_its_access_token() {
        let keep = Duration::from_secs(86_400);
        let v = Validity::new(at(0), HOUR, HOUR, keep);
        assert_eq!(v.store_ttl(HOUR), HOUR + keep);
        let left = v.left(at(60), Some(HOUR + keep - Duration::from_secs(60)));
        assert_eq!(left.remaining, HOUR - Duration::from_secs(60));
        // Past its access token, within the keep: kept, expired.
        let left = v.left(at(7200), Some(keep - HOUR));
        assert_eq!(left.remaining, Duration::ZERO);
    }

    #[test]
    fn spent_refresh_tokens_are_remembered_by_digest_and_bounded() {
        let login = StoredLogin::new("s", "u", "i", "c", "t", "r", Secret::new("a"));
        let v = Validity::new(at(0), HOUR, HOUR, Duration::ZERO);
        let mut spent = Vec::new();
        for n in 0..20 {
            let entry = LoginEntry::new(&login, spent, &Secret::new(format!("rt-{n}")), v);
            spent = entry.spent;
        }
        assert_eq!(spent.len(), SPENT_KEPT);
        let entry = LoginEntry::new(&login, spent, &Secret::new("rt-19"), v);
        let bytes = entry.encode();
        assert!(!String::from_utf8_lossy(&bytes).contains("rt-19"));
        let shared = LoginEntry::decode(&SharedEntry::new(bytes, Some(HOUR)), at(0)).unwrap();
        assert!(shared.has_spent(&Secret::new("rt-19")));
        assert!(shared.has_spent(&Secret::new("rt-4")));
        assert!(!shared.has_spent(&Secret::new("rt-3")), "forgotten");
        assert_eq!(shared.login.access_token.expose(), "a");
        assert!(
            LoginEntry::decode(&SharedEntry::new(b"{\"v\":2}".to_vec(), None), at(0)).is_none()
        );
    }
}
