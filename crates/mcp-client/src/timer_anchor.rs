//! Keeping a call's timeout from waking the runtime's timer driver.
//!
//! Tokio wakes the thread parked on its timer driver whenever a deadline is registered that
//! comes before the earliest one the driver last slept towards, or when it slept with no
//! deadline at all. Sequential calls hit the second case every time: the driver parks between
//! two calls with the wheel empty (the last call's timeout was dropped), so the next call's
//! timeout wakes it for nothing, a context switch on every call (measured in
//! `docs/benchmarks.md`). A [`TimerAnchor`] keeps one deadline of its own in the wheel, no
//! later than any call timeout it precedes, so registering that timeout never wakes the driver.
//! When the anchor's own deadline has passed, the next call moves it on (one wake-up per period
//! at most).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A deadline kept in the runtime's timer wheel, at most `period` ahead (see the
/// [module docs](self)).
#[derive(Debug)]
pub(crate) struct TimerAnchor {
    period: Duration,
    sleep: Mutex<Option<Pin<Box<Sleep>>>>,
}

impl TimerAnchor {
    /// An anchor for timeouts of at least `period`.
    pub(crate) fn new(period: Duration) -> Self {
        Self {
            period,
            sleep: Mutex::new(None),
        }
    }

    /// Makes sure the wheel holds the anchor's deadline, no later than now plus `period`: call
    /// it right before registering a timeout of at least `period`. Needs the Tokio runtime
    /// (with its time driver) the timeout is registered with.
    pub(crate) fn hold(&self) {
        let now = Instant::now();
        let mut sleep = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        if sleep.as_ref().is_some_and(|sleep| sleep.deadline() > now) {
            return;
        }
        // A new sleep, not the old one reset: the old one belongs to the runtime it was made in,
        // which may have shut down since (a sleep polled after that panics).
        let sleep = sleep.insert(Box::pin(tokio::time::sleep_until(now + self.period)));
        // A sleep enters the wheel when first polled; nothing waits for it to end.
        let _ = sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session may outlive the runtime its anchor was first held in: once that runtime shut
    /// down, the next call in another runtime goes on, no panic.
    #[test]
    fn an_anchor_outlives_the_runtime_it_was_held_in() {
        let anchor = TimerAnchor::new(Duration::from_millis(1));
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let first = runtime();
        first.block_on(async { anchor.hold() });
        drop(first);
        let held_until = anchor.sleep.lock().unwrap().as_ref().unwrap().deadline();
        while Instant::now() <= held_until {
            std::thread::yield_now();
        }
        runtime().block_on(async {
            anchor.hold();
            assert!(anchor.sleep.lock().unwrap().as_ref().unwrap().deadline() > held_until);
        });
    }

    #[tokio::test(start_paused = true)]
    async fn the_anchor_moves_on_only_once_its_deadline_passed() {
        let anchor = TimerAnchor::new(Duration::from_secs(30));
        let deadline = |anchor: &TimerAnchor| {
            let sleep = anchor.sleep.lock().unwrap();
            sleep.as_ref().map(|s| s.deadline())
        };
        assert_eq!(deadline(&anchor), None);
        let start = Instant::now();
        anchor.hold();
        assert_eq!(deadline(&anchor), Some(start + Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(10)).await;
        anchor.hold();
        assert_eq!(deadline(&anchor), Some(start + Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(25)).await;
        anchor.hold();
        assert_eq!(deadline(&anchor), Some(start + Duration::from_secs(65)));
    }
}
