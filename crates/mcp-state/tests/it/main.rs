//! The integration tests of `mcp-state`, against a real Redis started per test
//! (`mcp_test_kit::redis::RedisServer`), compiled as one test binary. Without the Redis peer
//! they skip with a note, or fail under `CI=true` / `MCP_AGENT_REQUIRE_PEERS=1`; the `tls`
//! tests need the Redis built with TLS (`MCP_AGENT_PEER_REDIS_TLS`) the same way.

mod connect;
mod lock;
mod notice;
mod rate;
mod sealed;
mod support;
mod tls;
