//! `mcp-agent serve` replicas with `[serve] state` and a seal key share their upstream OAuth
//! tokens in Redis: two gateway processes, one token request at the authorization server; a
//! gateway without `seal_key_env` says it shares nothing and fetches its own. Over `rediss://`
//! (the TLS-built Redis peer) with `ca_file`, a gateway answers a call counted in Redis, and
//! refuses to start when the CA did not issue the server's certificate.

use base64::Engine as _;
use mcp_test_kit::oauth::{AuthServer, CLIENT_ID, CLIENT_SECRET};
use mcp_test_kit::redis::RedisServer;
use mcp_test_kit::{TestServerOptions, bounded, serve_http};

use serde_json::json;

use crate::support::gateway::{Gateway, kit_config, open_session, request, stateless_call};

/// Opens a session on `gateway` and lists its tools: by then its upstream session is open.
fn open_upstream(gateway: &Gateway) {
    let addr = gateway.addr();
    let session = open_session(&addr);
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = request(&addr, "POST", &headers, list.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("servers: up)"),
        "the upstream is open: {body}"
    );
}

/// A gateway config whose one server is the HTTP MCP server `upstream`, with client
/// credentials at `token_url`, and `state` as its `[serve] state`.
fn config(
    dir: &tempfile::TempDir,
    name: &str,
    upstream: &str,
    token_url: &str,
    state: &str,
) -> std::path::PathBuf {
    let text = format!(
        "[[servers]]\nname = \"up\"\nurl = {upstream:?}\n\
         auth = {{ oauth_client_credentials = {{ client_id = {CLIENT_ID:?}, \
         client_secret = {CLIENT_SECRET:?}, token_url = {token_url:?} }} }}\n\n\
         [serve]\nstate = {state}\n"
    );
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn gateway_replicas_with_a_seal_key_share_upstream_tokens() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(redis) = runtime.block_on(bounded(RedisServer::start())) else {
        return;
    };
    let auth = runtime.block_on(bounded(AuthServer::start())).unwrap();
    let upstream = runtime
        .block_on(bounded(serve_http(TestServerOptions::default())))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sealed = config(
        &dir,
        "sealed.toml",
        upstream.url(),
        &auth.token_url(),
        "{ redis = { url_env = \"REDIS_URL\", seal_key_env = \"SEAL\" } }",
    );
    let seal = base64::engine::general_purpose::STANDARD.encode([42u8; 32]);
    let env = [("REDIS_URL", redis.url()), ("SEAL", seal)];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let first = Gateway::start(&sealed, &env);
    open_upstream(&first);
    assert_eq!(auth.token_requests(), 1, "{:?}", first.head);
    let second = Gateway::start(&sealed, &env);
    open_upstream(&second);
    assert_eq!(
        auth.token_requests(),
        1,
        "the second replica took the first one's token"
    );
    assert!(
        !second
            .head
            .iter()
            .any(|l| l.contains("not shared") || l.contains("nothing to share")),
        "{:?}",
        second.head
    );

    let unsealed = config(
        &dir,
        "unsealed.toml",
        upstream.url(),
        &auth.token_url(),
        "{ redis = { url_env = \"REDIS_URL\" } }",
    );
    let alone = Gateway::start(&unsealed, &env[..1]);
    assert!(
        alone
            .head
            .iter()
            .any(|l| l.contains("upstream OAuth tokens are not shared")),
        "{:?}",
        alone.head
    );
    assert!(
        alone.head.iter().any(|l| l.contains("nothing to share")),
        "{:?}",
        alone.head
    );
    assert!(
        alone
            .head
            .iter()
            .any(|l| l.contains("without trusted_proxies")),
        "a fleet's replica behind a balancer would count every client as it: {:?}",
        alone.head
    );
    open_upstream(&alone);
    assert_eq!(auth.token_requests(), 2, "its own token");
}

/// The password of the TLS Redis: sent over TLS, never on a gateway's stderr.
const TLS_PASSWORD: &str = "tls-gw-pw-93";

/// A gateway config with the test-kit server and `[serve] state` on `rediss://` from
/// `REDIS_URL` trusting `ca_file`, every request counted in Redis by a rate limit (its bucket
/// stays in Redis until full again: 100 s after a request).
fn rediss_config(ca_file: &std::path::Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, file, _record) = kit_config(&format!(
        "rate_limit = {{ per_second = 0.01, burst = 100 }}\n\
         state = {{ redis = {{ url_env = \"REDIS_URL\", ca_file = {:?} }} }}",
        ca_file.display().to_string()
    ));
    (dir, file)
}

#[test]
fn a_gateway_on_rediss_trusting_its_ca_file_answers_and_never_prints_the_password() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(redis) = runtime.block_on(bounded(RedisServer::start_tls(Some(TLS_PASSWORD)))) else {
        return;
    };
    let ca = redis.ca_file().unwrap();
    let (_dir, file) = rediss_config(&ca);
    let url = redis.url();
    let gateway = Gateway::start(&file, &[("REDIS_URL", &url)]);
    let result = stateless_call(&gateway.addr(), None, "kit__echo", json!({"via": "rediss"}));
    assert_eq!(
        result["structuredContent"],
        json!({"via": "rediss"}),
        "{result}"
    );
    // The call was counted in the TLS Redis: the rate limit's bucket is there.
    let certificates = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(std::fs::read(&ca).unwrap()),
    };
    let mut raw = redis::Client::build_with_tls(url.as_str(), certificates)
        .unwrap()
        .get_connection()
        .unwrap();
    let buckets: Vec<String> = redis::cmd("KEYS")
        .arg("mcp-agent:rl:*")
        .query(&mut raw)
        .unwrap();
    assert_eq!(buckets.len(), 1, "{buckets:?}");
    assert!(
        !gateway.head.iter().any(|l| l.contains(TLS_PASSWORD)),
        "{:?}",
        gateway.head
    );

    // A CA that did not issue the server's certificate: exit 2 naming the server, no password.
    let stranger = mcp_test_kit::tls::TestCa::new();
    let (_dir, file) = rediss_config(&stranger.ca_file());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--http", "127.0.0.1:0", "--file"])
        .arg(&file)
        .env_clear()
        .env("REDIS_URL", &url)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&redis.addr().to_string()), "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(!stderr.contains(TLS_PASSWORD), "{stderr}");
}
