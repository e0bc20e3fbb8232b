//! Parsing and validating server specs from JSON values, reporting every problem with its path.
//!
//! Every function here pushes what it finds to a [`Problems`](crate::path::Problems) collector
//! and goes on, so one pass reports all problems of a document. No message contains a value
//! that could be a secret: only field names, server names, variable names and enum words.
//!
//! - [`read`]: the problem-collecting reader (field access, type checks, unknown fields with
//!   "did you mean", timeouts, URLs).
//! - [`server`]: server objects (both dialects), their transport, timeouts and tool filter.
//! - [`auth`]: `auth` objects, OAuth client credentials, secrets and credential headers.
//! - [`auth_federated`]: the `enterprise` and `workload_identity` tables.
//! - [`policy`]: the `[policy]` table (rules, annotation switches, output bound).

mod auth;
mod auth_federated;
mod policy;
pub(crate) mod read;
mod server;

pub(crate) use auth::{check_header_credentials, check_not_blank};
pub(crate) use policy::{PolicyLayer, parse_policy};
pub(crate) use read::{
    as_bool, as_str, did_you_mean, expect_object, field, parse_http_url, parse_timeout,
    reject_unknown, shown, type_name,
};
pub(crate) use server::{Dialect, check_name, is_disabled, parse_server};

/// Parses one server object at `servers[0]`: the spec, or every problem as (kind, path).
#[cfg(test)]
fn parse_test_server(
    value: serde_json::Value,
) -> Result<crate::ServerSpec, Vec<(crate::ProblemKind, String)>> {
    use crate::path::{JsonPath, Problems};

    let mut p = Problems::new();
    let spec = parse_server(
        &value,
        &JsonPath::root().key("servers").index(0),
        Dialect::Native,
        None,
        crate::SpecOrigin::Operator,
        &mut p,
    );
    match spec {
        Some(s) if p.is_empty() => Ok(s),
        _ => Err(p.into_vec().into_iter().map(|p| (p.kind, p.path)).collect()),
    }
}
