//! `[serve] rate_limit` with `[serve] state`: three replicas behind nginx round robin count
//! one budget in Redis, so the fleet lets through what one replica would, within 5%.

use integration_tests::fleet::{Fleet, FleetOptions, check_rate_limit};

/// The fleet's limit: 50 requests a second after a burst of 50.
const PER_SECOND: f64 = 50.0;
const BURST: u32 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_let_through_one_budget_within_five_percent() {
    let Some(fleet) = Fleet::start(FleetOptions::default().with_serve(format!(
        "rate_limit = {{ per_second = {PER_SECOND}, burst = {BURST} }}"
    )))
    .await
    else {
        return;
    };
    // 120 a second for 4 s: 40 a second at each replica, under its own in-memory limit, so
    // only the shared one refuses; the three together get 2.4× the fleet's budget.
    let check = check_rate_limit(fleet.lb.addr(), PER_SECOND, BURST, 120.0, 480).await;
    eprintln!("rate limit through the fleet: {check:?}");
    assert!(
        check.other.is_empty(),
        "only 200 and 429 expected: {check:?}"
    );
    assert!(
        (check.accuracy() - 1.0).abs() <= 0.05,
        "{} let through, {:.1} expected: {check:?}",
        check.allowed,
        check.expected
    );
    // Each replica both served and refused: the budget is the fleet's, not one replica's.
    let passed = fleet.lb.passed();
    for replica in &fleet.replicas {
        let at = replica.addr().to_string();
        let mine: Vec<_> = passed
            .iter()
            .filter(|p| p.backends == [at.clone()])
            .collect();
        assert!(mine.iter().any(|p| p.status == 200), "{at} served none");
        assert!(mine.iter().any(|p| p.status == 429), "{at} refused none");
    }
}
