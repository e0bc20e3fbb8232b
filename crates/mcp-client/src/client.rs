//! The MCP client: turns a run's input into a runner over that run's servers.

use std::sync::Arc;
use std::time::Duration;

use agent_core::{EventSink, NoopEventSink, RunInput, RunScope, RunnerError, RunnerFactory};
use async_trait::async_trait;
use mcp_catalog::{Catalog, CatalogConfig};
use mcp_config::{Config, DefaultResolver, ResolvedRun, Scrubber, ServerResolver};
use tracing::Instrument;

use crate::open::{OpenSettings, open_sessions};
use crate::session::SessionOptions;
use crate::{ClientError, Connectors, ListLimits, McpRunner};

/// Opens per-run MCP runners.
///
/// Holds what is shared by every run — the connectors, the resolver that picks each run's
/// servers, the catalog settings, the event sink — and nothing of any one run.
///
/// ```no_run
/// use agent_core::RunInput;
/// use mcp_client::{Connectors, McpClient};
/// use mcp_config::Config;
///
/// # async fn run(connectors: Connectors) -> Result<(), Box<dyn std::error::Error>> {
/// let client = McpClient::builder(Config::from_env()?).connectors(connectors).build();
/// let runner = client.open_runner(&RunInput::new("state-1", "find my open issues")).await?;
/// for tool in agent_core::ToolCatalog::tools(&runner) {
///     println!("{}", tool.name);
/// }
/// agent_core::Runner::close(&runner).await; // every session closes, every process is gone
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

struct Inner {
    agent: String,
    connectors: Connectors,
    resolver: Arc<dyn ServerResolver>,
    catalog: CatalogConfig,
    events: Arc<dyn EventSink>,
    max_parallel: usize,
    grace: Duration,
    list_limits: ListLimits,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("agent", &self.inner.agent)
            .field("connectors", &self.inner.connectors)
            .field("max_parallel", &self.inner.max_parallel)
            .finish_non_exhaustive()
    }
}

/// Builds an [`McpClient`].
#[must_use]
pub struct McpClientBuilder {
    agent: String,
    connectors: Connectors,
    resolver: Arc<dyn ServerResolver>,
    catalog: CatalogConfig,
    events: Arc<dyn EventSink>,
    max_parallel: usize,
    grace: Duration,
    list_limits: ListLimits,
}

impl McpClientBuilder {
    /// The agent's name, passed to the resolver.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = agent.into();
        self
    }

    /// The transports available to runs.
    pub fn connectors(mut self, connectors: Connectors) -> Self {
        self.connectors = connectors;
        self
    }

    /// Replaces the resolver (e.g. one mapping opaque connection ids to specs in a vault).
    pub fn resolver(mut self, resolver: impl ServerResolver + 'static) -> Self {
        self.resolver = Arc::new(resolver);
        self
    }

    /// The catalog settings (exposure mode, pinned tools, search limits).
    pub fn catalog(mut self, config: CatalogConfig) -> Self {
        self.catalog = config;
        self
    }

    /// Where server events go.
    pub fn events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = events;
        self
    }

    /// How many servers connect at once (default 16).
    pub fn max_parallel(mut self, max: usize) -> Self {
        self.max_parallel = max.max(1);
        self
    }

    /// How long a closing server gets to exit before it is terminated (default 2 s).
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Bounds on each server's tool listing (default [`ListLimits::default`]: 100 pages,
    /// 10,000 tools, 32 MiB).
    ///
    /// ```
    /// use mcp_client::{ListLimits, McpClient};
    /// use mcp_config::Config;
    ///
    /// let client = McpClient::builder(Config::new(vec![]).unwrap())
    ///     .list_limits(ListLimits::default().with_max_tools(2_000))
    ///     .build();
    /// # let _ = client;
    /// ```
    pub fn list_limits(mut self, limits: ListLimits) -> Self {
        self.list_limits = limits;
        self
    }

    /// Builds the client.
    pub fn build(self) -> McpClient {
        McpClient {
            inner: Arc::new(Inner {
                agent: self.agent,
                connectors: self.connectors,
                resolver: self.resolver,
                catalog: self.catalog,
                events: self.events,
                max_parallel: self.max_parallel,
                grace: self.grace,
                list_limits: self.list_limits,
            }),
        }
    }
}

impl McpClient {
    /// A builder resolving runs against `config` with the default resolver (SPEC A5).
    pub fn builder(config: Config) -> McpClientBuilder {
        let pinned = config
            .servers
            .iter()
            .flat_map(|s| {
                s.tools
                    .pinned
                    .iter()
                    .map(move |t| mcp_catalog::external_name(&s.name, t))
            })
            .collect::<Vec<_>>();
        McpClientBuilder {
            agent: "agent".into(),
            connectors: Connectors::new(),
            resolver: Arc::new(DefaultResolver::new(config)),
            catalog: CatalogConfig::default().with_pinned(pinned),
            events: Arc::new(NoopEventSink),
            max_parallel: 16,
            grace: Duration::from_secs(2),
            list_limits: ListLimits::default(),
        }
    }

    /// Opens a runner for `input`: resolves its servers, connects them in parallel, lists
    /// their tools and builds the catalog. Close it with [`agent_core::Runner::close`].
    pub async fn open_runner(&self, input: &RunInput) -> Result<McpRunner, ClientError> {
        let run = self
            .inner
            .resolver
            .resolve(&self.inner.agent, input)
            .await
            .map_err(|e| ClientError::Config(Box::new(e)))?;
        self.open_resolved(run).await
    }

    /// Opens a runner for servers already resolved.
    ///
    /// The run's known secrets are every static secret of its specs
    /// ([`ServerSpec::secret_values`](mcp_config::ServerSpec::secret_values)): no error, event
    /// or tool result of the run shows one.
    pub async fn open_resolved(&self, run: ResolvedRun) -> Result<McpRunner, ClientError> {
        let span = tracing::info_span!("mcp_run", servers = run.servers.len());
        self.open_resolved_inner(run).instrument(span).await
    }

    async fn open_resolved_inner(&self, run: ResolvedRun) -> Result<McpRunner, ClientError> {
        let started = std::time::Instant::now();
        let inner = &*self.inner;
        let scrubber = Scrubber::new(run.servers.iter().flat_map(|s| s.secret_values()));
        let settings = OpenSettings {
            default_connect_timeout: run.options.connect_timeout,
            policy: run.options.partial_failure,
            max_parallel: inner.max_parallel,
            grace: inner.grace,
            events: &*inner.events,
            session: SessionOptions {
                limits: inner.list_limits,
                scrubber: scrubber.clone(),
            },
            tool_limits: &inner.catalog.tool_limits,
        };
        let opened = open_sessions(&inner.connectors, run.servers, settings)
            .await
            .map_err(ClientError::Server)?;
        let catalog = Arc::new(Catalog::new(inner.catalog.clone()));
        let runner = McpRunner::new(
            catalog,
            opened.sessions,
            opened.skipped,
            run.options.partial_failure,
            inner.grace,
            inner.events.clone(),
            scrubber,
        )
        .await
        .map_err(ClientError::Server);
        match &runner {
            Ok(runner) => tracing::info!(
                sessions = runner.sessions().len(),
                skipped = runner.skipped().len(),
                duration_ms = started.elapsed().as_millis() as u64,
                "run opened"
            ),
            Err(e) => tracing::info!(
                error = %agent_core::error_chain(e),
                duration_ms = started.elapsed().as_millis() as u64,
                "run failed to open"
            ),
        }
        runner
    }
}

#[async_trait]
impl RunnerFactory for McpClient {
    async fn open(&self, input: &RunInput) -> Result<RunScope, RunnerError> {
        match self.open_runner(input).await {
            Ok(runner) => Ok(RunScope::new(Box::new(runner))),
            Err(ClientError::Config(e)) => Err(RunnerError::Configuration {
                message: e.to_string(),
            }),
            Err(ClientError::Server(e)) => Err(RunnerError::Connect {
                server: e.server().to_owned(),
                source: Box::new(e),
            }),
        }
    }
}
