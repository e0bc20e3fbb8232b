//! Workload-identity tokens shared by replicas: the JWT bearer grant is sent once in the fleet,
//! each replica reading the same projected token file, and the token is sealed in Redis like a
//! client-credentials token.

use std::sync::Arc;
use std::time::Duration;

use mcp_agent::ServerSpec;
use mcp_agent::auth::{AuthProvider, Credentials};
use mcp_agent::config::SpecOrigin;
use mcp_test_kit::bounded;
use serde_json::json;

use crate::fleet::{KEY, bearer, concurrent, fleet};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_one_workload_identity_token() {
    let Some(fleet) = fleet().await else { return };
    let dir = std::env::temp_dir().join(format!("mcp-agent-fleet-wif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "projected-workload-token\n").unwrap();
    // The authorization server's origin serves the MCP URL's metadata (no resource metadata).
    let spec = ServerSpec::from_json(
        &json!({
            "name": "upstream",
            "url": format!("{}/mcp", fleet.auth.issuer()),
            "connect_timeout_seconds": 10,
            "auth": {"workload_identity": {"token_file": token_file}},
        }),
        SpecOrigin::Operator,
    )
    .expect("a valid spec");
    fleet.auth.set_delay(Duration::from_millis(100));
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(fleet.replica(KEY).await);
    }
    let hooks: Vec<Arc<dyn AuthProvider>> = replicas
        .iter()
        .map(|r| r.registry().provider(&spec).unwrap())
        .collect();
    // Each replica's first request was refused with a 401: discovery, then the grant.
    let mut tasks = Vec::new();
    for hook in &hooks {
        let hook = hook.clone();
        tasks.push(tokio::spawn(async move {
            hook.on_unauthorized(&Credentials::none(), Some("Bearer"))
                .await
        }));
    }
    for task in tasks {
        bounded(task).await.expect("task").expect("a token");
    }
    let got = concurrent(&hooks, 10).await;
    assert!(got.iter().all(|b| b == "Bearer at-1"), "{got:?}");
    assert_eq!(
        fleet.auth.jwt_bearer_requests(),
        1,
        "one grant for the fleet"
    );
    assert_eq!(fleet.auth.token_requests(), 1);
    assert_eq!(fleet.entries().await.len(), 1, "shared");
    // A replica started later takes the fleet's token without a request.
    let late = fleet.replica(KEY).await;
    let hook = late.registry().provider(&spec).unwrap();
    bounded(hook.on_unauthorized(&Credentials::none(), Some("Bearer")))
        .await
        .expect("a token");
    let got = bounded(hook.credentials()).await.unwrap();
    assert_eq!(bearer(&got), "Bearer at-1");
    assert_eq!(fleet.auth.jwt_bearer_requests(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
