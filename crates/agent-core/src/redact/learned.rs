//! Secrets learned while a run goes on, and the sink that teaches them.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{PoisonError, RwLock};

use super::secret::Secret;

/// How many secret values learned at run time one [`Redactor`](crate::Redactor) keeps: the
/// oldest are forgotten first (a token that old has long expired).
pub const MAX_LEARNED_SECRETS: usize = 256;

/// Where secret values obtained at run time go: an OAuth access or refresh token when it is
/// issued or loaded from a token store, a client secret a server issued.
///
/// A [`Redactor`](crate::Redactor)'s [`sink`](crate::Redactor::sink) is one: whatever it is
/// taught, that redactor and its clones replace from then on. Whoever obtains such secrets
/// (an OAuth provider) is given the sinks of the runs that use it and reports to each.
///
/// ```
/// use agent_core::{Redactor, Secret, SecretSink};
///
/// let run = Redactor::new();
/// let sink = run.sink();
/// sink.learn(&Secret::new("at-issued-at-run-time-1234"));
/// assert_eq!(run.scrub("token at-issued-at-run-time-1234 refused"), "token [REDACTED] refused");
/// ```
pub trait SecretSink: Send + Sync {
    /// Replaces `secret` from now on (values shorter than
    /// [`MIN_SECRET_LEN`](crate::MIN_SECRET_LEN) may be ignored).
    fn learn(&self, secret: &Secret);
}

/// The learned values of one redactor and its clones, most recent last, at most
/// [`MAX_LEARNED_SECRETS`].
#[derive(Default)]
pub(super) struct Learned {
    values: RwLock<VecDeque<Secret>>,
}

impl Learned {
    /// A set holding a copy of `other`'s values.
    pub(super) fn copy_of(other: &Self) -> Self {
        Self {
            values: RwLock::new(other.read().clone()),
        }
    }

    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, VecDeque<Secret>> {
        self.values.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn len(&self) -> usize {
        self.read().len()
    }

    /// Adds `secret` unless it is too short or known; forgets the oldest beyond the bound.
    pub(super) fn add(&self, secret: &Secret, min_len: usize) {
        if secret.expose().chars().count() < min_len || self.read().contains(secret) {
            return;
        }
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        if values.contains(secret) {
            return;
        }
        if values.len() == MAX_LEARNED_SECRETS {
            values.pop_front();
        }
        values.push_back(secret.clone());
    }
}

impl fmt::Debug for Learned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Learned")
            .field("values", &self.len())
            .finish()
    }
}
