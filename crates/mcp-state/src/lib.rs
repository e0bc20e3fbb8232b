//! Shared state for a fleet of `mcp-agent serve` gateways on Redis: the replicas of one
//! deployment keep what must agree across them (tokens, rate-limit counters, sessions) in one
//! server instead of each in its own memory.
//!
//! - [`StateConfig`]: `url` or `url_env`, `key_prefix` (default `mcp-agent:`), `seal_key_env`,
//!   `on_error` (`closed` or `open`), `ca_file`; its `Debug` hides the password.
//! - [`RedisState::connect`]: one checked, self-reconnecting connection (`redis://`, or
//!   `rediss://` over rustls with the ring provider, trusting the web roots or the CAs of
//!   `ca_file`); errors ([`StateError`]) name `host:port`, never the password.
//! - [`SealedStore`]: `get` / `put` (with a TTL) / `delete` of opaque values, sealed with
//!   ChaCha20-Poly1305 under a [`SealKey`] and bound to their Redis key. What does not open
//!   reads as absent; [`get_with_ttl`](SealedStore::get_with_ttl) also tells how long Redis
//!   keeps it, and [`SealKey::blind`] makes names that say nothing without the key.
//! - [`Locks`]: leases with an owner token and an expiry (`SET NX PX`), released only by their
//!   owner (a compare-and-delete script): one replica of the fleet does a thing at a time.
//! - [`RateLimiter`]: token buckets (GCRA) under `<prefix>rl:<key>`, each take one atomic Lua
//!   script, each key expiring once its bucket is full again.
//! - [`RedisState::publish`] / [`RedisState::subscribe`]: short notices between replicas on a
//!   channel under the prefix; a [`Subscription`] has its own RESP3 connection, brought back
//!   by itself, and tells what it may have missed as a [`Notice::Gap`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcp_state::StateError> {
//! use std::time::Duration;
//! use mcp_state::{RedisState, SealKey, StateConfig};
//!
//! let config = StateConfig::from_env("MCP_AGENT_REDIS_URL");
//! let state = RedisState::connect(&config).await?;
//! let sessions = state.sealed_store(SealKey::from_env("MCP_AGENT_SEAL_KEY")?);
//! sessions.put("session:42", b"opaque", Duration::from_secs(600)).await?;
//! assert_eq!(sessions.get("session:42").await?.as_deref(), Some(&b"opaque"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! # Architecture invariant
//!
//! Depends on no other crate of this workspace: the gateway (`mcp-serve`, the CLI) wires it in.
//! Values are opaque bytes here; what they mean belongs to their callers.

mod config;
mod error;
mod lock;
mod notice;
mod rate;
mod seal;
mod state;
mod store;
mod tls;

pub use config::{DEFAULT_PREFIX, OnError, StateConfig};
pub use error::{STATE_ERRORS, StateError};
pub use lock::Locks;
pub use notice::{MAX_NOTICE, Notice, Subscription};
pub use rate::RateLimiter;
pub use seal::SealKey;
pub use state::RedisState;
pub use store::SealedStore;
