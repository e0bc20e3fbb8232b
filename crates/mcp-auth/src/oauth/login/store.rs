//! Where a login's tokens are kept: the [`TokenStore`] seam, what it stores, and the store
//! kept in memory (for services; the command line uses the file store, `file_store.rs`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mcp_config::Secret;

use super::super::lock;
use crate::StoreError;

/// What identifies a stored login: the authorization server (issuer), the client and the
/// resource the tokens are for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoginKey {
    /// The issuer identifier.
    pub issuer: String,
    /// The client id the tokens were issued to.
    pub client_id: String,
    /// The RFC 8707 resource the tokens are for.
    pub resource: String,
}

/// A login's tokens and what is needed to refresh them. `Debug` shows no token or secret.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredLogin {
    /// The configured server's name (informative: a server renamed keeps its login).
    pub server: String,
    /// The MCP server's URL: stored logins are found by it.
    pub server_url: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// The client id (pre-registered, a metadata document URL, or registered dynamically).
    pub client_id: String,
    /// A secret the authorization server issued at dynamic registration (a pre-registered
    /// client's secret stays in the configuration and is never stored).
    pub client_secret: Option<Secret>,
    /// How the client authenticates at the token endpoint (`none`, `client_secret_basic`,
    /// `client_secret_post`).
    pub token_endpoint_auth_method: String,
    /// The token endpoint.
    pub token_endpoint: String,
    /// The RFC 8707 resource.
    pub resource: String,
    /// The scope granted (or asked for, when the answer did not say).
    pub scope: Option<String>,
    /// The access token.
    pub access_token: Secret,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<Secret>,
    /// When the access token expires (seconds since the Unix epoch), if known.
    pub expires_at: Option<u64>,
    /// When the tokens were obtained (seconds since the Unix epoch).
    pub obtained_at: u64,
    /// The DPoP key (PKCS#8, base64url) the tokens are bound to, for a DPoP-bound login
    /// (`dpop` set and the authorization server binding them); `None`: bearer tokens.
    pub dpop_key: Option<Secret>,
}

impl StoredLogin {
    /// A login of a public client (`none`) obtained now, without refresh token, scope or
    /// expiry: set those fields as needed (a custom store rebuilding what it keeps).
    pub fn new(
        server: impl Into<String>,
        server_url: impl Into<String>,
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        token_endpoint: impl Into<String>,
        resource: impl Into<String>,
        access_token: Secret,
    ) -> Self {
        Self {
            server: server.into(),
            server_url: server_url.into(),
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: None,
            token_endpoint_auth_method: "none".to_owned(),
            token_endpoint: token_endpoint.into(),
            resource: resource.into(),
            scope: None,
            access_token,
            refresh_token: None,
            expires_at: None,
            obtained_at: unix_now(),
            dpop_key: None,
        }
    }

    /// Its key.
    pub fn key(&self) -> LoginKey {
        LoginKey {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            resource: self.resource.clone(),
        }
    }

    /// How long the access token has left (zero once expired), if its expiry is known.
    pub fn remaining(&self, now: SystemTime) -> Option<Duration> {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        self.expires_at
            .map(|at| Duration::from_secs(at.saturating_sub(now)))
    }
}

impl fmt::Debug for StoredLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredLogin")
            .field("server", &self.server)
            .field("server_url", &self.server_url)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("resource", &self.resource)
            .field("scope", &self.scope)
            .field("refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Held while a login for one server runs; dropping it lets the next one start.
#[must_use = "the lock is released when dropped"]
pub struct LoginLock {
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl LoginLock {
    /// A lock that runs `release` when dropped (for a custom store).
    pub fn new(release: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            release: Some(Box::new(release)),
        }
    }
}

impl Drop for LoginLock {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl fmt::Debug for LoginLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginLock").finish_non_exhaustive()
    }
}

/// Where logins are kept, keyed by [`LoginKey`] (issuer, client, resource) and found by the
/// MCP server's URL.
///
/// [`MemoryTokenStore`] keeps them for the life of the process (services);
/// [`FileTokenStore`](crate::FileTokenStore) in one file per login under the user's state
/// directory (the command line). Implementations never log or show a token.
#[async_trait]
pub trait TokenStore: Send + Sync + fmt::Debug {
    /// The login stored under `key`.
    async fn load(&self, key: &LoginKey) -> Result<Option<StoredLogin>, StoreError>;

    /// Stores `login` under its key, replacing what was there.
    async fn save(&self, login: &StoredLogin) -> Result<(), StoreError>;

    /// Forgets the login under `key`; true when there was one.
    async fn remove(&self, key: &LoginKey) -> Result<bool, StoreError>;

    /// Every stored login.
    async fn list(&self) -> Result<Vec<StoredLogin>, StoreError>;

    /// Takes the lock of a login to the server at `server_url`: a second caller gets
    /// [`StoreError::LoginInProgress`] until the returned guard is dropped.
    fn lock_login(&self, server_url: &str) -> Result<LoginLock, StoreError>;

    /// Forgets every login for the server at `server_url` (a logout); how many there were.
    async fn forget(&self, server_url: &str) -> Result<usize, StoreError> {
        let mut removed = 0;
        for login in self.find(server_url).await? {
            if self.remove(&login.key()).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The logins for the server at `server_url`, the most recent first.
    async fn find(&self, server_url: &str) -> Result<Vec<StoredLogin>, StoreError> {
        let mut found: Vec<StoredLogin> = self
            .list()
            .await?
            .into_iter()
            .filter(|l| l.server_url == server_url)
            .collect();
        found.sort_by_key(|l| std::cmp::Reverse(l.obtained_at));
        Ok(found)
    }
}

/// Logins kept in memory for the life of the process (clones share them).
#[derive(Clone, Default)]
pub struct MemoryTokenStore {
    logins: Arc<Mutex<HashMap<LoginKey, StoredLogin>>>,
    locks: Arc<Mutex<HashSet<String>>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl fmt::Debug for MemoryTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTokenStore")
            .field("logins", &lock(&self.logins).len())
            .finish()
    }
}

#[async_trait]
impl TokenStore for MemoryTokenStore {
    async fn load(&self, key: &LoginKey) -> Result<Option<StoredLogin>, StoreError> {
        Ok(lock(&self.logins).get(key).cloned())
    }

    async fn save(&self, login: &StoredLogin) -> Result<(), StoreError> {
        lock(&self.logins).insert(login.key(), login.clone());
        Ok(())
    }

    async fn remove(&self, key: &LoginKey) -> Result<bool, StoreError> {
        Ok(lock(&self.logins).remove(key).is_some())
    }

    async fn list(&self) -> Result<Vec<StoredLogin>, StoreError> {
        Ok(lock(&self.logins).values().cloned().collect())
    }

    fn lock_login(&self, server_url: &str) -> Result<LoginLock, StoreError> {
        if !lock(&self.locks).insert(server_url.to_owned()) {
            return Err(StoreError::LoginInProgress {
                holder: "in this process".to_owned(),
                path: None,
            });
        }
        let locks = self.locks.clone();
        let key = server_url.to_owned();
        Ok(LoginLock::new(move || {
            lock(&locks).remove(&key);
        }))
    }
}
