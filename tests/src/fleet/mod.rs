//! A gateway fleet on one machine, every part a real process started by the test: a Redis
//! server (`mcp_test_kit::redis`), an HTTP upstream (`mcp-test-server --http`), replicas of
//! `mcp-agent serve --http` sharing the Redis through `[serve] state`, and nginx round-robin
//! in front of them (`mcp_test_kit::lb`). All on loopback, nothing persisted.
//!
//! - [`Fleet::start`] brings it up from [`FleetOptions`]: the number of replicas, more
//!   `[serve]` lines (a rate limit, an `auth` table, …), more variables for every replica
//!   (seal keys, tokens), the `on_error` policy, a Redis password. `None` when a peer (Redis,
//!   nginx) is missing and not required, like every peer test.
//! - [`Replica`] is one `mcp-agent serve` process (SIGTERM, SIGKILL, its exit code and
//!   stderr); [`Replica::try_start`] also reports one that refuses to start.
//! - [`Load`] drives many MCP clients ([`Protocol::Stateless`] 2026-07-28 clients, or
//!   [`Protocol::Session`] 2025-11-25 sessions) and keeps every call's outcome and times;
//!   [`Load::run_until`] keeps going until stopped, for faults injected meanwhile.
//! - [`check_rate_limit`] sends requests faster than a limit and counts what got through.
//! - [`cpu::Ticks`] reads the CPU time each process of a fleet spent over a load.
//! - For state shared beyond the rate limit ([`FleetOptions::with_seal_key`]):
//!   [`Protocol::Session`] clients with [`LoadReport::renewals`] (a session that outlives its
//!   replica is never initialised again) and [`LoadReport::fresh_clients`]; an upstream that
//!   wants tokens through [`FleetOptions::with_upstream_url`] and
//!   [`FleetOptions::with_server`] (its `auth` table), whose token requests the benchmark's
//!   `token_requests` figure is for.
//!
//! ```no_run
//! # async fn demo() {
//! use integration_tests::fleet::{Fleet, FleetOptions, Load};
//!
//! let Some(fleet) = Fleet::start(FleetOptions::default()).await else { return };
//! let report = Load::new(&fleet.url(), "kit__echo").with_clients(30, 20).with_in_flight(10).run().await;
//! assert!(report.failed().is_empty(), "{}", report.sample_failures());
//! # }
//! ```

pub mod cpu;
mod load;
mod rate;
mod replica;
mod upstream;

use std::path::{Path, PathBuf};

use mcp_test_kit::lb::LoadBalancer;
use mcp_test_kit::redis::RedisServer;

pub use load::{Call, Client, Load, LoadReport, Outcome, Progress, Protocol, Running, Window};
pub use rate::{RateCheck, check_rate_limit, tools_list_status};
pub use replica::{REPLICA_BOUND, Refused, Replica, agent_binary};
pub use upstream::Upstream;

/// The variable the replicas read the Redis URL from (`url_env`).
pub const REDIS_URL_VAR: &str = "FLEET_REDIS_URL";

/// The variable the replicas read the seal key from (`seal_key_env`), when they have one.
pub const SEAL_KEY_VAR: &str = "FLEET_SEAL_KEY";

/// What a fleet is made of.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// How many replicas (at least 1). Default 3.
    pub replicas: usize,
    /// More lines of the replicas' `[serve]` table (`rate_limit = { … }`, `auth = { … }`).
    pub serve: Vec<String>,
    /// More environment variables of every replica (seal keys, tokens).
    pub env: Vec<(String, String)>,
    /// `[serve] state`'s `on_error`: `closed` (the default) or `open`.
    pub on_error: String,
    /// A password the Redis server requires (and the replicas' URL carries).
    pub redis_password: Option<String>,
    /// More lines of the upstream's `[[servers]]` table (`auth = { … }` for an upstream
    /// that wants tokens).
    pub server: Vec<String>,
    /// Another upstream for the replicas (one that checks tokens, say); default: the test
    /// kit's server, started with the fleet.
    pub upstream_url: Option<String>,
    /// The test kit's server records every call it starts ([`Upstream::record`]).
    pub record_upstream: bool,
    /// The seal key (32 bytes, base64) the replicas share sessions and upstream tokens with,
    /// if any.
    pub seal_key: Option<String>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            replicas: 3,
            serve: Vec::new(),
            env: Vec::new(),
            on_error: "closed".into(),
            redis_password: None,
            server: Vec::new(),
            upstream_url: None,
            record_upstream: false,
            seal_key: None,
        }
    }
}

impl FleetOptions {
    /// `n` replicas.
    pub fn with_replicas(mut self, n: usize) -> Self {
        self.replicas = n.max(1);
        self
    }

    /// One more `[serve]` line.
    pub fn with_serve(mut self, line: impl Into<String>) -> Self {
        self.serve.push(line.into());
        self
    }

    /// One more environment variable of every replica.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// One more line of the upstream's `[[servers]]` table.
    pub fn with_server(mut self, line: impl Into<String>) -> Self {
        self.server.push(line.into());
        self
    }

    /// The replicas serve the upstream at `url` instead of the test kit's server.
    pub fn with_upstream_url(mut self, url: impl Into<String>) -> Self {
        self.upstream_url = Some(url.into());
        self
    }

    /// The test kit's server records every call it starts.
    pub fn with_recorded_upstream(mut self) -> Self {
        self.record_upstream = true;
        self
    }

    /// A seal key (32 bytes, base64): the replicas share sessions and upstream tokens.
    pub fn with_seal_key(mut self, key: impl Into<String>) -> Self {
        self.seal_key = Some(key.into());
        self
    }

    /// A password the Redis server requires.
    pub fn with_redis_password(mut self, password: impl Into<String>) -> Self {
        self.redis_password = Some(password.into());
        self
    }

    /// `on_error = "closed"` or `"open"`.
    pub fn with_on_error(mut self, on_error: &str) -> Self {
        self.on_error = on_error.to_owned();
        self
    }
}

/// A running fleet: Redis, the upstream, the replicas, the load balancer. Dropping it kills
/// every process.
#[derive(Debug)]
pub struct Fleet {
    /// The shared Redis.
    pub redis: RedisServer,
    /// The test kit's server, when the replicas serve it (no
    /// [`upstream_url`](FleetOptions::upstream_url) given).
    pub upstream: Option<Upstream>,
    /// The replicas, in the balancer's order.
    pub replicas: Vec<Replica>,
    /// nginx, round robin over the replicas.
    pub lb: LoadBalancer,
    upstream_url: String,
    config: PathBuf,
    env: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

impl Fleet {
    /// Starts a fleet, every part ready when it returns. `None` when Redis or nginx is not
    /// installed and not required (a note on stderr says which); panics when a part does not
    /// start.
    pub async fn start(options: FleetOptions) -> Option<Self> {
        // Both peers first, so that a missing one skips before anything is spawned.
        mcp_test_kit::peer::path(mcp_test_kit::lb::NGINX)?;
        let redis = match &options.redis_password {
            Some(password) => RedisServer::start_with_password(password).await?,
            None => RedisServer::start().await?,
        };
        let (upstream, upstream_url) = match &options.upstream_url {
            Some(url) => (None, url.clone()),
            None => {
                let kit = if options.record_upstream {
                    Upstream::recording().await
                } else {
                    Upstream::start().await
                };
                let url = kit.url().to_owned();
                (Some(kit), url)
            }
        };
        let dir = tempfile::tempdir().expect("a directory for the fleet's config");
        let state = match &options.seal_key {
            Some(_) => sealed_state_line(&options.on_error),
            None => state_line(&options.on_error),
        };
        let mut serve = vec![state];
        serve.extend(options.serve.iter().cloned());
        let config = gateway_config_with(dir.path(), &upstream_url, &options.server, &serve);
        let mut env = vec![(REDIS_URL_VAR.to_owned(), redis.url())];
        if let Some(key) = &options.seal_key {
            env.push((SEAL_KEY_VAR.to_owned(), key.clone()));
        }
        env.extend(options.env.iter().cloned());
        let mut replicas = Vec::new();
        for _ in 0..options.replicas.max(1) {
            replicas.push(Replica::start(&config, &env).await);
        }
        let backends: Vec<_> = replicas.iter().map(Replica::addr).collect();
        let lb = LoadBalancer::start(&backends).await?;
        Some(Self {
            redis,
            upstream,
            upstream_url,
            replicas,
            lb,
            config,
            env,
            _dir: dir,
        })
    }

    /// The upstream's URL, as the replicas have it.
    pub fn upstream_url(&self) -> &str {
        &self.upstream_url
    }

    /// The fleet's endpoint: the load balancer's `/mcp`.
    pub fn url(&self) -> String {
        self.lb.url("/mcp")
    }

    /// The replicas' configuration file, to start one more like them
    /// (`Replica::start(fleet.config(), fleet.env())`).
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// The replicas' environment.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The index of the replica at `backend` (`127.0.0.1:port`, as the balancer logs it).
    pub fn replica_at(&self, backend: &str) -> Option<usize> {
        self.replicas
            .iter()
            .position(|r| r.addr().to_string() == backend)
    }
}

/// The `[serve] state` line of a fleet: Redis from [`REDIS_URL_VAR`], `on_error` as given.
pub fn state_line(on_error: &str) -> String {
    format!("state = {{ redis = {{ url_env = \"{REDIS_URL_VAR}\" }}, on_error = \"{on_error}\" }}")
}

/// [`state_line`] with `seal_key_env` ([`SEAL_KEY_VAR`]): sessions and upstream tokens shared.
pub fn sealed_state_line(on_error: &str) -> String {
    format!(
        "state = {{ redis = {{ url_env = \"{REDIS_URL_VAR}\", seal_key_env = \"{SEAL_KEY_VAR}\" }}, \
         on_error = \"{on_error}\" }}"
    )
}

/// Writes a gateway's configuration into `dir` and returns its path: the upstream at `url`
/// as the shared server `kit` (one upstream session per replica, whatever the clients),
/// every tool exposed as `kit__<tool>`, calls approved, then the `serve` lines.
pub fn gateway_config(dir: &Path, url: &str, serve: &[String]) -> PathBuf {
    gateway_config_with(dir, url, &[], serve)
}

/// [`gateway_config`] with more lines in the upstream's `[[servers]]` table.
pub fn gateway_config_with(dir: &Path, url: &str, server: &[String], serve: &[String]) -> PathBuf {
    let text = format!(
        "[[servers]]\nname = \"kit\"\nurl = {url:?}\nshared = true\n{}\n\n[serve]\n\
         expose = \"eager\"\napprove = \"allow\"\n{}\n",
        server.join("\n"),
        serve.join("\n")
    );
    let path = dir.join(format!("gateway-{}.toml", unique()));
    std::fs::write(&path, text).expect("write the gateway's config");
    path
}

/// A number no other config of this process has.
fn unique() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}
