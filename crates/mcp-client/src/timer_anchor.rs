//! Keeping a call's timeout from waking the runtime's timer driver.
//!
//! Tokio wakes the thread parked on its timer driver whenever a deadline is registered that
//! comes before the earliest one the driver last slept towards, or when it slept with no
//! deadline at all. Sequential calls hit the second case every time: the driver parks between
//! two calls with the wheel empty (the last call's timeout was dropped), so the next call's
//! timeout wakes it for nothing, a context switch on every call (measured in
//! `docs/benchmarks.md`). A [`TimerAnchor`] keeps one deadline of its own in the wheel, no
//! later than any call timeout it precedes, so registering that timeout never wakes the driver.
//! When the anchor's own deadline has passed, the next call registers a new one (a wake-up or two
//! once a period, instead of one a call). Under a paused test clock the anchor is one more
//! deadline the clock may advance to while the runtime idles.

use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
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
        // A timeout that far ahead is no deadline to Tokio either: nothing to anchor.
        let Some(deadline) = now.checked_add(self.period) else {
            return;
        };
        let mut sleep = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        if sleep.as_ref().is_some_and(|sleep| sleep.deadline() > now) {
            return;
        }
        // A new sleep, not the old one reset: the old one belongs to the runtime it was made in,
        // which may have shut down since. Resetting a new sleep enters it in the wheel at once
        // (polling it would not while the task's budget is spent, and would panic in a runtime
        // shutting down); nothing waits for it to end.
        sleep
            .insert(Box::pin(tokio::time::sleep_until(deadline)))
            .as_mut()
            .reset(deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timeout too far ahead to be a deadline (`Duration::MAX`: calls never time out) gets no
    /// anchor, and no panic.
    #[tokio::test]
    async fn a_timeout_too_far_ahead_is_not_anchored() {
        let anchor = TimerAnchor::new(Duration::MAX);
        anchor.hold();
        assert!(anchor.sleep.lock().unwrap().is_none());
    }

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
