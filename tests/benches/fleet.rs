//! Fleet benchmark: a gateway fleet on one machine — Redis, three `mcp-agent serve --http`
//! replicas sharing it (`[serve] state`, a rate limit counted in it on every request), nginx
//! round robin in front, the test kit's server over HTTP as the upstream — against one
//! replica without Redis, side by side in the same run, every part a real process.
//!
//! ```text
//! cargo xtask bench --only fleet        # --json for the figures
//! cargo bench -p integration-tests --bench fleet
//! ```
//!
//! Needs the Redis and nginx peers (`cargo xtask peers`; without them it says so and
//! measures nothing), the `mcp-agent` binary (`MCP_AGENT_BIN`; `cargo xtask bench` builds
//! it in release) and `mcp-test-server` (`MCP_TEST_SERVER_BIN`, likewise).
//!
//! - `load`: 300 downstream clients × 20 `kit__echo` calls each, 30 clients at work at once,
//!   spread round robin by the balancer: the calls that failed (target 0), and the wall time
//!   per call through the fleet and through the single replica, in three rounds that run
//!   both in turn (which goes first alternates), so that a load that changes between them
//!   moves both: the median of the per-round ratios. The clients are 2026-07-28 (stateless)
//!   clients: each request stands alone.
//! - `sessions`: the same with 300 2025-11-25 sessions (`initialize`, then the session's id on
//!   every request) shared through Redis (the replicas have a seal key): every request may land
//!   on any replica, which restores the session there (with a run of its own over the
//!   replica's session of the shared upstream);
//!   failed calls and sessions the clients had to initialise again (target 0 each), and the
//!   wall time per call against the same sessions on the single replica, in rounds as `load`.
//! - `load.cpu_ticks` and `sessions.cpu_ticks`: where each load's CPU went, part by part (the
//!   replicas, nginx, Redis, the upstream, this process's clients; 10 ms ticks from
//!   `/proc/<pid>/stat`, median over the rounds) through the fleet and through the single
//!   replica, and the median ratio of the totals: on a machine the load keeps busy, the
//!   wall-time ratio is this one, and the parts say what it is made of.
//! - `sequential`: rounds of 200 sequential calls by one client on each path, back to back in
//!   rotating order: the median per call and the median of the per-round ratios (target
//!   ≤ 1.15×: the balancer's hop and a Redis round trip per request on top of a replica). Two
//!   more paths tell the fleet's cost apart: nginx in front of the single replica alone
//!   (`balancer_*`: the hop), and nginx round robin over three replicas without Redis
//!   (`round_robin_*`: the hop and the spreading of the calls over processes).
//! - `rate_limit`: a fleet limited to 50 requests a second (burst 50), sent 120 a second for
//!   4 s through the balancer: what got through against what the limit allows (target within
//!   5%).
//! - `token_requests`: a fleet whose upstream wants client-credentials tokens from the test
//!   kit's authorization server (the replicas share them sealed in Redis): once the shared
//!   token has expired, 50 concurrent calls sent straight to each of the 3 replicas, with
//!   the token endpoint answering 200 ms late so that they all overlap; the requests the
//!   authorization server saw for them (target exactly 1).
//!
//! No path has session affinity. The figures are printed and written as JSON to
//! `$MCP_AGENT_BENCH_PAIRED` when set (`cargo xtask bench` reads it and checks the targets).

use std::time::{Duration, Instant};

use integration_tests::bench::{median, run_paired, runtime};
use integration_tests::fleet::cpu::Ticks;
use integration_tests::fleet::{
    Client, Fleet, FleetOptions, Load, LoadReport, Protocol, Replica, check_rate_limit,
    gateway_config,
};
use mcp_test_kit::lb::LoadBalancer;
use mcp_test_kit::oauth::{AuthServer, CLIENT_ID, CLIENT_SECRET};
use mcp_transport_http::{HttpConnector, HttpOptions};
use serde_json::{Map, Value, json};

/// The fleet's replicas.
const REPLICAS: usize = 3;
/// Counted in Redis on every request, never reached.
const UNREACHED_LIMIT: &str = "rate_limit = { per_second = 1000000, burst = 1000000 }";
/// Concurrent calls per replica on an expired token.
const CALLS_ON_EXPIRED: usize = 50;
/// The seal key the replicas share sessions and upstream tokens with (32 bytes, base64).
const SEAL_KEY: &str = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";
/// The rate-limit run's limit.
const RATE_PER_SECOND: f64 = 50.0;
const RATE_BURST: u32 = 50;

/// The sizes of one run: full under `cargo bench`, a quick check under `cargo test --benches`.
struct Sizes {
    /// Rounds of each load, through the fleet and the single replica in turn.
    load_rounds: usize,
    sessions: usize,
    calls_per_session: usize,
    in_flight: usize,
    rounds: usize,
    calls_per_round: usize,
    rate_requests: usize,
}

impl Sizes {
    fn new(full: bool) -> Self {
        if full {
            Self {
                load_rounds: 3,
                sessions: 300,
                calls_per_session: 20,
                in_flight: 30,
                rounds: 15,
                calls_per_round: 200,
                rate_requests: 480,
            }
        } else {
            Self {
                load_rounds: 1,
                sessions: 6,
                calls_per_session: 5,
                in_flight: 3,
                rounds: 2,
                calls_per_round: 10,
                rate_requests: 120,
            }
        }
    }
}

fn main() {
    run_paired(|full| {
        let figures = runtime().block_on(measure(&Sizes::new(full)));
        println!(
            "fleet: {}",
            serde_json::to_string_pretty(&figures).unwrap_or_default()
        );
        figures
    });
}

async fn measure(sizes: &Sizes) -> Value {
    let options = FleetOptions::default()
        .with_replicas(REPLICAS)
        .with_serve(UNREACHED_LIMIT)
        .with_seal_key(SEAL_KEY);
    let Some(fleet) = Fleet::start(options).await else {
        return json!({"skipped": "the Redis or nginx peer is not installed (cargo xtask peers)"});
    };
    // One replica without Redis, on the same upstream, reached directly.
    let dir = tempfile::tempdir().expect("a directory");
    let config = gateway_config(dir.path(), fleet.upstream_url(), &[]);
    let single = Replica::start(&config, &[]).await;

    let load = |url: &str, protocol: Protocol| {
        Load::new(url, "kit__echo")
            .with_protocol(protocol)
            .with_clients(sizes.sessions, sizes.calls_per_session)
            .with_in_flight(sizes.in_flight)
    };
    // The processes whose CPU each path's load spends (the upstream and this process, the
    // clients', are on both).
    let upstream = fleet.upstream.as_ref().map_or(0, |u| u.pid());
    let mut fleet_parts: Vec<(&str, u32)> = fleet
        .replicas
        .iter()
        .map(|r| ("replicas", r.pid()))
        .collect();
    fleet_parts.extend([("balancer", fleet.lb.pid()), ("redis", fleet.redis.pid())]);
    let shared_parts = [("upstream", upstream), ("clients", std::process::id())];
    fleet_parts.extend(shared_parts);
    let single_parts = [("replica", single.pid()), shared_parts[0], shared_parts[1]];
    let spending = async |parts: &[(&str, u32)], url: &str, protocol: Protocol| {
        let before = Ticks::of(parts);
        let report = load(url, protocol).run().await;
        (report, Ticks::of(parts).since(&before))
    };
    let mut loads = Vec::new();
    for protocol in [Protocol::Stateless, Protocol::Session] {
        let mut rounds = Vec::new();
        let mut ticks = Vec::new();
        for round in 0..sizes.load_rounds {
            // Each round runs both, the one that went first last time going second.
            let (through_fleet, through_single) = if round % 2 == 0 {
                let through_fleet = spending(&fleet_parts, &fleet.url(), protocol).await;
                (
                    through_fleet,
                    spending(&single_parts, &single.url(), protocol).await,
                )
            } else {
                let through_single = spending(&single_parts, &single.url(), protocol).await;
                (
                    spending(&fleet_parts, &fleet.url(), protocol).await,
                    through_single,
                )
            };
            rounds.push((through_fleet.0, through_single.0));
            ticks.push((through_fleet.1, through_single.1));
        }
        let mut figures = load_figures(sizes, &rounds);
        figures["cpu_ticks"] = cpu_figures(&ticks);
        loads.push(figures);
    }
    let sessions_figures = loads.pop().unwrap_or_default();
    let load_figures = loads.pop().unwrap_or_default();

    // The fleet's cost apart: the balancer before the single replica alone, and before it
    // and two more replicas like it (no Redis).
    let others = [
        Replica::start(&config, &[]).await,
        Replica::start(&config, &[]).await,
    ];
    let addrs = [single.addr(), others[0].addr(), others[1].addr()];
    let balancers = (
        LoadBalancer::start(&addrs[..1]).await,
        LoadBalancer::start(&addrs).await,
    );
    let (Some(balanced), Some(round_robin)) = balancers else {
        return json!({"skipped": "the nginx peer is not installed (cargo xtask peers)"});
    };
    let paths = Paths {
        fleet: fleet.url(),
        single: single.url(),
        balanced: balanced.url("/mcp"),
        round_robin: round_robin.url("/mcp"),
    };
    let sequential = sequential(&paths, sizes).await;
    drop((balanced, round_robin, others));
    drop(single);
    drop(fleet);
    let rate_limit = rate_limit(sizes).await;
    let token_requests = token_requests().await;
    json!({
        "replicas": REPLICAS,
        "load": load_figures,
        "sessions": sessions_figures,
        "sequential": sequential,
        "rate_limit": rate_limit,
        "token_requests": token_requests,
    })
}

/// The figures of a load's rounds, each through the fleet and through the single replica:
/// calls, failures and renewals over every round; per call, the medians of the rounds; the
/// ratio, the median of the per-round ratios.
fn load_figures(sizes: &Sizes, rounds: &[(LoadReport, LoadReport)]) -> Value {
    let per_call_us = |r: &LoadReport| r.per_call().as_secs_f64() * 1e6;
    let sum = |count: fn(&LoadReport) -> usize| -> usize {
        rounds.iter().map(|(fleet, _)| count(fleet)).sum()
    };
    for (through_fleet, _) in rounds {
        if !through_fleet.failed().is_empty() {
            eprintln!("fleet: failed calls:\n{}", through_fleet.sample_failures());
        }
    }
    let ratios: Vec<f64> = rounds
        .iter()
        .map(|(fleet, single)| per_call_us(fleet) / per_call_us(single))
        .collect();
    json!({
        "sessions": sizes.sessions,
        "calls_per_session": sizes.calls_per_session,
        "in_flight": sizes.in_flight,
        "rounds": rounds.len(),
        "calls": sum(|r| r.calls.len()),
        "failed": sum(|r| r.failed().len()),
        "failed_single": rounds.iter().map(|(_, single)| single.failed().len()).sum::<usize>(),
        "renewals": rounds.iter().map(|(fleet, _)| fleet.renewals).sum::<u64>(),
        "fresh_clients": sum(|r| r.fresh_clients),
        "fleet_us_per_call": round(median(rounds.iter().map(|(f, _)| per_call_us(f)).collect()), 1),
        "single_us_per_call": round(median(rounds.iter().map(|(_, s)| per_call_us(s)).collect()), 1),
        "round_ratios": ratios.iter().map(|r| round(*r, 3)).collect::<Vec<_>>(),
        "ratio": round(median(ratios), 3),
    })
}

/// Where each round's CPU went, through the fleet and through the single replica: the median
/// ticks of each part over the rounds, and the median of the per-round ratios of the totals
/// (the load is CPU-bound on a small machine: this ratio is what its wall-time ratio is made
/// of, part by part).
fn cpu_figures(rounds: &[(Ticks, Ticks)]) -> Value {
    let medians = |side: fn(&(Ticks, Ticks)) -> &Ticks| -> Value {
        let Some(first) = rounds.first() else {
            return json!({});
        };
        let mut parts: Map<String, Value> = side(first)
            .parts()
            .map(|(part, _)| {
                let ticks = rounds.iter().map(|r| side(r).get(part) as f64).collect();
                (part.to_owned(), json!(median(ticks)))
            })
            .collect();
        let totals = rounds.iter().map(|r| side(r).total() as f64).collect();
        parts.insert("total".into(), json!(median(totals)));
        Value::Object(parts)
    };
    let ratios = rounds
        .iter()
        .filter(|(_, single)| single.total() > 0)
        .map(|(fleet, single)| fleet.total() as f64 / single.total() as f64)
        .collect();
    json!({
        "fleet": medians(|r| &r.0),
        "single": medians(|r| &r.1),
        "total_ratio": round(median(ratios), 3),
    })
}

/// The endpoints the sequential rounds call, the fleet's and the three it is compared with.
struct Paths {
    fleet: String,
    single: String,
    balanced: String,
    round_robin: String,
}

/// Rounds of sequential calls by one client per path, rotating which goes first.
async fn sequential(paths: &Paths, sizes: &Sizes) -> Value {
    let connector = HttpConnector::new(HttpOptions::default()).expect("an HTTP connector");
    let urls = [
        &paths.fleet,
        &paths.single,
        &paths.balanced,
        &paths.round_robin,
    ];
    let mut clients = Vec::with_capacity(urls.len());
    for url in urls {
        let client = Client::connect(&connector, url, Protocol::Stateless).await;
        clients.push(client.expect("a client"));
    }
    let mut arguments = Map::new();
    arguments.insert("text".into(), Value::from("hello, fleet"));
    let mut failed = 0;
    let mut run = async |client: &Client, calls: usize| {
        let started = Instant::now();
        for _ in 0..calls {
            failed += usize::from(client.call("kit__echo", &arguments).await.is_err());
        }
        started.elapsed().as_secs_f64() * 1e6 / calls as f64
    };
    // Warm every path up.
    for client in &clients {
        run(client, sizes.calls_per_round.min(20)).await;
    }
    let mut times = vec![Vec::new(); clients.len()];
    for r in 0..sizes.rounds {
        for i in 0..clients.len() {
            let path = (i + r) % clients.len();
            times[path].push(run(&clients[path], sizes.calls_per_round).await);
        }
    }
    for client in clients {
        client.close().await;
    }
    // Each path's median per call, and the median of its per-round ratios to the single
    // replica's.
    let per_call = |path: usize| round(median(times[path].clone()), 1);
    let ratio = |path: usize| {
        let ratios = times[path].iter().zip(&times[1]).map(|(x, s)| x / s);
        round(median(ratios.collect()), 3)
    };
    json!({
        "rounds": sizes.rounds,
        "calls_per_round": sizes.calls_per_round,
        "failed": failed,
        "fleet_us_per_call": per_call(0),
        "single_us_per_call": per_call(1),
        "ratio": ratio(0),
        "balancer_us_per_call": per_call(2),
        "balancer_ratio": ratio(2),
        "round_robin_us_per_call": per_call(3),
        "round_robin_ratio": ratio(3),
    })
}

/// A fleet limited to 50 requests a second, sent 120 a second through the balancer.
async fn rate_limit(sizes: &Sizes) -> Value {
    let options = FleetOptions::default()
        .with_replicas(REPLICAS)
        .with_serve(format!(
            "rate_limit = {{ per_second = {RATE_PER_SECOND}, burst = {RATE_BURST} }}"
        ));
    let Some(fleet) = Fleet::start(options).await else {
        return Value::Null;
    };
    let check = check_rate_limit(
        fleet.lb.addr(),
        RATE_PER_SECOND,
        RATE_BURST,
        120.0,
        sizes.rate_requests,
    )
    .await;
    json!({
        "per_second": RATE_PER_SECOND,
        "burst": RATE_BURST,
        "sent": check.sent,
        "allowed": check.allowed,
        "refused": check.refused,
        "other": check.other.iter().map(|(s, n)| json!([s, n])).collect::<Vec<_>>(),
        "window_s": round(check.window.as_secs_f64(), 3),
        "expected": round(check.expected, 1),
        "accuracy": round(check.accuracy(), 4),
    })
}

/// The token requests of [`REPLICAS`] × [`CALLS_ON_EXPIRED`] concurrent calls on an expired
/// shared token (see the crate docs).
async fn token_requests() -> Value {
    let Ok(auth) = AuthServer::start().await else {
        return json!({"skipped": "the authorization server did not start"});
    };
    // The first token lives 2 s: long enough to be shared, short enough to wait out.
    auth.set_expires_in(2);
    let credentials = format!(
        "auth = {{ oauth_client_credentials = {{ client_id = {CLIENT_ID:?}, \
         client_secret = {CLIENT_SECRET:?}, token_url = {:?} }} }}",
        auth.token_url()
    );
    let options = FleetOptions::default()
        .with_replicas(REPLICAS)
        .with_seal_key(SEAL_KEY)
        .with_server(credentials);
    let Some(fleet) = Fleet::start(options).await else {
        return Value::Null;
    };
    let calls = |url: &str, clients: usize| {
        Load::new(url, "kit__echo")
            .with_clients(clients, 1)
            .with_in_flight(clients)
    };
    // Every replica has its upstream session open, on the one token the fleet took.
    let mut warm_failed = 0;
    for replica in &fleet.replicas {
        warm_failed += calls(&replica.url(), 1).run().await.failed().len();
    }
    let warm = auth.token_requests();
    // Past the first token's lifetime: every replica's copy, and Redis's, has expired.
    tokio::time::sleep(Duration::from_secs(3)).await;
    auth.set_expires_in(3600);
    auth.set_delay(Duration::from_millis(200));
    let before = auth.token_requests();
    let started = Instant::now();
    let reports = futures::future::join_all(
        fleet
            .replicas
            .iter()
            .map(|replica| async move { calls(&replica.url(), CALLS_ON_EXPIRED).run().await }),
    )
    .await;
    let took = started.elapsed();
    let sent: usize = reports.iter().map(|r| r.calls.len()).sum();
    let failed: usize = reports.iter().map(|r| r.failed().len()).sum();
    json!({
        "replicas": REPLICAS,
        "calls_per_replica": CALLS_ON_EXPIRED,
        "warm_up_requests": warm,
        "warm_up_failed": warm_failed,
        "calls": sent,
        "failed": failed,
        "took_ms": round(took.as_secs_f64() * 1e3, 1),
        "requests": auth.token_requests() - before,
    })
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}
