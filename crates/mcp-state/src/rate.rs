//! `RateLimiter`: token buckets in Redis, one per key, shared by every replica. Each take is
//! one Lua script (GCRA: the key holds the bucket's "theoretical arrival time" in ms, by the
//! server's clock), so concurrent takes from any replica never overdraw; the key expires when
//! the bucket would be full again, so idle keys vanish.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use crate::error::StateError;
use crate::state::RedisState;

/// GCRA in one step. `KEYS[1]`: the bucket; `ARGV[1]`: ms between tokens; `ARGV[2]`: burst;
/// `ARGV[3]`: tokens to take at once; `ARGV[4]`: tokens to leave in the bucket, 0 for none.
/// Returns `{1, 0, room, taken}` when they were taken (`room`: the tokens left that could be
/// taken at once; `taken`: `ARGV[3]`, or fewer when only they leave `ARGV[4]`), `{0, ms until
/// they can be, 0, 0}` when not (a take that must leave tokens: `{0, 0, 0, 0}` when it cannot
/// take one).
const GCRA: &str = r"
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + tonumber(now_parts[2]) / 1000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if keep > 0 then
  local spare = math.floor((now - tat) / interval + burst) - keep
  if spare < 1 then return {0, 0, 0, 0} end
  if spare < count then count = spare end
end
local next_tat = tat + count * interval
local allowed_at = next_tat - burst * interval
if now < allowed_at then
  return {0, math.ceil(allowed_at - now), 0, 0}
end
redis.call('SET', KEYS[1], string.format('%.3f', next_tat), 'PX', math.max(1, math.ceil(next_tat - now)))
local room = math.floor((now - next_tat) / interval + burst)
if room < 0 then room = 0 end
return {1, 0, room, count}
";

/// A count of tokens the script returned, as a `u32` (0 when negative, saturated when larger).
fn tokens(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// Token buckets under `<prefix>rl:<key>`, taken from atomically on the server.
///
/// ```no_run
/// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
/// let limiter = state.rate_limiter();
/// // 10 requests a second, in bursts of up to 20, for `sub:alice` fleet-wide.
/// match limiter.take("sub:alice", 10.0, 20).await? {
///     Ok(()) => { /* serve */ }
///     Err(wait) => println!("retry after {wait:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimiter {
    state: RedisState,
    script: Arc<Script>,
}

impl RedisState {
    /// The rate limiter on this connection, under this state's prefix.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// let limiter = state.rate_limiter();
    /// assert_eq!(limiter.key("addr:10.0.0.1"), "mcp-agent:rl:addr:10.0.0.1");
    /// # }
    /// ```
    pub fn rate_limiter(&self) -> RateLimiter {
        RateLimiter {
            state: self.clone(),
            script: Arc::new(Script::new(GCRA)),
        }
    }
}

impl RateLimiter {
    /// Takes a token of `key`'s bucket, refilled with `per_second` tokens a second (at least
    /// 0.001) up to `burst` (at least 1): `Ok(Ok(()))` when it had one, `Ok(Err(wait))` when it
    /// has one after `wait`, `Err` ([`StateError::Command`], [`StateError::AuthFailed`]) when
    /// Redis failed.
    ///
    /// ```no_run
    /// # async fn demo(limiter: mcp_state::RateLimiter) -> Result<(), mcp_state::StateError> {
    /// assert!(limiter.take("addr:10.0.0.1", 0.001, 1).await?.is_ok());
    /// assert!(limiter.take("addr:10.0.0.1", 0.001, 1).await?.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take(
        &self,
        key: &str,
        per_second: f64,
        burst: u32,
    ) -> Result<Result<(), Duration>, StateError> {
        Ok(self
            .take_counted(key, 1, per_second, burst)
            .await?
            .map(|_| ()))
    }

    /// [`take`](Self::take) of `count` tokens at once (at least 1), all or none, telling on
    /// success how many more the bucket held right after (the takes that would succeed at
    /// once): `Ok(Ok(room))`.
    ///
    /// ```no_run
    /// # async fn demo(limiter: mcp_state::RateLimiter) -> Result<(), mcp_state::StateError> {
    /// // A fresh bucket of 20: one taken, 19 left; then 8 at once, 11 left.
    /// assert_eq!(limiter.take_counted("addr:10.0.0.2", 1, 10.0, 20).await?, Ok(19));
    /// assert_eq!(limiter.take_counted("addr:10.0.0.2", 8, 10.0, 20).await?, Ok(11));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_counted(
        &self,
        key: &str,
        count: u32,
        per_second: f64,
        burst: u32,
    ) -> Result<Result<u32, Duration>, StateError> {
        let (taken, wait_ms, room, _) = self.invoke(key, count, 0, per_second, burst).await?;
        Ok(if taken == 1 {
            Ok(tokens(room))
        } else {
            Err(Duration::from_millis(wait_ms.max(1).unsigned_abs()))
        })
    }

    /// Takes up to `count` tokens of `key`'s bucket at once (at least 1), only as many as leave
    /// `keep` in it (a `keep` of 0 counts as 1): `Some((taken, room))` with `taken` at least 1
    /// and the room left right after, `None` when the bucket holds no more than `keep`. For
    /// tokens taken ahead of the requests that will use them: however many replicas take ahead
    /// at once, none takes the bucket below `keep`.
    ///
    /// ```no_run
    /// # async fn demo(limiter: mcp_state::RateLimiter) -> Result<(), mcp_state::StateError> {
    /// // A fresh bucket of 20, half of it kept: 8 taken, 12 left; then only 2 more.
    /// assert_eq!(limiter.take_sparing("addr:10.0.0.3", 8, 10, 10.0, 20).await?, Some((8, 12)));
    /// assert_eq!(limiter.take_sparing("addr:10.0.0.3", 8, 10, 10.0, 20).await?, Some((2, 10)));
    /// assert_eq!(limiter.take_sparing("addr:10.0.0.3", 8, 10, 10.0, 20).await?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_sparing(
        &self,
        key: &str,
        count: u32,
        keep: u32,
        per_second: f64,
        burst: u32,
    ) -> Result<Option<(u32, u32)>, StateError> {
        let (taken, _, room, count) = self
            .invoke(key, count, keep.max(1), per_second, burst)
            .await?;
        Ok((taken == 1).then(|| (tokens(count), tokens(room))))
    }

    /// The script on `key`'s bucket: `(taken, wait_ms, room, count taken)`.
    async fn invoke(
        &self,
        key: &str,
        count: u32,
        keep: u32,
        per_second: f64,
        burst: u32,
    ) -> Result<(i64, i64, i64, i64), StateError> {
        let per_second = if per_second.is_finite() {
            per_second.max(0.001)
        } else {
            0.001
        };
        let interval_ms = 1000.0 / per_second;
        let mut invocation = self.script.key(self.key(key));
        invocation
            .arg(interval_ms)
            .arg(burst.max(1))
            .arg(count.max(1))
            .arg(keep);
        self.state.invoke("rate limit", &invocation).await
    }

    /// The full Redis key of `key`'s bucket: the state's prefix, `rl:`, then `key`.
    ///
    /// ```no_run
    /// # async fn demo(limiter: mcp_state::RateLimiter) {
    /// assert!(limiter.key("sub:alice").ends_with("rl:sub:alice"));
    /// # }
    /// ```
    pub fn key(&self, key: &str) -> String {
        self.state.key(&format!("rl:{key}"))
    }

    /// The server as `host:port`, to name it in errors.
    ///
    /// ```no_run
    /// # async fn demo(limiter: mcp_state::RateLimiter) {
    /// println!("counting at {}", limiter.addr());
    /// # }
    /// ```
    pub fn addr(&self) -> &str {
        self.state.addr()
    }
}
