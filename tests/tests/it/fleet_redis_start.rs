//! A replica whose `[serve] state` Redis cannot be used refuses to start: exit 2, an error
//! naming `host:port` and what went wrong, and never the password — with a seal key (sessions
//! and tokens shared) or without (the rate limit alone).

use integration_tests::fleet::{REDIS_URL_VAR, Replica, gateway_config, state_line};
use mcp_test_kit::redis::RedisServer;

/// The seal key's variable, and a key (32 bytes, base64).
const SEAL_VAR: &str = "FLEET_SEAL_KEY";
const SEAL: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// Starts replicas (`on_error = "closed"`, without and with a seal key) whose Redis URL is
/// `url`: each one's exit code and stderr.
async fn refused(url: &str) -> Vec<(Option<i32>, String)> {
    let dir = tempfile::tempdir().unwrap();
    let sealed = format!(
        "state = {{ redis = {{ url_env = \"{REDIS_URL_VAR}\", seal_key_env = \"{SEAL_VAR}\" }} }}"
    );
    let env = [
        (REDIS_URL_VAR.to_owned(), url.to_owned()),
        (SEAL_VAR.to_owned(), SEAL.to_owned()),
    ];
    let mut out = Vec::new();
    for state in [state_line("closed"), sealed] {
        // Never opened: the replica stops before serving.
        let serve = [state, "rate_limit = { per_second = 10, burst = 10 }".into()];
        let config = gateway_config(dir.path(), "http://127.0.0.1:9/mcp", &serve);
        match Replica::try_start(&config, &env).await {
            Ok(replica) => panic!("the replica started on {url:?}: {}", replica.stderr()),
            Err(refused) => out.push((refused.code, refused.stderr)),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_exits_2_naming_host_and_port_without_the_password() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (code, stderr) in refused(&format!("redis://:pass-5ecret-77@127.0.0.1:{port}/")).await {
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
        assert!(stderr.contains("unreachable"), "{stderr}");
        for secret in ["pass-5ecret-77", SEAL] {
            assert!(!stderr.contains(secret), "{secret} printed: {stderr}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_password_exits_2_and_prints_neither_password() {
    let Some(redis) = RedisServer::start_with_password("right-pass-4242").await else {
        return;
    };
    let addr = redis.addr().to_string();
    for url in [
        format!("redis://:wrong-pass-1717@{addr}/"),
        format!("redis://{addr}/"),
    ] {
        for (code, stderr) in refused(&url).await {
            assert_eq!(code, Some(2), "{url}: {stderr}");
            assert!(stderr.contains(&addr), "{stderr}");
            assert!(stderr.contains("refused the credentials"), "{stderr}");
            for secret in ["wrong-pass-1717", "right-pass-4242", SEAL] {
                assert!(!stderr.contains(secret), "{secret} printed: {stderr}");
            }
        }
    }
}
