//! The `[serve]` table: how `mcp-agent serve` offers the configured servers to downstream MCP
//! clients, read into mcp-serve's [`HttpOptions`] and the catalog's [`Exposure`]. The bearer
//! token itself is never in the configuration, only the name of the variable that holds it.
//!
//! | key | meaning | default |
//! | --- | --- | --- |
//! | `http` | address to serve streamable HTTP on (`"127.0.0.1:8080"`) | stdio |
//! | `expose` | `lazy` or `eager` | `lazy` |
//! | `tool_names` | `prefixed` (`server__tool`) or `upstream` (each tool's own name where no other tool has it) | `prefixed` |
//! | `allowed_origins` | browser origins allowed besides the endpoint's own | `[]` |
//! | `public_url` | the URL clients reach the endpoint by (behind a proxy, or on `0.0.0.0`) | none |
//! | `allowed_hosts` | `Host` values accepted besides the bound address and the public URL's | `[]` |
//! | `auth` | `{ bearer_token_env = "VAR" }` or `{ jwt = { issuer, jwks_url, audience, algorithms, leeway_s, claims, dpop } }` (`claims`: names kept for `[policy]` rules; `dpop`: sender-constrained tokens) | none |
//! | `max_body_bytes` | largest request body (at least 1024) | 4 MiB |
//! | `max_sessions` | downstream sessions open at once | 64 |
//! | `max_calls_per_session` | calls in flight per downstream session | 16 |
//! | `rate_limit` | `{ per_second = 10, burst = 20 }`, per client address | none |
//! | `auth_failure_rate_limit` | requests failing authentication, per client address; beyond, 429 before any check | `{ per_second = 1, burst = 10 }` |
//! | `max_connections` | HTTP connections open at once; one more is answered 503 and closed | 512 |
//! | `max_connections_per_address` | HTTP connections open at once from one client address | none |
//! | `trusted_proxies` | addresses or networks (`"10.0.0.5"`, `"10.0.4.0/24"`) of the load balancers in front, and nothing else (any host in them can name any client, a victim's address too): a request they relay counts as the client's their `X-Forwarded-For` names, for the per-address limits (at most 256) | `[]` |
//! | `header_read_timeout_seconds` | a request head (and a kept-alive HTTP/1 connection's idle wait) | 30 |
//! | `body_read_timeout_seconds` | a request body, whole (beyond: 408) | 30 |
//! | `idle_timeout_seconds` | a connection with no request in progress is closed | 60 |
//! | `drain_delay_seconds` | after SIGTERM/SIGINT, `/readyz` says draining and the gateway serves this long more before it drains, so that balancers probing it take it out first (another signal drains at once) | none |
//! | `park_idle_sessions_seconds` | a session with no request in progress for this long is parked: closed here (its upstream sessions too), its record kept (in Redis with `state`, else in this process), and restored at its next request | none |
//! | `approve` | `deny` or `allow`: calls `[policy]` says need approval | `deny` |
//! | `state` | `{ redis = { url_env = "VAR", key_prefix = "mcp-agent:", seal_key_env = "VAR", ca_file = "ca.pem" }, on_error = "closed" }` (or `"open"`): the fleet's shared state (`ca_file`: the CAs trusted for `rediss://` instead of the web roots); `rate_limit` is then counted fleet-wide too, and with `seal_key_env` (32 bytes, base64) sessions (any replica serves them) and upstream OAuth tokens are shared, sealed | none |
//! | `run_pool` | `{ max_runs = 16, idle_timeout_seconds = 60 }`: runs kept for stateless (2026-07-28) requests, one per principal, closed when idle; `max_runs = 0` opens one per request | as shown |
//! | `history` | directory recording each session's run (one subdirectory each; a pooled run's holds every request it served) | none |
//! | `metrics` | address of the operators' listener: Prometheus text at `/metrics`, `/healthz`, `/readyz` (no auth: keep it on loopback or a private network) | none |
//! | `worker_threads` | threads that serve requests (1 to 1,024; with replicas sharing one machine, about its CPUs divided among them) | over HTTP the CPUs the process may use; over stdio 2 |
//!
//! Every key is optional; `mcp-agent serve`'s flags win over it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use mcp_agent::Exposure;
use mcp_agent::config::ProblemKind;
use mcp_agent::config::read::{
    JsonPath, Problems, Table, as_str, expect_object, field, parse_timeout, reject_unknown, shown,
    type_name, whole_number,
};
use mcp_serve::{HttpOptions, IpNet, PoolOptions, RateLimit};
use mcp_state::StateConfig;
use serde_json::Value;

pub(crate) use super::serve_auth::ServeAuth;

/// The keys of the `[serve]` table.
const SERVE_FIELDS: &[&str] = &[
    "http",
    "expose",
    "tool_names",
    "allowed_origins",
    "public_url",
    "allowed_hosts",
    "auth",
    "max_body_bytes",
    "max_sessions",
    "max_calls_per_session",
    "rate_limit",
    "auth_failure_rate_limit",
    "max_connections",
    "max_connections_per_address",
    "trusted_proxies",
    "header_read_timeout_seconds",
    "body_read_timeout_seconds",
    "idle_timeout_seconds",
    "park_idle_sessions_seconds",
    "drain_delay_seconds",
    "approve",
    "history",
    "state",
    "metrics",
    "run_pool",
    "worker_threads",
];

/// The keys of `run_pool`.
const POOL_FIELDS: &[&str] = &["max_runs", "idle_timeout_seconds"];

/// The keys of `rate_limit`.
const RATE_FIELDS: &[&str] = &["per_second", "burst"];

/// The smallest request body bound (a JSON-RPC `initialize` must fit).
const MIN_BODY_BYTES: u64 = 1024;

/// The most networks `trusted_proxies` may list.
const MAX_TRUSTED_PROXIES: usize = 256;

/// The most threads `worker_threads` may ask for.
const MAX_WORKER_THREADS: u64 = 1024;

/// Downstream sessions open at once when `[serve] max_sessions` says nothing.
const DEFAULT_MAX_SESSIONS: usize = 64;

/// The names under which the gateway lists upstream tools first-class (every tool in eager
/// exposure; pinned and promoted ones in lazy exposure).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ToolNames {
    /// `server__tool`, whatever the servers call their tools (the default).
    #[default]
    Prefixed,
    /// Each tool's own name, as its server lists it, when no other tool of the session has it;
    /// a name two servers share (or one of the gateway's own tools has) stays `server__tool`.
    /// A gateway over one server then lists exactly that server's tools.
    Upstream,
}

impl ToolNames {
    /// Parses `prefixed` or `upstream`.
    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "prefixed" => Some(Self::Prefixed),
            "upstream" => Some(Self::Upstream),
            _ => None,
        }
    }
}

/// Parses `lazy` or `eager` (the catalog's automatic exposure is not offered downstream).
pub(crate) fn exposure(word: &str) -> Option<Exposure> {
    match word {
        "lazy" => Some(Exposure::Lazy),
        "eager" => Some(Exposure::Eager),
        _ => None,
    }
}

/// What happens to a call that `[policy]` says needs approval: the gateway has nobody to ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Approval {
    /// Refused, with a message saying so (the default).
    #[default]
    Deny,
    /// Run, as if approved.
    Allow,
}

/// The `[serve]` table, read.
#[derive(Debug, Clone)]
pub(crate) struct ServeSettings {
    /// Serve streamable HTTP on this address (stdio when unset and no flag says otherwise).
    pub(crate) http: Option<SocketAddr>,
    /// Lazy or eager exposure.
    pub(crate) expose: Option<Exposure>,
    /// How first-class upstream tools are named.
    pub(crate) tool_names: Option<ToolNames>,
    /// Inbound authentication.
    pub(crate) auth: Option<ServeAuth>,
    /// The HTTP endpoint's options the table sets: origins, hosts, public URL, sessions, rate
    /// limits, connections and timeouts (the bind address and the authentication are set when
    /// serving).
    pub(crate) options: HttpOptions,
    /// The largest request body.
    pub(crate) max_body_bytes: Option<usize>,
    /// Calls in flight per downstream session.
    pub(crate) max_calls_per_session: Option<usize>,
    /// Calls that need approval: denied or allowed.
    pub(crate) approve: Approval,
    /// Where each session's run is recorded.
    pub(crate) history: Option<PathBuf>,
    /// The fleet's shared state (its `Debug` hides the password).
    pub(crate) state: Option<StateConfig>,
    /// Where to serve metrics and health checks.
    pub(crate) metrics: Option<SocketAddr>,
    /// The runs kept for stateless requests.
    pub(crate) run_pool: PoolOptions,
    /// After a stop signal, how long the gateway goes on serving (`/readyz` saying draining)
    /// before it drains.
    pub(crate) drain_delay: Option<Duration>,
    /// The runtime's worker threads (when unset: over HTTP the CPUs the process may use, over
    /// stdio two).
    pub(crate) worker_threads: Option<usize>,
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            http: None,
            expose: None,
            tool_names: None,
            auth: None,
            options: HttpOptions::default().with_max_sessions(DEFAULT_MAX_SESSIONS),
            max_body_bytes: None,
            max_calls_per_session: None,
            approve: Approval::default(),
            history: None,
            state: None,
            metrics: None,
            run_pool: PoolOptions::default(),
            worker_threads: None,
            drain_delay: None,
        }
    }
}

/// Reads the `[serve]` table, pushing every problem.
pub(crate) fn read(table: &Table, p: &mut Problems) -> ServeSettings {
    let mut s = ServeSettings::default();
    table.reject_unknown(SERVE_FIELDS, p);
    s.http = table.read("http", p, address);
    s.metrics = table.read("metrics", p, address);
    s.expose = table.read("expose", p, |v, at, p| {
        choice(v, at, p, exposure, "exposure", "`lazy` or `eager`")
    });
    s.tool_names = table.read("tool_names", p, |v, at, p| {
        let words = "`prefixed` or `upstream`";
        choice(v, at, p, ToolNames::parse, "tool names", words)
    });
    if let Some(origins) = table.read("allowed_origins", p, origins) {
        s.options = s.options.with_allowed_origins(origins);
    }
    if let Some(url) = table.read("public_url", p, public_url) {
        s.options = s.options.with_public_url(url);
    }
    if let Some(hosts) = table.read("allowed_hosts", p, hosts) {
        s.options = s.options.with_allowed_hosts(hosts);
    }
    s.auth = table.read("auth", p, super::serve_auth::read);
    s.max_body_bytes = table.read("max_body_bytes", p, |v, at, p| {
        whole_number(v, at, MIN_BODY_BYTES, p).map(saturate)
    });
    let count =
        |v: &Value, at: &JsonPath, p: &mut Problems| whole_number(v, at, 1, p).map(saturate);
    if let Some(max) = table.read("max_sessions", p, count) {
        s.options = s.options.with_max_sessions(max);
    }
    s.max_calls_per_session = table.read("max_calls_per_session", p, count);
    if let Some(limit) = table.read("rate_limit", p, rate_limit) {
        s.options = s.options.with_rate_limit(limit);
    }
    if let Some(limit) = table.read("auth_failure_rate_limit", p, rate_limit) {
        s.options = s.options.with_auth_failure_limit(Some(limit));
    }
    if let Some(max) = table.read("max_connections", p, count) {
        s.options = s.options.with_max_connections(max);
    }
    if let Some(max) = table.read("max_connections_per_address", p, count) {
        s.options = s.options.with_max_connections_per_address(max);
    }
    if let Some(networks) = table.read("trusted_proxies", p, trusted_proxies) {
        s.options = s.options.with_trusted_proxies(networks);
    }
    if let Some(timeout) = table.read("header_read_timeout_seconds", p, parse_timeout) {
        s.options = s.options.with_header_read_timeout(timeout);
    }
    if let Some(timeout) = table.read("body_read_timeout_seconds", p, parse_timeout) {
        s.options = s.options.with_body_read_timeout(timeout);
    }
    if let Some(timeout) = table.read("idle_timeout_seconds", p, parse_timeout) {
        s.options = s.options.with_idle_timeout(timeout);
    }
    if let Some(after) = table.read("park_idle_sessions_seconds", p, parse_timeout) {
        s.options = s.options.with_park_after(after);
    }
    let approval = |word: &str| match word {
        "deny" => Some(Approval::Deny),
        "allow" => Some(Approval::Allow),
        _ => None,
    };
    if let Some(approve) = table.read("approve", p, |v, at, p| {
        choice(v, at, p, approval, "approval", "`deny` or `allow`")
    }) {
        s.approve = approve;
    }
    s.history = table.read("history", p, |v, at, p| {
        let dir = as_str(v, at, p)?;
        if dir.trim().is_empty() {
            p.push(
                at,
                ProblemKind::InvalidValue,
                "the history directory is empty",
            );
            return None;
        }
        Some(PathBuf::from(dir))
    });
    s.state = table.read("state", p, super::serve_state::read);
    if let Some(pool) = table.read("run_pool", p, run_pool) {
        s.run_pool = pool;
    }
    s.worker_threads = table.read("worker_threads", p, worker_threads);
    s.drain_delay = table.read("drain_delay_seconds", p, parse_timeout);
    s
}

/// `worker_threads`: a whole number from 1 to [`MAX_WORKER_THREADS`].
fn worker_threads(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<usize> {
    let threads = whole_number(value, at, 1, p)?;
    if threads > MAX_WORKER_THREADS {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!("{threads} worker threads: must be at most {MAX_WORKER_THREADS}"),
        );
        return None;
    }
    Some(saturate(threads))
}

/// An `IP:PORT` address.
fn address(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<SocketAddr> {
    let text = as_str(value, at, p)?;
    let addr = text.trim().parse::<SocketAddr>().ok();
    if addr.is_none() {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!(
                "{} is not an address: write `IP:PORT`, e.g. `127.0.0.1:8080`",
                shown(text)
            ),
        );
    }
    addr
}

/// `run_pool`: `{ max_runs = N, idle_timeout_seconds = S }`, each optional.
fn run_pool(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<PoolOptions> {
    let what = "`run_pool` (`{ max_runs = 16, idle_timeout_seconds = 60 }`)";
    let obj = expect_object(value, path, what, p)?;
    reject_unknown(obj, POOL_FIELDS, path, p);
    let max = field(obj, "max_runs").map(|v| whole_number(v, &path.key("max_runs"), 0, p));
    let idle = field(obj, "idle_timeout_seconds")
        .map(|v| parse_timeout(v, &path.key("idle_timeout_seconds"), p));
    let mut pool = PoolOptions::default();
    match max {
        Some(Some(max)) => pool = pool.with_max_runs(saturate(max)),
        Some(None) => return None,
        None => {}
    }
    match idle {
        Some(Some(timeout)) => pool = pool.with_idle_timeout(timeout),
        Some(None) => return None,
        None => {}
    }
    Some(pool)
}

fn saturate(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `value` as one of a fixed set of words (`parse`), or a problem naming `what` it is and the
/// `words` allowed.
fn choice<T>(
    value: &Value,
    at: &JsonPath,
    p: &mut Problems,
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
    words: &str,
) -> Option<T> {
    let word = as_str(value, at, p)?;
    let parsed = parse(word);
    if parsed.is_none() {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!("unknown {what} {}: use {words}", shown(word)),
        );
    }
    parsed
}

/// An `http(s)://host[:port]/path` URL without credentials.
fn public_url(value: &Value, at: &JsonPath, p: &mut Problems) -> Option<url::Url> {
    let text = as_str(value, at, p)?;
    let url = url::Url::parse(text.trim()).ok().filter(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host().is_some()
            && u.username().is_empty()
            && u.password().is_none()
    });
    if url.is_none() {
        p.push(
            at,
            ProblemKind::InvalidValue,
            format!(
                "{} is no public URL: write `http(s)://host[:port]/path`, without credentials",
                shown(text)
            ),
        );
    }
    url
}

/// `Host` header values: a name or address, with an optional port, nothing else.
fn hosts(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<String>> {
    words(value, path, p, "host names", |s| {
        let ok = !s.is_empty()
            && s.len() <= 261
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
        ok.then(|| s.to_ascii_lowercase())
            .ok_or("is no host: write `name` or `name:port`")
    })
}

/// Addresses (`10.0.0.5`, `::1`) and networks (`10.0.0.0/8`), at most [`MAX_TRUSTED_PROXIES`].
fn trusted_proxies(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<IpNet>> {
    let networks = words(value, path, p, "addresses or networks", |s| {
        let network = s
            .parse::<IpNet>()
            .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| "is no address or network: write `10.0.0.5` or `10.0.0.0/8`".to_owned())?;
        mcp_serve::trusted_proxy(network).map_err(|why| why.to_string())
    })?;
    if networks.len() > MAX_TRUSTED_PROXIES {
        p.push(
            path,
            ProblemKind::InvalidValue,
            format!(
                "lists {} networks, more than the {MAX_TRUSTED_PROXIES} taken",
                networks.len()
            ),
        );
        return None;
    }
    Some(networks)
}

/// Browser origins (`scheme://host[:port]`, or `null`).
fn origins(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<String>> {
    words(value, path, p, "origins", |s| {
        let ok = s == "null"
            || url::Url::parse(s)
                .ok()
                .is_some_and(|u| u.origin().is_tuple() && matches!(u.scheme(), "http" | "https"));
        ok.then(|| s.to_owned())
            .ok_or("is no origin: write `scheme://host[:port]`")
    })
}

/// An array of strings, each kept as `check` gives it or a problem saying why not; `what` the
/// array holds, for the message when it is no array.
fn words<T, E: std::fmt::Display>(
    value: &Value,
    path: &JsonPath,
    p: &mut Problems,
    what: &str,
    check: impl Fn(&str) -> Result<T, E>,
) -> Option<Vec<T>> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            ProblemKind::WrongType,
            format!("must be an array of {what}, found {}", type_name(value)),
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        let Some(s) = as_str(item, &at, p) else {
            continue;
        };
        match check(s) {
            Ok(word) => out.push(word),
            Err(why) => p.push(
                &at,
                ProblemKind::InvalidValue,
                format!("{} {why}", shown(s)),
            ),
        }
    }
    Some(out)
}

fn rate_limit(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<RateLimit> {
    let obj = expect_object(
        value,
        path,
        "`rate_limit` (`{ per_second = N, burst = M }`)",
        p,
    )?;
    reject_unknown(obj, RATE_FIELDS, path, p);
    let at = path.key("per_second");
    let Some(v) = field(obj, "per_second") else {
        p.push(&at, ProblemKind::MissingField, "`per_second` is required");
        return None;
    };
    let per_second = match v.as_f64() {
        Some(n) if n.is_finite() && n >= RateLimit::MIN_PER_SECOND => n,
        Some(n) if n.is_finite() && n > 0.0 => {
            let min = RateLimit::MIN_PER_SECOND;
            p.push(
                &at,
                ProblemKind::InvalidValue,
                format!("{n} is under the slowest rate taken, {min} (one request in 1000 s)"),
            );
            return None;
        }
        Some(_) => {
            p.push(&at, ProblemKind::InvalidValue, "must be positive");
            return None;
        }
        None => {
            p.push(
                &at,
                ProblemKind::WrongType,
                format!("must be a number, found {}", type_name(v)),
            );
            return None;
        }
    };
    let burst = match field(obj, "burst") {
        Some(v) => {
            let at = path.key("burst");
            let burst = whole_number(v, &at, 1, p)?;
            let Ok(burst) = u32::try_from(burst) else {
                let max = u32::MAX;
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!("must be at most {max}"),
                );
                return None;
            };
            burst
        }
        None => u32::try_from(per_second.ceil() as u64).unwrap_or(u32::MAX),
    };
    Some(RateLimit::new(per_second, burst))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_agent::Exposure;
    use mcp_agent::config::ProblemKind;

    use super::{Approval, ServeAuth, ToolNames};
    use crate::settings::tests::toml;

    #[test]
    fn a_whole_serve_table_is_read() {
        let settings = toml(
            r#"
[serve]
http = "127.0.0.1:9000"
expose = "lazy"
tool_names = "upstream"
allowed_origins = ["http://localhost:5173"]
public_url = "https://gateway.example.com/mcp"
allowed_hosts = ["Gateway.internal:8443"]
auth = { bearer_token_env = "GW_TOKEN" }
max_body_bytes = 2048
max_sessions = 3
max_calls_per_session = 2
rate_limit = { per_second = 0.5, burst = 4 }
auth_failure_rate_limit = { per_second = 2 }
max_connections = 100
max_connections_per_address = 8
trusted_proxies = ["127.0.0.1", "10.1.0.0/16", "fd00::/8", "10.0.0.0/8"]
header_read_timeout_seconds = 5
body_read_timeout_seconds = 7.5
idle_timeout_seconds = 20
park_idle_sessions_seconds = 45
approve = "allow"
history = "/tmp/h"
metrics = "127.0.0.1:9464"
run_pool = { max_runs = 3, idle_timeout_seconds = 0.5 }
worker_threads = 3
drain_delay_seconds = 15
"#,
        )
        .unwrap();
        let s = &settings.serve;
        let o = &s.options;
        assert_eq!(s.http, Some("127.0.0.1:9000".parse().unwrap()));
        assert_eq!(s.expose, Some(Exposure::Lazy));
        assert_eq!(s.tool_names, Some(ToolNames::Upstream));
        assert_eq!(o.max_sessions, Some(3));
        assert_eq!(s.max_calls_per_session, Some(2));
        assert_eq!(s.max_body_bytes, Some(2048));
        assert_eq!(s.approve, Approval::Allow);
        assert!(matches!(&s.auth, Some(ServeAuth::BearerTokenEnv(v)) if v == "GW_TOKEN"));
        assert_eq!(o.rate_limit.unwrap().burst, 4);
        assert_eq!(o.auth_failure_limit.unwrap().burst, 2);
        assert_eq!(o.max_connections, 100);
        assert_eq!(o.max_connections_per_address, Some(8));
        let proxies: Vec<String> = o.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(
            proxies,
            ["127.0.0.1/32", "10.1.0.0/16", "fd00::/8", "10.0.0.0/8"]
        );
        assert_eq!(o.header_read_timeout, Duration::from_secs(5));
        assert_eq!(o.body_read_timeout, Duration::from_millis(7500));
        assert_eq!(o.idle_timeout, Duration::from_secs(20));
        assert_eq!(o.park_after, Some(Duration::from_secs(45)));
        assert_eq!(o.allowed_origins, ["http://localhost:5173"]);
        assert_eq!(
            o.public_url.as_ref().map(url::Url::as_str),
            Some("https://gateway.example.com/mcp")
        );
        assert_eq!(o.allowed_hosts, ["gateway.internal:8443"]);
        assert_eq!(s.history.as_deref(), Some(std::path::Path::new("/tmp/h")));
        assert_eq!(s.metrics, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(s.run_pool.max_runs, 3);
        assert_eq!(s.run_pool.idle_timeout, Duration::from_millis(500));
        assert_eq!(s.worker_threads, Some(3));
        assert_eq!(s.drain_delay, Some(Duration::from_secs(15)));
        let env = crate::settings::tests::env(&[("MCP_AGENT__SERVE", r#"{"approve": "allow"}"#)])
            .unwrap();
        assert_eq!(env.serve.approve, Approval::Allow);
    }

    #[test]
    fn nothing_set_is_the_gateways_defaults() {
        let s = toml("").unwrap().serve;
        assert_eq!((s.http, s.expose, s.tool_names), (None, None, None));
        assert_eq!(s.metrics, None, "no metrics listener unless asked");
        assert_eq!(s.options.max_sessions, Some(64));
        assert_eq!(s.approve, Approval::Deny);
        assert!(s.auth.is_none());
        assert_eq!(
            s.options.park_after, None,
            "sessions are parked only when asked"
        );
        assert_eq!(s.run_pool.max_runs, 16);
        assert_eq!(s.run_pool.idle_timeout, Duration::from_secs(60));
        assert_eq!(s.worker_threads, None, "as many as the process has CPUs");
        assert_eq!(s.drain_delay, None, "a stop drains at once");
        let off = toml("[serve]\nrun_pool = { max_runs = 0 }\n")
            .unwrap()
            .serve;
        assert_eq!(off.run_pool.max_runs, 0);
        assert_eq!(off.run_pool.idle_timeout, Duration::from_secs(60));
    }

    #[test]
    fn a_later_source_wins_key_by_key_and_every_source_is_checked() {
        let dir = std::env::temp_dir().join(format!("mcp-agent-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcp.toml");
        std::fs::write(&file, "[serve]\nexpose = \"eager\"\napprove = \"allow\"\n").unwrap();
        let vars = [("MCP_AGENT__SERVE", r#"{"approve": "deny"}"#)];
        let s = crate::settings::tests::load(&vars, Some(&file))
            .unwrap()
            .serve;
        assert_eq!(
            (s.expose, s.approve),
            (Some(Exposure::Eager), Approval::Deny)
        );

        std::fs::write(&file, "[serve]\nexpose = \"all\"\n").unwrap();
        let vars = [("MCP_AGENT__SERVE", r#"{"expose": "lazy", "colour": 1}"#)];
        let err = crate::settings::tests::load(&vars, Some(&file)).unwrap_err();
        let found: Vec<_> = err
            .problems()
            .iter()
            .map(|p| (p.path.as_str(), p.file.is_some()))
            .collect();
        assert!(found.contains(&("serve.expose", true)), "{found:?}");
        assert!(
            found.contains(&("MCP_AGENT__SERVE.colour", false)),
            "{found:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rate_below_the_slowest_or_a_burst_over_the_largest_names_the_bound() {
        for (line, path, bound) in [
            (
                "rate_limit = { per_second = 0.0005 }",
                "serve.rate_limit.per_second",
                "0.001",
            ),
            (
                "auth_failure_rate_limit = { per_second = 1, burst = 4294967296 }",
                "serve.auth_failure_rate_limit.burst",
                "at most 4294967295",
            ),
        ] {
            let err = toml(&format!("[serve]\n{line}\n")).unwrap_err();
            let problems = err.problems();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].path, path);
            assert!(problems[0].message.contains(bound), "{problems:?}");
        }
        let s = toml("[serve]\nrate_limit = { per_second = 0.001 }\n")
            .unwrap()
            .serve;
        assert_eq!(s.options.rate_limit.unwrap().burst, 1);
    }

    #[test]
    fn worker_threads_out_of_bounds_name_the_bound() {
        for (threads, bound) in [("0", "at least 1"), ("1025", "at most 1024")] {
            let err = toml(&format!("[serve]\nworker_threads = {threads}\n")).unwrap_err();
            let problems = err.problems();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].path, "serve.worker_threads");
            assert!(problems[0].message.contains(bound), "{problems:?}");
        }
        let s = toml("[serve]\nworker_threads = 1024\n").unwrap().serve;
        assert_eq!(s.worker_threads, Some(1024));
    }

    #[test]
    fn every_bad_key_is_named() {
        let err = toml(
            r#"
[serve]
http = "localhost"
expose = "all"
tool_names = "bare"
allowed_origins = ["not an origin"]
public_url = "ftp://user:pw@gateway"
allowed_hosts = ["evil.example/path"]
auth = { jwt = { issuer = "x", jwks_url = "http://auth.example.com/k", algorithms = ["none", "HS256"] }, bearer_token = "tok-never-echoed" }
max_body_bytes = 10
max_sessions = 0
max_calls_per_session = "many"
rate_limit = { burst = 2 }
auth_failure_rate_limit = 5
max_connections = 0
max_connections_per_address = -1
trusted_proxies = ["10.0.0.0/33", "0.0.0.0/0", "10.2.3.4/8", "::ffff:0:0/96"]
header_read_timeout_seconds = 0
body_read_timeout_seconds = "long"
idle_timeout_seconds = -3
approve = "ask"
metrics = "9464"
run_pool = { max_runs = -1, idle_timeout_seconds = 0, size = 2 }
worker_threads = 0
drain_delay_seconds = -1
colour = 1
"#,
        )
        .unwrap_err();
        let problems = crate::settings::tests::kinds(&err);
        for (kind, path) in [
            (ProblemKind::InvalidValue, "serve.http"),
            (ProblemKind::InvalidValue, "serve.expose"),
            (ProblemKind::InvalidValue, "serve.tool_names"),
            (ProblemKind::InvalidValue, "serve.allowed_origins[0]"),
            (ProblemKind::InvalidValue, "serve.public_url"),
            (ProblemKind::InvalidValue, "serve.allowed_hosts[0]"),
            (ProblemKind::InvalidValue, "serve.auth.jwt.jwks_url"),
            (ProblemKind::InvalidValue, "serve.auth.jwt.algorithms[0]"),
            (ProblemKind::InvalidValue, "serve.auth.jwt.algorithms[1]"),
            (ProblemKind::UnknownField, "serve.auth.bearer_token"),
            (ProblemKind::InvalidValue, "serve.max_body_bytes"),
            (ProblemKind::InvalidValue, "serve.max_sessions"),
            (ProblemKind::WrongType, "serve.max_calls_per_session"),
            (ProblemKind::MissingField, "serve.rate_limit.per_second"),
            (ProblemKind::WrongType, "serve.auth_failure_rate_limit"),
            (ProblemKind::InvalidValue, "serve.max_connections"),
            (ProblemKind::WrongType, "serve.max_connections_per_address"),
            (ProblemKind::InvalidValue, "serve.trusted_proxies[0]"),
            (ProblemKind::InvalidValue, "serve.trusted_proxies[1]"),
            (ProblemKind::InvalidValue, "serve.trusted_proxies[2]"),
            (ProblemKind::InvalidValue, "serve.trusted_proxies[3]"),
            (
                ProblemKind::InvalidTimeout,
                "serve.header_read_timeout_seconds",
            ),
            (ProblemKind::WrongType, "serve.body_read_timeout_seconds"),
            (ProblemKind::InvalidTimeout, "serve.idle_timeout_seconds"),
            (ProblemKind::InvalidValue, "serve.approve"),
            (ProblemKind::InvalidValue, "serve.metrics"),
            (ProblemKind::WrongType, "serve.run_pool.max_runs"),
            (
                ProblemKind::InvalidTimeout,
                "serve.run_pool.idle_timeout_seconds",
            ),
            (ProblemKind::UnknownField, "serve.run_pool.size"),
            (ProblemKind::InvalidValue, "serve.worker_threads"),
            (ProblemKind::InvalidTimeout, "serve.drain_delay_seconds"),
            (ProblemKind::UnknownField, "serve.colour"),
        ] {
            assert!(
                problems.contains(&(kind, path.to_owned())),
                "{kind:?} {path} not in {problems:?}"
            );
        }
        let text = err.to_string();
        assert!(!text.contains("tok-never-echoed"), "{text}");
        assert!(text.contains("never accepted"), "{text}");
        assert!(
            text.contains("`::ffff:0:0/96` trusts every address"),
            "every IPv4 address mapped into IPv6 is everyone: {text}"
        );
    }
}
