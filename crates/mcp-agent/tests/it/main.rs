//! The integration tests of the facade (feature `redis`): OAuth tokens shared by a fleet's
//! replicas in a real Redis (`mcp_test_kit::redis::RedisServer`), obtained from a real
//! authorization server on 127.0.0.1 (`mcp_test_kit::oauth::AuthServer`) through each
//! replica's own HTTP connector. A replica is an `HttpConnector` (its own pool and
//! `AuthRegistry`) with its own Redis connection; `processes.rs` runs replicas as processes.
//! Without the Redis peer the tests skip with a note, or fail under `CI=true` /
//! `MCP_AGENT_REQUIRE_PEERS=1`.

mod fleet;

mod client_credentials;
mod faults;
mod federated;
mod login;
mod processes;
