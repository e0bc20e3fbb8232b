//! Replicas sharing sessions (`[serve] state` with a seal key) behind nginx round robin:
//! 2025-11-25 sessions, each request of which may land on any replica, go on when one
//! replica is SIGKILLed under load: only the calls in flight on it fail; or SIGTERMed: it
//! answers what it runs and refuses the rest unrun. No session is opened again (the transport
//! never re-initialises one), and every session's next calls are answered by the others.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_goes_on_when_a_replica_drains() {
    let Some(mut fleet) = Fleet::start(
        FleetOptions::default()
            .with_seal_key(SEAL)
            .with_recorded_upstream(),
    )
    .await
    else {
        return;
    };
    let url = fleet.url();
    let replica = &mut fleet.replicas[1];
    let mut code = None;
    let (report, _) = Load::new(&url, "kit__slow")
        .with_arguments(serde_json::json!({"ms": 300}))
        .with_protocol(Protocol::Session)
        .with_clients(SESSIONS, 1)
        .around(async {
            replica.terminate();
            code = replica.exit_code().await;
        })
        .await;

    let stderr = fleet.replicas[1].stderr();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report.hung(), 0, "{}", report.sample_failures());
    // What the draining replica ran, it answered; what it refused, it did not run.
    let record = fleet.upstream.as_ref().and_then(|u| u.record()).unwrap();
    let ran = record.snapshot().calls_of("slow");
    assert_eq!(ran, report.answered(), "{}", report.sample_failures());
    assert!(
        report.failed().len() <= SESSIONS,
        "{}",
        report.sample_failures()
    );
    // Every session went on with the other replicas: none initialised again.
    assert_eq!(report.renewals, 0, "a session was initialised again");
    assert_eq!(report.fresh_clients, 0, "{}", report.sample_failures());
}
