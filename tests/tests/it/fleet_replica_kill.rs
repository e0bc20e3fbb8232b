//! One of three replicas SIGKILLed while stateless (2026-07-28) clients call through the
//! balancer: only the calls in flight on it fail (each answered `502` by the balancer,
//! counted), and every client goes on with its next call on the others.

use integration_tests::fleet::{Fleet, FleetOptions, Load};

/// Clients calling at once.
const CLIENTS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_calls_in_flight_on_a_killed_replica_fail() {
    let Some(mut fleet) = Fleet::start(
        FleetOptions::default()
            .with_serve("rate_limit = { per_second = 100000, burst = 100000 }")
            .with_recorded_upstream(),
    )
    .await
    else {
        return;
    };
    let killed = fleet.replicas[1].addr().to_string();
    // Each call takes 300 ms upstream: about 4 are in flight on each replica at any time.
    let (report, window) = Load::new(&fleet.url(), "kit__slow")
        .with_arguments(serde_json::json!({"ms": 300}))
        .with_clients(CLIENTS, 1)
        .around(fleet.replicas[1].kill())
        .await;

    let failed = report.failed();
    eprintln!(
        "{} calls, {} failed with the replica killed mid-load",
        report.calls.len(),
        failed.len()
    );
    report.assert_only_in_flight_failed(window);
    assert_eq!(
        report.renewals, 0,
        "stateless clients have no session to renew"
    );
    // Each client went on as it was: none had to be opened again.
    assert_eq!(report.fresh_clients, 0, "{}", report.sample_failures());
    assert!(
        !failed.is_empty(),
        "no call was in flight on the killed replica"
    );
    assert!(failed.len() <= CLIENTS, "{}", report.sample_failures());
    // No call ran twice: the upstream started each answered call, and at most the failed ones
    // besides (those the killed replica had passed on).
    let record = fleet.upstream.as_ref().and_then(|u| u.record()).unwrap();
    let ran = record.snapshot().calls_of("slow");
    let answered = report.answered();
    assert!(
        (answered..=answered + failed.len()).contains(&ran),
        "{ran} started upstream, {answered} answered, {} failed",
        failed.len()
    );
    // The balancer failed exactly those, each on the killed replica.
    let broken: Vec<_> = fleet
        .lb
        .passed()
        .into_iter()
        .filter(|p| p.status >= 500)
        .collect();
    assert_eq!(broken.len(), failed.len(), "{broken:?}\n{}", fleet.lb.log());
    for request in &broken {
        assert_eq!(request.status, 502, "{request:?}");
        assert_eq!(request.backends.last(), Some(&killed), "{request:?}");
    }
}
