//! A session's last tool listing, and whether it still stands: the session pool
//! (`pool.rs`) hands it to the next run instead of asking the server again while nothing says
//! the tools changed.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::Tool;

/// How long a listing stands without asking the server again, at most, even when nothing
/// says the tools changed: it bounds what a server that announces changes but fails to send
/// one (or sends it on a stream the client does not hold) can leave stale.
pub(crate) const LISTING_STANDS_FOR: Duration = Duration::from_secs(5);

/// What the session had seen when a listing was asked for: how many tool-list changes the
/// server had announced, how many times the transport had renewed its session, and how many
/// of its requests had failed in the transport or timed out (a server gone away or hung, say). A listing asked for
/// under one stamp does not stand under another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) changes: u64,
    pub(crate) renewals: u64,
    pub(crate) failures: u64,
}

/// A listing of a session's tools, with what the session had heard when it was asked for: a
/// run that takes it starts watching for changes from there.
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) tools: Vec<Tool>,
    pub(crate) stamp: Stamp,
}

/// The last complete listing of a session's tools.
#[derive(Debug, Default)]
pub(crate) struct LastListing(Mutex<Option<Listed>>);

#[derive(Debug)]
struct Listed {
    tools: Vec<Tool>,
    stamp: Stamp,
    at: Instant,
}

impl LastListing {
    /// Keeps `tools`, asked for at `at` under `stamp`, unless a listing asked for later is kept.
    pub(crate) fn keep(&self, tools: &[Tool], stamp: Stamp, at: Instant) {
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if last.as_ref().is_some_and(|listed| listed.at > at) {
            return;
        }
        *last = Some(Listed {
            tools: tools.to_vec(),
            stamp,
            at,
        });
    }

    /// The tools last listed, when that listing was asked for under `stamp` less than
    /// [`LISTING_STANDS_FOR`] before `now`.
    pub(crate) fn standing(&self, stamp: Stamp, now: Instant) -> Option<Listing> {
        let last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let listed = last.as_ref()?;
        (listed.stamp == stamp && now.saturating_duration_since(listed.at) < LISTING_STANDS_FOR)
            .then(|| Listing {
                tools: listed.tools.clone(),
                stamp,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Tool {
        Tool::new(name.to_owned(), "", rmcp::model::JsonObject::new())
    }

    const STAMP: Stamp = Stamp {
        changes: 0,
        renewals: 0,
        failures: 0,
    };

    #[test]
    fn a_listing_stands_until_a_change_a_renewal_a_failure_or_its_age_says_otherwise() {
        let last = LastListing::default();
        let at = Instant::now();
        assert!(last.standing(STAMP, at).is_none(), "nothing listed yet");
        last.keep(&[tool("a")], STAMP, at);
        let names = |listing: Option<Listing>| {
            listing.map(|l| {
                l.tools
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(names(last.standing(STAMP, at)), Some(vec!["a".to_owned()]));
        let changed = Stamp {
            changes: 1,
            ..STAMP
        };
        let renewed = Stamp {
            renewals: 1,
            ..STAMP
        };
        let failed = Stamp {
            failures: 1,
            ..STAMP
        };
        assert!(last.standing(changed, at).is_none());
        assert!(last.standing(renewed, at).is_none());
        assert!(last.standing(failed, at).is_none());
        assert!(last.standing(STAMP, at + LISTING_STANDS_FOR).is_none());
        assert!(
            last.standing(STAMP, at + LISTING_STANDS_FOR - Duration::from_millis(1))
                .is_some()
        );
    }

    #[test]
    fn a_listing_asked_for_earlier_never_replaces_a_later_one() {
        let last = LastListing::default();
        let at = Instant::now();
        let later = at + Duration::from_millis(10);
        last.keep(&[tool("new")], STAMP, later);
        last.keep(&[tool("old")], STAMP, at);
        let listing = last.standing(STAMP, later).unwrap();
        assert_eq!(listing.tools[0].name, "new");
    }
}
