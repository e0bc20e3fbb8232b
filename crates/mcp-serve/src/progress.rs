//! A call's progress, passed to the client that asked for it (`_meta.progressToken`) as
//! `notifications/progress` on the call's stream.
//!
//! The call runs inside an [`agent_core::progress`] scope: a native tool reports with
//! [`agent_core::progress::report`], and a gateway's upstream session relays its server's
//! reports there. Only increasing, finite progress is kept ([`Progress::bounded`]); reports
//! reach the client in order and before the call's answer, and the call goes on while one is
//! being sent. Past [`BACKLOG`] reports not yet sent, the oldest waiting one is dropped (the
//! client sees fewer, the newest among them, never a stalled call).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::progress::{Progress, ProgressSink, with_progress};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::Notify;

/// Reports waiting to be sent to the client, at most.
pub(crate) const BACKLOG: usize = 64;

/// The reports of one call not yet sent, and the last progress taken.
#[derive(Default)]
struct Waiting {
    reports: VecDeque<Progress>,
    last: Option<f64>,
}

/// Runs `call`, sending the progress reported meanwhile to `peer` under its `token`.
pub(crate) async fn relayed<F: Future>(
    peer: &Peer<RoleServer>,
    token: ProgressToken,
    call: F,
) -> F::Output {
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    let ready = Arc::new(Notify::new());
    let sink: ProgressSink = {
        let (waiting, ready) = (waiting.clone(), ready.clone());
        Arc::new(move |report: Progress| {
            let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(report) = report.bounded(waiting.last) else {
                return;
            };
            waiting.last = Some(report.progress);
            if waiting.reports.len() == BACKLOG {
                waiting.reports.pop_front();
            }
            waiting.reports.push_back(report);
            drop(waiting);
            ready.notify_one();
        })
    };
    let next = || {
        waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reports
            .pop_front()
    };
    let call = with_progress(sink, call);
    tokio::pin!(call);
    let mut sending: Option<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = None;
    loop {
        if sending.is_none()
            && let Some(report) = next()
        {
            sending = Some(Box::pin(send(peer, token.clone(), report)));
        }
        let step = tokio::select! {
            biased;
            outcome = &mut call => Step::Done(outcome),
            () = async { sending.as_mut().expect("guarded").await }, if sending.is_some() => {
                Step::Sent
            }
            () = ready.notified(), if sending.is_none() => Step::Reported,
        };
        match step {
            Step::Done(outcome) => {
                // What was reported before the answer goes out before it, in order.
                if let Some(in_flight) = sending.take() {
                    in_flight.await;
                }
                while let Some(report) = next() {
                    send(peer, token.clone(), report).await;
                }
                return outcome;
            }
            Step::Sent => sending = None,
            Step::Reported => {}
        }
    }
}

/// What woke [`relayed`]: the call's end, a report sent, or a new report.
enum Step<T> {
    Done(T),
    Sent,
    Reported,
}

/// Sends one report. A client gone mid-call gets nothing more; the call's own end deals with
/// it.
async fn send(peer: &Peer<RoleServer>, token: ProgressToken, report: Progress) {
    let mut params = ProgressNotificationParam::new(token, report.progress);
    params.total = report.total;
    params.message = report.message;
    let _ = peer.notify_progress(params).await;
}
