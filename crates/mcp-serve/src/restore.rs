//! The principals of sessions being restored from a shared store: the store's read puts the
//! principal a session was bound to here, and the session's handler, replaying the session's
//! `initialize` on this replica, takes it, so that the restored session acts for its own
//! principal and not for whoever presented its id.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use agent_core::Principal;

/// At most this many restores under way at once are remembered (a restore takes the entry at
/// once; this only bounds what restores that failed midway leave).
const MAX_PENDING: usize = 4096;

/// The principals of the sessions being restored, by session id.
#[derive(Debug, Default)]
pub(crate) struct Restoring(Mutex<HashMap<String, Option<Principal>>>);

impl Restoring {
    /// The session `id` is being restored, bound to `principal`.
    pub(crate) fn put(&self, id: &str, principal: Option<Principal>) {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.len() >= MAX_PENDING {
            pending.clear();
        }
        pending.insert(id.to_owned(), principal);
    }

    /// The principal session `id` is restored for; `None` when no restore of it is under way.
    pub(crate) fn take(&self, id: &str) -> Option<Option<Principal>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_is_taken_once() {
        let restoring = Restoring::default();
        restoring.put("s1", Some(Principal::new("alice")));
        restoring.put("s2", None);
        assert_eq!(restoring.take("s1"), Some(Some(Principal::new("alice"))));
        assert_eq!(restoring.take("s1"), None);
        assert_eq!(restoring.take("s2"), Some(None));
    }
}
