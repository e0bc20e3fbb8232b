//! `mcp-agent serve` replicas with `[serve] state` and a seal key share their upstream OAuth
//! tokens in Redis: two gateway processes, one token request at the authorization server; a
//! gateway without `seal_key_env` says it shares nothing and fetches its own.

use base64::Engine as _;
use mcp_test_kit::oauth::{AuthServer, CLIENT_ID, CLIENT_SECRET};
use mcp_test_kit::redis::RedisServer;
use mcp_test_kit::{TestServerOptions, bounded, serve_http};

use crate::support::gateway::{Gateway, open_session, request};

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
    open_upstream(&alone);
    assert_eq!(auth.token_requests(), 2, "its own token");
}
