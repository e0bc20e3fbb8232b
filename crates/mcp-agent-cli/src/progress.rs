//! A call's progress on the terminal: the reports its server sends while it runs, a line each
//! on stderr, in order, all printed before the call's result.
//!
//! A server chooses how many reports it sends and how fast, so what reaches the terminal is
//! bounded: at most [`MAX_LINES`] lines a call, then a count of the reports not shown and the
//! last one; reports waiting to be printed are at most [`BACKLOG`], the oldest dropped first,
//! so the newest (the end) is never the one lost.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use mcp_agent::agent::progress::{Progress, ProgressSink, with_progress};
use tokio::sync::Notify;

use super::term::escaped;

/// Reports waiting to be printed, at most; past it the oldest are dropped.
const BACKLOG: usize = 256;

/// The most progress lines printed for one call; the rest are counted, and the last printed.
const MAX_LINES: usize = 500;

/// The longest progress message printed, in characters.
const MAX_MESSAGE: usize = 200;

/// Reports handed over by the session's receiving loop, which must never wait on a terminal.
#[derive(Default)]
struct Queue {
    pending: Mutex<Pending>,
    ready: Notify,
}

#[derive(Default)]
struct Pending {
    reports: VecDeque<Progress>,
    /// Reports dropped because the backlog was full.
    dropped: u64,
}

impl Queue {
    fn push(&self, report: Progress) {
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.reports.len() == BACKLOG {
                pending.reports.pop_front();
                pending.dropped += 1;
            }
            pending.reports.push_back(report);
        }
        self.ready.notify_one();
    }

    fn take(&self) -> Pending {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What has been printed of one call's reports.
#[derive(Default)]
struct Printer {
    lines: usize,
    /// Reports not shown and not [`last`](Self::last): dropped from the backlog or past
    /// [`MAX_LINES`].
    unshown: u64,
    /// The newest report past [`MAX_LINES`], printed at the end.
    last: Option<Progress>,
}

impl Printer {
    fn print(&mut self, pending: Pending, print: &mut impl FnMut(&str)) {
        self.unshown += pending.dropped;
        for report in pending.reports {
            if self.lines < MAX_LINES {
                self.lines += 1;
                print(&line(&report));
            } else if self.last.replace(report).is_some() {
                self.unshown += 1;
            }
        }
    }

    fn finish(self, print: &mut impl FnMut(&str)) {
        if self.unshown > 0 {
            let more = if self.last.is_some() { "more " } else { "" };
            print(&format!(
                "progress: {} {more}reports not shown",
                self.unshown
            ));
        }
        if let Some(last) = &self.last {
            print(&line(last));
        }
    }
}

/// Runs `call` in a progress scope of its own and hands each report's line to `print`, on the
/// caller's task while the call runs (the reports arrive on the session's receiving loop, which
/// a terminal write must not hold up). Returns once every report made before the call ended is
/// printed; a report that comes later is not. Dropping the future (a cancelled call) prints
/// nothing more.
pub(crate) async fn printed<F: Future>(call: F, mut print: impl FnMut(&str)) -> F::Output {
    let queue = Arc::new(Queue::default());
    let sink: ProgressSink = {
        let queue = Arc::clone(&queue);
        Arc::new(move |report| queue.push(report))
    };
    let call = with_progress(sink, call);
    tokio::pin!(call);
    let mut printer = Printer::default();
    let outcome = loop {
        tokio::select! {
            biased;
            outcome = &mut call => break outcome,
            () = queue.ready.notified() => printer.print(queue.take(), &mut print),
        }
    };
    // Reports are queued before the answer they precede is handed over: whatever the call
    // reported is here now.
    printer.print(queue.take(), &mut print);
    printer.finish(&mut print);
    outcome
}

/// A number as printed: plain, or in exponent form when plain would take more than about 20
/// characters (`1e300` would be 301 digits).
fn number(x: f64) -> String {
    let magnitude = x.abs();
    if magnitude >= 1e15 || (magnitude > 0.0 && magnitude < 1e-6) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// One report as printed: `progress: P[/TOTAL][ MESSAGE]`, terminal-safe (control characters
/// shown escaped, as the CLI shows every server text on one line).
pub(crate) fn line(report: &Progress) -> String {
    let mut line = format!("progress: {}", number(report.progress));
    if let Some(total) = report.total {
        line.push('/');
        line.push_str(&number(total));
    }
    if let Some(message) = report.message.as_deref().filter(|m| !m.is_empty()) {
        line.push(' ');
        line.push_str(&escaped(message, MAX_MESSAGE));
    }
    line
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::task::Poll;

    use mcp_agent::agent::progress::report;

    use super::*;

    #[test]
    fn a_report_is_one_terminal_safe_line() {
        assert_eq!(line(&Progress::new(3.0)), "progress: 3");
        assert_eq!(
            line(
                &Progress::new(0.5)
                    .with_total(2.0)
                    .with_message("a\u{1b}[2J\nb")
            ),
            r"progress: 0.5/2 a\u{1b}[2J\u{a}b"
        );
        assert_eq!(
            line(&Progress::new(1e300).with_total(5e-324)),
            "progress: 1e300/5e-324"
        );
        let long = line(&Progress::new(1.0).with_message("x".repeat(10_000)));
        assert!(long.chars().count() < 260, "{} characters", long.len());
    }

    /// Yields to the printing loop once.
    async fn yield_once() {
        let mut yielded = false;
        poll_fn(|cx| {
            if yielded {
                Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await;
    }

    #[tokio::test]
    async fn reports_print_in_order_before_the_call_returns() {
        let mut lines = Vec::new();
        let answer = printed(
            async {
                for i in 1..=3 {
                    report(Progress::new(f64::from(i)).with_total(3.0));
                    yield_once().await;
                }
                report(Progress::new(4.0));
                "done"
            },
            |l| lines.push(l.to_owned()),
        )
        .await;
        assert_eq!(answer, "done");
        assert_eq!(
            lines,
            [
                "progress: 1/3",
                "progress: 2/3",
                "progress: 3/3",
                "progress: 4"
            ]
        );
    }

    #[tokio::test]
    async fn a_flood_is_cut_to_the_line_bound_and_ends_with_its_last_report() {
        let mut lines = Vec::new();
        printed(
            async {
                for i in 0..5_000u32 {
                    report(Progress::new(f64::from(i)));
                    if i % 100 == 0 {
                        yield_once().await;
                    }
                }
            },
            |l| lines.push(l.to_owned()),
        )
        .await;
        assert_eq!(lines.len(), MAX_LINES + 2, "{:?}", &lines[MAX_LINES..]);
        assert_eq!(lines[0], "progress: 0");
        let not_shown: u64 = lines[MAX_LINES]
            .strip_prefix("progress: ")
            .and_then(|l| l.strip_suffix(" more reports not shown"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", lines[MAX_LINES]));
        // Dropped from a full backlog or past the bound, all but the last are counted.
        assert_eq!(not_shown, 5_000 - MAX_LINES as u64 - 1);
        assert_eq!(lines[MAX_LINES + 1], "progress: 4999");
    }

    #[tokio::test]
    async fn a_burst_past_the_backlog_keeps_its_newest_reports() {
        let mut lines = Vec::new();
        printed(
            async {
                for i in 0..(BACKLOG as u32 + 10) {
                    report(Progress::new(f64::from(i)));
                }
            },
            |l| lines.push(l.to_owned()),
        )
        .await;
        assert_eq!(lines.len(), BACKLOG + 1);
        assert_eq!(lines[0], "progress: 10");
        assert_eq!(lines[BACKLOG - 1], format!("progress: {}", BACKLOG + 9));
        assert_eq!(lines[BACKLOG], "progress: 10 reports not shown");
    }
}
