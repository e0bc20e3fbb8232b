//! One of three replicas sent SIGTERM while clients call through the balancer: it stops
//! taking connections, answers every call it holds, and exits 0. Nothing it ran comes back
//! broken: every call the upstream started was answered, none hung. A request that meets it
//! once it drains is refused without being run (counted) — with a result saying so, or, when
//! the replica closes the connection it came on (a kept-alive one at the end of the drain, or
//! one still waiting to be accepted when it stopped listening), with the balancer's `502` —
//! and the client goes on.

use std::time::SystemTime;

use integration_tests::fleet::{Fleet, FleetOptions, Load, Outcome};

/// Clients calling at once.
const CLIENTS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_replica_drains_and_no_call_it_ran_fails() {
    let Some(mut fleet) = Fleet::start(
        FleetOptions::default()
            .with_serve("rate_limit = { per_second = 100000, burst = 100000 }")
            .with_recorded_upstream(),
    )
    .await
    else {
        return;
    };
    let leaving = fleet.replicas[1].addr().to_string();
    let url = fleet.url();
    let replica = &mut fleet.replicas[1];
    let (mut at, mut code) = (SystemTime::now(), None);
    // Each call takes 500 ms upstream: several are in flight on each replica at any time.
    let (report, _) = Load::new(&url, "kit__slow")
        .with_arguments(serde_json::json!({"ms": 500}))
        .with_clients(CLIENTS, 1)
        .around(async {
            at = SystemTime::now();
            replica.terminate();
            code = replica.exit_code().await;
        })
        .await;

    let stderr = fleet.replicas[1].stderr();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("cut off"), "{stderr}");
    assert_eq!(report.hung(), 0, "{}", report.sample_failures());
    // Every call the upstream ran was answered: no failed call was run.
    let record = fleet.upstream.as_ref().and_then(|u| u.record()).unwrap();
    let ran = record.snapshot().calls_of("slow");
    assert_eq!(ran, report.answered(), "{}", report.sample_failures());

    let refused = report.failed();
    let closed: Vec<_> = fleet
        .lb
        .passed()
        .into_iter()
        .filter(|p| p.status >= 500)
        .collect();
    eprintln!(
        "{} calls; {} refused unrun by the draining replica, {} of them as `502`",
        report.calls.len(),
        refused.len(),
        closed.len()
    );
    for request in &closed {
        assert_eq!(request.status, 502, "{request:?}");
        assert_eq!(request.backends.last(), Some(&leaving), "{request:?}");
    }
    for call in &refused {
        let Outcome::Failed(why) = &call.outcome else {
            panic!("{call:?}");
        };
        let said = why.contains("shutting down") && why.contains("was not run");
        assert!(said || why.contains("HTTP 502"), "{call:?}");
    }
    let said_not_run = refused.len() - closed.len();
    assert!(
        said_not_run + closed.len() <= CLIENTS,
        "{}",
        report.sample_failures()
    );

    // It held calls when told to stop, and answered them.
    let drained: Vec<_> = fleet
        .lb
        .passed()
        .into_iter()
        .filter(|p| p.backends == [leaving.clone()] && p.ended > at)
        .collect();
    assert!(!drained.is_empty(), "no call was in flight on the replica");
    assert!(drained.iter().any(|p| p.status == 200), "{drained:?}");
}
