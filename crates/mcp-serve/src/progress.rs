//! A call's progress, passed to the client that asked for it (`_meta.progressToken`) as
//! `notifications/progress` on the call's stream.
//!
//! The call runs inside an [`agent_core::progress`] scope: a native tool reports with
//! [`agent_core::progress::report`], and a gateway's upstream session relays its server's
//! reports there. Reports reach the client in order and before the call's answer; past
//! [`BACKLOG`] reports not yet sent, more are dropped (the client sees fewer, never a stalled
//! call), and only increasing progress goes out.

use std::future::Future;
use std::sync::Arc;

use agent_core::progress::{Progress, ProgressSink, with_progress};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;

/// Reports waiting to be sent to the client, at most.
pub(crate) const BACKLOG: usize = 64;

/// Runs `call`, sending the progress reported meanwhile to `peer` under its `token`.
pub(crate) async fn relayed<F: Future>(
    peer: &Peer<RoleServer>,
    token: ProgressToken,
    call: F,
) -> F::Output {
    let (tx, mut rx) = mpsc::channel::<Progress>(BACKLOG);
    let sink: ProgressSink = Arc::new(move |report| {
        let _ = tx.try_send(report);
    });
    let call = with_progress(sink, call);
    tokio::pin!(call);
    let mut last = None;
    loop {
        tokio::select! {
            Some(report) = rx.recv() => send(peer, &token, &mut last, report).await,
            outcome = &mut call => {
                // What was reported before the answer goes out before it.
                while let Ok(report) = rx.try_recv() {
                    send(peer, &token, &mut last, report).await;
                }
                return outcome;
            }
        }
    }
}

/// Sends one report, if its progress is above the last one sent.
async fn send(
    peer: &Peer<RoleServer>,
    token: &ProgressToken,
    last: &mut Option<f64>,
    report: Progress,
) {
    let Some(report) = report.bounded(*last) else {
        return;
    };
    *last = Some(report.progress);
    let mut params = ProgressNotificationParam::new(token.clone(), report.progress);
    params.total = report.total;
    params.message = report.message;
    // A client gone mid-call gets nothing more; the call's own end deals with it.
    let _ = peer.notify_progress(params).await;
}
