//! A user's OAuth login: the authorization code grant with PKCE (S256), as the MCP
//! authorization spec asks of clients, and the auth hook that uses its tokens.
//!
//! One room per job:
//!
//! - `flow.rs`: [`Login`] → [`PendingLogin`] (discovery, client, authorization URL) →
//!   [`Callback`] checked (`state`, RFC 9207 `iss`) and exchanged for tokens, stored.
//! - `client.rs`: which client: pre-registered, a client ID metadata document (SEP-991), or
//!   RFC 7591 dynamic registration.
//! - `listener.rs`: [`CallbackListener`], the loopback end of the redirect
//!   (`http://127.0.0.1:<port>/callback`).
//! - `pkce.rs`: [`Pkce`] S256 and the random `state`, from the system's CSPRNG.
//! - `scope.rs`: [`select_scope`] and [`StepUp`].
//! - `store.rs`: the [`TokenStore`] seam, [`StoredLogin`], [`MemoryTokenStore`].
//! - `file_store.rs`: [`FileTokenStore`], files of mode 0600 under the user's state
//!   directory, with a lock file per login in progress.
//! - `provider.rs`: [`LoginTokens`], the hook that gives and refreshes the stored tokens;
//!   `shared_login.rs` the same through a fleet's shared store (one refresh in the fleet).
//! - `on_demand.rs`: [`LoginOnDemand`], the hook that also runs a login (through the
//!   runtime's [`UserAuthorization`]) when the server asks for one, and step-up.

mod client;
mod file_store;
mod flow;
mod listener;
mod on_demand;
mod pkce;
mod provider;
mod record;
mod scope;
mod shared_login;
mod store;

pub use self::file_store::FileTokenStore;
pub use self::flow::{Callback, Login, PendingLogin, loopback_redirect_uri};
pub use self::listener::CallbackListener;
pub(in crate::oauth) use self::on_demand::LoginFactory;
pub use self::on_demand::{LoginOnDemand, UserAuthorization};
pub use self::pkce::Pkce;
pub(in crate::oauth) use self::provider::LoginState;
pub use self::provider::LoginTokens;
pub(crate) use self::record::LoginRecord;
pub use self::scope::{OFFLINE_ACCESS, StepUp, select_scope};
pub use self::store::{LoginKey, LoginLock, MemoryTokenStore, StoredLogin, TokenStore};
