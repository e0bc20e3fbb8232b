//! Serving over streamable HTTP on hyper-util: the listener, connections, graceful shutdown.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use url::Url;

use crate::ServeError;
use crate::drain::{CUT_GRACE, InFlight, Lifecycle, ServeState, ShutdownReport};
use crate::handler::{Session, Shared};
use crate::param_headers::ParamHeaderCheck;
use crate::per_session::OpenTools;
use crate::server::{Source, ToolServer};

/// The longest of the endpoint's timeouts a setter takes (a year): a connection's deadline is
/// its start plus a timeout, which a clock cannot hold for any duration.
pub const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

mod accept;
mod answer;
mod auth;
mod authenticate;
mod body;
mod check;
mod conn;
mod dpop;
mod ended;
mod forwarded;
mod front;
mod ids;
mod in_flight;
mod jwks;
mod jwt;
mod limit;
mod limit_ahead;
mod limit_store;
mod message_check;
mod metered;
mod one_body;
mod origin;
mod params;
mod park;
mod parked_records;
mod route;
mod session_keeper;
mod session_store;
mod sessions;
mod shared_limit;
mod shared_sessions;

pub use auth::BearerAuth;
pub use dpop::{DpopPolicy, InProcessReplay, PROOF_WINDOW, ProofReplay};
pub use forwarded::{UntrustableNetwork, trusted_proxy};
pub use jwks::JwksError;
pub use jwt::{JwtAlgorithm, JwtAuth};
pub use limit::RateLimit;
pub use limit_store::{
    InProcessStore, OnStoreError, RateLimitStore, SharedRateLimit, StoreError, Taken,
};
pub use session_store::{InProcessSessions, SessionNotice, SessionStore, SharedSessions};

/// How the HTTP endpoint is served. Plain data with `with_<field>` setters.
///
/// ```
/// use std::time::Duration;
/// use mcp_serve::{BearerAuth, HttpOptions};
///
/// let options = HttpOptions::default()
///     .with_bind("127.0.0.1:8931".parse().unwrap())
///     .with_allowed_origins(["http://localhost:5173"])
///     .with_auth(BearerAuth::new("token"))
///     .with_drain_timeout(Duration::from_secs(10));
/// assert_eq!(options.path, "/mcp");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Where to listen. Default `127.0.0.1:0` (loopback only, a free port).
    pub bind: SocketAddr,
    /// The endpoint's path. Default `/mcp`.
    pub path: String,
    /// The endpoint's URL as clients reach it (behind a proxy, or on a host name), which is
    /// the resource named in the protected-resource metadata. Default
    /// `http://<bound address><path>`.
    pub public_url: Option<Url>,
    /// Browser origins allowed besides the endpoint's own (`scheme://host[:port]`, or
    /// `null`). A request with any other `Origin` is answered `403`; requests without one
    /// (not from a browser) pass.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted besides the defaults (the loopback names for a loopback bind,
    /// the bound address, the public URL's host). Binding an unspecified address
    /// (`0.0.0.0`, `::`) needs a public URL or a host here.
    pub allowed_hosts: Vec<String>,
    /// Inbound authentication: one bearer token, or JWTs ([`BearerAuth::jwt`]). Default none.
    pub auth: Option<BearerAuth>,
    /// How long a shutdown waits for exchanges in flight. Default 30 s.
    pub drain_timeout: Duration,
    /// How often an idle event stream gets a keep-alive comment. Default 15 s.
    pub sse_keep_alive: Option<Duration>,
    /// At most this many initialised sessions at once; a client initialising one more is
    /// answered `503 Service Unavailable` with a JSON-RPC error saying so. With
    /// [`ToolServer::per_session`] tools it also bounds the tools open at once, stateless
    /// (2026-07-28) requests included: one more open fails with that message (the runs a
    /// [`PooledTools`](crate::PooledTools) keeps idle count in its own bound). Default none.
    pub max_sessions: Option<usize>,
    /// Requests per second per client address. Default none.
    pub rate_limit: Option<RateLimit>,
    /// [`rate_limit`](Self::rate_limit) counted fleet-wide too, in a store the replicas share,
    /// per JWT subject for authenticated requests and per client address otherwise (after
    /// authentication; the per-address count in memory stays before it). Default none: only
    /// in memory.
    pub shared_rate_limit: Option<SharedRateLimit>,
    /// Requests failing authentication, per client address: once an address has used its
    /// budget, its requests are answered `429 Too Many Requests` (with `Retry-After`)
    /// without being checked, valid tokens from that address included, until the budget
    /// refills. Default 1 a second in bursts of 10; `None` turns it off.
    pub auth_failure_limit: Option<RateLimit>,
    /// Connections open at once. One more is answered `503 Service Unavailable` (with
    /// `Retry-After`) and closed at once, before anything is read. Default 512.
    pub max_connections: usize,
    /// Connections open at once from one client address, refused like those beyond
    /// [`max_connections`](Self::max_connections). Default none: behind a proxy every client
    /// has the proxy's address.
    pub max_connections_per_address: Option<usize>,
    /// The networks of the proxies (load balancers) in front of this endpoint: a request on a
    /// connection from one of them comes from the last address its `X-Forwarded-For` names
    /// that is not one of theirs, for the per-address limits
    /// ([`rate_limit`](Self::rate_limit), [`auth_failure_limit`](Self::auth_failure_limit),
    /// [`shared_rate_limit`](Self::shared_rate_limit) without a subject). A connection from
    /// anywhere else is its own client whatever it sends; the bound on connections per
    /// address stays per connecting address. Default none: behind a proxy every client
    /// counts as the proxy. A network holding every address, or with bits past its prefix,
    /// is refused when the endpoint starts ([`trusted_proxy`]).
    pub trusted_proxies: Vec<IpNet>,
    /// How long a client may take to send a request's head (line and headers), counted from
    /// when the connection waits for it: on a kept-alive HTTP/1 connection that is its idle
    /// time too. Beyond, the connection is closed. Default 30 s.
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's body, whole. Beyond, `408 Request
    /// Timeout` and the connection is closed. Default 30 s.
    pub body_read_timeout: Duration,
    /// A connection with no request in progress for this long is closed (HTTP/2, and a
    /// connection that sent nothing yet; see also
    /// [`header_read_timeout`](Self::header_read_timeout)). An open event stream is a
    /// request in progress. Default 60 s.
    pub idle_timeout: Duration,
    /// A session with no message for this long ends (its tools closed); with
    /// [`shared_sessions`](Self::shared_sessions), its record expires once no replica has
    /// used it for this long. Default 300 s.
    pub session_idle_timeout: Duration,
    /// Sessions (2025-11-25 and older) kept in a store the replicas share, so that any
    /// replica serves a session another one opened, without sticky routing: its record holds
    /// the principal the session is bound to, the client's `initialize` and the tools it
    /// promoted ([`SessionTools::promoted`](crate::SessionTools::promoted)); a replica that
    /// does not hold the session replays that handshake, bound to the stored principal, and
    /// opens the session's own tools ([`ToolServer::per_session`]), given the promoted ones
    /// ([`Downstream::promoted`](crate::Downstream::promoted)). What those tools hold
    /// themselves (an upstream server's process and session) stays on the replica that opened
    /// them; a replica already holding the session does not learn of promotions made on
    /// another. `DELETE` ends it on every replica (each drops it as the store announces the
    /// end, or at its next check, at most an interval of a tenth of the idle timeout, within
    /// 0.1–30 s, later). An id that is not in the store, or whose record does not open, is
    /// `404`. Default none: sessions stay in this process.
    pub shared_sessions: Option<SharedSessions>,
    /// A session with no request in progress (an open event stream is one) for this long is
    /// parked: closed on this replica (its handler and its tools, so an upstream's process and
    /// session end too) while its record stays in the session store
    /// ([`shared_sessions`](Self::shared_sessions), or one in this process when none is set);
    /// with a shared store, this replica keeps the record too (at most 64 MiB of parked
    /// records), until it would expire, and writes it back should the store lose it
    /// (restarted empty).
    /// Its next request restores it as a replica that does not hold it would: the handshake
    /// replayed, bound to the stored principal, its tools opened again and the promoted ones
    /// promoted again; what the closed tools held (an upstream's subscriptions, a stdio
    /// server's own state) does not come back. An idle session then costs its record (about
    /// 1 KiB) instead of its handler and rmcp's session. Default none: sessions stay open
    /// until [`session_idle_timeout`](Self::session_idle_timeout).
    pub park_after: Option<Duration>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            path: "/mcp".into(),
            public_url: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            auth: None,
            drain_timeout: Duration::from_secs(30),
            sse_keep_alive: Some(Duration::from_secs(15)),
            max_sessions: None,
            rate_limit: None,
            shared_rate_limit: None,
            auth_failure_limit: Some(RateLimit::new(1.0, 10)),
            max_connections: 512,
            max_connections_per_address: None,
            trusted_proxies: Vec::new(),
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            session_idle_timeout: Duration::from_secs(300),
            shared_sessions: None,
            park_after: None,
        }
    }
}

impl HttpOptions {
    /// Sets [`bind`](Self::bind).
    #[must_use]
    pub fn with_bind(mut self, bind: SocketAddr) -> Self {
        self.bind = bind;
        self
    }

    /// Sets [`path`](Self::path).
    #[must_use]
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Sets [`public_url`](Self::public_url).
    #[must_use]
    pub fn with_public_url(mut self, url: Url) -> Self {
        self.public_url = Some(url);
        self
    }

    /// Sets [`allowed_origins`](Self::allowed_origins).
    #[must_use]
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`allowed_hosts`](Self::allowed_hosts).
    #[must_use]
    pub fn with_allowed_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`auth`](Self::auth).
    #[must_use]
    pub fn with_auth(mut self, auth: BearerAuth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Sets [`drain_timeout`](Self::drain_timeout).
    #[must_use]
    pub fn with_drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Sets [`sse_keep_alive`](Self::sse_keep_alive).
    #[must_use]
    pub fn with_sse_keep_alive(mut self, interval: Option<Duration>) -> Self {
        self.sse_keep_alive = interval;
        self
    }

    /// Sets [`max_sessions`](Self::max_sessions) (at least 1).
    #[must_use]
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = Some(max.max(1));
        self
    }

    /// Sets [`rate_limit`](Self::rate_limit).
    #[must_use]
    pub fn with_rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Sets [`shared_rate_limit`](Self::shared_rate_limit) (counted only with a
    /// [`rate_limit`](Self::rate_limit)).
    #[must_use]
    pub fn with_shared_rate_limit(mut self, shared: SharedRateLimit) -> Self {
        self.shared_rate_limit = Some(shared);
        self
    }

    /// Sets [`auth_failure_limit`](Self::auth_failure_limit) (`None`: off).
    #[must_use]
    pub fn with_auth_failure_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.auth_failure_limit = limit;
        self
    }

    /// Sets [`max_connections`](Self::max_connections) (at least 1).
    #[must_use]
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        self
    }

    /// Sets [`max_connections_per_address`](Self::max_connections_per_address) (at least 1).
    #[must_use]
    pub fn with_max_connections_per_address(mut self, max: usize) -> Self {
        self.max_connections_per_address = Some(max.max(1));
        self
    }

    /// Sets [`trusted_proxies`](Self::trusted_proxies) (checked when the endpoint starts).
    ///
    /// ```
    /// use mcp_serve::HttpOptions;
    ///
    /// let options = HttpOptions::default()
    ///     .with_trusted_proxies(["10.0.0.0/8".parse().unwrap(), "127.0.0.1/32".parse().unwrap()]);
    /// assert_eq!(options.trusted_proxies.len(), 2);
    /// ```
    #[must_use]
    pub fn with_trusted_proxies(mut self, networks: impl IntoIterator<Item = IpNet>) -> Self {
        self.trusted_proxies = networks.into_iter().collect();
        self
    }

    /// Sets [`header_read_timeout`](Self::header_read_timeout) (at least 1 ms, at most [`MAX_HTTP_TIMEOUT`]).
    #[must_use]
    pub fn with_header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout.clamp(Duration::from_millis(1), MAX_HTTP_TIMEOUT);
        self
    }

    /// Sets [`body_read_timeout`](Self::body_read_timeout) (at least 1 ms, at most [`MAX_HTTP_TIMEOUT`]).
    #[must_use]
    pub fn with_body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout.clamp(Duration::from_millis(1), MAX_HTTP_TIMEOUT);
        self
    }

    /// Sets [`idle_timeout`](Self::idle_timeout) (at least 1 ms, at most [`MAX_HTTP_TIMEOUT`]).
    #[must_use]
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout.clamp(Duration::from_millis(1), MAX_HTTP_TIMEOUT);
        self
    }

    /// Sets [`session_idle_timeout`](Self::session_idle_timeout) (at least 1 s, at most
    /// [`MAX_HTTP_TIMEOUT`]).
    #[must_use]
    pub fn with_session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.session_idle_timeout = timeout.clamp(Duration::from_secs(1), MAX_HTTP_TIMEOUT);
        self
    }

    /// Sets [`shared_sessions`](Self::shared_sessions).
    #[must_use]
    pub fn with_shared_sessions(mut self, sessions: SharedSessions) -> Self {
        self.shared_sessions = Some(sessions);
        self
    }

    /// Sets [`park_after`](Self::park_after) (at least 100 ms).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mcp_serve::HttpOptions::default().with_park_after(Duration::from_secs(30));
    /// assert_eq!(options.park_after, Some(Duration::from_secs(30)));
    /// ```
    #[must_use]
    pub fn with_park_after(mut self, after: Duration) -> Self {
        self.park_after = Some(after.max(Duration::from_millis(100)));
        self
    }
}

/// A running streamable HTTP endpoint. Dropping it stops it at once; [`shutdown`](Self::shutdown)
/// stops it gracefully.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use mcp_serve::{BearerAuth, Exposure, HttpOptions, ServeState, ToolServer};
///
/// struct Nothing;
/// impl ToolCatalog for Nothing {
///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
/// }
/// #[async_trait::async_trait]
/// impl ToolDispatcher for Nothing {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Err(ToolError::unknown_tool(call.name, Vec::new()))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), mcp_serve::ServeError> {
/// let server = ToolServer::new(Arc::new(Nothing), Exposure::read_only());
/// let http = server
///     .serve_http(HttpOptions::default().with_auth(BearerAuth::new("token")))
///     .await?;
/// assert!(http.local_addr().ip().is_loopback());
/// assert_eq!(http.url().path(), "/mcp");
/// let metadata = http.resource_metadata_url().unwrap();
/// assert_eq!(metadata.path(), "/.well-known/oauth-protected-resource/mcp");
/// let state = http.state();
/// let report = http.shutdown().await;
/// assert_eq!((report.in_flight, report.abandoned), (0, 0));
/// assert_eq!(*state.borrow(), ServeState::Stopped);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct HttpServer {
    url: Url,
    addr: SocketAddr,
    metadata_url: Option<Url>,
    lifecycle: Lifecycle,
    in_flight: InFlight,
    /// Per-session tools still open.
    open_tools: InFlight,
    /// What opens them, shut down last.
    opener: Option<Opener>,
    drain_timeout: Duration,
    /// Ends sessions and their event streams (rmcp's token).
    sessions: CancellationToken,
    /// Ends the accept loop.
    accepting: CancellationToken,
    /// Drops every connection still open.
    hard_stop: CancellationToken,
    connections: TaskTracker,
    slots: Arc<accept::Slots>,
    accept: Option<JoinHandle<()>>,
}

/// The opener of a server's per-session tools.
struct Opener(Arc<dyn OpenTools>);

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenTools")
    }
}

impl ToolServer {
    /// Serves over streamable HTTP: revision 2025-11-25 clients get sessions
    /// (`Mcp-Session-Id`), 2026-07-28 clients are answered statelessly. Either way a request
    /// is answered in one JSON body, or in an event stream when the server notifies or asks
    /// before it answers (a call that reports progress to a client that asked for it) or a
    /// session's answer takes longer than a second to start. Every request passes
    /// the checks of `options` first (path, `Origin` → 403, bearer token → 401, body size →
    /// 413, one JSON-RPC message → 400 with a JSON-RPC error), so nothing refused reaches a
    /// session or the dispatcher.
    ///
    /// ```no_run
    /// # async fn demo(server: mcp_serve::ToolServer) -> Result<(), mcp_serve::ServeError> {
    /// use mcp_serve::{BearerAuth, HttpOptions};
    ///
    /// let http = server
    ///     .serve_http(HttpOptions::default().with_auth(BearerAuth::new("token")))
    ///     .await?;
    /// println!("serving on {}", http.url());
    /// let report = http.shutdown().await; // drains calls in flight, then closes
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ServeError::InvalidOption`] for an unusable path, public URL, host list or trusted
    /// proxy network ([`trusted_proxy`]),
    /// [`ServeError::Bind`] when the address cannot be bound.
    pub async fn serve_http(self, options: HttpOptions) -> Result<HttpServer, ServeError> {
        if !options.path.starts_with('/') || options.path.contains(['?', '#']) {
            return Err(ServeError::InvalidOption {
                option: "path",
                reason: "must start with `/` and hold no query or fragment".into(),
            });
        }
        let unspecified = options.bind.ip().is_unspecified();
        if unspecified && options.public_url.is_none() && options.allowed_hosts.is_empty() {
            return Err(ServeError::InvalidOption {
                option: "allowed_hosts",
                reason: format!(
                    "binding {} accepts any address: name the hosts clients use (allowed_hosts or public_url)",
                    options.bind.ip()
                ),
            });
        }
        let trusted_proxies = forwarded::TrustedProxies::new(&options.trusted_proxies).map_err(
            |(network, why)| ServeError::InvalidOption {
                option: "trusted_proxies",
                reason: format!("{network} {why}"),
            },
        )?;
        let listener =
            TcpListener::bind(options.bind)
                .await
                .map_err(|source| ServeError::Bind {
                    addr: options.bind,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind {
            addr: options.bind,
            source,
        })?;
        let url = match &options.public_url {
            Some(url) => url.clone(),
            None => Url::parse(&format!("http://{addr}{}", options.path)).map_err(|e| {
                ServeError::InvalidOption {
                    option: "path",
                    reason: e.to_string(),
                }
            })?,
        };
        let endpoint = Endpoint::new(&url, addr, &options)?;

        let lifecycle = Lifecycle::default();
        let opener = match &self.source {
            Source::PerSession(opener) => Some(Opener(Arc::clone(opener))),
            Source::Fixed(_) => None,
        };
        let shared = Shared::new(&self, lifecycle.clone(), options.max_sessions);
        let sessions = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(endpoint.hosts)
            .with_cancellation_token(sessions.clone())
            .with_max_request_body_bytes(self.max_request_bytes_value())
            .with_sse_keep_alive(options.sse_keep_alive)
            // A sessionless request (2026-07-28, or `server/discover`) whose first message is
            // its answer gets that answer as one JSON body; one that notifies or asks first
            // gets an event stream. rmcp holds the response until that first message either
            // way, so a stream would only add framing and writes (docs/benchmarks.md, fleet).
            // rmcp applies this beside 2025-11-25 sessions too (its own doc says only without
            // them); `a_sessionless_call_is_one_json_body_unless_it_reports_progress` holds it.
            .with_json_response(true);
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(options.session_idle_timeout);
        let manager = Arc::new(manager);
        let store = options.shared_sessions.clone().or_else(|| {
            // Parking keeps the records of parked sessions in this process.
            options.park_after.map(|_| {
                SharedSessions::new(Arc::new(InProcessSessions::default()), OnStoreError::Closed)
            })
        });
        let in_process = options.shared_sessions.is_none();
        let kept = store.map(|store| {
            let keeper = session_keeper::Keeper::new(
                store,
                options.session_idle_timeout,
                shared.restoring.clone(),
            );
            let keeper = Arc::new(if in_process {
                keeper.keeping_no_parked()
            } else {
                keeper
            });
            config.session_store = Some(keeper.clone());
            let _ = shared.records.set(keeper.clone());
            let parking = options.park_after.map(park::Parking::new);
            let kept = shared_sessions::Sessions::new(keeper, manager.clone(), parking);
            kept.clone().listen(sessions.clone());
            kept
        });
        let live = shared.live.clone();
        let open_tools = shared.open_tools.clone();
        let mcp = StreamableHttpService::new(move || Ok(Session::new(&shared)), manager, config);
        let in_flight = InFlight::default();
        let front = front::Checks {
            routes: route::Routes {
                path: options.path.clone(),
                metadata_paths: endpoint.metadata_paths,
                resource: url.clone(),
                name: self.display_name(),
                auth: options.auth.clone(),
            },
            metadata_url: endpoint.metadata_url.clone(),
            allowed_origins: endpoint.origins,
            rate_limit: options.rate_limit,
            shared_rate_limit: options.shared_rate_limit.clone(),
            auth_failure_limit: options.auth_failure_limit,
            trusted_proxies,
            max_body: self.max_request_bytes_value(),
            body_timeout: options.body_read_timeout,
            live,
            max_sessions: options.max_sessions,
            params: {
                // Only a fixed catalog's tools are known before a session opens.
                let served = self.clone();
                ParamHeaderCheck::new(move |name| {
                    served.exposed_tools().into_iter().find(|t| t.name == name)
                })
            },
            in_flight: in_flight.clone(),
            sessions: kept,
        }
        .stack(mcp);
        let connections = TaskTracker::new();
        let hard_stop = CancellationToken::new();
        let accepting = CancellationToken::new();
        let slots = Arc::new(accept::Slots::new(accept::Caps {
            total: options.max_connections,
            per_address: options.max_connections_per_address,
        }));
        let accept = tokio::spawn(accept::accept_loop(
            listener,
            front,
            accept::Loop {
                accepting: accepting.clone(),
                lifecycle: lifecycle.clone(),
                connections: connections.clone(),
                hard_stop: hard_stop.clone(),
                slots: slots.clone(),
                timeouts: conn::Timeouts {
                    header: options.header_read_timeout,
                    idle: options.idle_timeout,
                },
            },
        ));
        Ok(HttpServer {
            url,
            addr,
            metadata_url: options.auth.is_some().then_some(endpoint.metadata_url),
            lifecycle,
            in_flight,
            open_tools,
            opener,
            drain_timeout: options.drain_timeout,
            sessions,
            accepting,
            hard_stop,
            connections,
            slots,
            accept: Some(accept),
        })
    }
}

/// What follows from the endpoint's URL: metadata paths, origins and hosts.
struct Endpoint {
    metadata_paths: [String; 2],
    metadata_url: Url,
    origins: Vec<String>,
    hosts: Vec<String>,
}

impl Endpoint {
    fn new(url: &Url, addr: SocketAddr, options: &HttpOptions) -> Result<Self, ServeError> {
        let invalid = |option, reason: String| ServeError::InvalidOption { option, reason };
        let Some(host) = url.host_str() else {
            return Err(invalid("public_url", "has no host".into()));
        };
        let well_known = "/.well-known/oauth-protected-resource";
        let path_aware = format!("{well_known}{}", url.path().trim_end_matches('/'));
        let mut metadata_url = url.clone();
        metadata_url.set_path(&path_aware);
        metadata_url.set_query(None);
        metadata_url.set_fragment(None);

        let own_origin = url.origin().ascii_serialization();
        let mut origins = vec![own_origin];
        let mut hosts = vec![host.trim_matches(['[', ']']).to_owned()];
        if addr.ip().is_loopback() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                origins.push(format!("http://{name}:{}", addr.port()));
                hosts.push(name.trim_matches(['[', ']']).to_owned());
            }
        } else if !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
        for origin in &options.allowed_origins {
            let normalized = origin::normalize_origin(origin)
                .ok_or_else(|| invalid("allowed_origins", format!("`{origin}` is no origin")))?;
            origins.push(normalized);
        }
        hosts.extend(options.allowed_hosts.iter().cloned());
        Ok(Self {
            metadata_paths: [path_aware, well_known.to_owned()],
            metadata_url,
            origins,
            hosts,
        })
    }
}

impl HttpServer {
    /// The endpoint's URL (the public URL when one was given).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the protected-resource metadata is served, when auth is on.
    pub fn resource_metadata_url(&self) -> Option<&Url> {
        self.metadata_url.as_ref()
    }

    /// The server's state, to watch it drain and stop.
    pub fn state(&self) -> watch::Receiver<ServeState> {
        self.lifecycle.watch()
    }

    /// Connections open now (at most [`HttpOptions::max_connections`]).
    pub fn connections(&self) -> usize {
        self.slots.open()
    }

    /// Shuts down gracefully: closes the listener (then the state is
    /// [`ServeState::Draining`]), refuses new calls (an `isError` result), lets exchanges in flight finish and their answers go out (waiting
    /// at most the drain timeout; calls still running then are answered with a JSON-RPC
    /// error saying the server shut down), then ends every session and event stream, closes
    /// every connection, and waits (at most the drain timeout again) until the tools opened
    /// per session are closed, then (within the drain timeout too) for their opener's
    /// [`shutdown`](crate::OpenTools::shutdown): a [`PooledTools`](crate::PooledTools) closes
    /// the runs it kept.
    pub async fn shutdown(mut self) -> ShutdownReport {
        let in_flight = self.in_flight.count();
        // The listener is closed before the state says `Draining`.
        self.accepting.cancel();
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
        self.lifecycle.set(ServeState::Draining);
        let abandoned = self.in_flight.drained(self.drain_timeout).await;
        if abandoned > 0 {
            // Calls still running answer with an error, so no client is left with a closed
            // stream instead of an answer.
            self.lifecycle.cut();
            self.in_flight.drained(CUT_GRACE).await;
        }
        self.sessions.cancel();
        self.connections.close();
        // Connections end once their streams do; what still hangs after a short grace is
        // dropped.
        let grace = self.drain_timeout.min(Duration::from_secs(5));
        if tokio::time::timeout(grace, self.connections.wait())
            .await
            .is_err()
        {
            self.hard_stop.cancel();
            self.connections.wait().await;
        }
        // Every ended session closes its per-session tools (upstream sessions, processes).
        self.open_tools.drained(self.drain_timeout).await;
        if let Some(opener) = &self.opener {
            let _ = tokio::time::timeout(self.drain_timeout, opener.0.shutdown()).await;
        }
        self.lifecycle.set(ServeState::Stopped);
        ShutdownReport {
            in_flight,
            abandoned,
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if self.lifecycle.get() != ServeState::Stopped {
            self.lifecycle.set(ServeState::Stopped);
            self.accepting.cancel();
            self.sessions.cancel();
            self.hard_stop.cancel();
        }
    }
}
