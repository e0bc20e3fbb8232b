//! Replicas as processes: this test binary runs itself three times as a replica (an ignored
//! test the parent selects), each with its own runtime, connector and Redis connection; they
//! start their 50 calls together (the parent says `go` on their stdin once all are ready).

use std::process::Stdio;
use std::time::Duration;

use mcp_test_kit::bounded;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::fleet::{KEY, fleet};

const CHILD: &str = "processes::one_replica_process_run_by_the_fleet_test";
const REDIS_VAR: &str = "MCP_AGENT_TEST_FLEET_REDIS";
const TOKEN_VAR: &str = "MCP_AGENT_TEST_FLEET_TOKEN_URL";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replica_processes_with_fifty_calls_each_send_one_token_request() {
    let Some(fleet) = fleet().await else { return };
    fleet.auth.set_delay(Duration::from_millis(200));
    let mut children = Vec::new();
    for _ in 0..3 {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD, "--include-ignored", "--nocapture"])
            .env(REDIS_VAR, fleet.redis.url())
            .env(TOKEN_VAR, fleet.auth.token_url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        children.push(child);
    }
    let mut outputs = Vec::new();
    for child in &mut children {
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            let line = bounded(lines.next_line()).await.unwrap();
            let line = line.unwrap_or_else(|| panic!("a replica ended before it was ready"));
            if line == "ready" {
                break;
            }
        }
        outputs.push(lines);
    }
    for child in &mut children {
        let mut stdin = child.stdin.take().unwrap();
        bounded(stdin.write_all(b"go\n")).await.unwrap();
    }
    for (child, mut lines) in children.into_iter().zip(outputs) {
        let mut seen = Vec::new();
        while let Some(line) = bounded(lines.next_line()).await.unwrap() {
            seen.push(line);
        }
        let output = bounded(child.wait_with_output()).await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{seen:?}\n{stderr}");
        assert!(
            seen.iter().any(|l| l == "50 × Bearer at-1"),
            "{seen:?}\n{stderr}"
        );
        assert!(seen.iter().any(|l| l.contains("1 passed")), "{seen:?}");
    }
    assert_eq!(
        fleet.auth.token_requests(),
        1,
        "one request for three processes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "one replica of three_replica_processes_with_fifty_calls_each_send_one_token_request"]
async fn one_replica_process_run_by_the_fleet_test() {
    use mcp_agent::auth::AuthProvider;
    use mcp_agent::http::{HttpConnector, HttpOptions};
    use mcp_agent::state::{RedisState, RedisTokens, SealKey, StateConfig};
    use std::sync::Arc;

    let redis = std::env::var(REDIS_VAR).expect("run by the fleet test");
    let token_url = std::env::var(TOKEN_VAR).expect("run by the fleet test");
    let state = bounded(RedisState::connect(&StateConfig::new(redis)))
        .await
        .unwrap();
    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    connector
        .auth_registry()
        .use_shared_tokens(Arc::new(RedisTokens::new(
            &state,
            SealKey::from_bytes(&KEY),
        )));
    let spec = crate::fleet::cc_spec_at(&token_url);
    let hook: Arc<dyn AuthProvider> = connector.auth_registry().provider(&spec).unwrap();
    println!("ready");
    let mut go = String::new();
    tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut go))
        .await
        .unwrap()
        .unwrap();
    let got = crate::fleet::concurrent(&[hook], 50).await;
    let first = got[0].clone();
    assert!(got.iter().all(|b| *b == first), "{got:?}");
    println!("{} × {first}", got.len());
}
