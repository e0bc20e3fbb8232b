//! What a pool's parts share ([`PoolState`]): the book under its lock, the gates that make
//! concurrent first opens of a key one, the closes under way, and the reaper that closes runs
//! idle too long.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::book::{Book, Key, Run, RunId};

/// The state of one pool.
pub(crate) struct PoolState {
    max_runs: usize,
    idle_timeout: Duration,
    book: Mutex<Book>,
    /// Held while a key's run opens: requests of that key wait, then find it.
    gates: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// Told when a run becomes idle or is added, so the reaper looks again.
    wake: Arc<Notify>,
    /// Closes under way.
    closing: TaskTracker,
    /// Ends the reaper.
    stop: CancellationToken,
    reaper: Mutex<Option<JoinHandle<()>>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PoolState {
    pub(crate) fn new(max_runs: usize, idle_timeout: Duration) -> Self {
        Self {
            max_runs,
            idle_timeout,
            book: Mutex::default(),
            gates: Mutex::default(),
            wake: Arc::default(),
            closing: TaskTracker::new(),
            stop: CancellationToken::new(),
            reaper: Mutex::default(),
        }
    }

    /// `key`'s pooled run, leased once more.
    pub(crate) fn lease(&self, key: &Key) -> Option<(RunId, Run)> {
        locked(&self.book).lease(key)
    }

    /// The gate of `key`'s open (a new one when no open of it is under way).
    pub(crate) fn gate(&self, key: &Key) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(locked(&self.gates).entry(key.clone()).or_default())
    }

    /// Forgets `gate`, once the open it guarded is over (requests already waiting on it still
    /// get it, then find the run).
    pub(crate) fn ungate(&self, key: &Key, gate: &Arc<tokio::sync::Mutex<()>>) {
        let mut gates = locked(&self.gates);
        if gates.get(key).is_some_and(|g| Arc::ptr_eq(g, gate)) {
            gates.remove(key);
        }
    }

    /// Adds `run`, just opened for `key` and leased by the request that opened it (see
    /// [`Book::add`]); the run it evicts is closed.
    pub(crate) fn add(self: &Arc<Self>, key: Key, run: Run) -> RunId {
        let (id, evicted) = locked(&self.book).add(key, run, self.max_runs);
        if let Some(evicted) = evicted {
            self.close_later(evicted);
        }
        self.start_reaper();
        id
    }

    /// Ends one lease of `id` (see [`Book::release`]): the run to close now, if any.
    pub(crate) fn release(&self, id: RunId, reusable: bool) -> Option<Run> {
        let closed = locked(&self.book).release(id, reusable, Instant::now());
        self.wake.notify_one();
        closed
    }

    /// How many runs are pooled now, and how many of them are idle.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let book = locked(&self.book);
        (book.pooled(), book.idle())
    }

    /// Closes `run` on a task of its own, which [`shutdown`](Self::shutdown) waits for.
    /// Without a runtime (the last lease dropped outside one) the run is dropped, which
    /// releases what it holds.
    pub(crate) fn close_later(&self, run: Run) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            self.closing
                .spawn_on(async move { run.close().await }, &runtime);
        }
    }

    /// Closes the pool: no run is pooled any more, the idle ones are closed, the reaper ends,
    /// and every close under way is waited for. Runs still in use are closed when their last
    /// request ends.
    pub(crate) async fn shutdown(&self) {
        let idle = locked(&self.book).close();
        for run in idle {
            self.close_later(run);
        }
        self.stop.cancel();
        let reaper = locked(&self.reaper).take();
        if let Some(reaper) = reaper {
            let _ = reaper.await;
        }
        self.closing.close();
        self.closing.wait().await;
    }

    /// Starts the reaper once (it needs a runtime, which the first open has).
    fn start_reaper(self: &Arc<Self>) {
        let mut reaper = locked(&self.reaper);
        if reaper.is_some() || self.stop.is_cancelled() {
            return;
        }
        *reaper = Some(tokio::spawn(reap(
            Arc::downgrade(self),
            Arc::clone(&self.wake),
            self.stop.clone(),
            self.idle_timeout,
        )));
    }
}

impl Drop for PoolState {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Closes the runs idle for `idle_timeout`, waking when the longest idle one is due or the
/// book changed, until `stop` (the pool's shutdown, or its drop: the task holds the pool
/// weakly).
async fn reap(
    pool: Weak<PoolState>,
    wake: Arc<Notify>,
    stop: CancellationToken,
    idle_timeout: Duration,
) {
    loop {
        let due = {
            let Some(pool) = pool.upgrade() else {
                return;
            };
            let expired = match Instant::now().checked_sub(idle_timeout) {
                Some(cutoff) => locked(&pool.book).expire(cutoff),
                None => Vec::new(),
            };
            for run in expired {
                pool.close_later(run);
            }
            locked(&pool.book)
                .oldest_idle()
                .map(|since| since + idle_timeout)
        };
        let next = async {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = wake.notified() => {}
            () = next => {}
        }
    }
}
