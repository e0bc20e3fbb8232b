//! What a session shared by a fleet carries between its replica's handler and the store
//! (`http/session_keeper.rs`): the store's read leaves here what a session restored on this
//! replica was ([`Restored`]: the principal it is bound to, the tools it had promoted), and the
//! handler, replaying the session's `initialize`, takes it, so that the restored session acts
//! for its own principal and not for whoever presented its id. The other way, the handler
//! writes the session's promoted tools back through [`Records`] when they change.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use agent_core::Principal;
use async_trait::async_trait;
use rmcp::model::InitializeRequestParams;

/// At most this many restores under way at once are remembered (a restore takes the entry at
/// once; this only bounds what restores that failed midway leave).
const MAX_PENDING: usize = 4096;

/// How many hex digits of a session id's digest make its label.
const LABEL_DIGITS: usize = 16;

/// What a session restored from a shared store was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Restored {
    /// Who it acts for.
    pub(crate) principal: Option<Principal>,
    /// The ids of the tools it had promoted, in promotion order.
    pub(crate) promoted: Vec<String>,
}

/// What the sessions being restored were, by session id.
#[derive(Debug, Default)]
pub(crate) struct Restoring(Mutex<HashMap<String, Restored>>);

impl Restoring {
    /// The session `id` is being restored from `restored`.
    pub(crate) fn put(&self, id: &str, restored: Restored) {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.len() >= MAX_PENDING {
            pending.clear();
        }
        pending.insert(id.to_owned(), restored);
    }

    /// What session `id` is restored from; `None` when no restore of it is under way.
    pub(crate) fn take(&self, id: &str) -> Option<Restored> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }
}

/// Where a shared session's record is written again when what it carries changes.
#[async_trait]
pub(crate) trait Records: Send + Sync + std::fmt::Debug + 'static {
    /// Session `id` (bound to `principal`, opened with `initialize`) has promoted `promoted`
    /// now. A session that has no record (ended meanwhile, never shared) gets none.
    async fn promoted(
        &self,
        id: &str,
        principal: Option<&Principal>,
        initialize: &InitializeRequestParams,
        promoted: &[String],
    );
}

/// SHA-256 of `id`, in hex.
pub(crate) fn digest(id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    data_encoding::HEXLOWER.encode(digest.as_ref())
}

/// The label of session `id`: the first digits of its digest, the same on every replica,
/// which name it (in a history directory, say) without giving away the id.
pub(crate) fn label(id: &str) -> String {
    let mut label = digest(id);
    label.truncate(LABEL_DIGITS);
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_session_was_is_taken_once() {
        let restoring = Restoring::default();
        let alice = Restored {
            principal: Some(Principal::new("alice")),
            promoted: vec!["kit__add".into()],
        };
        restoring.put("s1", alice.clone());
        restoring.put("s2", Restored::default());
        assert_eq!(restoring.take("s1"), Some(alice));
        assert_eq!(restoring.take("s1"), None);
        assert_eq!(restoring.take("s2"), Some(Restored::default()));
    }

    #[test]
    fn a_label_is_short_stable_and_not_the_id() {
        let id = "0b6c3a3e-5d0f-4c55-9a43-7f2d9c1b8e11";
        assert_eq!(digest(id).len(), 64);
        assert_eq!(label(id), label(id));
        assert_eq!(label(id).len(), LABEL_DIGITS);
        assert!(digest(id).starts_with(&label(id)) && !id.contains(&label(id)));
    }
}
