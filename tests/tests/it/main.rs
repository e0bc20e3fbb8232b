//! The integration tests of `integration-tests`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod in_memory;

mod catalog_conflict;
mod custom_transport;
mod fault_crash_mid_call;
mod fault_garbage_on_stdout;
mod fault_hang;
mod fault_huge_resource;
mod fault_ignores_close;
mod fault_slow_initialize;
mod fleet_rate_limit;
mod fleet_redis_restart;
mod fleet_redis_start;
mod fleet_replica_kill;
mod fleet_replica_term;
mod fleet_round_robin;
mod fleet_sessions_survive;
mod fleet_trusted_proxies;
mod governed_approval;
mod governed_events;
mod governed_history;
mod governed_identity;
mod governed_output;
mod governed_support;
mod hostile_names;
mod hostile_pagination;
mod http_runner;
mod missing_transport;
mod oauth_secret_never_shown;
mod open_runner;
mod partial_failure;
mod peer_discover;
mod peer_everything;
mod peer_python_sdk;
mod pool_shared;
mod run_memory;
mod runner_dropped;
mod secret_echo;
mod tools_list_changed;
