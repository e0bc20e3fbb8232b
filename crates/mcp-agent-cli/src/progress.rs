//! A call's progress on the terminal: the reports its server sends while it runs, a line each
//! on stderr, in order, all printed before the call's result.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mcp_agent::agent_core::progress::{Progress, ProgressSink, with_progress};

use super::term::inline;

/// Reports waiting to be printed, at most; more are dropped (a server cannot fill the memory).
const BACKLOG: usize = 256;

/// The longest progress message printed, in characters.
const MAX_MESSAGE: usize = 200;

/// Runs `call` in a progress scope of its own, handing each report to `print` on a task of its
/// own (the reports arrive on the session's receiving loop, which a terminal write must not
/// hold up). Returns once the reports made before the call's end are printed.
pub(crate) async fn printed<F: Future>(
    call: F,
    print: impl Fn(&Progress) + Send + 'static,
) -> F::Output {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Progress>(BACKLOG);
    let sink: ProgressSink = Arc::new(move |report| {
        let _ = tx.try_send(report);
    });
    let printer = tokio::spawn(async move {
        while let Some(report) = rx.recv().await {
            print(&report);
        }
    });
    let outcome = with_progress(sink, call).await;
    // The call is over: its sink is gone once the session lets go of it, which ends the
    // printer (bounded, should anything still hold the sink).
    let _ = tokio::time::timeout(Duration::from_secs(2), printer).await;
    outcome
}

/// One report as printed: `progress: P[/TOTAL][ MESSAGE]`, terminal-safe (control characters
/// shown escaped, as the CLI shows every server text on one line).
pub(crate) fn line(report: &Progress) -> String {
    let mut line = format!("progress: {}", report.progress);
    if let Some(total) = report.total {
        line.push_str(&format!("/{total}"));
    }
    if let Some(message) = report.message.as_deref().filter(|m| !m.is_empty()) {
        line.push(' ');
        line.push_str(&inline(message, MAX_MESSAGE));
    }
    line
}

#[cfg(test)]
mod tests {
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
    }
}
