//! The token cache of every OAuth2 credential: one [`Shared`] entry per credential, shared by
//! the registry (which makes entries) and its providers (which prune it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_config::Secret;
use tokio::time::Instant;

use super::flight::Shared;
use super::lock;
use super::share::entry_name;

/// How often (at most) the registry drops cache entries nobody uses whose token expired,
/// besides whenever a provider is built.
const PRUNE_INTERVAL: Duration = Duration::from_secs(30);

/// Every credential's cache entry, shared by the registry and its providers (which prune it).
#[derive(Default)]
pub(super) struct Cache {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<CredentialKey, Arc<Shared>>,
    /// No access-time pruning before then.
    next_prune: Option<Instant>,
}

impl Cache {
    pub(super) fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }

    /// Drops the entries no provider holds whose token has expired (or that never got one).
    fn prune(entries: &mut Entries, now: Instant) {
        entries
            .map
            .retain(|_, shared| Arc::strong_count(shared) > 1 || shared.has_valid_token(now));
        entries.next_prune = Some(now + PRUNE_INTERVAL);
    }

    /// The entry of `key` (made by `make` when there is none), after dropping the unused
    /// expired ones.
    pub(super) fn entry(
        &self,
        key: CredentialKey,
        make: impl FnOnce() -> Arc<Shared>,
    ) -> Arc<Shared> {
        let mut entries = lock(&self.entries);
        Self::prune(&mut entries, Instant::now());
        entries.map.entry(key).or_insert_with(make).clone()
    }

    /// Forgets every entry (their providers keep theirs): credentials built from now on start
    /// afresh.
    pub(super) fn clear(&self) {
        lock(&self.entries).map.clear();
    }

    /// [`prune`](Self::prune), at most every [`PRUNE_INTERVAL`].
    pub(super) fn prune_if_due(&self, now: Instant) {
        let mut entries = lock(&self.entries);
        if entries.next_prune.is_none_or(|at| now >= at) {
            Self::prune(&mut entries, now);
        }
    }
}

/// What identifies one credential's cache. The secret is part of it (compared, never shown),
/// so a wrong secret never reuses a token obtained with the right one.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct CredentialKey {
    pub(super) endpoint: String,
    pub(super) client_id: String,
    pub(super) secret: Secret,
    pub(super) scope: Option<String>,
    pub(super) resource: Option<String>,
    pub(super) method: Option<&'static str>,
    pub(super) allowed_issuers: Vec<String>,
    pub(super) guarded: bool,
    /// `dpop`: a DPoP credential has a key of its own and never shares a bearer's cache.
    pub(super) dpop: mcp_config::DpopMode,
}

impl CredentialKey {
    /// The name of this credential's entry in a fleet's shared store: a digest of every field,
    /// the secret included, so that the name says nothing of it and a wrong secret never meets
    /// the token of the right one.
    pub(super) fn share_name(&self) -> String {
        let issuers = self.allowed_issuers.join("\n");
        entry_name(
            "cc",
            &[
                self.endpoint.as_bytes(),
                self.client_id.as_bytes(),
                self.secret.expose().as_bytes(),
                self.scope.as_deref().unwrap_or("\0").as_bytes(),
                self.resource.as_deref().unwrap_or("\0").as_bytes(),
                self.method.unwrap_or("\0").as_bytes(),
                issuers.as_bytes(),
                &[u8::from(self.guarded)],
            ],
        )
    }
}
