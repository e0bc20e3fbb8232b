//! The pool's bookkeeping ([`Book`]): which run each key has, how many requests use each run,
//! since when an unused one is idle, and which runs must be closed. Synchronous, under the
//! pool's one lock; it never closes a run itself, it hands back the runs to close.

use std::collections::HashMap;
use std::sync::Arc;

use agent_core::Principal;
use tokio::time::Instant;

use crate::per_session::SessionTools;

/// What a pooled run is kept for: who it acts for, and what it reaches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The principal (a JWT's `sub`); `None` is anonymous.
    pub(crate) principal: Option<Principal>,
    /// The opener's [`upstream_digest`](crate::OpenTools::upstream_digest).
    pub(crate) upstream: u64,
}

/// One run the book knows, by the id [`Book::add`] gave it.
pub(crate) type RunId = u64;

/// Tools opened by the pool's opener.
pub(crate) type Run = Arc<dyn SessionTools>;

/// A run handed out and not yet closed.
struct Entry {
    run: Run,
    key: Key,
    /// Requests using it now.
    leases: usize,
    /// Since when no request uses it (`None` while one does).
    idle_since: Option<Instant>,
    /// Whether it is its key's pooled run, handed out again; a run that is not is closed when
    /// its last lease ends.
    pooled: bool,
}

/// The runs of a pool: at most one pooled run per key, every run handed out until it is closed.
#[derive(Default)]
pub(crate) struct Book {
    by_key: HashMap<Key, RunId>,
    runs: HashMap<RunId, Entry>,
    next: RunId,
    closed: bool,
}

impl Book {
    /// `key`'s pooled run, leased once more: its id and the run.
    pub(crate) fn lease(&mut self, key: &Key) -> Option<(RunId, Run)> {
        let id = *self.by_key.get(key)?;
        let entry = self.runs.get_mut(&id)?;
        entry.leases += 1;
        entry.idle_since = None;
        Some((id, Arc::clone(&entry.run)))
    }

    /// Adds `run`, just opened for `key`, leased once. It becomes `key`'s pooled run when the
    /// book is open, `key` has none, and there is room among at most `max` pooled runs — the
    /// longest idle one is evicted to make it; when every pooled run is in use, it is closed
    /// when its lease ends. Its id, and the evicted run (to close).
    pub(crate) fn add(&mut self, key: Key, run: Run, max: usize) -> (RunId, Option<Run>) {
        let id = self.next;
        self.next += 1;
        let mut evicted = None;
        let mut pooled = !self.closed && max > 0 && !self.by_key.contains_key(&key);
        if pooled && self.by_key.len() >= max {
            evicted = self.evict_longest_idle();
            pooled = evicted.is_some();
        }
        if pooled {
            self.by_key.insert(key.clone(), id);
        }
        let entry = Entry {
            run,
            key,
            leases: 1,
            idle_since: None,
            pooled,
        };
        self.runs.insert(id, entry);
        (id, evicted)
    }

    /// Ends one lease of `id` at `now`. A run that is not `reusable` is handed out no more.
    /// Once no lease is left, a pooled run of an open book is idle from `now`; any other run is
    /// removed and returned, to close.
    pub(crate) fn release(&mut self, id: RunId, reusable: bool, now: Instant) -> Option<Run> {
        let entry = self.runs.get_mut(&id)?;
        entry.leases = entry.leases.saturating_sub(1);
        if !reusable && entry.pooled {
            entry.pooled = false;
            self.by_key.remove(&entry.key);
        }
        if entry.leases > 0 {
            return None;
        }
        if entry.pooled && !self.closed {
            entry.idle_since = Some(now);
            return None;
        }
        self.remove(id)
    }

    /// Removes the pooled runs idle since `cutoff` or earlier, to close.
    pub(crate) fn expire(&mut self, cutoff: Instant) -> Vec<Run> {
        let expired: Vec<RunId> = self
            .runs
            .iter()
            .filter(|(_, e)| e.idle_since.is_some_and(|since| since <= cutoff))
            .map(|(id, _)| *id)
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.remove(id))
            .collect()
    }

    /// When the longest idle run became idle.
    pub(crate) fn oldest_idle(&self) -> Option<Instant> {
        self.runs.values().filter_map(|e| e.idle_since).min()
    }

    /// Closes the book: every idle run is removed and returned (to close), every run in use is
    /// closed when its last lease ends, and nothing is pooled any more.
    pub(crate) fn close(&mut self) -> Vec<Run> {
        self.closed = true;
        self.by_key.clear();
        for entry in self.runs.values_mut() {
            entry.pooled = false;
        }
        let idle: Vec<RunId> = self
            .runs
            .iter()
            .filter(|(_, e)| e.leases == 0)
            .map(|(id, _)| *id)
            .collect();
        idle.into_iter().filter_map(|id| self.remove(id)).collect()
    }

    /// How many runs are pooled now (in use or idle).
    pub(crate) fn pooled(&self) -> usize {
        self.by_key.len()
    }

    /// How many pooled runs no request uses now.
    pub(crate) fn idle(&self) -> usize {
        self.runs
            .values()
            .filter(|e| e.idle_since.is_some())
            .count()
    }

    fn evict_longest_idle(&mut self) -> Option<Run> {
        let id = self
            .runs
            .iter()
            .filter(|(_, e)| e.pooled)
            .filter_map(|(id, e)| e.idle_since.map(|since| (since, *id)))
            .min()
            .map(|(_, id)| id)?;
        self.remove(id)
    }

    fn remove(&mut self, id: RunId) -> Option<Run> {
        let entry = self.runs.remove(&id)?;
        if entry.pooled {
            self.by_key.remove(&entry.key);
        }
        Some(entry.run)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agent_core::{
        ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput,
    };
    use async_trait::async_trait;

    use super::*;

    struct Nothing;
    impl ToolCatalog for Nothing {
        fn tools(&self) -> Vec<ToolDescriptor> {
            Vec::new()
        }
    }
    #[async_trait]
    impl ToolDispatcher for Nothing {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Err(ToolError::unknown_tool(call.name, Vec::new()))
        }
    }
    impl SessionTools for Nothing {}

    fn key(who: &str) -> Key {
        Key {
            principal: Some(Principal::new(who)),
            upstream: 7,
        }
    }

    fn run() -> Run {
        Arc::new(Nothing)
    }

    #[test]
    fn a_key_s_run_is_leased_again_and_idle_once_no_request_uses_it() {
        let mut book = Book::default();
        let t0 = Instant::now();
        let (id, _) = book.add(key("alice"), run(), 4);
        assert!(book.lease(&key("bob")).is_none(), "another principal's run");
        let other_digest = Key {
            upstream: 8,
            ..key("alice")
        };
        assert!(book.lease(&other_digest).is_none(), "another upstream set");
        let (again, _) = book.lease(&key("alice")).unwrap();
        assert_eq!(again, id);
        assert!(book.release(id, true, t0).is_none());
        assert_eq!(book.oldest_idle(), None, "still in use");
        assert!(book.release(id, true, t0).is_none());
        assert_eq!(book.oldest_idle(), Some(t0));
        assert_eq!((book.pooled(), book.idle()), (1, 1));
    }

    #[test]
    fn a_run_that_is_not_reusable_is_closed_after_its_last_lease() {
        let mut book = Book::default();
        let t0 = Instant::now();
        let (id, _) = book.add(key("alice"), run(), 4);
        book.lease(&key("alice")).unwrap();
        assert!(book.release(id, false, t0).is_none(), "one lease left");
        assert!(book.lease(&key("alice")).is_none(), "no longer handed out");
        assert!(
            book.release(id, true, t0).is_some(),
            "closed with its last lease"
        );
        assert_eq!(book.pooled(), 0);
    }

    #[test]
    fn the_longest_idle_run_makes_room_and_runs_in_use_are_never_evicted() {
        let mut book = Book::default();
        let t0 = Instant::now();
        let (a, _) = book.add(key("a"), run(), 2);
        let (b, _) = book.add(key("b"), run(), 2);
        // Both in use: a third key's run is not pooled, and closed after its request.
        let (c, evicted) = book.add(key("c"), run(), 2);
        assert!(evicted.is_none());
        assert!(book.lease(&key("c")).is_none());
        assert!(book.release(c, true, t0).is_some());
        book.release(b, true, t0);
        book.release(a, true, t0 + Duration::from_secs(1));
        let (_, evicted) = book.add(key("d"), run(), 2);
        assert!(evicted.is_some(), "b, idle the longest");
        assert!(book.lease(&key("b")).is_none());
        assert!(book.lease(&key("a")).is_some());
        assert_eq!(book.pooled(), 2);
    }

    #[test]
    fn idle_runs_expire_and_a_closed_book_pools_nothing() {
        let mut book = Book::default();
        let t0 = Instant::now();
        let (a, _) = book.add(key("a"), run(), 4);
        let (b, _) = book.add(key("b"), run(), 4);
        book.release(a, true, t0);
        book.release(b, true, t0 + Duration::from_secs(5));
        assert_eq!(book.expire(t0 + Duration::from_secs(1)).len(), 1);
        assert!(book.lease(&key("a")).is_none());
        let (b, _) = book.lease(&key("b")).unwrap();

        assert!(book.close().is_empty(), "b is in use");
        assert!(
            book.release(b, true, t0).is_some(),
            "closed with its last lease"
        );
        let (c, _) = book.add(key("c"), run(), 4);
        assert!(book.lease(&key("c")).is_none());
        assert!(book.release(c, true, t0).is_some());
        assert_eq!(book.pooled(), 0);
    }
}
