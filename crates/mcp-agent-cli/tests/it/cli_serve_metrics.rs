//! `mcp-agent serve` with `[serve] metrics`: the operators' listener, apart from the MCP
//! endpoint, scraped while the real gateway serves and read with the Prometheus project's own
//! parser (the prometheus-client peer, `mcp_test_kit::prometheus`): calls counted exactly by
//! outcome (ok, tool error, denied, timeout), requests by method and status, sessions, upstream
//! opens and OAuth token requests, rate refusals; `/healthz` and `/readyz` (draining, Redis
//! gone); tool names a client makes up stay within the label bound; 200 concurrent scrapes
//! while calls run.
//!
//! They need the Prometheus parser peer (`MCP_AGENT_PEER_PROMETHEUS_PYTHON`), and the Redis one
//! for the readiness of a fleet: they skip without, or fail under `CI=true` /
//! `MCP_AGENT_REQUIRE_PEERS=1`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_test_kit::prometheus::Exposition;
use mcp_test_kit::{Event, RecordFile};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use mcp_agent::telemetry::MAX_TOOL_LABELS;

use crate::support::gateway::{Gateway, LIMIT, open_session, request};

/// A config with the test-kit server `kit` (recording its calls; `server` more keys of its
/// entry, `args` more arguments), eager exposure, `[serve] metrics` on a free loopback port and
/// `serve` more keys of `[serve]`, then `rest` (more tables).
fn config(
    server: &str,
    args: &[&str],
    serve: &str,
    rest: &str,
) -> (tempfile::TempDir, PathBuf, RecordFile) {
    let dir = tempfile::tempdir().unwrap();
    let record = RecordFile::new(dir.path().join("record.jsonl"));
    let args: String = args.iter().map(|a| format!(", {a:?}")).collect();
    let text = format!(
        "[[servers]]\nname = \"kit\"\ncommand = {:?}\nargs = [\"--record\", {:?}{args}]\n{server}\n\n\
         [serve]\nexpose = \"eager\"\nmetrics = \"127.0.0.1:0\"\n{serve}\n\n{rest}\n",
        mcp_test_kit::stdio::binary().display().to_string(),
        record.path().display().to_string(),
    );
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path, record)
}

/// Where the gateway serves its metrics, as it said before `listening on`.
fn metrics_addr(gateway: &Gateway) -> String {
    gateway
        .head
        .iter()
        .find_map(|l| l.strip_prefix("metrics on "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no `metrics on` line in {:?}", gateway.head))
        .to_owned()
}

/// `GET path` on a fresh connection: status and body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let text = String::from_utf8(answer).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// The metrics, parsed by the Prometheus parser peer; `None` when the peer is missing.
fn scrape(addr: &str) -> Option<Exposition> {
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "{body}");
    Exposition::parse(&body)
}

/// The headers of requests in `session`.
fn in_session(session: &str) -> [(&str, &str); 2] {
    [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ]
}

/// Calls `tool` with `arguments` in `session`: the JSON-RPC answer.
fn call(addr: &str, session: &str, id: u64, tool: &str, arguments: Value) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    });
    let (status, _, answer) = request(
        addr,
        "POST",
        &in_session(session),
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{answer}");
    let answer = dechunked(&answer);
    let data = answer
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.contains("\"id\""))
        .unwrap_or_else(|| answer.trim());
    serde_json::from_str(data).unwrap_or_else(|e| panic!("no answer ({e}): {answer}"))
}

/// `body` as sent in chunks (`Transfer-Encoding: chunked`), joined; as it is otherwise.
fn dechunked(body: &str) -> String {
    let mut rest = body;
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_owned();
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    if out.is_empty() { body.to_owned() } else { out }
}

/// Whether a `tools/call` answer is a tool error (`isError`).
fn is_error(answer: &Value) -> bool {
    answer["result"]["isError"] == true
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every metric the gateway lists, with its type: each is described, and typed, in a scrape.
fn assert_described(metrics: &Exposition) {
    for (family, kind) in [
        ("mcp_gateway_requests", "counter"),
        ("mcp_tool_calls", "counter"),
        ("mcp_tool_call_duration_seconds", "histogram"),
        ("mcp_sessions_active", "gauge"),
        ("mcp_upstream_opens", "counter"),
        ("mcp_rate_limited", "counter"),
        ("mcp_state_errors", "counter"),
    ] {
        let samples: Vec<_> = metrics
            .samples
            .iter()
            .filter(|s| s.family == family)
            .collect();
        assert!(!samples.is_empty(), "no {family} in {metrics:#?}");
        for sample in samples {
            assert_eq!(sample.kind, kind, "{sample:?}");
            assert!(!sample.help.is_empty(), "{sample:?} has no help");
        }
    }
}

#[test]
fn calls_requests_sessions_and_opens_are_counted_exactly_by_outcome() {
    let (_dir, file, record) = config(
        "call_timeout_seconds = 1",
        &[],
        "",
        "[policy]\napprove = [{ server = \"*\", tool = \"add\" }]",
    );
    let gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    let Some(before) = scrape(&metrics) else {
        return;
    };
    // Before anything happened: the label-less ones, at zero.
    assert_eq!(before.value("mcp_sessions_active", &[]), Some(0.0));
    assert_eq!(before.value("mcp_rate_limited_total", &[]), Some(0.0));
    assert_eq!(before.value("mcp_state_errors_total", &[]), Some(0.0));
    assert_eq!(get(&metrics, "/healthz"), (200, "ok\n".into()));
    assert_eq!(get(&metrics, "/readyz"), (200, "ready\n".into()));
    assert_eq!(get(&metrics, "/other").0, 404);

    let addr = gateway.addr();
    let session = open_session(&addr);
    for id in 1..=2 {
        let echoed = call(&addr, &session, id, "kit__echo", json!({"n": id}));
        assert!(!is_error(&echoed), "{echoed}");
    }
    let failed = call(&addr, &session, 3, "kit__fail", json!({"message": "no"}));
    assert!(is_error(&failed), "{failed}");
    let denied = call(&addr, &session, 4, "kit__add", json!({"a": 1, "b": 2}));
    let text = denied["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        is_error(&denied) && text.contains("needs approval"),
        "{denied}"
    );
    let slow = call(&addr, &session, 5, "kit__slow", json!({"ms": 30_000}));
    let text = slow["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(is_error(&slow) && text.contains("timed out"), "{slow}");
    let reached: Vec<String> = record
        .snapshot()
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Call { tool, .. } => Some(tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reached,
        ["echo", "echo", "fail", "slow"],
        "the denied call stayed"
    );

    let Some(after) = scrape(&metrics) else {
        return;
    };
    assert_described(&after);
    let calls = |tool, outcome| {
        after.value(
            "mcp_tool_calls_total",
            &[("server", "kit"), ("tool", tool), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("echo", "ok"), Some(2.0), "{after:#?}");
    assert_eq!(calls("fail", "tool_error"), Some(1.0));
    assert_eq!(calls("add", "denied"), Some(1.0));
    assert_eq!(calls("slow", "timeout"), Some(1.0));
    let total: f64 = after.named("mcp_tool_calls_total").map(|s| s.value).sum();
    assert_eq!(total, 5.0, "each call once");
    assert_eq!(
        after.value("mcp_tool_call_duration_seconds_count", &[("server", "kit")]),
        Some(4.0),
        "the calls that ran are timed"
    );
    let within_a_second = after.value(
        "mcp_tool_call_duration_seconds_bucket",
        &[("server", "kit"), ("le", "1")],
    );
    assert_eq!(
        within_a_second,
        Some(3.0),
        "the timed-out call took its second"
    );
    assert_eq!(
        after.value(
            "mcp_upstream_opens_total",
            &[("server", "kit"), ("outcome", "ok")]
        ),
        Some(1.0)
    );
    assert_eq!(after.value("mcp_sessions_active", &[]), Some(1.0));
    let requests = |method, status| {
        after.value(
            "mcp_gateway_requests_total",
            &[("method", method), ("status", status)],
        )
    };
    assert_eq!(requests("initialize", "200"), Some(1.0));
    assert_eq!(requests("notifications/initialized", "202"), Some(1.0));
    assert_eq!(requests("tools/call", "200"), Some(5.0));
    let total: f64 = after
        .named("mcp_gateway_requests_total")
        .map(|s| s.value)
        .sum();
    assert_eq!(total, 7.0, "every request, once; scrapes are not counted");

    // The session ends: the gauge follows.
    let (status, _, _) = request(&addr, "DELETE", &in_session(&session), b"");
    assert_eq!(status, 204);
    wait_until("the session to end", || {
        scrape(&metrics)
            .and_then(|m| m.value("mcp_sessions_active", &[]))
            .is_some_and(|v| v == 0.0)
    });
    let last = scrape(&metrics).unwrap();
    assert_eq!(
        last.value(
            "mcp_gateway_requests_total",
            &[("method", "DELETE"), ("status", "204")]
        ),
        Some(1.0)
    );
}

#[test]
fn readiness_fails_while_draining_and_health_holds() {
    let (_dir, file, record) = config("", &[], "", "");
    let mut gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    assert_eq!(get(&metrics, "/readyz").0, 200);
    let addr = gateway.addr();
    let session = open_session(&addr);
    let in_flight = {
        let (addr, session) = (addr.clone(), session.clone());
        std::thread::spawn(move || call(&addr, &session, 1, "kit__slow", json!({"ms": 4000})))
    };
    wait_until("the slow call to reach the upstream", || {
        record
            .snapshot()
            .events
            .iter()
            .any(|e| matches!(e, Event::Call { tool, .. } if tool == "slow"))
    });
    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    wait_until("/readyz to say draining", || {
        get(&metrics, "/readyz") == (503, "not ready: draining\n".into())
    });
    assert_eq!(
        get(&metrics, "/healthz").0,
        200,
        "the process still answers"
    );
    let answer = in_flight.join().unwrap();
    assert!(
        !is_error(&answer),
        "the call in flight ran to its end: {answer}"
    );
    assert_eq!(gateway.exit_code(), Some(0));
}

#[test]
fn with_a_drain_delay_readiness_fails_first_while_new_sessions_are_still_served() {
    // Longer than the test: a second signal ends the wait.
    let (_dir, file, _record) = config("", &[], "drain_delay_seconds = 600", "");
    let mut gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    assert_eq!(get(&metrics, "/readyz").0, 200);
    let addr = gateway.addr();
    let pid = Pid::from_raw(gateway.pid() as i32);
    kill(pid, Signal::SIGTERM).unwrap();
    wait_until("/readyz to say draining", || {
        get(&metrics, "/readyz") == (503, "not ready: draining\n".into())
    });
    // Out of the rotation, yet serving: a new session opens and its call runs.
    let session = open_session(&addr);
    let answer = call(&addr, &session, 1, "kit__add", json!({"a": 2, "b": 3}));
    assert!(!is_error(&answer), "{answer}");
    kill(pid, Signal::SIGTERM).unwrap();
    assert_eq!(gateway.exit_code(), Some(0));
    let said = gateway.lines_until("draining calls in flight");
    assert!(
        said.iter()
            .any(|l| l.contains("serving 600s more before draining")),
        "{said:?}"
    );
}

#[test]
fn a_drain_delay_runs_out_by_itself_and_the_gateway_drains() {
    let (_dir, file, _record) = config("", &[], "drain_delay_seconds = 1", "");
    let mut gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    assert_eq!(get(&metrics, "/readyz").0, 200);
    let signalled = std::time::Instant::now();
    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    let said = gateway.lines_until("draining calls in flight");
    assert!(
        said.iter()
            .any(|l| l.contains("/readyz says draining; serving 1s more before draining")),
        "{said:?}"
    );
    assert_eq!(gateway.exit_code(), Some(0), "one signal is enough");
    // A lower bound only: however loaded the machine, the wait is never shorter.
    assert!(
        signalled.elapsed() >= std::time::Duration::from_secs(1),
        "the gateway waited out its delay: {:?}",
        signalled.elapsed()
    );
}

#[test]
fn rate_refusals_are_counted_before_any_body_is_read() {
    let (_dir, file, _record) = config(
        "",
        &[],
        "rate_limit = { per_second = 0.001, burst = 2 }",
        "",
    );
    let gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    let addr = gateway.addr();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let statuses: Vec<u16> = (0..5)
        .map(|_| request(&addr, "POST", &[], ping.as_bytes()).0)
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        3,
        "{statuses:?}"
    );
    let Some(after) = scrape(&metrics) else {
        return;
    };
    assert_eq!(after.value("mcp_rate_limited_total", &[]), Some(3.0));
    assert_eq!(
        after.value(
            "mcp_gateway_requests_total",
            &[("method", "POST"), ("status", "429")]
        ),
        Some(3.0),
        "refused before the body was read: counted by the HTTP method"
    );
    let answered: f64 = after
        .named("mcp_gateway_requests_total")
        .filter(|s| s.labels["status"] != "429")
        .map(|s| s.value)
        .sum();
    assert_eq!(answered, 2.0, "{after:#?}");
}

#[test]
fn tool_names_a_server_lists_stay_within_the_label_bound() {
    let names = MAX_TOOL_LABELS + 500;
    let (_dir, file, _record) = config("", &["--extra-tools", &names.to_string()], "", "");
    let gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    let addr = gateway.addr();
    let session = open_session(&addr);
    // Four clients at once, each calling its share of the server's distinct tools.
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let (addr, session) = (addr.clone(), session.clone());
            std::thread::spawn(move || {
                for i in (client..names).step_by(4) {
                    let tool = format!("kit__tool_{i:04}");
                    let answer = call(&addr, &session, i as u64, &tool, json!({"i": i}));
                    assert!(!is_error(&answer), "{answer}");
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let Some(after) = scrape(&metrics) else {
        return;
    };
    let series: Vec<_> = after.named("mcp_tool_calls_total").collect();
    assert_eq!(
        series.len(),
        MAX_TOOL_LABELS + 1,
        "{names} tools: the bound, and `other`"
    );
    let total: f64 = series.iter().map(|s| s.value).sum();
    assert_eq!(total, names as f64, "every call counted");
    assert_eq!(
        after.value(
            "mcp_tool_calls_total",
            &[("server", "kit"), ("tool", "other"), ("outcome", "ok")]
        ),
        Some((names - MAX_TOOL_LABELS) as f64),
        "past the bound: `other`"
    );
}

#[test]
fn two_hundred_concurrent_scrapes_while_calls_run() {
    let (_dir, file, _record) = config("", &[], "", "");
    let gateway = Gateway::start(&file, &[]);
    let metrics = metrics_addr(&gateway);
    let addr = gateway.addr();
    let session = open_session(&addr);
    const CALLERS: u64 = 4;
    const CALLS: u64 = 50;
    let callers: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let (addr, session) = (addr.clone(), session.clone());
            std::thread::spawn(move || {
                for i in 0..CALLS {
                    let id = caller * CALLS + i;
                    let answer = call(&addr, &session, id, "kit__echo", json!({"i": id}));
                    assert!(!is_error(&answer), "{answer}");
                }
            })
        })
        .collect();
    let scrapers: Vec<_> = (0..200)
        .map(|_| {
            let metrics = metrics.clone();
            std::thread::spawn(move || get(&metrics, "/metrics"))
        })
        .collect();
    let echoed = |body: &str| -> f64 {
        body.lines()
            .find(|l| {
                l.starts_with("mcp_tool_calls_total{")
                    && l.contains("tool=\"echo\"")
                    && l.contains("outcome=\"ok\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .map_or(0.0, |v| v.parse().unwrap())
    };
    let mut seen = Vec::new();
    for (i, scraper) in scrapers.into_iter().enumerate() {
        let (status, body) = scraper.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("# TYPE mcp_rate_limited_total counter"),
            "{body}"
        );
        // Every 20th, whole, through the Prometheus parser (200 would take it long).
        if i % 20 == 0 && Exposition::parse(&body).is_none() {
            return;
        }
        seen.push(echoed(&body));
    }
    for caller in callers {
        caller.join().unwrap();
    }
    let Some(after) = scrape(&metrics) else {
        return;
    };
    let total = (CALLERS * CALLS) as f64;
    assert_eq!(
        after.value(
            "mcp_tool_calls_total",
            &[("server", "kit"), ("tool", "echo"), ("outcome", "ok")]
        ),
        Some(total)
    );
    assert!(seen.iter().all(|n| *n <= total), "{seen:?}");
}

#[test]
fn a_fleet_replica_is_ready_while_its_redis_answers() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(redis) = runtime.block_on(mcp_test_kit::bounded(
        mcp_test_kit::redis::RedisServer::start(),
    )) else {
        return;
    };
    let (_dir, file, _record) = config(
        "",
        &[],
        "state = { redis = { url_env = \"REDIS_URL\" } }",
        "",
    );
    let url = redis.url();
    let gateway = Gateway::start(&file, &[("REDIS_URL", url.as_str())]);
    let metrics = metrics_addr(&gateway);
    assert_eq!(get(&metrics, "/readyz"), (200, "ready\n".into()));
    drop(redis);
    let mut refused = 0;
    wait_until("/readyz to name the failing Redis", || {
        let (status, body) = get(&metrics, "/readyz");
        assert_eq!(status == 503, body.starts_with("not ready: "), "{body}");
        if body.contains("ping failed") {
            refused += 1;
        }
        refused > 0
    });
    assert_eq!(get(&metrics, "/healthz").0, 200);
    let Some(after) = scrape(&metrics) else {
        return;
    };
    assert_eq!(
        after.value("mcp_state_errors_total", &[]),
        Some(f64::from(refused)),
        "each failed PING, once"
    );
}

#[test]
fn upstream_token_requests_are_counted_by_server_and_outcome() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let auth = runtime
        .block_on(mcp_test_kit::bounded(
            mcp_test_kit::oauth::AuthServer::start(),
        ))
        .unwrap();
    let upstream = runtime
        .block_on(mcp_test_kit::bounded(mcp_test_kit::serve_http(
            mcp_test_kit::TestServerOptions::default(),
        )))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[servers]]\nname = \"up\"\nurl = {:?}\n\
         auth = {{ oauth_client_credentials = {{ client_id = {:?}, \
         client_secret = {:?}, token_url = {:?} }} }}\n\n\
         [serve]\nmetrics = \"127.0.0.1:0\"\n",
        upstream.url(),
        mcp_test_kit::oauth::CLIENT_ID,
        mcp_test_kit::oauth::CLIENT_SECRET,
        auth.token_url(),
    );
    let file = dir.path().join("gateway.toml");
    std::fs::write(&file, text).unwrap();
    let gateway = Gateway::start(Path::new(&file), &[]);
    let metrics = metrics_addr(&gateway);
    let addr = gateway.addr();
    let session = open_session(&addr);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = request(
        &addr,
        "POST",
        &in_session(&session),
        list.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(auth.token_requests(), 1);
    let Some(after) = scrape(&metrics) else {
        return;
    };
    assert_eq!(
        after.value(
            "mcp_oauth_token_requests_total",
            &[("server", "up"), ("outcome", "ok")]
        ),
        Some(1.0),
        "{after:#?}"
    );
    let samples: Vec<_> = after
        .samples
        .iter()
        .filter(|s| s.family == "mcp_oauth_token_requests")
        .collect();
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(samples[0].kind, "counter");
    assert_eq!(
        after.value(
            "mcp_upstream_opens_total",
            &[("server", "up"), ("outcome", "ok")]
        ),
        Some(1.0)
    );
}

#[test]
fn a_metrics_address_that_is_none_or_taken_is_refused_at_start() {
    let (_dir, file, _record) = config("", &[], "", "");
    let file = file.to_string_lossy().into_owned();
    let serve = |metrics: &str| {
        crate::support::mcp_agent(
            &[
                "serve",
                "--http",
                "127.0.0.1:0",
                "--metrics",
                metrics,
                "--file",
                &file,
            ],
            &[],
        )
    };
    let out = serve("nowhere");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--metrics `nowhere`: not an address"),
        "{stderr}"
    );
    // The flag wins over the file's `metrics`: an address taken is the configuration's fault.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = serve(&addr);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("error: [serve] metrics: cannot listen on {addr}")),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");
}
