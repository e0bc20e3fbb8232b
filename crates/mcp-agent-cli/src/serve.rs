//! `mcp-agent serve`: the configured servers behind one MCP endpoint (stdio or streamable
//! HTTP), every call — and every read of their resources, prompts and completions — through the
//! governed layer (the facade's `RunTools`). Each downstream session gets its own
//! upstream run, opened when it starts and closed when it ends; stateless (2026-07-28)
//! requests borrow a run kept per principal (`[serve] run_pool`). SIGHUP reloads the
//! configuration for new sessions (see [`reload`](super::reload)).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mcp_agent::{
    ApprovalDecision, ApprovalRequest, AutoApprove, CatalogConfig, Config, ElicitationHandler,
    Exposure, McpClient, OpenOptions, RunInput,
    config::DEFAULT_CALL_TIMEOUT,
    prelude::ApprovalGate,
    rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction},
    serve::RunTools,
};
use mcp_serve::{
    BearerAuth, Downstream, OpenError, OpenTools, PooledTools, ServeError, SessionTools, ToolServer,
};

use super::exit::Exit;
use super::gateways::{Built, Gateways};
use super::logging::LogSecrets;
use super::open::{COMMAND_WORKERS, fail, load_all, runtime_with};
use super::reload::{Fixed, Reload, Sources};
use super::settings::ServeSettings;
use super::settings::serve::{Approval, ServeAuth, ToolNames, exposure};
use super::shared_sessions::shared_sessions;
use super::shared_state::FleetState;
use super::signals::Signals;
use mcp_agent::Redactor;

use super::term::chain;
use super::term::say;

/// How long a shutdown waits for calls in flight, then again for upstream sessions to close.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call that needs approval is refused by the gateway.
const DENIED: &str = "this call needs approval and the gateway has nobody to ask: \
                      `[serve] approve = \"allow\"` runs such calls";

/// `mcp-agent serve`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve one session on stdin/stdout (the default unless `[serve] http` is set).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve streamable HTTP on ADDR (`127.0.0.1:8080`; a port alone binds 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// What downstream clients see: `lazy` (`mcp_search_tools`, `mcp_call_tool`; the
    /// default) or `eager` (every upstream tool as `server__tool`).
    #[arg(long, value_name = "MODE", value_parser = ["lazy", "eager"])]
    expose: Option<String>,
    /// How first-class upstream tools are named: `prefixed` (`server__tool`; the default) or
    /// `upstream` (each tool's own name where no other tool has it).
    #[arg(long, value_name = "NAMES", value_parser = ["prefixed", "upstream"])]
    tool_names: Option<String>,
    /// Serve Prometheus metrics (`/metrics`) and health checks (`/healthz`, `/readyz`) on
    /// ADDR, apart from the MCP endpoint and without its auth (a port alone binds 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
}

/// Where the gateway serves.
#[derive(Clone, Copy)]
enum Mode {
    Stdio,
    Http(SocketAddr),
}

/// Runs `mcp-agent serve`.
pub(crate) fn run(args: ServeArgs, file: Option<&std::path::Path>, logs: &LogSecrets) -> ExitCode {
    let (config, settings, secrets) = match load_all(file, false, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let secrets = &secrets;
    let mut settings = settings.serve;
    if let Some(addr) = &args.metrics {
        match parse_addr("--metrics", addr) {
            Ok(addr) => settings.metrics = Some(addr),
            Err(message) => {
                say(format_args!("error: {message}"));
                return Exit::InvalidConfig.into();
            }
        }
    }
    let mode = match mode(&args, &settings) {
        Ok(mode) => mode,
        Err(message) => {
            say(format_args!("error: {message}"));
            return Exit::InvalidConfig.into();
        }
    };
    let auth = match &settings.auth {
        Some(ServeAuth::Jwt(jwt)) if matches!(mode, Mode::Http(_)) => {
            match BearerAuth::jwt(jwt.as_ref().clone()) {
                Ok(auth) => Some(auth),
                Err(e) => {
                    say(format_args!("error: serve.auth.jwt: {e}"));
                    return Exit::InvalidConfig.into();
                }
            }
        }
        Some(auth) if matches!(mode, Mode::Http(_)) => {
            match auth.token_from(|name| std::env::var(name).ok()) {
                Ok(token) => Some(BearerAuth::new(token.expose())),
                Err(e) => {
                    super::config::report(&e);
                    return Exit::InvalidConfig.into();
                }
            }
        }
        _ => None,
    };
    if let Mode::Http(addr) = mode
        && auth.is_none()
        && !addr.ip().is_loopback()
    {
        say(format_args!(
            "warning: serving on {addr} without `[serve] auth`: any client that reaches this \
             address can call every tool; set `auth = {{ bearer_token_env = \"VAR\" }}` (or `jwt`) \
             in [serve], or bind to 127.0.0.1"
        ));
    }
    let exposure = match args.expose.as_deref() {
        Some(word) => exposure(word).unwrap_or_default(),
        None => settings.expose.unwrap_or_default(),
    };
    let names = match args.tool_names.as_deref() {
        Some(word) => ToolNames::parse(word).unwrap_or_default(),
        None => settings.tool_names.unwrap_or_default(),
    };
    let gateway = GatewaySettings {
        serve: settings,
        exposure,
        names,
    };
    let sources = Sources {
        file: file.map(std::path::Path::to_path_buf),
        logs: logs.clone(),
    };
    // Over HTTP a gateway serves many clients at once: as many workers as it may use CPUs,
    // unless `[serve] worker_threads` says otherwise (replicas sharing a machine share its
    // CPUs). Over stdio it serves one client, as a command does.
    let workers = gateway.serve.worker_threads.unwrap_or_else(|| match mode {
        Mode::Http(_) => std::thread::available_parallelism()
            .map_or(COMMAND_WORKERS, std::num::NonZeroUsize::get),
        Mode::Stdio => COMMAND_WORKERS,
    });
    runtime_with(workers).block_on(serve(secrets, config, gateway, mode, auth, sources))
}

/// What `[serve]` and the flags say, together.
struct GatewaySettings {
    serve: ServeSettings,
    exposure: Exposure,
    names: ToolNames,
}

fn mode(args: &ServeArgs, settings: &ServeSettings) -> Result<Mode, String> {
    if args.stdio {
        return Ok(Mode::Stdio);
    }
    match (&args.http, settings.http) {
        (Some(addr), _) => parse_addr("--http", addr).map(Mode::Http),
        (None, Some(addr)) => Ok(Mode::Http(addr)),
        (None, None) => Ok(Mode::Stdio),
    }
}

/// `IP:PORT`, or a port alone (bound on 127.0.0.1), given to `flag`.
fn parse_addr(flag: &str, text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| {
        format!(
            "{flag} `{}`: not an address (write `127.0.0.1:8080`, or a port)",
            text.escape_debug()
        )
    })
}

async fn serve(
    secrets: &Redactor,
    config: Config,
    gateway: GatewaySettings,
    mode: Mode,
    auth: Option<BearerAuth>,
    sources: Sources,
) -> ExitCode {
    let GatewaySettings {
        serve: settings,
        exposure,
        names,
    } = gateway;
    let (mut signals, hangups) = Signals::install_reloading();
    // First: what the rest of the start counts (state errors, token requests) is recorded.
    let monitor = match super::monitor::start(settings.metrics, secrets).await {
        Ok(monitor) => monitor,
        Err(code) => return code,
    };
    let fleet = match &settings.state {
        Some(state) => match FleetState::connect(state).await {
            Ok(fleet) => Some(Arc::new(fleet)),
            Err(e) => {
                // Like an address that cannot be bound: the deployment is wrong.
                let hint = if matches!(e, mcp_state::StateError::SealKey { .. }) {
                    " (32 random bytes in base64: `head -c 32 /dev/urandom | base64`)"
                } else {
                    ""
                };
                say(format_args!(
                    "error: [serve] state: {}{hint}",
                    chain(secrets, &e)
                ));
                return Exit::InvalidConfig.into();
            }
        },
        None => None,
    };
    let tokens = fleet.as_ref().and_then(|fleet| fleet.tokens());
    let sharing_tokens = tokens.is_some();
    let connectors = match tokens.map_or_else(mcp_agent::connectors, |tokens| {
        mcp_agent::connectors_with_shared_tokens(tokens)
    }) {
        Ok(c) => c,
        Err(e) => return fail(secrets, &e),
    };
    let name = config.tool_server.name.clone();
    let runs = Arc::new(AtomicU64::new(0));
    let build = move |secrets: &Redactor, config: Config, serve: &ServeSettings| {
        let runs = runs.clone();
        build_gateway(
            secrets,
            config,
            serve,
            connectors.clone(),
            exposure,
            names,
            runs,
        )
    };
    let started = Fixed::of(&config);
    let gateways = Arc::new(Gateways::new(build(secrets, config, &settings)));
    let reload = Reload::new(sources, secrets, started, Box::new(build), gateways.clone());
    let mut reloads = super::reload::watch(hangups, reload);
    // Stateless requests borrow pooled runs; sessions open their own through it.
    let opener = Arc::new(PooledTools::new(gateways.clone(), settings.run_pool));
    let mut server = ToolServer::per_session(opener)
        .name(name, env!("CARGO_PKG_VERSION"))
        .instructions(match (exposure, names) {
            (Exposure::Eager, ToolNames::Upstream) => {
                "The tools of the configured MCP servers, each under its own name \
                 (`server__tool` where two servers share one)."
            }
            (Exposure::Eager, _) => "The tools of the configured MCP servers, as `server__tool`.",
            _ => {
                "The tools of the configured MCP servers: find one with `mcp_search_tools`, \
                 run it with `mcp_call_tool`."
            }
        });
    if let Some(max) = settings.max_calls_per_session {
        server = server.max_calls_per_session(max);
    }
    if let Some(max) = settings.max_body_bytes {
        server = server.max_request_bytes(max);
    }
    match mode {
        Mode::Stdio => {
            if settings.drain_delay.is_some() {
                say(
                    "note: [serve] drain_delay_seconds applies over HTTP only: over stdio a stop \
                     drains at once",
                );
            }
            let session = tokio::select! {
                served = server.serve_stdio() => match served {
                    Ok(session) => session,
                    Err(e) => return fail(secrets, &e),
                },
                _ = signals.recv() => return Exit::Success.into(),
            };
            ready(monitor.as_ref(), session.state(), fleet.as_deref());
            tokio::select! {
                () = session.wait() => {}
                _ = signals.recv() => say("stopping: draining calls in flight"),
            }
            reloads.stop();
            let report = tokio::select! {
                report = session.shutdown(DRAIN_TIMEOUT) => Some(report),
                _ = signals.recv() => None,
            };
            stopped(report, &gateways, &mut signals).await
        }
        Mode::Http(bind) => {
            let mut options = settings
                .options
                .clone()
                .with_bind(bind)
                .with_drain_timeout(DRAIN_TIMEOUT);
            if let Some(mut auth) = auth {
                // Used DPoP proofs are remembered fleet-wide (else in this process).
                if let Some(fleet) = &fleet {
                    auth = auth.with_proof_replay(fleet.proof_replay());
                }
                options = options.with_auth(auth);
            }
            if let Some(fleet) = &fleet {
                if options.trusted_proxies.is_empty() {
                    say(
                        "note: [serve] state is set without trusted_proxies: behind a balancer \
                         every client counts as the balancer's address in the per-address limits",
                    );
                }
                if options.rate_limit.is_none() {
                    let dpop =
                        matches!(&settings.auth, Some(ServeAuth::Jwt(jwt)) if jwt.dpop.is_some());
                    let unset = if sharing_tokens {
                        "rate_limit"
                    } else {
                        "rate_limit or seal_key_env"
                    };
                    let shared = match (sharing_tokens, dpop) {
                        (true, false) => "sessions and upstream tokens are shared, no limit",
                        (true, true) => {
                            "sessions, upstream tokens and used DPoP proofs are shared, no limit"
                        }
                        (false, true) => "only used DPoP proofs are shared",
                        (false, false) => "nothing to share",
                    };
                    say(format_args!(
                        "note: [serve] state is set without {unset}: {shared}"
                    ));
                }
                options = options.with_shared_rate_limit(fleet.rate_limit());
                // Sessions are stored sealed only: without the key (noted at the connection)
                // a client must stay on the replica that opened its session.
                match shared_sessions(fleet).await {
                    Ok(Some(sessions)) => options = options.with_shared_sessions(sessions),
                    Ok(None) => {}
                    Err(e) => {
                        say(format_args!("error: [serve] state: {}", chain(secrets, &e)));
                        return Exit::InvalidConfig.into();
                    }
                }
            }
            let http = match server.serve_http(options).await {
                Ok(http) => http,
                Err(e) => {
                    say(format_args!("error: {}", chain(secrets, &e)));
                    // An address that cannot be bound (taken, not this host's, a port
                    // reserved to root) or an unusable option is the configuration's fault.
                    let code = match e {
                        ServeError::Bind { .. } | ServeError::InvalidOption { .. } => {
                            Exit::InvalidConfig
                        }
                        _ => Exit::Failed,
                    };
                    return code.into();
                }
            };
            ready(monitor.as_ref(), http.state(), fleet.as_deref());
            if settings.drain_delay.is_some() && monitor.is_none() {
                say(
                    "note: [serve] drain_delay_seconds is set without metrics: no /readyz tells \
                     the balancers of a stop; the gateway still serves that long before it drains",
                );
            }
            let workers = tokio::runtime::Handle::current().metrics().num_workers();
            say(format_args!("worker threads: {workers}"));
            say(format_args!("listening on {}", http.url()));
            let _ = signals.recv().await;
            if let Some(delay) = settings.drain_delay {
                // Out of the balancers' rotation first (`/readyz`), still serving meanwhile.
                let told = match &monitor {
                    Some(monitor) => {
                        monitor.leaving();
                        "/readyz says draining; "
                    }
                    None => "",
                };
                say(format_args!(
                    "stopping: {told}serving {delay:?} more before draining (another signal \
                     drains at once)"
                ));
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = signals.recv() => {}
                }
            }
            reloads.stop();
            say("stopping: draining calls in flight");
            let report = tokio::select! {
                report = http.shutdown() => Some(report),
                _ = signals.recv() => None,
            };
            stopped(report, &gateways, &mut signals).await
        }
    }
}

/// Tells the metrics listener, if there is one, that the gateway serves in `state` (its
/// `/readyz` pings the fleet's Redis too, when there is one).
fn ready(
    monitor: Option<&super::monitor::Monitor>,
    state: tokio::sync::watch::Receiver<mcp_serve::ServeState>,
    fleet: Option<&FleetState>,
) {
    if let Some(monitor) = monitor {
        monitor.serving(state, fleet.map(|fleet| fleet.redis().clone()));
    }
}

/// Reports how a shutdown went: `None` when a second signal cut it short (what is left is
/// killed as the runtime drops it: every upstream process group). Otherwise the shared
/// upstream sessions (`shared = true`, which outlive the downstream sessions) are closed too —
/// those of every configuration loaded, the one in use and those it replaced — unless another
/// signal cuts that short. Exit 0 either way.
async fn stopped(
    report: Option<mcp_serve::ShutdownReport>,
    gateways: &Gateways,
    signals: &mut Signals,
) -> ExitCode {
    if report.is_some() {
        tokio::select! {
            () = gateways.close_all() => {}
            _ = signals.recv() => say("interrupted again: stopping the MCP servers now"),
        }
    }
    match report {
        Some(report) if report.abandoned > 0 => {
            say(format_args!(
                "warning: {} calls were cut off",
                report.abandoned
            ));
        }
        Some(_) => {}
        None => say("interrupted again: stopping the MCP servers now"),
    }
    Exit::Success.into()
}

/// One configuration's gateway: its client, and the opener of each session's run over it.
/// `runs` numbers the runs of every configuration (their ids and history directories).
fn build_gateway(
    secrets: &Redactor,
    config: Config,
    serve: &ServeSettings,
    connectors: mcp_agent::Connectors,
    exposure: Exposure,
    names: ToolNames,
    runs: Arc<AtomicU64>,
) -> Built {
    let servers = config.servers.len();
    let upstreams = upstream_digest(&config.servers);
    let call_timeouts = config
        .servers
        .iter()
        .map(|s| (s.name.clone(), s.call_timeout))
        .collect();
    let client = client(
        secrets,
        config,
        connectors,
        exposure,
        serve.approve,
        serve.history.clone(),
    );
    let opener = Arc::new(Gateway {
        client: client.clone(),
        runs,
        call_timeouts: Arc::new(call_timeouts),
        names,
        upstreams,
    });
    Built {
        opener,
        client,
        servers,
    }
}

/// The client every session's run is opened with.
fn client(
    secrets: &Redactor,
    config: Config,
    connectors: mcp_agent::Connectors,
    exposure: Exposure,
    approve: Approval,
    history: Option<std::path::PathBuf>,
) -> McpClient {
    let pinned: Vec<String> = config
        .servers
        .iter()
        .flat_map(|s| {
            s.tools
                .pinned
                .iter()
                .map(move |t| mcp_agent::external_name(&s.name, t))
        })
        .collect();
    let catalog = CatalogConfig::default()
        .with_pinned(pinned)
        .with_exposure(exposure)
        .with_identity_rules(config.policy.identity.clone());
    let gate: Arc<dyn ApprovalGate> = match approve {
        Approval::Allow => Arc::new(AutoApprove),
        _ => Arc::new(Deny),
    };
    let mut builder = McpClient::builder(config)
        .connectors(connectors)
        .agent("mcp-agent-serve")
        .events(Arc::new(super::logging::LoggedEvents))
        .catalog(catalog)
        // The configuration's engine is the template of each run's.
        .govern(|layer| layer.approval_gate(gate).redactor(secrets.clone()));
    if let Some(dir) = history {
        builder = builder.history_root(dir);
    }
    super::open::local_model(builder).build()
}

/// Refuses every call that needs approval: nobody can be asked.
struct Deny;

#[async_trait]
impl ApprovalGate for Deny {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Rejected {
            reason: DENIED.to_owned(),
        }
    }
}

/// Opens one upstream run per downstream session.
struct Gateway {
    client: McpClient,
    /// Numbers the runs, shared by the gateways of every configuration loaded.
    runs: Arc<AtomicU64>,
    /// Each configured server's call timeout, which also bounds its elicitations.
    call_timeouts: Arc<HashMap<String, Duration>>,
    /// How first-class upstream tools are named.
    names: ToolNames,
    /// The digest of the upstream servers' specs.
    upstreams: u64,
}

/// A digest of the configured servers' specs (their JSON, which shows every field but no
/// secret), by which pooled runs are keyed: a run is lent only for the upstream set it was
/// opened for. Keyed afresh in each process, never shown.
fn upstream_digest(servers: &[mcp_agent::ServerSpec]) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    for spec in servers {
        serde_json::to_string(spec)
            .unwrap_or_default()
            .hash(&mut hasher);
    }
    hasher.finish()
}

#[async_trait]
impl OpenTools for Gateway {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.open_for(Downstream::none()).await
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        // A session's runs on every replica share its label.
        let id = match downstream.session() {
            Some(label) => format!("serve-{label}-{}-{n}", std::process::id()),
            None => format!("serve-{}-{n}", std::process::id()),
        };
        let promoted = downstream.promoted().to_vec();
        let mut options = OpenOptions::new();
        // The run acts for the session's authenticated subject, if any.
        if let Some(principal) = downstream.principal() {
            options = options.with_principal(principal.clone());
        }
        // Without a client to ask, the upstream sessions declare no elicitation (declined).
        if downstream.declares_elicitation() {
            options = options.with_elicitation(Arc::new(Forward {
                downstream,
                call_timeouts: self.call_timeouts.clone(),
            }));
        }
        let runner = self
            .client
            .open_runner_with(&RunInput::new(id, ""), options)
            .await?;
        // Promoted where the session was served before: promoted again (a tool gone is not).
        for tool in &promoted {
            let _ = runner.catalog().promote(tool);
        }
        for skipped in runner.skipped() {
            let secrets = runner.redactor();
            say(format_args!(
                "warning: skipped: {}",
                chain(secrets, &skipped.error)
            ));
        }
        let names = match self.names {
            ToolNames::Upstream => mcp_agent::serve::ToolNames::Upstream,
            ToolNames::Prefixed => mcp_agent::serve::ToolNames::Prefixed,
        };
        let tools = RunTools::new(runner, names).on_close(|runner, outcome| {
            if let Err(e) = outcome {
                say(format_args!("warning: {}", chain(runner.redactor(), &e)));
            }
            // What the session held is free now; glibc keeps it unless asked.
            super::trim::after_close();
        });
        Ok(Arc::new(tools))
    }

    fn upstream_digest(&self) -> u64 {
        self.upstreams
    }

    /// A session's run may offer its servers' resources, prompts and completions.
    fn offered(&self) -> mcp_serve::Offered {
        RunTools::MAY_OFFER
    }
}

/// Forwards an upstream server's requests for user input to the downstream client of the
/// session (declined when it cannot be asked in the request's mode), on the stream of the
/// session's newest call to that server (see `RunTools`' `origin`). The request lasts no
/// longer than that call, nor than the server's call timeout, nor than the upstream's own
/// request (cancelled upstream, cancelled downstream). Its texts go without the run's secrets
/// and control characters, bounded, a URL only if `http(s)` (else declined); the answer goes
/// back as the client gave it.
struct Forward {
    downstream: Downstream,
    call_timeouts: Arc<HashMap<String, Duration>>,
}

#[async_trait]
impl ElicitationHandler for Forward {
    async fn elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        let bound = self
            .call_timeouts
            .get(server)
            .copied()
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        match self.downstream.elicit_from(server, request, bound).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::info!(server, error = %e, "an elicitation got no answer downstream");
                ElicitResult::new(ElicitationAction::Cancel)
            }
        }
    }

    /// Passes the completion of a URL request on to the client that was sent it (only a
    /// request of the same server).
    async fn completed(&self, server: &str, elicitation_id: &str) {
        self.downstream.complete_from(server, elicitation_id).await;
    }
}
