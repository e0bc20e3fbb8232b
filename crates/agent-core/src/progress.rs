//! Progress of a tool call, reported by whoever runs it to whoever asked for it.
//!
//! The caller of a tool that wants its progress runs the call inside [`with_progress`]; the
//! code running the tool — a native tool, or the client of an MCP server relaying the server's
//! `notifications/progress` — reports with [`report`] (or hands [`current`] to another task).
//! Outside a [`with_progress`] scope nobody listens: [`report`] does nothing and an MCP client
//! passes none of its server's reports on. The scope is the task's, so it follows the call
//! through every `await` of the same task (the governed layer, the catalog, the session), not
//! into a task spawned from it. A report says nothing of which call it is about: give each
//! call a scope of its own (concurrent calls in one scope would mix their reports).
//!
//! What a server reports is its own text: [`Progress::bounded`] is what a relay passes on
//! (finite, increasing, its message cut and without control characters).
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use agent_core::progress::{self, Progress, ProgressSink};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let sink: ProgressSink = {
//!     let seen = seen.clone();
//!     Arc::new(move |p: Progress| seen.lock().unwrap().push(p.progress))
//! };
//! // A tool's work, reporting as it goes.
//! let work = async {
//!     for step in 1..=3 {
//!         progress::report(Progress::new(f64::from(step)).with_total(3.0));
//!     }
//!     "done"
//! };
//! assert_eq!(progress::with_progress(sink, work).await, "done");
//! assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);
//! // Nobody listening: nothing happens.
//! progress::report(Progress::new(4.0));
//! # });
//! ```

use std::future::Future;
use std::sync::Arc;

/// How far a call has come: `progress` of `total` (when known), with a message for people.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// The amount done; increases with every report of one call.
    pub progress: f64,
    /// The whole amount, when known.
    pub total: Option<f64>,
    /// What is being done, for people.
    pub message: Option<String>,
}

/// The longest message [`Progress::bounded`] keeps, in bytes.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;

impl Progress {
    /// `progress` done, of an unknown total.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// With the whole amount.
    pub fn with_total(mut self, total: f64) -> Self {
        self.total = Some(total);
        self
    }

    /// With a message for people.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// This report as a relay passes on another party's: `None` when its progress is not a
    /// finite number above `previous` (progress must increase), a total that is not finite
    /// is dropped, and the message loses its control characters and is cut to
    /// [`MAX_PROGRESS_MESSAGE_BYTES`] (at a character boundary).
    pub fn bounded(mut self, previous: Option<f64>) -> Option<Self> {
        if !self.progress.is_finite() || previous.is_some_and(|p| self.progress <= p) {
            return None;
        }
        self.total = self.total.filter(|t| t.is_finite());
        self.message = self.message.map(|m| {
            let mut kept = String::with_capacity(m.len().min(MAX_PROGRESS_MESSAGE_BYTES));
            for c in m.chars().filter(|c| !c.is_control()) {
                if kept.len() + c.len_utf8() > MAX_PROGRESS_MESSAGE_BYTES {
                    break;
                }
                kept.push(c);
            }
            kept
        });
        Some(self)
    }
}

/// Where a call's progress goes. Called on the reporting task: keep it short (hand the report
/// to a channel), and never block.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

tokio::task_local! {
    static SINK: ProgressSink;
}

/// Runs `call` with `sink` receiving the progress reported on this task meanwhile: one call
/// per scope (a report names no call).
pub async fn with_progress<F: Future>(sink: ProgressSink, call: F) -> F::Output {
    SINK.scope(sink, call).await
}

/// The sink of the [`with_progress`] scope this task runs in, if any: to pass to a task that
/// reports for the call, or to learn whether anyone listens.
pub fn current() -> Option<ProgressSink> {
    SINK.try_with(Arc::clone).ok()
}

/// Reports `progress` to the [`with_progress`] scope this task runs in; nothing without one.
pub fn report(progress: Progress) {
    let _ = SINK.try_with(|sink| sink(progress));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_passes_on_increasing_finite_progress_and_a_clean_short_message() {
        assert_eq!(Progress::new(f64::NAN).bounded(None), None);
        assert_eq!(Progress::new(f64::INFINITY).bounded(None), None);
        assert_eq!(Progress::new(2.0).bounded(Some(2.0)), None);
        assert_eq!(Progress::new(1.0).bounded(Some(2.0)), None);
        let kept = Progress::new(3.0)
            .with_total(f64::NAN)
            .with_message(format!("\u{1b}[31mred\n{}", "é".repeat(2000)))
            .bounded(Some(2.0))
            .unwrap();
        assert_eq!(kept.total, None);
        let message = kept.message.unwrap();
        assert!(message.starts_with("[31mred"));
        assert!(message.len() <= MAX_PROGRESS_MESSAGE_BYTES);
        assert!(!message.chars().any(char::is_control));
        assert_eq!(
            Progress::new(0.0).with_total(10.0).bounded(None),
            Some(Progress::new(0.0).with_total(10.0))
        );
    }

    #[tokio::test]
    async fn reports_reach_the_scope_of_their_task_only() {
        let (tx, rx) = std::sync::mpsc::channel();
        let sink: ProgressSink = Arc::new(move |p: Progress| tx.send(p.progress).unwrap());
        assert!(current().is_none());
        with_progress(sink, async {
            report(Progress::new(1.0));
            tokio::task::yield_now().await;
            report(Progress::new(2.0));
            // A spawned task is outside the scope.
            tokio::spawn(async { report(Progress::new(9.0)) })
                .await
                .unwrap();
            assert!(current().is_some());
        })
        .await;
        report(Progress::new(3.0));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1.0, 2.0]);
    }
}
