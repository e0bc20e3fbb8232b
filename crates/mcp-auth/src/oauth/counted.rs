//! Token requests counted through the `metrics` facade (see `agent_core::telemetry`).

use agent_core::telemetry;

use super::failure::Failure;

/// Counts one request to `server`'s token endpoint in
/// [`OAUTH_TOKEN_REQUESTS`](telemetry::OAUTH_TOKEN_REQUESTS) by how it went: `ok` (tokens
/// issued), `rejected` (the endpoint answered with an OAuth error) or `error` (no usable
/// answer: unreachable, timed out, malformed).
pub(super) fn token_request<T>(server: &str, issued: &Result<T, Failure>) {
    let outcome = match issued {
        Ok(_) => "ok",
        Err(Failure::Rejected { .. }) => "rejected",
        Err(_) => "error",
    };
    metrics::counter!(
        telemetry::OAUTH_TOKEN_REQUESTS,
        "server" => telemetry::server_label(Some(server)),
        "outcome" => outcome,
    )
    .increment(1);
}
