//! A Redis per test, the state connected to it, and raw commands for looking behind the store.

use mcp_state::{RedisState, StateConfig};
use mcp_test_kit::bounded;
use mcp_test_kit::redis::RedisServer;
use redis::aio::MultiplexedConnection;

/// A started server, a state connected to it, and a plain connection of the test's own.
pub(crate) struct Fixture {
    pub(crate) server: RedisServer,
    pub(crate) state: RedisState,
    pub(crate) raw: MultiplexedConnection,
}

/// `None` when the Redis peer is missing (the test returns early).
pub(crate) async fn fixture() -> Option<Fixture> {
    let server = bounded(RedisServer::start()).await?;
    let state = bounded(RedisState::connect(&StateConfig::new(server.url())))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; server output:\n{}", server.log()));
    let raw = bounded(
        redis::Client::open(server.url())
            .expect("URL")
            .get_multiplexed_async_connection(),
    )
    .await
    .expect("a raw connection");
    Some(Fixture { server, state, raw })
}

impl Fixture {
    /// Runs a raw command.
    pub(crate) async fn raw<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> T {
        bounded(cmd.query_async(&mut self.raw))
            .await
            .unwrap_or_else(|e| panic!("raw command: {e}"))
    }

    /// The stored (sealed) bytes of the full Redis key `key`.
    pub(crate) async fn stored(&mut self, key: &str) -> Vec<u8> {
        let value: Option<Vec<u8>> = self.raw(redis::cmd("GET").arg(key)).await;
        value.unwrap_or_else(|| panic!("{key} holds nothing"))
    }

    /// Writes `bytes` to the full Redis key `key`, with no expiry.
    pub(crate) async fn store_raw(&mut self, key: &str, bytes: &[u8]) {
        self.raw::<()>(redis::cmd("SET").arg(key).arg(bytes)).await;
    }
}
