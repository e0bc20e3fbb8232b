//! Replicas sharing sessions (`[serve] state` with a seal key) behind nginx round robin:
//! 2025-11-25 sessions, each request of which may land on any replica, go on when one
//! replica is SIGKILLed under load. Only the calls in flight on it fail; no session is
//! opened again (the transport never re-initialises one), and every session's next calls are
//! answered by the others.

use std::time::{Duration, Instant};

use integration_tests::fleet::{Fleet, FleetOptions, Load, Outcome, Protocol};

/// Sessions calling at once.
const SESSIONS: usize = 9;

/// A seal key (32 bytes, base64).
const SEAL: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_goes_on_when_a_replica_is_killed() {
    let Some(mut fleet) = Fleet::start(FleetOptions::default().with_seal_key(SEAL)).await else {
        return;
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = Load::new(&fleet.url(), "kit__slow")
        .with_arguments(serde_json::json!({"ms": 300}))
        .with_protocol(Protocol::Session)
        .with_clients(SESSIONS, 1)
        .run_until(stopped);
    let bound = Duration::from_secs(60);
    let flowing = running
        .progress()
        .until(bound, |p| p.answered() >= 2 * SESSIONS);
    assert!(flowing.await, "calls did not flow");
    let before = Instant::now();
    fleet.replicas[1].kill().await;
    let after = Instant::now();
    let went_on = running
        .progress()
        .until(bound, |p| p.clients_answered_since(after) == SESSIONS);
    assert!(went_on.await, "sessions did not go on after the kill");
    stop.send(true).unwrap();
    let report = running.report().await;

    let failed = report.failed();
    eprintln!(
        "{} session calls, {} failed with the replica killed mid-load",
        report.calls.len(),
        failed.len()
    );
    assert_eq!(report.hung(), 0, "{}", report.sample_failures());
    assert_eq!(report.renewals, 0, "a session was initialised again");
    assert_eq!(report.fresh_clients, 0, "{}", report.sample_failures());
    assert!(failed.len() <= SESSIONS, "{}", report.sample_failures());
    for call in &failed {
        assert!(
            call.started <= after && call.ended >= before,
            "failed but not in flight at the kill: {call:?}"
        );
    }
    for session in 0..SESSIONS {
        let next: Vec<_> = report
            .calls
            .iter()
            .filter(|c| c.client == session && c.started > after)
            .collect();
        assert!(
            !next.is_empty(),
            "session {session} made no call after the kill"
        );
        assert!(
            next.iter().all(|c| c.outcome == Outcome::Answered),
            "session {session}: {next:?}"
        );
    }
}
