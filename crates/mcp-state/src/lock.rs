//! `Locks`: leases in Redis, each held by one owner until the owner releases it or it expires,
//! so that one replica of a fleet does a thing (say, refresh a token) while the others wait.
//! Taking is `SET NX PX`; releasing is a compare-and-delete script, so an owner whose lease
//! expired and was taken by another never removes the other's.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::StateError;
use crate::state::RedisState;
use crate::store::ttl_millis;

/// Deletes `KEYS[1]` only while it holds `ARGV[1]` (the owner). Returns 1 when it did.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Leases under `<prefix>lock:<name>`: whoever takes one first holds it until it releases it
/// or its time to live runs out (a holder that died blocks no one for longer).
///
/// ```no_run
/// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
/// use std::time::Duration;
///
/// let locks = state.locks();
/// let me = mcp_state::Locks::new_owner();
/// if locks.try_acquire("refresh:alice", &me, Duration::from_secs(30)).await? {
///     // … the one refresh of the fleet …
///     locks.release("refresh:alice", &me).await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Locks {
    state: RedisState,
    release: Arc<Script>,
}

impl RedisState {
    /// The leases on this connection, under this state's prefix.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// assert_eq!(state.locks().key("refresh:a"), "mcp-agent:lock:refresh:a");
    /// # }
    /// ```
    pub fn locks(&self) -> Locks {
        Locks {
            state: self.clone(),
            release: Arc::new(Script::new(RELEASE)),
        }
    }
}

impl Locks {
    /// A fresh owner token: 128 random bits from the system's CSPRNG, as 32 hex digits.
    ///
    /// ```
    /// let owner = mcp_state::Locks::new_owner();
    /// assert_eq!(owner.len(), 32);
    /// assert_ne!(owner, mcp_state::Locks::new_owner());
    /// ```
    pub fn new_owner() -> String {
        let mut bytes = [0u8; 16];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system's random source");
        data_encoding::HEXLOWER.encode(&bytes)
    }

    /// Takes the lease `name` for `owner` for `ttl` (rounded up to whole milliseconds):
    /// `true` when it was free and is now `owner`'s, `false` when someone holds it (`owner`
    /// included: a lease is not re-entrant). [`StateError::BadTtl`] for a TTL Redis cannot take.
    ///
    /// ```no_run
    /// # async fn demo(locks: mcp_state::Locks) -> Result<(), mcp_state::StateError> {
    /// let taken = locks.try_acquire("job", "owner-1", std::time::Duration::from_secs(5)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, StateError> {
        let millis = ttl_millis(ttl)?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(name))
            .arg(owner)
            .arg("NX")
            .arg("PX")
            .arg(millis);
        let set: Option<String> = self.state.query("lock", &cmd).await?;
        Ok(set.is_some())
    }

    /// Releases the lease `name` if `owner` still holds it: `true` when it did, `false` when
    /// it had expired (and maybe been taken by another, whose lease stays).
    ///
    /// ```no_run
    /// # async fn demo(locks: mcp_state::Locks) -> Result<(), mcp_state::StateError> {
    /// let released: bool = locks.release("job", "owner-1").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(&self, name: &str, owner: &str) -> Result<bool, StateError> {
        let mut invocation = self.release.key(self.key(name));
        invocation.arg(owner);
        let removed: i64 = self.state.invoke("unlock", &invocation).await?;
        Ok(removed == 1)
    }

    /// The full Redis key of lease `name`: the state's prefix, `lock:`, then `name`.
    ///
    /// ```no_run
    /// # async fn demo(locks: mcp_state::Locks) {
    /// assert!(locks.key("job").ends_with("lock:job"));
    /// # }
    /// ```
    pub fn key(&self, name: &str) -> String {
        self.state.key(&format!("lock:{name}"))
    }
}
