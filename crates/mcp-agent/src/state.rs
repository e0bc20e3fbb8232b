//! A fleet's shared state on Redis (feature `redis`): the `mcp-state` crate's connection and
//! seal key, and [`RedisTokens`], the OAuth tokens the replicas of an agent service (or of a
//! gateway) share, so that they hold one token per credential and renew it once.
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcp_agent::state::{RedisState, RedisTokens, SealKey, StateConfig};
//! use mcp_agent::{Config, McpClient};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let state = RedisState::connect(&StateConfig::from_env("REDIS_URL")).await?;
//! let tokens = RedisTokens::new(&state, SealKey::from_env("MCP_AGENT_SEAL_KEY")?);
//! let client = McpClient::builder(Config::from_env()?)
//!     .connectors(mcp_agent::connectors_with_shared_tokens(Arc::new(tokens))?)
//!     .build();
//! # drop(client);
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use async_trait::async_trait;
use mcp_auth::{ShareError, SharedEntry, SharedTokens};
pub use mcp_state::{
    DEFAULT_PREFIX, Locks, OnError, RedisState, SealKey, SealedStore, StateConfig, StateError,
};

/// OAuth tokens shared in Redis by a fleet's replicas, for
/// [`AuthRegistry::use_shared_tokens`](mcp_auth::AuthRegistry::use_shared_tokens) (or
/// [`connectors_with_shared_tokens`](crate::connectors_with_shared_tokens)).
///
/// - Entries are sealed ([`SealedStore`]: ChaCha20-Poly1305 under the [`SealKey`], bound to
///   their Redis key) under `<prefix>oauth:<name>`, where the name is blinded with the seal
///   key ([`SealKey::blind`]). A replica without the key has no store to read; one with
///   another key reads and writes other names, so two groups of replicas with different
///   keys never read, refuse or overwrite each other's entries. An entry that does not open
///   (altered, moved) reads as absent: the replica obtains its own token and writes it over.
/// - Leases are [`Locks`] under `<prefix>lock:oauth:<name>`, with a random owner token and an
///   expiry, released by a compare-and-delete.
/// - When Redis fails a login's refresh waits for it (an error now), unless the state's
///   `on_error` is `open` (then each replica refreshes alone, at the risk of sending a
///   refresh token twice); client credentials are fetched alone either way.
#[derive(Debug, Clone)]
pub struct RedisTokens {
    store: SealedStore,
    locks: Locks,
    addr: String,
    refresh_alone: bool,
}

impl RedisTokens {
    /// Tokens in `state`'s Redis, sealed with `key`.
    pub fn new(state: &RedisState, key: SealKey) -> Self {
        Self {
            store: state.sealed_store(key),
            locks: state.locks(),
            addr: state.addr().to_owned(),
            refresh_alone: state.on_error() == OnError::Open,
        }
    }

    /// How many entries did not open (another key, altered) since this store was made.
    pub fn rejected(&self) -> u64 {
        self.store.rejected()
    }

    /// The Redis key (without the state's prefix) of the entry `name` of mcp-auth.
    fn name(&self, name: &str) -> String {
        format!("oauth:{}", self.store.blind(name))
    }

    fn error(&self, e: StateError) -> ShareError {
        let reason = match e {
            StateError::Command { op, reason, .. } => format!("{op}: {reason}"),
            StateError::AuthFailed { .. } => "the credentials were refused".to_owned(),
            other => other.to_string(),
        };
        ShareError::new(format!("Redis at {}", self.addr), reason)
    }
}

#[async_trait]
impl SharedTokens for RedisTokens {
    async fn get(&self, name: &str) -> Result<Option<SharedEntry>, ShareError> {
        let got = self.store.get_with_ttl(&self.name(name)).await;
        let entry = got.map_err(|e| self.error(e))?;
        Ok(entry.map(|(value, ttl)| SharedEntry::new(value, ttl)))
    }

    async fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), ShareError> {
        let put = self.store.put(&self.name(name), value, ttl).await;
        put.map_err(|e| self.error(e))
    }

    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, ShareError> {
        let taken = self.locks.try_acquire(&self.name(name), owner, ttl).await;
        taken.map_err(|e| self.error(e))
    }

    async fn unlock(&self, name: &str, owner: &str) -> Result<(), ShareError> {
        let released = self.locks.release(&self.name(name), owner).await;
        released.map(drop).map_err(|e| self.error(e))
    }

    fn refresh_alone_on_error(&self) -> bool {
        self.refresh_alone
    }
}
