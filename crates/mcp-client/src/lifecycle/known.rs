//! What a client learned of its servers' lifecycles: the specs whose server refused the
//! `server/discover` probe and answered `initialize` instead. A later session with the same
//! spec (the same [`Fingerprint`]: command or URL, parameters, secrets) starts with
//! `initialize` alone and saves the refused round trip.
//!
//! Only a refusal counts — a JSON-RPC error, or an answer that is not a discover result — never
//! a probe that went unanswered within its bound: a modern server slow to start keeps getting
//! `server/discover`. A remembered server that then refuses `initialize` (upgraded meanwhile)
//! is forgotten, and its session starts with the probe again ([`super::start`]).
//!
//! One per client, kept by its session pool for as long as the client lives, bounded: past
//! [`MAX_REMEMBERED`] specs nothing more is learned (those servers keep paying the probe).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use mcp_config::ServerSpec;

use crate::fingerprint::Fingerprint;

/// The most specs one client remembers.
pub(crate) const MAX_REMEMBERED: usize = 4096;

/// The specs whose servers answer `initialize` only, by fingerprint.
#[derive(Debug, Default)]
pub(crate) struct KnownLifecycles {
    initialize_only: Mutex<HashSet<Fingerprint>>,
}

impl KnownLifecycles {
    fn with_set<T>(&self, f: impl FnOnce(&mut HashSet<Fingerprint>) -> T) -> T {
        f(&mut self
            .initialize_only
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether `spec`'s server refused the probe before.
    pub(crate) fn initialize_only(&self, spec: &ServerSpec) -> bool {
        let fingerprint = Fingerprint::of(spec);
        self.with_set(|set| set.contains(&fingerprint))
    }

    /// Remembers that `spec`'s server refused the probe and answered `initialize`.
    pub(crate) fn remember_initialize_only(&self, spec: &ServerSpec) {
        let fingerprint = Fingerprint::of(spec);
        self.with_set(|set| {
            if set.len() < MAX_REMEMBERED {
                set.insert(fingerprint);
            }
        });
    }

    /// Forgets what was learned of `spec`'s server.
    pub(crate) fn forget(&self, spec: &ServerSpec) {
        let fingerprint = Fingerprint::of(spec);
        self.with_set(|set| set.remove(&fingerprint));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_config::{StdioSpec, TransportSpec};

    fn spec(command: &str) -> ServerSpec {
        ServerSpec::new(
            "s",
            TransportSpec::Stdio(StdioSpec::new(command.to_owned(), Vec::<String>::new())),
        )
    }

    #[test]
    fn a_spec_is_remembered_until_forgotten_and_others_are_not() {
        let known = KnownLifecycles::default();
        let (legacy, other) = (spec("legacy-server"), spec("other-server"));
        assert!(!known.initialize_only(&legacy));
        known.remember_initialize_only(&legacy);
        assert!(known.initialize_only(&legacy));
        assert!(!known.initialize_only(&other));
        known.forget(&legacy);
        assert!(!known.initialize_only(&legacy));
    }

    #[test]
    fn nothing_more_is_learned_past_the_bound() {
        let known = KnownLifecycles::default();
        for i in 0..MAX_REMEMBERED {
            known.remember_initialize_only(&spec(&format!("server-{i}")));
        }
        known.remember_initialize_only(&spec("one-too-many"));
        assert!(known.initialize_only(&spec("server-0")));
        assert!(!known.initialize_only(&spec("one-too-many")));
    }
}
