//! The streamable HTTP [`Connector`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::HeaderName;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcp_auth::{AuthError, AuthProvider, Chain, StaticHeaders};
#[cfg(feature = "oauth")]
use mcp_auth::{AuthRegistry, OAuthOptions};
use mcp_config::{ServerSpec, TransportKind, TransportSpec};
use mcp_connector::{BoxError, ConnectError, Connection, ConnectionHandle, Connector};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
    StreamableHttpResponseLimits,
};

use crate::client::{HttpClient, Pool};
use crate::error::HttpError;
#[cfg(feature = "oauth")]
use crate::fetch::PoolFetch;
use crate::options::HttpOptions;
use crate::resolve::{Resolve, SystemResolver, TcpConnect};

/// Builds the auth hook of one server from its spec.
pub type AuthFactory =
    dyn Fn(&ServerSpec) -> Result<Arc<dyn AuthProvider>, AuthError> + Send + Sync + 'static;

/// Headers the transport sets itself; a configured header may not use these names.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// Opens streamable HTTP sessions on pooled hyper clients with rustls.
///
/// Every session it opens shares its connection pools (HTTP/1.1 keep-alive, HTTP/2 over
/// TLS where the server offers it), so keep one connector per process (per tokio runtime).
///
/// **SSRF guard.** Sessions of [SSRF-guarded](mcp_config::ServerSpec::ssrf_guarded) specs
/// (caller-supplied ones, unless the operator turned `ssrf_guard` off) and their OAuth
/// requests go through a second pool that connects only to non-internal addresses: host
/// names are resolved and their internal addresses dropped (none left: the request fails with
/// [`HttpError::BlockedAddress`]), internal IP literals are refused. The operator's own specs
/// use the other pool, unrestricted.
/// Each session gets its own [`HttpClient`] carrying the spec's headers and auth hook, wrapped
/// in rmcp's `StreamableHttpClientTransport`, which handles `Mcp-Session-Id`, the protocol
/// version header, SSE resumption and `DELETE` on close, and re-initialises the session once
/// when the server answers 404 for it.
///
/// ```no_run
/// use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
/// use mcp_connector::Connector;
/// use mcp_transport_http::{HttpConnector, HttpOptions};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let connector = HttpConnector::new(HttpOptions::default())?;
/// let url = "https://mcp.example.com/mcp".parse()?;
/// let spec = ServerSpec::new("docs", TransportSpec::StreamableHttp(HttpSpec::new(url)));
/// let connection = connector.connect(&spec).await?;
/// // Hand `connection.transport` to `rmcp::serve_client` for the handshake.
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct HttpConnector {
    pool: Pool,
    /// For SSRF-guarded specs: connects only to non-internal addresses.
    guarded_pool: Pool,
    options: HttpOptions,
    #[cfg(feature = "oauth")]
    registry: Arc<AuthRegistry>,
    auth: Arc<AuthFactory>,
}

impl fmt::Debug for HttpConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConnector")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl HttpConnector {
    /// A connector with `options`; fails only when an extra root certificate is unusable.
    ///
    /// Auth comes from each spec's `auth` section through the connector's
    /// [`AuthRegistry`] ([`auth_registry`](Self::auth_registry)): static headers, bearer
    /// tokens, and OAuth2 client credentials whose token and metadata requests go through
    /// this connector's pools (the guarded one for SSRF-guarded specs), with one token cache
    /// per credential shared by every session the connector opens. Without the `oauth`
    /// feature, static headers and bearer tokens only ([`mcp_auth::from_spec`]); an OAuth
    /// spec is refused when its session opens.
    pub fn new(options: HttpOptions) -> Result<Self, HttpError> {
        #[cfg(feature = "oauth")]
        return Self::with_oauth_options(options, OAuthOptions::default());
        #[cfg(not(feature = "oauth"))]
        return Ok(Self {
            pool: build_pool(&options, false)?,
            guarded_pool: build_pool(&options, true)?,
            options,
            auth: Arc::new(|spec: &ServerSpec| mcp_auth::from_spec(&spec.name, &spec.auth)),
        });
    }

    /// [`new`](Self::new) with OAuth2 tunables (token renewal skew, request timeout, answer
    /// size bound).
    #[cfg(feature = "oauth")]
    pub fn with_oauth_options(
        options: HttpOptions,
        oauth: OAuthOptions,
    ) -> Result<Self, HttpError> {
        let pool = build_pool(&options, false)?;
        let guarded_pool = build_pool(&options, true)?;
        let timeout = options.tcp_connect_timeout;
        let registry = Arc::new(
            AuthRegistry::new(Arc::new(PoolFetch::new(pool.clone(), timeout)))
                .with_guarded_fetch(Arc::new(PoolFetch::new(guarded_pool.clone(), timeout)))
                .with_options(oauth),
        );
        let factory = registry.clone();
        Ok(Self {
            pool,
            guarded_pool,
            options,
            registry,
            auth: Arc::new(move |spec: &ServerSpec| factory.provider(spec)),
        })
    }

    /// The registry that builds each spec's auth hook by default and holds the OAuth2 token
    /// caches. A custom [`with_auth_factory`](Self::with_auth_factory) can wrap it.
    #[cfg(feature = "oauth")]
    pub fn auth_registry(&self) -> &Arc<AuthRegistry> {
        &self.registry
    }

    /// Replaces how a spec's auth hook is built (e.g. a provider of your own, possibly
    /// chained with [`auth_registry`](Self::auth_registry)'s). The factory runs when each
    /// session opens.
    pub fn with_auth_factory(
        mut self,
        factory: impl Fn(&ServerSpec) -> Result<Arc<dyn AuthProvider>, AuthError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.auth = Arc::new(factory);
        self
    }

    /// The options.
    pub fn options(&self) -> &HttpOptions {
        &self.options
    }

    /// The HTTP client for `spec`: static headers validated, auth hook built (so a
    /// `bearer_token_env` variable is read now), on the guarded pool when the spec is
    /// [SSRF-guarded](mcp_config::ServerSpec::ssrf_guarded).
    pub fn client(&self, spec: &ServerSpec) -> Result<HttpClient, ConnectError> {
        let http = http_spec(spec)?;
        let config_error = |message: String| ConnectError::Config {
            server: spec.name.clone(),
            message,
        };
        // `ConnectError` keeps no typed cause for a configuration problem: the auth error's
        // reason (without the server, which `Config` names) is its message.
        let auth_error = |e: AuthError| ConnectError::Config {
            server: spec.name.clone(),
            message: e.reason().to_string(),
        };
        let transport_headers =
            StaticHeaders::new(&spec.name, &http.headers).map_err(auth_error)?;
        for name in transport_headers.names() {
            check_not_reserved(name).map_err(config_error)?;
        }
        for name in spec.auth.headers.keys() {
            if let Ok(name) = HeaderName::try_from(name.as_str()) {
                check_not_reserved(&name).map_err(config_error)?;
            }
        }
        let auth: Arc<dyn AuthProvider> = (self.auth)(spec).map_err(auth_error)?;
        let auth = if http.headers.is_empty() {
            auth
        } else {
            // Transport headers first: the auth hook's headers replace same-named ones.
            Arc::new(Chain::new(vec![Arc::new(transport_headers), auth]))
        };
        let pool = if spec.ssrf_guarded() {
            &self.guarded_pool
        } else {
            &self.pool
        };
        Ok(HttpClient::new(
            &spec.name,
            pool.clone(),
            auth,
            self.limits(),
            spec.secret_values(),
            self.options.tcp_connect_timeout,
            self.options.event_stream_wait,
        ))
    }

    /// rmcp's streamable HTTP transport for `spec`, on [`client`](Self::client). Must be
    /// called inside a tokio runtime (the transport spawns its worker).
    ///
    /// ```no_run
    /// use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
    /// use mcp_transport_http::{HttpConnector, HttpOptions};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let connector = HttpConnector::new(HttpOptions::default())?;
    /// let url = "http://127.0.0.1:8080/mcp".parse()?;
    /// let spec = ServerSpec::new("local", TransportSpec::StreamableHttp(HttpSpec::new(url)));
    /// let client = rmcp::serve_client((), connector.transport(&spec)?).await?;
    /// let tools = client.peer().list_all_tools().await?;
    /// client.cancel().await?; // sends DELETE for the session
    /// # drop(tools);
    /// # Ok(())
    /// # }
    /// ```
    pub fn transport(
        &self,
        spec: &ServerSpec,
    ) -> Result<StreamableHttpClientTransport<HttpClient>, ConnectError> {
        let client = self.client(spec)?;
        Ok(StreamableHttpClientTransport::with_client(
            client,
            self.transport_config(spec)?,
        ))
    }

    fn limits(&self) -> StreamableHttpResponseLimits {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_json_response_size = self.options.max_response_bytes;
        limits.max_sse_event_size = self.options.max_sse_event_bytes;
        limits.max_error_response_size = self.options.max_error_body_bytes;
        limits
    }

    fn transport_config(
        &self,
        spec: &ServerSpec,
    ) -> Result<StreamableHttpClientTransportConfig, ConnectError> {
        let http = http_spec(spec)?;
        let options = &self.options;
        let mut retry = ExponentialBackoff::default();
        retry.max_times = Some(options.sse_reconnect_attempts);
        retry.base_duration = options.sse_reconnect_base_delay;
        retry.max_delay = Some(options.sse_reconnect_max_delay);
        let mut config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
            .max_concurrent_requests(options.max_concurrent_requests)
            .session_recovery_timeout(options.session_recovery_timeout)
            .max_sse_event_size(options.max_sse_event_bytes)
            .max_json_response_size(options.max_response_bytes)
            .max_error_response_size(options.max_error_body_bytes)
            .reinit_on_expired_session(true);
        config.retry_config = Arc::new(retry);
        config.allow_stateless = true;
        Ok(config)
    }
}

#[async_trait]
impl Connector for HttpConnector {
    fn kind(&self) -> TransportKind {
        TransportKind::StreamableHttp
    }

    async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
        let client = self.client(spec)?;
        let transport = StreamableHttpClientTransport::with_client(
            client.clone(),
            self.transport_config(spec)?,
        );
        Ok(Connection::new(transport, HttpHandle { client }))
    }
}

/// The [`ConnectionHandle`] of an HTTP session. The session's `DELETE` is sent by the
/// transport when it closes, so shutdown has nothing left to do; the pool belongs to the
/// connector.
#[derive(Debug, Clone)]
pub struct HttpHandle {
    client: HttpClient,
}

impl HttpHandle {
    /// The session's HTTP client.
    pub fn client(&self) -> &HttpClient {
        &self.client
    }
}

#[async_trait]
impl ConnectionHandle for HttpHandle {
    async fn shutdown(&self, _grace: Duration) {}

    fn diagnostics(&self) -> Option<String> {
        let reinitializations = self.client.initializations().saturating_sub(1);
        (reinitializations > 0).then(|| {
            format!("the session was re-initialised {reinitializations} time(s) after HTTP 404")
        })
    }

    /// Counts the session's completed re-initialisations (after HTTP 404): see
    /// [`HttpClient::renewals`].
    fn renewals(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.client.renewals())
    }

    /// The last error of the session's requests (refused, DNS, TLS, an oversized answer, …):
    /// rmcp reports a failed request only through its own wrappers
    /// (docs/upstream.md#rmcp-error-source).
    fn failure(&self) -> Option<BoxError> {
        self.client
            .last_failure()
            .map(|e| Box::new(HttpError::Recorded(e)) as BoxError)
    }

    /// How many of the session's requests failed, each recorded in turn as its last failure.
    fn failures(&self) -> u64 {
        self.client.failures()
    }

    /// The auth hook's OAuth tokens, issued or loaded, now and later.
    fn report_secrets_to(&self, sink: &Arc<dyn mcp_config::SecretSink>) {
        self.client.report_secrets_to(sink);
    }
}

fn http_spec(spec: &ServerSpec) -> Result<&mcp_config::HttpSpec, ConnectError> {
    let TransportSpec::StreamableHttp(http) = &spec.transport else {
        return Err(ConnectError::Config {
            server: spec.name.clone(),
            message: format!(
                "the streamable HTTP connector cannot open a {} transport",
                spec.kind()
            ),
        });
    };
    if !matches!(http.url.scheme(), "http" | "https") {
        return Err(ConnectError::Config {
            server: spec.name.clone(),
            message: format!(
                "the URL scheme `{}` is not supported (use http or https)",
                http.url.scheme()
            ),
        });
    }
    Ok(http)
}

fn check_not_reserved(name: &HeaderName) -> Result<(), String> {
    if RESERVED_HEADERS.contains(&name.as_str()) {
        return Err(format!(
            "header `{name}` is set by the transport and cannot be configured"
        ));
    }
    Ok(())
}

/// A pool with the options' TLS roots and resolver; `guard`: connects only to non-internal
/// addresses (see `resolve.rs`).
fn build_pool(options: &HttpOptions, guard: bool) -> Result<Pool, HttpError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for certificate in &options.extra_root_certificates {
        roots
            .add(certificate.clone())
            .map_err(|source| HttpError::Tls { source })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| HttpError::Tls { source })?
        .with_root_certificates(roots)
        .with_no_client_auth();

    let resolver: Arc<dyn Resolve> = options
        .resolver
        .clone()
        .unwrap_or_else(|| Arc::new(SystemResolver));
    let tcp = TcpConnect::new(resolver, guard, |tcp| {
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(options.tcp_connect_timeout));
    });
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp);
    Ok(
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(options.pool_idle_timeout)
            .pool_max_idle_per_host(options.pool_max_idle_per_host)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https),
    )
}
