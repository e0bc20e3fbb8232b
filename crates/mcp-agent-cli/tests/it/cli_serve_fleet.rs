//! `mcp-agent serve --http` replicas sharing one Redis (`[serve] state`), with no sticky
//! routing: a session opened on one replica is served by another (its upstream server opened
//! there anew), bound to the JWT subject it was opened for; `DELETE` on one ends it on all; an
//! id whose record is not in Redis under this fleet's prefix, sealed with its key, for that
//! id, is `404`; without a seal key nothing of a session reaches Redis and it stays on its
//! replica.
//!
//! They need the Redis peer (`MCP_AGENT_PEER_REDIS`): they skip without it, or fail under
//! `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`.

use std::time::{Duration, Instant};

use base64::Engine as _;
use mcp_test_kit::redis::RedisServer;
use serde_json::{Value, json};

use crate::cli_serve_jwt::{AUDIENCE, ISSUER, jwk, key, serve_jwks, token_of};
use crate::support::children;
use crate::support::gateway::{Gateway, LIMIT, kit_config, request};

/// A seal key (32 bytes, base64) for the fleet.
fn seal_key(byte: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

/// A Redis server for the test, `None` (the test skips) without the peer.
fn redis() -> Option<RedisServer> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(mcp_test_kit::bounded(RedisServer::start()))
}

/// A plain connection of the test's own, to look behind the gateways.
fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// The Redis key of `session`'s record under the default prefix.
fn record_key(session: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, session.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("mcp-agent:session:{hex}")
}

/// `[serve]` of a replica: `extra`, the upstream's tools eagerly, and the shared state.
fn fleet(extra: &str, key_prefix: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    lazy_fleet(&format!("expose = \"eager\"\n{extra}"), key_prefix)
}

/// [`fleet`] with the lazy surface (`mcp_search_tools`, `mcp_call_tool`).
fn lazy_fleet(extra: &str, key_prefix: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, file, _record) = kit_config(&format!(
        "{extra}\nstate = {{ redis = {{ url_env = \"REDIS_URL\", \
         seal_key_env = \"SEAL_KEY\", key_prefix = \"{key_prefix}\" }} }}"
    ));
    (dir, file)
}

/// A replica on `file` with Redis at `url` and the seal key `seal`.
fn replica(file: &std::path::Path, url: &str, seal: &str) -> Gateway {
    Gateway::start(file, &[("REDIS_URL", url), ("SEAL_KEY", seal)])
}

/// The headers of a request of `session`, as `bearer` when given.
fn of<'a>(session: &'a str, bearer: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    if let Some(bearer) = bearer {
        headers.push(("Authorization", bearer));
    }
    headers
}

/// Opens a session on `gateway` as `bearer`; its id.
fn open(gateway: &Gateway, bearer: Option<&str>) -> String {
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "fleet-test-client", "version": "1"}},
    });
    let first: Vec<(&str, &str)> = bearer.iter().map(|b| ("Authorization", *b)).collect();
    let (status, head, body) =
        request(&gateway.addr(), "POST", &first, init.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no session id in {head}"));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = request(
        &gateway.addr(),
        "POST",
        &of(&session, bearer),
        initialized.to_string().as_bytes(),
    );
    assert_eq!(status, 202, "{body}");
    session
}

/// The JSON-RPC message of an answer's body (one event, or JSON); `Null` for none.
fn message(body: &str) -> Value {
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(body);
    serde_json::from_str(data).unwrap_or(Value::Null)
}

/// Sends `method` with `params` in `session` to `gateway`: the status and the message.
fn rpc(
    gateway: &Gateway,
    session: &str,
    bearer: Option<&str>,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let (status, _, body) = request(
        &gateway.addr(),
        "POST",
        &of(session, bearer),
        body.to_string().as_bytes(),
    );
    (status, message(&body))
}

/// The names of the tools `session` lists on `gateway`.
fn tool_names(gateway: &Gateway, session: &str, bearer: Option<&str>) -> Vec<String> {
    let (status, listed) = rpc(gateway, session, bearer, "tools/list", json!({}));
    assert_eq!(status, 200, "{listed}");
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `kit__add` of 2 and 2 in `session` on `gateway`: the call's result.
fn add(gateway: &Gateway, session: &str, bearer: Option<&str>) -> Value {
    let params = json!({"name": "kit__add", "arguments": {"a": 2, "b": 2}});
    let (status, called) = rpc(gateway, session, bearer, "tools/call", params);
    assert_eq!(status, 200, "{called}");
    called
}

/// Waits until `done` holds, at most `limit`.
fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A DPoP proof of `key` for `POST` to [`AUDIENCE`], bound to `token`.
fn dpop_proof(key: &ring::signature::EcdsaKeyPair, token: &str) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::signature::KeyPair as _;
    let point = key.public_key().as_ref();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": {"kty": "EC", "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])}});
    let ath = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut jti = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut jti).unwrap();
    let claims = json!({"htm": "POST", "htu": AUDIENCE, "iat": now,
        "jti": URL_SAFE_NO_PAD.encode(jti), "ath": URL_SAFE_NO_PAD.encode(ath)});
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let sig = key
        .sign(&ring::rand::SystemRandom::new(), input.as_bytes())
        .unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

/// The RFC 7638 thumbprint of `key`'s public half.
fn jkt(key: &ring::signature::EcdsaKeyPair) -> String {
    let jwk = jwk(key, "");
    let canonical = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        jwk["x"].as_str().unwrap(),
        jwk["y"].as_str().unwrap()
    );
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_bytes(),
    ))
}

#[test]
fn a_dpop_proof_used_at_one_replica_is_refused_at_another() {
    let Some(redis) = redis() else { return };
    let signing = key();
    let jwks = serve_jwks(json!([jwk(&signing, "k1")]));
    let auth = format!(
        "public_url = \"{AUDIENCE}\"\nauth = {{ jwt = {{ issuer = \"{ISSUER}\", \
         jwks_url = \"{jwks}\", algorithms = [\"ES256\"], dpop = \"required\" }} }}"
    );
    let (_dir, file) = fleet(&auth, "mcp-agent:");
    let seal = seal_key(7);
    // With `public_url` the gateway prints that URL: each replica gets a port chosen here.
    let [a, b] = [0, 1].map(|_| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let bind = format!("127.0.0.1:{port}");
        let env = [("REDIS_URL", redis.url()), ("SEAL_KEY", seal.clone())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        (Gateway::start_on(&file, &bind, &env), bind)
    });
    let client_key = key();
    let token = crate::cli_serve_jwt::token_with(
        &signing,
        "k1",
        AUDIENCE,
        json!({"sub": "alice", "cnf": {"jkt": jkt(&client_key)}}),
    );
    let authorization = format!("DPoP {token}");
    let proof = dpop_proof(&client_key, &token);
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "dpop-client", "version": "1"}},
    })
    .to_string();
    let headers = [
        ("Host", "gateway.test"),
        ("Authorization", authorization.as_str()),
        ("DPoP", proof.as_str()),
    ];
    let (status, _, body) = request(&a.1, "POST", &headers, init.as_bytes());
    assert_eq!(status, 200, "{body}");
    let (status, head, _) = request(&b.1, "POST", &headers, init.as_bytes());
    assert_eq!(
        status, 401,
        "the proof was used at the other replica: {head}"
    );
    assert!(head.contains("invalid_dpop_proof"), "{head}");
    let fresh = dpop_proof(&client_key, &token);
    let headers = [
        ("Host", "gateway.test"),
        ("Authorization", authorization.as_str()),
        ("DPoP", fresh.as_str()),
    ];
    let (status, _, body) = request(&b.1, "POST", &headers, init.as_bytes());
    assert_eq!(status, 200, "a fresh proof passes: {body}");
}

#[test]
fn a_session_is_served_by_every_replica_for_its_own_subject_and_ended_on_all() {
    let Some(redis) = redis() else { return };
    let signing = key();
    let jwks = serve_jwks(json!([jwk(&signing, "k1")]));
    let auth = format!(
        "auth = {{ jwt = {{ issuer = \"{ISSUER}\", audience = \"{AUDIENCE}\", \
         jwks_url = \"{jwks}\", algorithms = [\"ES256\"] }} }}"
    );
    let (_dir, file) = fleet(&auth, "mcp-agent:");
    let seal = seal_key(7);
    let [a, b, c] = [0, 1, 2].map(|_| replica(&file, &redis.url(), &seal));
    let alice = format!("Bearer {}", token_of(&signing, "k1", AUDIENCE, "alice"));
    let bob = format!("Bearer {}", token_of(&signing, "k1", AUDIENCE, "bob"));

    let session = open(&a, Some(&alice));
    // At rest in Redis: sealed, neither the subject nor the client readable.
    let stored: Vec<u8> = redis::cmd("GET")
        .arg(record_key(&session))
        .query(&mut raw(&redis))
        .unwrap();
    for clear in [&b"alice"[..], b"fleet-test-client"] {
        assert!(!stored.windows(clear.len()).any(|w| w == clear));
    }
    let ttl: i64 = redis::cmd("PTTL")
        .arg(record_key(&session))
        .query(&mut raw(&redis))
        .unwrap();
    assert!(
        (1..=330_000).contains(&ttl),
        "the idle timeout and one check: {ttl}"
    );

    // B never saw the session: it serves it, on an upstream of its own opened for it.
    assert!(children(b.pid()).is_empty());
    assert!(tool_names(&b, &session, Some(&alice)).contains(&"kit__add".to_owned()));
    let called = add(&b, &session, Some(&alice));
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 4.0}),
        "{called}"
    );
    assert_eq!(
        children(b.pid()).len(),
        1,
        "B's own upstream for the session"
    );

    // Bob's valid token does not make Alice's session his: not on B, which holds it, nor on
    // C, which restores it for his request (for Alice, then refuses him).
    for replica in [&b, &c] {
        let (status, refused) = rpc(replica, &session, Some(&bob), "tools/list", json!({}));
        assert_eq!(status, 200);
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        let text = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains("another principal"), "{refused}");
    }
    let called = add(&c, &session, Some(&alice));
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 4.0}),
        "{called}"
    );

    // DELETE on A ends it on every replica, and their upstreams for it are closed.
    let (status, _, body) = request(&a.addr(), "DELETE", &of(&session, Some(&alice)), b"");
    assert_eq!(status, 204, "{body}");
    for replica in [&a, &b, &c] {
        until(
            "the session ends on every replica",
            Duration::from_secs(10),
            || rpc(replica, &session, Some(&alice), "tools/list", json!({})).0 == 404,
        );
    }
    for replica in [&b, &c] {
        until("the replica's upstream closes", LIMIT, || {
            children(replica.pid()).is_empty()
        });
    }
    let exists: i64 = redis::cmd("EXISTS")
        .arg(record_key(&session))
        .query(&mut raw(&redis))
        .unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn an_upstream_s_own_state_stays_on_the_replica_that_made_it() {
    let Some(redis) = redis() else { return };
    let (_dir, file) = fleet("", "mcp-agent:");
    let seal = seal_key(7);
    let [a, b] = [0, 1].map(|_| replica(&file, &redis.url(), &seal));
    let session = open(&a, None);
    let params = json!({"name": "kit__add_tool", "arguments": {"name": "extra"}});
    let (status, added) = rpc(&a, &session, None, "tools/call", params);
    assert_eq!(
        (status, added["result"]["isError"].as_bool()),
        (200, Some(false)),
        "{added}"
    );
    // The upstream's list change reaches A's catalog after the call's answer: A re-lists.
    until("A lists the added tool", LIMIT, || {
        tool_names(&a, &session, None).contains(&"kit__extra".to_owned())
    });
    // B's upstream is a process of its own, which never had the tool added.
    let on_b = tool_names(&b, &session, None);
    assert!(on_b.contains(&"kit__add".to_owned()) && !on_b.contains(&"kit__extra".to_owned()));
}

#[test]
fn tools_promoted_on_one_replica_are_listed_on_the_next_and_runs_share_a_label() {
    let Some(redis) = redis() else { return };
    let history = tempfile::tempdir().unwrap();
    let (_dir, file) = lazy_fleet(
        &format!("history = {:?}", history.path().display().to_string()),
        "mcp-agent:",
    );
    let seal = seal_key(7);
    let [a, b] = [0, 1].map(|_| replica(&file, &redis.url(), &seal));
    let session = open(&a, None);
    assert!(!tool_names(&a, &session, None).contains(&"kit__add".to_owned()));
    let params = json!({"name": "mcp_search_tools",
        "arguments": {"query": "select:kit__add", "promote": true}});
    let (status, found) = rpc(&a, &session, None, "tools/call", params);
    assert_eq!(status, 200, "{found}");
    assert!(tool_names(&a, &session, None).contains(&"kit__add".to_owned()));
    // B restores the session with the tool promoted again, and calls it by its name.
    assert!(tool_names(&b, &session, None).contains(&"kit__add".to_owned()));
    let called = add(&b, &session, None);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 4.0}),
        "{called}"
    );
    // Each replica records its part of the session under the session's label.
    let (status, _, _) = request(&a.addr(), "DELETE", &of(&session, None), b"");
    assert_eq!(status, 204);
    let mut runs: Vec<String> = Vec::new();
    until("both runs are recorded", LIMIT, || {
        runs = std::fs::read_dir(history.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        runs.len() == 2
    });
    runs.sort();
    let labels: Vec<&str> = runs.iter().map(|r| r.split('-').nth(1).unwrap()).collect();
    assert_eq!(labels[0], labels[1], "{runs:?}");
    assert_eq!(labels[0].len(), 16, "{runs:?}");
    assert!(!session.contains(labels[0]));
}

#[test]
fn ids_without_a_record_of_this_fleet_are_404() {
    let Some(redis) = redis() else { return };
    let (_dir, file) = fleet("", "mcp-agent:");
    let (_other_dir, other_prefix) = fleet("", "other-fleet:");
    let seal = seal_key(7);
    let a = replica(&file, &redis.url(), &seal);
    let b = replica(&file, &redis.url(), &seal);
    let c = replica(&other_prefix, &redis.url(), &seal);
    let d = replica(&file, &redis.url(), &seal_key(8));
    let session = open(&a, None);
    assert_eq!(
        add(&b, &session, None)["result"]["structuredContent"],
        json!({"sum": 4.0})
    );
    for (replica, what) in [(&c, "another key prefix"), (&d, "another seal key")] {
        let (status, _) = rpc(replica, &session, None, "tools/list", json!({}));
        assert_eq!(status, 404, "{what}");
    }
    for forged in [
        "4a1e7c3e-0000-4000-8000-000000000000",
        "not-a-session",
        &session[1..],
    ] {
        let (status, _) = rpc(&b, forged, None, "tools/list", json!({}));
        assert_eq!(status, 404, "{forged}");
    }

    // Records that do not open for their id: altered, moved from another session, sealed
    // with another key. Each session is new to B, which must read its record.
    let mut raw = raw(&redis);
    let altered = open(&a, None);
    let mut bytes: Vec<u8> = redis::cmd("GET")
        .arg(record_key(&altered))
        .query(&mut raw)
        .unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let _: () = redis::cmd("SET")
        .arg(record_key(&altered))
        .arg(&bytes)
        .arg("KEEPTTL")
        .query(&mut raw)
        .unwrap();
    let moved = open(&a, None);
    let donor: Vec<u8> = redis::cmd("GET")
        .arg(record_key(&session))
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(record_key(&moved))
        .arg(&donor)
        .arg("KEEPTTL")
        .query(&mut raw)
        .unwrap();
    let foreign = open(&a, None);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let state = mcp_state::RedisState::connect(&mcp_state::StateConfig::new(redis.url()))
                .await
                .unwrap();
            let store = state.sealed_store(mcp_state::SealKey::generate());
            let name = record_key(&foreign);
            let name = name.trim_start_matches("mcp-agent:");
            store
                .put(name, &donor, Duration::from_secs(60))
                .await
                .unwrap();
        });
    for (id, what) in [
        (&altered, "altered"),
        (&moved, "moved"),
        (&foreign, "sealed with another key"),
    ] {
        let (status, _) = rpc(&b, id, None, "tools/list", json!({}));
        assert_eq!(status, 404, "{what}");
    }
    // The genuine session is still served by both.
    assert_eq!(
        add(&a, &session, None)["result"]["structuredContent"],
        json!({"sum": 4.0})
    );
    assert_eq!(
        add(&b, &session, None)["result"]["structuredContent"],
        json!({"sum": 4.0})
    );
}

#[test]
fn without_a_seal_key_sessions_stay_on_their_replica_and_it_says_so() {
    let Some(redis) = redis() else { return };
    let (_dir, file, _record) =
        kit_config("expose = \"eager\"\nstate = { redis = { url_env = \"REDIS_URL\" } }");
    let a = Gateway::start(&file, &[("REDIS_URL", &redis.url())]);
    let b = Gateway::start(&file, &[("REDIS_URL", &redis.url())]);
    for gateway in [&a, &b] {
        assert!(
            gateway
                .head
                .iter()
                .any(|l| l.contains("sessions and upstream OAuth tokens are not shared")),
            "{:?}",
            gateway.head
        );
    }
    let session = open(&a, None);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = request(
        &b.addr(),
        "POST",
        &of(&session, None),
        list.to_string().as_bytes(),
    );
    assert_eq!(status, 404, "another replica does not know it: {body}");
    let (status, _, body) = request(
        &a.addr(),
        "POST",
        &of(&session, None),
        list.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw(&redis)).unwrap();
    assert!(keys.iter().all(|k| !k.contains("session")), "{keys:?}");
}
