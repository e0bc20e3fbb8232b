//! The fleet's Redis killed and started again (empty) while clients call through the
//! balancer: no call hangs; under `on_error = "closed"` calls are refused while it is down
//! and answered again within 5 s of its return; under `"open"` none fails at all. 2025-11-25
//! sessions shared through it go on: the replicas holding them write their records again, and
//! the replica that parked one writes its record back too.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use integration_tests::fleet::{Fleet, FleetOptions, Load, LoadReport, Outcome, Protocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long after Redis is back every call must be answered again.
const RESUME: Duration = Duration::from_secs(5);

/// The longest any call may take, outage or not: Redis's own timeouts are 5 s.
const CALL_BOUND: Duration = Duration::from_secs(12);

/// A seal key (32 bytes, base64), for sessions shared through Redis.
const SEAL: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// What a load through a Redis restart saw.
struct Restart {
    report: LoadReport,
    /// When Redis answered again.
    back: Instant,
    /// Every status the balancer sent.
    statuses: Vec<u16>,
}

/// Runs 6 clients of `protocol` through a fleet of `options` with `on_error`, kills Redis
/// once `before` calls were answered, waits for `outage_seen` (answered and failed calls
/// since), restarts Redis and waits until 30 more calls are answered.
async fn through_a_redis_restart(
    options: FleetOptions,
    protocol: Protocol,
    on_error: &str,
    before: usize,
    outage_seen: impl Fn(usize, usize) -> bool,
) -> Option<Restart> {
    let mut fleet = Fleet::start(
        options
            .with_on_error(on_error)
            // Counted in Redis on every request, never reached.
            .with_serve("rate_limit = { per_second = 100000, burst = 100000 }"),
    )
    .await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = Load::new(&fleet.url(), "kit__echo")
        .with_protocol(protocol)
        .with_clients(6, 1)
        .with_bound(CALL_BOUND)
        .run_until(stopped);
    let bound = Duration::from_secs(30);
    assert!(
        running
            .progress()
            .until(bound, |p| p.answered() >= before)
            .await
    );
    let before = (running.progress().answered(), running.progress().failed());
    fleet.redis.stop();
    let seen = running
        .progress()
        .until(bound, |p| {
            outage_seen(p.answered() - before.0, p.failed() - before.1)
        })
        .await;
    assert!(
        seen,
        "the outage was not seen: {before:?} → {}/{}",
        running.progress().answered(),
        running.progress().failed()
    );
    fleet.redis.restart().await;
    let back = Instant::now();
    let answered = running.progress().answered();
    assert!(
        running
            .progress()
            .until(bound, |p| p.answered() >= answered + 30)
            .await,
        "calls did not resume"
    );
    stop.send(true).unwrap();
    let report = running.report().await;
    let statuses = fleet.lb.passed().iter().map(|p| p.status).collect();
    Some(Restart {
        report,
        back,
        statuses,
    })
}

impl Restart {
    /// Under `on_error = "closed"`: no call hung or took longer than the bound, calls were
    /// refused (`503`, at least `refused` of them) while Redis was down, every status is one of
    /// `statuses`, and calls were answered again within [`RESUME`] of its return.
    fn assert_refused_then_resumed(&self, refused: usize, statuses: &[u16]) {
        let report = &self.report;
        assert_eq!(report.hung(), 0, "{}", report.sample_failures());
        let slowest = report.calls.iter().map(|c| c.took()).max().unwrap();
        assert!(slowest <= CALL_BOUND, "a call took {slowest:?}");
        assert!(
            report.failed().len() >= refused,
            "{}",
            report.sample_failures()
        );
        assert!(self.statuses.contains(&503), "{:?}", self.statuses);
        assert!(
            self.statuses.iter().all(|s| statuses.contains(s)),
            "{:?}",
            self.statuses
        );
        let back = self.back;
        let first_answer = report
            .calls
            .iter()
            .filter(|c| c.outcome == Outcome::Answered && c.started >= back)
            .map(|c| c.ended)
            .min()
            .expect("answers after the restart");
        assert!(
            first_answer - back <= RESUME,
            "the first answer came {:?} after Redis was back",
            first_answer - back
        );
        let late_failures: Vec<_> = report
            .failed()
            .into_iter()
            .filter(|c| c.started >= back + RESUME)
            .collect();
        assert!(
            late_failures.is_empty(),
            "failed after {RESUME:?}: {late_failures:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_refuses_while_redis_is_down_and_resumes_within_5_s_of_its_return() {
    // The outage is seen once 12 calls were refused.
    let Some(restart) = through_a_redis_restart(
        FleetOptions::default(),
        Protocol::Stateless,
        "closed",
        30,
        |_, failed| failed >= 12,
    )
    .await
    else {
        return;
    };
    // Refused while down: the replicas' `503`, nothing else.
    restart.assert_refused_then_resumed(12, &[200, 503]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_lets_every_call_through_while_redis_is_down() {
    // The outage is seen once 30 calls were answered without Redis.
    let Some(Restart {
        report, statuses, ..
    }) = through_a_redis_restart(
        FleetOptions::default(),
        Protocol::Stateless,
        "open",
        30,
        |answered, _| answered >= 30,
    )
    .await
    else {
        return;
    };
    assert!(report.failed().is_empty(), "{}", report.sample_failures());
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_go_on_when_redis_restarts_empty() {
    // Sessions whose requests have gone round the replicas, so that each replica holds some
    // of them; refused while Redis is down (12 refusals seen).
    let Some(restart) = through_a_redis_restart(
        FleetOptions::default().with_seal_key(SEAL),
        Protocol::Session,
        "closed",
        60,
        |_, failed| failed >= 12,
    )
    .await
    else {
        return;
    };
    // Never `404`: every session was still known once Redis was back (202 for notifications,
    // 204 for the clients' `DELETE` at the end).
    restart.assert_refused_then_resumed(12, &[200, 202, 204, 503]);
    // No session was lost: none initialised again, no client started over.
    let report = &restart.report;
    assert_eq!(report.renewals, 0, "{}", report.sample_failures());
    assert_eq!(report.fresh_clients, 0, "{}", report.sample_failures());
}

/// One POST of `body` to `/mcp` at `addr` in `session` (if any), the connection closed after:
/// its status, its `Mcp-Session-Id` and its body.
async fn post(
    addr: SocketAddr,
    session: Option<&str>,
    body: &str,
) -> (u16, Option<String>, String) {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(session) = session {
        head.push_str(&format!(
            "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        ));
    }
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .expect("connect to the balancer");
        let request = format!("{head}\r\n{body}");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .expect("read the answer");
        String::from_utf8_lossy(&answer).into_owned()
    };
    let answer = tokio::time::timeout(CALL_BOUND, exchange)
        .await
        .expect("an answer within the bound");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let session = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    });
    (status, session, body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_session_goes_on_when_redis_restarts_empty() {
    // One replica, which parks the session: after the restart nobody holds it, and only the
    // replica's copy of its record can bring it back.
    let Some(mut fleet) = Fleet::start(
        FleetOptions::default()
            .with_replicas(1)
            .with_seal_key(SEAL)
            .with_serve("park_idle_sessions_seconds = 1")
            .with_env("RUST_LOG", "mcp_serve=debug"),
    )
    .await
    else {
        return;
    };
    let addr = fleet.lb.addr();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"parked","version":"1"}}}"#;
    let (status, session, body) = post(addr, None, initialize).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, _, body) = post(addr, Some(&session), initialized).await;
    assert_eq!(status, 202, "{body}");
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"kit__echo","arguments":{"n":1}}}"#;
    // Parked after the call (a machine that stalls a second between two requests may have
    // parked it before; the call restores it).
    let parkings = || {
        fleet.replicas[0]
            .stderr()
            .matches("idle session parked")
            .count()
    };
    let before = parkings();
    let (status, _, body) = post(addr, Some(&session), call).await;
    assert_eq!(status, 200, "{body}");
    let parked = Instant::now();
    while parkings() == before {
        assert!(
            parked.elapsed() < Duration::from_secs(20),
            "the session was not parked: {}",
            fleet.replicas[0].stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fleet.redis.restart().await;
    // Answered `503` while the replica writes back, never `404`.
    let back = Instant::now();
    let mut statuses = Vec::new();
    loop {
        let (status, _, body) = post(addr, Some(&session), call).await;
        statuses.push(status);
        if status == 200 {
            assert!(body.contains(r#""n":1"#), "{body}");
            break;
        }
        assert!(
            status == 503 && back.elapsed() < RESUME,
            "{statuses:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
