//! A user's OAuth login (authorization code with PKCE) against peers nobody here wrote: the
//! pinned npm `oauth2-mock-server` with dynamic registration and RFC 9207 `iss`
//! (`tests/peers/oauth_login_as.mjs`), and the pinned fastmcp server verifying its JWTs
//! (`tests/peers/oauth_mcp_server.py`). Login → list → call → refresh → a revoked refresh
//! token telling the user to log in again.
//!
//! The peers come from `cargo xtask peers` (`MCP_AGENT_PEER_*`); without them the test fails
//! under `CI=true` or `MCP_AGENT_REQUIRE_PEERS=1`, and otherwise returns early with a note.

use crate::oauth_support::chain;
use crate::peer_process::{Peer, call, exchange, peer, text};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_auth::{CallbackListener, MemoryTokenStore, TokenStore};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use serde_json::{Value, json};
use tokio::process::Command;

async fn counts(auth: &Peer) -> Value {
    let (_, body) = exchange("GET", &format!("{}/counts", auth.url)).await;
    serde_json::from_str(body.trim()).unwrap()
}

#[tokio::test]
async fn login_lists_calls_refreshes_and_asks_for_a_new_login_once_revoked() {
    let lifetime = 4;
    let (Some(node), Some(mock), Some(python)) = (
        peer("MCP_AGENT_PEER_NODE22"),
        peer("MCP_AGENT_PEER_OAUTH2_MOCK"),
        peer("MCP_AGENT_PEER_PYTHON"),
    ) else {
        return;
    };
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let mut cmd = Command::new(node);
    cmd.arg(scripts.join("oauth_login_as.mjs"))
        .arg(mock.parent().expect("the mock's dist directory"))
        .arg(lifetime.to_string());
    let auth = Peer::start(cmd, "issuer ").await;
    let mut cmd = Command::new(python);
    cmd.arg(scripts.join("oauth_mcp_server.py")).arg(&auth.url);
    let mcp = Peer::start(cmd, "listening on ").await;

    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    let store = Arc::new(MemoryTokenStore::new());
    connector.auth_registry().use_token_store(store.clone());
    let spec = mcp_config::ServerSpec::from_json(
        &json!({"name": "fastmcp", "url": mcp.url, "connect_timeout_seconds": 30, "auth": {"oauth": {}}}),
        mcp_config::SpecOrigin::Operator,
    )
    .expect("valid spec");

    // Before any login: the session fails, and the hook says how to log in.
    let connection = connector.connect(&spec).await.unwrap();
    assert!(rmcp::serve_client((), connection.transport).await.is_err());
    let hook = connector.auth_registry().provider(&spec).unwrap();
    let err = hook.credentials().await.unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
    assert!(
        err.to_string().contains("mcp-agent auth login fastmcp"),
        "{err}"
    );

    // The login: discovery, registration, the browser's round trip through the loopback
    // listener, the code exchanged.
    let listener = CallbackListener::bind(0).await.unwrap();
    let pending = connector
        .auth_registry()
        .login(&spec)
        .unwrap()
        .with_redirect_uri(listener.redirect_uri().clone())
        .start()
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(pending.expects_iss());
    assert_eq!(pending.client_id(), "registered-1");
    let waiting = tokio::spawn(listener.wait());
    let (head, _) = exchange("GET", pending.authorization_url().as_str()).await;
    let location = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .unwrap_or_else(|| panic!("no redirect: {head}"))
        .to_owned();
    let (page, _) = exchange("GET", &location).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let callback = waiting.await.unwrap().unwrap();
    let login = pending
        .finish(callback)
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(login.refresh_token.is_some());
    assert_eq!(counts(&auth).await["authorization_code"], 1);

    // Sessions use the stored tokens: list and call.
    let connection = connector.connect(&spec).await.unwrap();
    let client = rmcp::serve_client((), connection.transport)
        .await
        .unwrap_or_else(|e| panic!("initialize: {}", chain(&e)));
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

    // Calls go on across the token's expiry: it is refreshed (and the new tokens stored).
    let started = Instant::now();
    let mut calls = 0;
    while counts(&auth).await["refresh_token"].as_u64().unwrap() == 0 {
        let echo = client
            .peer()
            .call_tool(call("echo", json!({"message": format!("m{calls}")})))
            .await
            .unwrap_or_else(|e| panic!("call {calls} after {:?}: {e}", started.elapsed()));
        assert_eq!(text(&echo), format!("Echo: m{calls}"));
        calls += 1;
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no refresh after {calls} calls"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = store.find(&login.server_url).await.unwrap();
    assert_ne!(
        kept[0].access_token, login.access_token,
        "the refreshed token is stored"
    );
    client
        .peer()
        .call_tool(call("echo", json!({"message": "after refresh"})))
        .await
        .unwrap();

    // The refresh token revoked: once the token runs out, a clear error says to log in again.
    exchange("POST", &format!("{}/revoke-refresh-tokens", auth.url)).await;
    let started = Instant::now();
    while client
        .peer()
        .call_tool(call("echo", json!({"message": "x"})))
        .await
        .is_ok()
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the revocation went unnoticed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = hook.credentials().await.unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("refused the refresh token"), "{err}");
    assert!(err.contains("mcp-agent auth login fastmcp"), "{err}");
    let _ = client.cancel().await;
}
