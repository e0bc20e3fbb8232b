//! A fleet of three `mcp-agent serve` replicas sharing a Redis, behind nginx round robin:
//! stateless (2026-07-28) clients' calls are spread over every replica and all answered.

use integration_tests::fleet::{Fleet, FleetOptions, Load};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_through_the_balancer_reach_every_replica_and_all_are_answered() {
    let Some(fleet) = Fleet::start(FleetOptions::default().with_serve(
        // Counted in Redis on every request, never reached.
        "rate_limit = { per_second = 100000, burst = 100000 }",
    ))
    .await
    else {
        return;
    };
    let report = Load::new(&fleet.url(), "kit__echo")
        .with_clients(12, 10)
        .with_in_flight(6)
        .run()
        .await;
    assert_eq!(report.calls.len(), 120);
    assert!(report.failed().is_empty(), "{}", report.sample_failures());
    let passed = fleet.lb.passed();
    for (i, replica) in fleet.replicas.iter().enumerate() {
        let served = passed
            .iter()
            .filter(|p| p.status == 200 && p.backends == [replica.addr().to_string()])
            .count();
        assert!(served > 0, "replica {i} served nothing: {passed:?}");
    }
}
