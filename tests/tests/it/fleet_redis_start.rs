//! A replica whose `[serve] state` Redis cannot be used refuses to start: exit 2, an error
//! naming `host:port` and what went wrong, and never the password.

use integration_tests::fleet::{REDIS_URL_VAR, Replica, gateway_config, state_line};
use mcp_test_kit::redis::RedisServer;

/// Starts a replica (`on_error = "closed"`) whose Redis URL is `url`: its exit code and stderr.
async fn refused(url: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    // Never opened: the replica stops before serving.
    let config = gateway_config(
        dir.path(),
        "http://127.0.0.1:9/mcp",
        &[
            state_line("closed"),
            "rate_limit = { per_second = 10, burst = 10 }".into(),
        ],
    );
    let env = [(REDIS_URL_VAR.to_owned(), url.to_owned())];
    match Replica::try_start(&config, &env).await {
        Ok(replica) => panic!("the replica started on {url:?}: {}", replica.stderr()),
        Err(refused) => (refused.code, refused.stderr),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_exits_2_naming_host_and_port_without_the_password() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, stderr) = refused(&format!("redis://:pass-5ecret-77@127.0.0.1:{port}/")).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("unreachable"), "{stderr}");
    assert!(!stderr.contains("pass-5ecret-77"), "{stderr}");
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
        let (code, stderr) = refused(&url).await;
        assert_eq!(code, Some(2), "{url}: {stderr}");
        assert!(stderr.contains(&addr), "{stderr}");
        assert!(stderr.contains("refused the credentials"), "{stderr}");
        for secret in ["wrong-pass-1717", "right-pass-4242"] {
            assert!(!stderr.contains(secret), "{secret} printed: {stderr}");
        }
    }
}
