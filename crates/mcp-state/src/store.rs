//! `SealedStore`: opaque values with a time to live, sealed before they reach Redis. An entry
//! that does not open (altered, moved from another key, sealed with another key) reads as
//! absent, is counted, and is logged once per read by key and reason, never by content.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::Script;

use crate::error::StateError;
use crate::seal::SealKey;
use crate::state::RedisState;

/// The longest time to live: Redis keeps it in milliseconds as a signed 64-bit number.
const MAX_TTL: Duration = Duration::from_millis(i64::MAX as u64 / 2);

/// [`SealedStore::restore`]: KEYS[1] the entry, KEYS[2] its mark; ARGV[1] the sealed value,
/// ARGV[2] the time to live in milliseconds. 0 when the mark is there; else the entry is
/// written when absent, kept for at least the time to live when present (a longer one is
/// left: `PEXPIRE … GT` is Redis 7's), and 1.
const RESTORE: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and left < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
end
return 1
";

/// Values sealed with one [`SealKey`] under the state's key prefix. Clones share the
/// connection and the count of rejected entries.
///
/// ```no_run
/// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
/// use std::time::Duration;
///
/// let store = state.sealed_store(mcp_state::SealKey::generate());
/// store.put("token:abc", b"claims", Duration::from_secs(300)).await?;
/// assert_eq!(store.get("token:abc").await?.as_deref(), Some(&b"claims"[..]));
/// assert!(store.delete("token:abc").await?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SealedStore {
    state: RedisState,
    key: Arc<SealKey>,
    rejected: Arc<AtomicU64>,
    restore: Arc<Script>,
}

/// `ttl` in whole milliseconds, rounded up, for `PX`; [`StateError::BadTtl`] when Redis cannot
/// take it (zero, or beyond its range).
pub(crate) fn ttl_millis(ttl: Duration) -> Result<u64, StateError> {
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(StateError::BadTtl { ttl, max: MAX_TTL });
    }
    Ok(u64::try_from(ttl.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX))
}

impl RedisState {
    /// A store of values sealed with `key`, under this state's prefix.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
    /// let store = state.sealed_store(mcp_state::SealKey::from_env("MCP_AGENT_SEAL_KEY")?);
    /// assert_eq!(store.get("absent").await?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn sealed_store(&self, key: SealKey) -> SealedStore {
        SealedStore {
            state: self.clone(),
            key: Arc::new(key),
            rejected: Arc::new(AtomicU64::new(0)),
            restore: Arc::new(Script::new(RESTORE)),
        }
    }
}

impl SealedStore {
    /// Stores `value` under `name` for `ttl` (Redis's own expiry, in milliseconds, rounded
    /// up), replacing what was there.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// store.put("rate:alice", b"7", std::time::Duration::from_secs(1)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StateError> {
        let millis = ttl_millis(ttl)?;
        let key = self.state.key(name);
        let sealed = self.key.seal(&key, value);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(sealed).arg("PX").arg(millis);
        self.state.query::<()>("put", &cmd).await
    }

    /// Replaces the value under `name` with `value`, kept for `ttl`, only if there is one
    /// (`SET … XX`): `false` when there is none, and then nothing is stored.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// let ttl = std::time::Duration::from_secs(600);
    /// if !store.replace("session:42", b"newer", ttl).await? {
    ///     println!("ended meanwhile: not made again");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn replace(
        &self,
        name: &str,
        value: &[u8],
        ttl: Duration,
    ) -> Result<bool, StateError> {
        let millis = ttl_millis(ttl)?;
        let key = self.state.key(name);
        let sealed = self.key.seal(&key, value);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(sealed).arg("XX").arg("PX").arg(millis);
        let set: Option<String> = self.state.query("replace", &cmd).await?;
        Ok(set.is_some())
    }

    /// The value under `name`; `None` when there is none, it expired, or it does not open
    /// with this store's key (then it is also counted in [`rejected`](Self::rejected)).
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// if let Some(value) = store.get("session:42").await? {
    ///     println!("{} bytes", value.len());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StateError> {
        let key = self.state.key(name);
        let mut cmd = redis::cmd("GET");
        cmd.arg(&key);
        let Some(sealed) = self.state.query::<Option<Vec<u8>>>("get", &cmd).await? else {
            return Ok(None);
        };
        Ok(self.open(&key, &sealed))
    }

    /// The value under `name`, kept for `ttl` from now, in one transaction (`GET` and
    /// `PEXPIRE`: one round trip); `None` like [`get`](Self::get). The entry's time is set even
    /// when it does not open, as [`touch`](Self::touch) would.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// use std::time::Duration;
    ///
    /// if let Some(value) = store.get_touched("session:42", Duration::from_secs(600)).await? {
    ///     println!("{} bytes, kept for another 10 minutes", value.len());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn get_touched(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<Vec<u8>>, StateError> {
        let millis = ttl_millis(ttl)?;
        let key = self.state.key(name);
        let mut pipe = redis::pipe();
        pipe.atomic().get(&key).cmd("PEXPIRE").arg(&key).arg(millis);
        let (sealed, _): (Option<Vec<u8>>, u64) =
            self.state.query_pipe("get and touch", &pipe).await?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        Ok(self.open(&key, &sealed))
    }

    /// The value under `name` and how long Redis keeps it still (`None` for an entry without
    /// expiry), read together in one transaction; `None` like [`get`](Self::get). The time left
    /// is measured by the Redis server's clock alone, so replicas whose clocks disagree agree on
    /// it.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// if let Some((value, Some(left))) = store.get_with_ttl("token:abc").await? {
    ///     println!("{} bytes, {left:?} left", value.len());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn get_with_ttl(
        &self,
        name: &str,
    ) -> Result<Option<(Vec<u8>, Option<Duration>)>, StateError> {
        let key = self.state.key(name);
        let mut pipe = redis::pipe();
        pipe.atomic().get(&key).pttl(&key);
        let (sealed, ttl_ms): (Option<Vec<u8>>, i64) =
            self.state.query_pipe("get with TTL", &pipe).await?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        // -1: no expiry; -2 cannot come with a value read in the same transaction.
        let ttl = u64::try_from(ttl_ms).ok().map(Duration::from_millis);
        Ok(self.open(&key, &sealed).map(|value| (value, ttl)))
    }

    /// What `sealed`, read from `key`, holds; `None` (counted and logged) when it does not open.
    fn open(&self, key: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        match self.key.open(key, sealed) {
            Ok(value) => Some(value),
            Err(why) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    key = %key,
                    reason = why.as_str(),
                    "a shared-state entry did not open; read as absent"
                );
                None
            }
        }
    }

    /// `name` blinded with this store's key ([`SealKey::blind`]): a name to store under that
    /// says nothing of what it stands for.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// let name = format!("token:{}", store.blind("client:alice"));
    /// store.put(&name, b"claims", std::time::Duration::from_secs(60)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn blind(&self, name: &str) -> String {
        self.key.blind(name)
    }

    /// Keeps the entry under `name` for `ttl` from now (Redis's own expiry, in milliseconds,
    /// rounded up): `false` when there is none (it expired, or was deleted). Whether it still
    /// opens is not checked: [`get`](Self::get) does.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// if !store.touch("session:42", std::time::Duration::from_secs(600)).await? {
    ///     println!("ended or expired");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn touch(&self, name: &str, ttl: Duration) -> Result<bool, StateError> {
        let millis = ttl_millis(ttl)?;
        let mut cmd = redis::cmd("PEXPIRE");
        cmd.arg(self.state.key(name)).arg(millis);
        let set: u64 = self.state.query("touch", &cmd).await?;
        Ok(set == 1)
    }

    /// Removes `name`; `true` when there was an entry.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// let existed: bool = store.delete("session:42").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete(&self, name: &str) -> Result<bool, StateError> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.state.key(name));
        let removed: u64 = self.state.query("delete", &cmd).await?;
        Ok(removed > 0)
    }

    /// Removes `name` and keeps the mark `mark` for `ttl` instead, in one transaction: what
    /// [`restore`](Self::restore) reads as "removed on purpose". `true` when there was an
    /// entry.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// let ttl = std::time::Duration::from_secs(600);
    /// store.retire("session:42", "session-ended:42", ttl).await?;
    /// assert!(!store.restore("session:42", b"record", ttl, "session-ended:42").await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retire(&self, name: &str, mark: &str, ttl: Duration) -> Result<bool, StateError> {
        let millis = ttl_millis(ttl)?;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(self.state.key(name))
            .cmd("SET")
            .arg(self.state.key(mark))
            .arg(b"")
            .arg("PX")
            .arg(millis)
            .ignore();
        let (removed,): (u64,) = self.state.query_pipe("retire", &pipe).await?;
        Ok(removed > 0)
    }

    /// Writes `value` under `name` for `ttl` again, unless the mark `mark` of a
    /// [`retire`](Self::retire) is there: for a holder of the value that found it gone
    /// without its being retired (a Redis restarted empty). An entry written meanwhile by
    /// another holder is kept as it is, for at least `ttl` (one that had longer keeps it).
    /// `false` when the mark is there (nothing is written).
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) -> Result<(), mcp_state::StateError> {
    /// let ttl = std::time::Duration::from_secs(600);
    /// if !store.touch("session:42", ttl).await?
    ///     && !store.restore("session:42", b"record", ttl, "session-ended:42").await?
    /// {
    ///     println!("ended on purpose: not made again");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn restore(
        &self,
        name: &str,
        value: &[u8],
        ttl: Duration,
        mark: &str,
    ) -> Result<bool, StateError> {
        let millis = ttl_millis(ttl)?;
        let key = self.state.key(name);
        let sealed = self.key.seal(&key, value);
        let mut invocation = self.restore.key(&key);
        invocation.key(self.state.key(mark)).arg(sealed).arg(millis);
        let restored: i64 = self.state.invoke("restore", &invocation).await?;
        Ok(restored == 1)
    }

    /// How many entries read as absent because they did not open, since this store (or the
    /// store it was cloned from) was made.
    ///
    /// ```no_run
    /// # async fn demo(store: mcp_state::SealedStore) {
    /// assert_eq!(store.rejected(), 0);
    /// # }
    /// ```
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }
}
