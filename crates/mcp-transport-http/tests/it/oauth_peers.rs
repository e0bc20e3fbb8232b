//! OAuth2 client credentials against peers nobody here wrote: the pinned npm
//! `oauth2-mock-server` (on Node 22) issuing RS256 JWTs whose `aud` is the RFC 8707 resource,
//! and a pinned fastmcp server verifying them against the server's JWKS and answering 401
//! with `resource_metadata`. Scripts: `tests/peers/oauth_as.mjs`, `tests/peers/oauth_mcp_server.py`.
//!
//! The peers come from `cargo xtask peers` (`MCP_AGENT_PEER_*` variables, which `cargo xtask
//! test` sets). Without them the tests fail under `CI=true` or `MCP_AGENT_REQUIRE_PEERS=1`,
//! and otherwise return early with a note.

use crate::oauth_support;
use crate::peer_process::{Peer, call, exchange, peer, script, text};

use std::time::{Duration, Instant};

use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use oauth_support::chain;
use serde_json::{Value, json};
use tokio::process::Command;

const CLIENT_ID: &str = "peer-client";
const CLIENT_SECRET: &str = "peer-secret-5e6f7a";
/// The authorization server (token lifetime `lifetime` seconds) and the MCP server behind it.
async fn peers(lifetime: u64) -> Option<(Peer, Peer)> {
    let node = peer("MCP_AGENT_PEER_NODE22")?;
    let mock = peer("MCP_AGENT_PEER_OAUTH2_MOCK")?;
    let python = peer("MCP_AGENT_PEER_PYTHON")?;
    let mut cmd = Command::new(node);
    cmd.arg(script("oauth_as.mjs"))
        .arg(mock.parent().expect("the mock's dist directory"))
        .args([CLIENT_ID, CLIENT_SECRET, &lifetime.to_string()]);
    let auth = Peer::start(cmd, "issuer ").await;
    let mut cmd = Command::new(python);
    cmd.arg(script("oauth_mcp_server.py")).arg(&auth.url);
    let mcp = Peer::start(cmd, "listening on ").await;
    Some((auth, mcp))
}

fn spec(mcp: &Peer, secret: &str) -> mcp_config::ServerSpec {
    mcp_config::ServerSpec::from_json(
        &json!({
            "name": "fastmcp",
            "url": mcp.url,
            "connect_timeout_seconds": 30,
            "auth": {"oauth_client_credentials": {"client_id": CLIENT_ID, "client_secret": secret}}
        }),
        mcp_config::SpecOrigin::Operator,
    )
    .expect("valid spec")
}

/// Token requests the authorization server answered, asked over its own HTTP route.
async fn token_requests(auth: &Peer) -> u64 {
    let (head, body) = exchange("GET", &format!("{}/token-requests", auth.url)).await;
    let json: Value =
        serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("{head}\n{body}"));
    json["count"].as_u64().unwrap()
}

#[tokio::test]
async fn discovers_fetches_lists_calls_and_renews_across_expiry() {
    let lifetime = 4;
    let Some((auth, mcp)) = peers(lifetime).await else {
        return;
    };
    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    let connecting = Instant::now();
    let connection = connector.connect(&spec(&mcp, CLIENT_SECRET)).await.unwrap();
    let client = tokio::time::timeout(
        Duration::from_secs(30),
        rmcp::serve_client((), connection.transport),
    )
    .await
    .expect("initialize in time")
    .unwrap_or_else(|e| panic!("initialize: {}", chain(&e)));
    let info = client.peer().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "oauth-peer");
    let mut tools: Vec<String> = client
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(tools, ["add", "echo"]);
    let sum = client
        .peer()
        .call_tool(call("add", json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert_eq!(text(&sum), "5");
    // One token serves every request until it goes stale (half its lifetime here): the count
    // grows with time, never with requests. On a slow machine the first token may already have
    // been renewed by now, so the bound follows the time spent.
    let stale_after = lifetime as f64 / 2.0;
    let renewals_due = (connecting.elapsed().as_secs_f64() / stale_after) as u64;
    let requests = token_requests(&auth).await;
    assert!(
        (1..=1 + renewals_due).contains(&requests),
        "{requests} token requests after {:?}",
        connecting.elapsed()
    );

    // Calls keep working while the first token's lifetime runs out: the client renews it
    // (ahead of expiry, or after the server's 401) without the caller noticing. A bounded
    // loop of real calls, stopped once the first token has expired and a second was issued.
    let started = Instant::now();
    let mut calls = 0;
    loop {
        let echo = client
            .peer()
            .call_tool(call("echo", json!({"message": format!("m{calls}")})))
            .await
            .unwrap_or_else(|e| panic!("call {calls} after {:?}: {e}", started.elapsed()));
        assert_eq!(text(&echo), format!("Echo: m{calls}"));
        calls += 1;
        if started.elapsed() > Duration::from_secs(lifetime) + Duration::from_millis(500)
            && token_requests(&auth).await >= 2
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20) && calls < 5_000,
            "no renewal after {calls} calls"
        );
    }
    let issued = token_requests(&auth).await;
    let renewals_due = (connecting.elapsed().as_secs_f64() / stale_after) as u64;
    assert!(
        (2..=1 + renewals_due).contains(&issued),
        "{issued} token requests for {calls} calls in {:?}",
        connecting.elapsed()
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_wrong_secret_is_invalid_client_after_one_token_request() {
    let Some((auth, mcp)) = peers(60).await else {
        return;
    };
    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    let connection = connector
        .connect(&spec(&mcp, "not-the-secret"))
        .await
        .unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        rmcp::serve_client((), connection.transport),
    )
    .await
    .expect("fails in time")
    .unwrap_err();
    let err = chain(&err);
    assert!(
        err.contains(
            "the token endpoint refused the client credentials (HTTP 401): invalid_client"
        ),
        "{err}"
    );
    assert!(!err.contains("not-the-secret"), "{err}");
    assert_eq!(token_requests(&auth).await, 1);
}
