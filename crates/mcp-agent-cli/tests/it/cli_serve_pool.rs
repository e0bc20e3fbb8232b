//! `mcp-agent serve` and stateless (2026-07-28) clients, `[serve] run_pool`: N requests of a
//! client open the test-kit upstream once (N times with `max_runs = 0`, one run a request);
//! two JWT subjects each get an upstream process of their own and keep it, and share only a
//! `shared = true` server's; with `max_runs = 1`
//! a second subject leaves one upstream process, not two; an idle run's process exits after
//! the idle timeout and the next request opens a new one; an upstream that crashed is not
//! lent again; SIGTERM closes the pooled runs and leaves no process.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::cli_serve_jwt::{AUDIENCE, ISSUER, jwk, key, serve_jwks, token_of};
use crate::support::gateway::{Gateway, LIMIT, kit_config, stateless_call};
use crate::support::{alive, children};

/// Requests of the first test.
const N: usize = 10;

pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The test-kit server processes below `pid`, at any depth.
pub(crate) fn kit_servers(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(parent) = next.pop() {
        for child in children(parent) {
            let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
            if comm.trim() == "mcp-test-server" && alive(child) {
                found.push(child);
            }
            next.push(child);
        }
    }
    found
}

/// The parent of `pid`, from `/proc`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The upstream process serving `token`'s requests now: the parent of a child it starts.
fn serving(gateway: &Gateway, token: Option<&str>) -> u32 {
    let result = stateless_call(
        &gateway.addr(),
        token,
        "kit__spawn_child",
        json!({"seconds": 600}),
    );
    let pid = result["structuredContent"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no pid in {result}"));
    parent_of(u32::try_from(pid).unwrap())
}

/// A gateway config checking JWTs of a JWKS served here, with `serve` added to `[serve]`;
/// its directory, file and record, and a token maker for subjects.
fn jwt_gateway(
    serve: &str,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    mcp_test_kit::RecordFile,
    impl Fn(&str) -> String,
) {
    let signing = key();
    let jwks = serve_jwks(json!([jwk(&signing, "k1")]));
    let (dir, file, record) = kit_config(&format!(
        "auth = {{ jwt = {{ issuer = \"{ISSUER}\", audience = \"{AUDIENCE}\", \
         jwks_url = \"{jwks}\", algorithms = [\"ES256\"] }} }}\n{serve}"
    ));
    (dir, file, record, move |sub: &str| {
        token_of(&signing, "k1", AUDIENCE, sub)
    })
}

#[test]
fn a_stateless_client_opens_the_upstream_once_for_n_requests() {
    for (serve, opens) in [("run_pool = { max_runs = 0 }", N), ("", 1)] {
        let (_dir, file, record) = kit_config(serve);
        let gateway = Gateway::start(&file, &[]);
        let started = Instant::now();
        for i in 0..N {
            let result = stateless_call(&gateway.addr(), None, "kit__echo", json!({"i": i}));
            assert_eq!(result["structuredContent"]["i"], i, "{result}");
        }
        eprintln!("{serve:?}: {N} stateless calls in {:?}", started.elapsed());
        let seen = record.snapshot();
        assert_eq!(seen.calls_of("echo"), N);
        assert_eq!(seen.handshakes(), opens, "`{serve}`: upstream handshakes");
    }
}

#[test]
fn each_principal_gets_an_upstream_process_of_its_own_and_keeps_it() {
    let (_dir, file, record, token) = jwt_gateway("");
    let gateway = Gateway::start(&file, &[]);
    let (alice, bob) = (token("alice"), token("bob"));
    let alices = serving(&gateway, Some(&alice));
    let bobs = serving(&gateway, Some(&bob));
    assert_ne!(alices, bobs, "never another principal's upstream");
    for _ in 0..3 {
        assert_eq!(serving(&gateway, Some(&alice)), alices);
        assert_eq!(serving(&gateway, Some(&bob)), bobs);
    }
    assert_eq!(record.snapshot().handshakes(), 2);
}

#[test]
fn principals_share_only_the_upstream_of_a_shared_server() {
    let (_dir, file, _record, token) = jwt_gateway("");
    // A second server, `shared = true`, before the `[serve]` table.
    let config = std::fs::read_to_string(&file).unwrap();
    let kit = mcp_test_kit::stdio::binary().display().to_string();
    let common = format!("[[servers]]\nname = \"common\"\ncommand = {kit:?}\nshared = true\n\n");
    std::fs::write(
        &file,
        config.replacen("[serve]", &format!("{common}[serve]"), 1),
    )
    .unwrap();
    let gateway = Gateway::start(&file, &[]);
    let (alice, bob) = (token("alice"), token("bob"));
    let of = |token: &str, tool: &str| {
        let result = stateless_call(&gateway.addr(), Some(token), tool, json!({"seconds": 600}));
        let pid = result["structuredContent"]["pid"].as_u64();
        parent_of(u32::try_from(pid.unwrap_or_else(|| panic!("{result}"))).unwrap())
    };
    assert_ne!(of(&alice, "kit__spawn_child"), of(&bob, "kit__spawn_child"));
    assert_eq!(
        of(&alice, "common__spawn_child"),
        of(&bob, "common__spawn_child")
    );
    assert_eq!(kit_servers(gateway.pid()).len(), 3);
}

#[test]
fn with_one_run_pooled_a_second_principal_leaves_one_upstream_process() {
    let (_dir, file, record, token) = jwt_gateway("run_pool = { max_runs = 1 }");
    let gateway = Gateway::start(&file, &[]);
    stateless_call(
        &gateway.addr(),
        Some(&token("alice")),
        "kit__echo",
        json!({}),
    );
    assert_eq!(kit_servers(gateway.pid()).len(), 1);
    // Alice's run makes room for Bob's (or, still in use, keeps its place and Bob's run is
    // closed after his request): one is left either way.
    stateless_call(&gateway.addr(), Some(&token("bob")), "kit__echo", json!({}));
    wait_until("one upstream process", || {
        kit_servers(gateway.pid()).len() == 1
    });
    assert_eq!(record.snapshot().handshakes(), 2);
}

#[test]
fn an_idle_run_s_upstream_exits_and_the_next_request_opens_a_new_one() {
    let (_dir, file, record) = kit_config("run_pool = { idle_timeout_seconds = 0.2 }");
    let gateway = Gateway::start(&file, &[]);
    stateless_call(&gateway.addr(), None, "kit__echo", json!({}));
    let upstream = kit_servers(gateway.pid());
    assert_eq!(upstream.len(), 1);
    wait_until("the idle upstream to exit", || !alive(upstream[0]));
    assert!(kit_servers(gateway.pid()).is_empty());
    let result = stateless_call(&gateway.addr(), None, "kit__echo", json!({"again": true}));
    assert_eq!(result["structuredContent"]["again"], true, "{result}");
    assert_eq!(record.snapshot().handshakes(), 2);
}

#[test]
fn an_upstream_that_crashed_is_not_lent_again() {
    let (_dir, file, record) = kit_config("");
    let gateway = Gateway::start(&file, &[]);
    let first = serving(&gateway, None);
    let crashed = stateless_call(&gateway.addr(), None, "kit__crash", json!({}));
    assert_eq!(crashed["isError"], true, "{crashed}");
    let next = serving(&gateway, None);
    assert_ne!(next, first);
    assert_eq!(serving(&gateway, None), next);
    assert_eq!(record.snapshot().handshakes(), 2);
}

#[test]
fn sigterm_closes_the_pooled_runs_and_leaves_no_process() {
    let (_dir, file, _record, token) = jwt_gateway("");
    let mut gateway = Gateway::start(&file, &[]);
    let sleeps: Vec<u32> = ["alice", "bob"]
        .iter()
        .map(|sub| {
            let result = stateless_call(
                &gateway.addr(),
                Some(&token(sub)),
                "kit__spawn_child",
                json!({"seconds": 600}),
            );
            u32::try_from(result["structuredContent"]["pid"].as_u64().unwrap()).unwrap()
        })
        .collect();
    let upstream = kit_servers(gateway.pid());
    assert_eq!(upstream.len(), 2);

    kill(Pid::from_raw(gateway.pid() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(gateway.exit_code(), Some(0));
    for pid in upstream.into_iter().chain(sleeps) {
        wait_until(&format!("process {pid} to be gone"), || !alive(pid));
    }
}
