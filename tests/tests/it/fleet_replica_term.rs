//! One of three replicas sent SIGTERM while clients call through the balancer: it stops
//! taking connections, answers every call it holds, and exits 0. Nothing comes back broken:
//! no `5xx`, no hang; a call that reaches it on a kept-alive connection once it drains is
//! refused with a result saying it was not run (counted), and the client goes on.

use std::time::{Duration, SystemTime};

use integration_tests::fleet::{Fleet, FleetOptions, Load, Outcome};

/// Clients calling at once.
const CLIENTS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_replica_drains_and_no_call_fails() {
    let Some(mut fleet) = Fleet::start(
        FleetOptions::default().with_serve("rate_limit = { per_second = 100000, burst = 100000 }"),
    )
    .await
    else {
        return;
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Each call takes 500 ms upstream: several are in flight on each replica at any time.
    let running = Load::new(&fleet.url(), "kit__slow")
        .with_arguments(serde_json::json!({"ms": 500}))
        .with_clients(CLIENTS, 1)
        .run_until(stopped);
    let bound = Duration::from_secs(60);
    assert!(
        running
            .progress()
            .until(bound, |p| p.answered() >= 2 * CLIENTS)
            .await
    );
    let leaving = fleet.replicas[1].addr().to_string();
    let at = SystemTime::now();
    fleet.replicas[1].terminate();
    let code = fleet.replicas[1].exit_code().await;
    let answered = running.progress().answered();
    assert!(
        running
            .progress()
            .until(bound, |p| p.answered() >= answered + 2 * CLIENTS)
            .await,
        "calls did not go on after the replica left"
    );
    stop.send(true).unwrap();
    let report = running.report().await;

    assert_eq!(code, Some(0), "{}", fleet.replicas[1].stderr());
    assert_eq!(report.hung(), 0, "{}", report.sample_failures());
    let refused = report.failed();
    eprintln!(
        "{} calls; {} refused unrun by the draining replica",
        report.calls.len(),
        refused.len()
    );
    for call in &refused {
        let Outcome::Failed(why) = &call.outcome else {
            panic!("{call:?}");
        };
        assert!(
            why.contains("shutting down") && why.contains("was not run"),
            "broken, not refused: {call:?}"
        );
    }
    assert!(refused.len() <= CLIENTS, "{}", report.sample_failures());
    let broken = fleet
        .lb
        .passed()
        .into_iter()
        .filter(|p| p.status >= 500)
        .count();
    assert_eq!(broken, 0, "{}", fleet.lb.log());
    assert!(
        !fleet.replicas[1].stderr().contains("cut off"),
        "{}",
        fleet.replicas[1].stderr()
    );
    // It held calls when told to stop, and answered them.
    let drained = fleet
        .lb
        .passed()
        .into_iter()
        .filter(|p| p.backends == [leaving.clone()] && p.ended > at)
        .collect::<Vec<_>>();
    assert!(!drained.is_empty(), "no call was in flight on the replica");
    assert!(drained.iter().all(|p| p.status == 200), "{drained:?}");
}
