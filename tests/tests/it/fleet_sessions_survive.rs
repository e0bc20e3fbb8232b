//! Replicas sharing sessions (`[serve] state` with a seal key) behind nginx round robin:
//! 2025-11-25 sessions, each request of which may land on any replica, go on when one
//! replica is SIGKILLed under load. Only the calls in flight on it fail; no session is
//! opened again (the transport never re-initialises one), and every session's next calls are
//! answered by the others.

use integration_tests::fleet::{Fleet, FleetOptions, Load, Protocol};

/// Sessions calling at once.
const SESSIONS: usize = 9;

/// A seal key (32 bytes, base64).
const SEAL: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_goes_on_when_a_replica_is_killed() {
    let Some(mut fleet) = Fleet::start(FleetOptions::default().with_seal_key(SEAL)).await else {
        return;
    };
    let (report, window) = Load::new(&fleet.url(), "kit__slow")
        .with_arguments(serde_json::json!({"ms": 300}))
        .with_protocol(Protocol::Session)
        .with_clients(SESSIONS, 1)
        .around(fleet.replicas[1].kill())
        .await;

    let failed = report.failed();
    eprintln!(
        "{} session calls, {} failed with the replica killed mid-load",
        report.calls.len(),
        failed.len()
    );
    report.assert_only_in_flight_failed(window);
    assert!(failed.len() <= SESSIONS, "{}", report.sample_failures());
    assert_eq!(report.renewals, 0, "a session was initialised again");
    assert_eq!(report.fresh_clients, 0, "{}", report.sample_failures());
}
