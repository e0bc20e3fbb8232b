//! The MCP client: turns a run's input into a runner over that run's servers, every call of
//! which goes through the run's governed layer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_core::{
    AsNative, EventSink, GovernedLayer, History, IdentityRules, RunInput, RunScope, RunnerError,
    RunnerFactory, SpillArea, ToolCall, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use mcp_catalog::{Catalog, CatalogConfig};
use mcp_config::{Config, DefaultResolver, ResolvedRun, ServerResolver};
use tracing::Instrument;

use crate::open::{OpenSettings, open_sessions};
use crate::pool::Pool;
use crate::session::SessionOptions;
use crate::{ClientError, Connectors, ElicitationHandler, ListLimits, McpRunner, OpenOptions};

/// Opens per-run MCP runners.
///
/// Holds what is shared by every run — the connectors, the resolver that picks each run's
/// servers, the catalog settings, the governed layer's template (the config's `[policy]`,
/// adjusted by [`McpClientBuilder::govern`]), native tools, where histories go — and nothing
/// of any one run. Each run gets its own layer from the template: every call of the run —
/// `mcp_search_tools`, `mcp_call_tool`, pinned and promoted MCP tools, native tools,
/// `mcp_read_output` — goes through it (identity rules, policy, approval, output limit,
/// events, history).
///
/// A closed run frees everything it held, but the host's allocator decides what returns to
/// the system; the library never drives it. On glibc, a host opening and closing many runs
/// gets most of it back by calling `malloc_trim(0)` after closing a batch; started with
/// `GLIBC_TUNABLES=glibc.malloc.tcache_count=0` too, its resident size came back within 8% of
/// where it started in most rounds measured (at about 9% more CPU per call):
/// docs/benchmarks.md in the repository, "Memory of library runs".
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

/// The agent's own tools, shown and governed beside the MCP tools.
struct Natives {
    tools: Vec<ToolDescriptor>,
    dispatcher: Arc<dyn ToolDispatcher>,
}

struct Inner {
    agent: String,
    /// The `[search]` table's embedder and vectors, shared by every run.
    search: Option<crate::search::SearchSetup>,
    connectors: Connectors,
    resolver: Arc<dyn ServerResolver>,
    catalog: CatalogConfig,
    layer: GovernedLayer,
    natives: Option<Natives>,
    history_root: Option<PathBuf>,
    max_parallel: usize,
    grace: Duration,
    list_limits: ListLimits,
    elicitation: Option<Arc<dyn ElicitationHandler>>,
    discover: bool,
    /// The sessions of `shared = true` servers, reused by every run.
    pool: Pool,
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
    layer: GovernedLayer,
    natives: Option<Natives>,
    history_root: Option<PathBuf>,
    max_parallel: usize,
    grace: Duration,
    list_limits: ListLimits,
    elicitation: Option<Arc<dyn ElicitationHandler>>,
    discover: bool,
    search: Option<mcp_config::SearchConfig>,
    #[cfg(feature = "embed")]
    local_model: Option<crate::LocalModelLoader>,
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

    /// The catalog settings (exposure mode, pinned tools, search limits). Its
    /// `identity_rules` are set by [`build`](Self::build) to the governed layer's, so the
    /// model is shown exactly the tools the layer lets run.
    pub fn catalog(mut self, config: CatalogConfig) -> Self {
        self.catalog = config;
        self
    }

    /// Where the run's events go — server events and `tool_call_*` events alike: the sink of
    /// the governed layer (the same as `govern(|layer| layer.event_sink(events))`).
    pub fn events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.layer = self.layer.event_sink(events);
        self
    }

    /// Adjusts the template of each run's governed layer: approval gate, tool policy,
    /// approval timeout, call timeout, event sink, output limits, rules. It starts from the
    /// configuration's `[policy]` (identity rules, approval rules, `max_output_bytes`,
    /// `max_spill_bytes`, with one spill area shared by every run of the client).
    ///
    /// The identity rules the template ends with also hide the tools they refuse from the
    /// model. Each run's redactor (for approval prompts, event messages and the history)
    /// is the one set here plus every secret of the run's specs and a learned set of its own
    /// (the tokens its sessions obtain): give it the secrets the
    /// client cannot know (a model's API key, say); the history is set per run
    /// ([`history_root`](Self::history_root), [`McpClient::open_runner_with_history`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use agent_core::AutoApprove;
    /// use mcp_client::McpClient;
    /// use mcp_config::Config;
    ///
    /// let client = McpClient::builder(Config::default())
    ///     .govern(|layer| {
    ///         layer
    ///             .approval_gate(Arc::new(AutoApprove))
    ///             .approval_timeout(Duration::from_secs(60))
    ///     })
    ///     .build();
    /// # let _ = client;
    /// ```
    pub fn govern(mut self, f: impl FnOnce(GovernedLayer) -> GovernedLayer) -> Self {
        self.layer = f(self.layer);
        self
    }

    /// The agent's own tools: shown to the model first-class, before the lazy surface, in the
    /// run's one catalog (an MCP tool whose model-facing name equals one of them cannot join
    /// it), run by `dispatcher`, and governed by the same layer as MCP tools (policy,
    /// annotation approval rules, output limit, events, history). Names must be unique and
    /// differ from `mcp_search_tools` / `mcp_call_tool`; otherwise opening a run fails with
    /// [`ClientError::NativeTools`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{ToolAnnotations, ToolCall, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
    /// use async_trait::async_trait;
    /// use mcp_client::McpClient;
    /// use mcp_config::Config;
    ///
    /// struct Clock;
    /// #[async_trait]
    /// impl ToolDispatcher for Clock {
    ///     async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
    ///         Ok(ToolOutput::text("12:00"))
    ///     }
    /// }
    /// let now = ToolDescriptor::new("now", Default::default())
    ///     .with_annotations(ToolAnnotations::read_only());
    /// let client = McpClient::builder(Config::default())
    ///     .native_tools(vec![now], Arc::new(Clock))
    ///     .build();
    /// # let _ = client;
    /// ```
    pub fn native_tools(
        mut self,
        tools: Vec<ToolDescriptor>,
        dispatcher: Arc<dyn ToolDispatcher>,
    ) -> Self {
        self.natives = Some(Natives { tools, dispatcher });
        self
    }

    /// Records each run opened with [`McpClient::open_runner`] under
    /// `<dir>/<run id>/` (`messages.jsonl`, `events.jsonl`), a run acting for a principal
    /// ([`OpenOptions::with_principal`]) under `<dir>/principal-<subject>/<run id>/`: the run
    /// id is the input's `state_id` and the subject the principal's, each with characters
    /// other than `[A-Za-z0-9._-]` replaced (and a hash suffix then, so two never share a
    /// directory). A directory that cannot be written fails
    /// the run when it opens, before any server is contacted.
    ///
    /// ```
    /// use mcp_client::McpClient;
    /// use mcp_config::Config;
    ///
    /// let client = McpClient::builder(Config::default()).history_root("/var/lib/agent/history").build();
    /// # let _ = client;
    /// ```
    pub fn history_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.history_root = Some(dir.into());
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

    /// Who answers a server's requests for user input (`elicitation/create`, form or URL
    /// mode, also inside input-required tool results). With one set, every session declares
    /// the elicitation capability; without (the default), none is declared and every request
    /// is declined. A run opened with its own handler ([`OpenOptions::with_elicitation`])
    /// uses that one for its private sessions; pooled sessions of `shared = true` servers,
    /// opened once for many runs, always use this one.
    pub fn elicitation(mut self, handler: Arc<dyn ElicitationHandler>) -> Self {
        self.elicitation = Some(handler);
        self
    }

    /// Whether sessions start with `server/discover` (protocol revision 2026-07-28, per-request
    /// metadata), falling back to `initialize` for servers of older revisions (see
    /// [`crate::lifecycle`]). On by default; a server of an older revision answers
    /// `server/discover` with method-not-found and is initialised at once. Off: sessions start
    /// with `initialize` alone, which every server of those revisions accepts.
    pub fn discover(mut self, discover: bool) -> Self {
        self.discover = discover;
        self
    }

    /// Hybrid tool search (the configuration's `[search]` table, which
    /// [`McpClient::builder`] starts from; `None`: lexical). The embedder is built by the
    /// first run and shared by the later ones; it needs the `embed` feature (an embeddings
    /// endpoint) or `embed-local` (a local model), else opening a run fails naming the
    /// feature. See [`SearchSetupError`](crate::SearchSetupError).
    pub fn search(mut self, search: Option<mcp_config::SearchConfig>) -> Self {
        self.search = search;
        self
    }

    /// How `[search] embedder = { local = … }` opens the model folder: a build of
    /// `mcp-client` with `embed-local` sets `mcp-embed-local`'s loader already; an application
    /// that links `mcp-embed-local` itself (or another model) registers its loader here, e.g.
    /// `mcp_embed_local::load_embedder`:
    ///
    /// ```
    /// use std::path::Path;
    /// use std::sync::Arc;
    /// use mcp_catalog::search::Embedder;
    /// use mcp_client::McpClient;
    /// use mcp_config::Config;
    ///
    /// fn my_model(dir: &Path) -> Result<Arc<dyn Embedder>, Box<dyn std::error::Error + Send + Sync>> {
    ///     Err(format!("no model in {}", dir.display()).into())
    /// }
    ///
    /// let client = McpClient::builder(Config::default()).local_model(my_model).build();
    /// ```
    ///
    /// Without a loader such a configuration fails the run's opening naming the `embed-local`
    /// feature ([`SearchSetupError::NotBuilt`](crate::SearchSetupError::NotBuilt)).
    #[cfg(feature = "embed")]
    pub fn local_model(mut self, loader: crate::LocalModelLoader) -> Self {
        self.local_model = Some(loader);
        self
    }

    /// Builds the client.
    pub fn build(self) -> McpClient {
        // The catalog hides what the layer's identity rules refuse.
        let catalog = self
            .catalog
            .with_identity_rules(identity_rules_of(&self.layer));
        McpClient {
            inner: Arc::new(Inner {
                agent: self.agent,
                connectors: self.connectors,
                resolver: self.resolver,
                catalog,
                layer: self.layer,
                natives: self.natives,
                history_root: self.history_root,
                max_parallel: self.max_parallel,
                grace: self.grace,
                list_limits: self.list_limits,
                elicitation: self.elicitation,
                discover: self.discover,
                search: crate::search::SearchSetup::new(
                    self.search,
                    #[cfg(feature = "embed")]
                    self.local_model,
                ),
                pool: Pool::new(),
            }),
        }
    }
}

/// The identity rules a layer built from `layer` applies.
fn identity_rules_of(layer: &GovernedLayer) -> IdentityRules {
    /// Runs nothing: only the rules of the layer around it are read.
    struct Nothing;
    #[async_trait]
    impl ToolDispatcher for Nothing {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Err(ToolError::unknown_tool(call.name, Vec::new()))
        }
    }
    layer
        .clone()
        .layer(AsNative::new(Nothing))
        .identity_rules()
        .clone()
}

/// A run id as one directory name: `[A-Za-z0-9._-]` kept, anything else replaced by `_`, at
/// most 64 bytes, and — when anything was replaced or cut, or the id is empty or only dots —
/// followed by `-` and a hash of the whole id, so two ids never share a directory.
fn run_dir_name(id: &str) -> String {
    const MAX: usize = 64;
    let mut name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let lossy = name != id || name.len() > MAX || name.chars().all(|c| c == '.');
    if lossy {
        name.truncate(MAX);
        // FNV-1a, 64 bits: stable across runs and builds.
        let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        name = format!("{name}-{hash:016x}");
    }
    name
}

impl McpClient {
    /// A builder resolving runs against `config` with the default resolver, its
    /// `[policy]` as the governed layer's identity rules, approval rules and output limit.
    pub fn builder(config: Config) -> McpClientBuilder {
        let search = config.search.clone();
        let policy = &config.policy;
        // One spill area for every run of this client: `max_spill_bytes` bounds them together.
        let limits = policy.output_limits();
        let area = SpillArea::new(limits.spill_dir.clone());
        let layer = GovernedLayer::new()
            .identity_rules(policy.identity.clone())
            .approval_rules(policy.approval.clone())
            .output_limits(limits.with_spill_area(area))
            .output_reader(mcp_catalog::ReadOutput);
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
            layer,
            natives: None,
            history_root: None,
            max_parallel: 16,
            grace: Duration::from_secs(2),
            list_limits: ListLimits::default(),
            elicitation: None,
            discover: true,
            search,
            #[cfg(feature = "embed")]
            local_model: crate::search::default_local_model(),
        }
    }

    /// Opens a runner for `input`: resolves its servers, connects them in parallel, lists
    /// their tools and builds the catalog behind the run's governed layer. With a
    /// [`history_root`](McpClientBuilder::history_root), the run is recorded under it.
    /// Close it with [`agent_core::Runner::close`] (or [`McpRunner::shutdown`], which reports
    /// a history write failure).
    pub async fn open_runner(&self, input: &RunInput) -> Result<McpRunner, ClientError> {
        self.open_runner_with(input, OpenOptions::new()).await
    }

    /// Opens a runner for `input` as [`open_runner`](Self::open_runner) does, with `options`:
    /// its own history directory ([`OpenOptions::with_history`], else the client's
    /// [`history_root`](McpClientBuilder::history_root)) and its own elicitation handler
    /// ([`OpenOptions::with_elicitation`], else the client's; pooled sessions of
    /// `shared = true` servers always keep the client's).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use agent_core::RunInput;
    /// use mcp_client::{DeclineElicitation, McpClient, OpenOptions};
    /// use mcp_config::Config;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = McpClient::builder(Config::from_env()?).build();
    /// // This run's servers are declined whatever the client's handler would answer.
    /// let options = OpenOptions::new().with_elicitation(Arc::new(DeclineElicitation));
    /// let runner = client.open_runner_with(&RunInput::new("state-1", "…"), options).await?;
    /// runner.shutdown().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_runner_with(
        &self,
        input: &RunInput,
        options: OpenOptions,
    ) -> Result<McpRunner, ClientError> {
        let mut options = options;
        options.history = options.history.take().or_else(|| {
            let root = self.inner.history_root.as_ref()?;
            // Each principal's runs are kept apart, under a directory of its own.
            let root = match &options.principal {
                Some(p) => root.join(format!("principal-{}", run_dir_name(p.subject()))),
                None => root.clone(),
            };
            Some(root.join(run_dir_name(&input.state_id)))
        });
        self.open_runner_in(input, options).await
    }

    /// Opens a runner for `input` as [`open_runner`](Self::open_runner) does, recording this
    /// run directly in `dir` (`dir/messages.jsonl`, `dir/events.jsonl`; created if missing,
    /// appended to if it holds a history already).
    ///
    /// Fails with [`ClientError::History`], naming the directory, before any server is
    /// contacted when `dir` cannot be written.
    ///
    /// ```no_run
    /// use std::path::Path;
    /// use agent_core::RunInput;
    /// use mcp_client::McpClient;
    /// use mcp_config::Config;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = McpClient::builder(Config::from_env()?).build();
    /// let input = RunInput::new("state-1", "summarise the open issues");
    /// let runner = client.open_runner_with_history(&input, Path::new("history/state-1")).await?;
    /// // … the run …
    /// runner.shutdown().await?; // sessions closed, history synced
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_runner_with_history(
        &self,
        input: &RunInput,
        dir: &Path,
    ) -> Result<McpRunner, ClientError> {
        self.open_runner_with(input, OpenOptions::new().with_history(dir))
            .await
    }

    /// Closes the client's shared sessions: every session of a `shared = true` server, which
    /// the runs using it left open, is closed (its process gone, its HTTP session
    /// deleted). Runs still open keep their private sessions; their calls to a shared server
    /// fail from then on with an error naming it. Runs opened later get private sessions of
    /// shared servers. Idempotent.
    ///
    /// Dropping every clone of the client without this releases a shared session only when
    /// the last run using it is gone too (its child process group is killed then).
    ///
    /// ```no_run
    /// use agent_core::{RunInput, Runner};
    /// use mcp_client::McpClient;
    /// use mcp_config::Config;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// // `shared = true` servers of the configuration are opened once, by the first run.
    /// let client = McpClient::builder(Config::from_env()?).build();
    /// for state in ["a", "b"] {
    ///     let runner = client.open_runner(&RunInput::new(state, "…")).await?;
    ///     runner.close().await; // the shared sessions stay open for the next run
    /// }
    /// client.shutdown().await; // now they close
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        self.inner.pool.close(self.inner.grace).await;
    }

    /// How many sessions of `shared = true` servers this client has opened so far, re-opens
    /// after a failed check included: with every run reusing them, one per shared server.
    pub fn shared_sessions_opened(&self) -> u64 {
        self.inner.pool.opened()
    }

    async fn open_runner_in(
        &self,
        input: &RunInput,
        options: OpenOptions,
    ) -> Result<McpRunner, ClientError> {
        let run = self
            .inner
            .resolver
            .resolve(&self.inner.agent, input)
            .await
            .map_err(|e| ClientError::Config(Box::new(e)))?;
        let span = tracing::info_span!("mcp_run", servers = run.servers.len());
        self.open_resolved_inner(run, options)
            .instrument(span)
            .await
    }

    /// Opens a runner for servers already resolved (recording no history: there is no run
    /// id; see [`open_runner_with_history`](Self::open_runner_with_history)).
    ///
    /// The run's known secrets are every static secret of its specs
    /// ([`ServerSpec::secret_values`](mcp_config::ServerSpec::secret_values)): no error, event,
    /// approval prompt, history line or tool result of the run shows one.
    pub async fn open_resolved(&self, run: ResolvedRun) -> Result<McpRunner, ClientError> {
        self.open_resolved_with(run, OpenOptions::new()).await
    }

    /// Opens a runner for servers already resolved, as [`open_resolved`](Self::open_resolved)
    /// does, with `options`: recorded in [`OpenOptions::with_history`]'s directory if given
    /// (there is no run id for the client's history root), its private sessions answering
    /// elicitations with [`OpenOptions::with_elicitation`]'s handler if given.
    pub async fn open_resolved_with(
        &self,
        run: ResolvedRun,
        options: OpenOptions,
    ) -> Result<McpRunner, ClientError> {
        let span = tracing::info_span!("mcp_run", servers = run.servers.len());
        self.open_resolved_inner(run, options)
            .instrument(span)
            .await
    }

    async fn open_resolved_inner(
        &self,
        run: ResolvedRun,
        options: OpenOptions,
    ) -> Result<McpRunner, ClientError> {
        let started = std::time::Instant::now();
        let inner = &*self.inner;
        // The run's one secret engine: the template's (with whatever secrets the caller gave
        // it: a model's key…), every secret of the run's specs, and a learned set of the run's
        // own, which its sessions' transports teach the tokens they obtain.
        let redactor = inner
            .layer
            .configured_redactor()
            .clone()
            .with_secrets(run.servers.iter().flat_map(|s| s.secret_values()))
            .with_own_learned();
        // The run's context: its bus, history, kept outputs, secret engine and principal,
        // which the governed layers and the run's sessions share.
        let mut context = inner.layer.run_context().redactor(redactor.clone());
        if let Some(dir) = options.history {
            // Before any server is contacted: a run never starts with a history it cannot keep.
            let history = History::create(&dir, redactor.clone()).map_err(ClientError::History)?;
            context = context.history(Arc::new(history));
        }
        if let Some(principal) = options.principal {
            context = context.principal(principal);
        }
        let context = Arc::new(context.build());
        // The catalog hides what the run's principal may not call, as its layer refuses it.
        let mut config = inner.catalog.clone();
        config.identity_rules = config.identity_rules.for_principal(context.principal());
        let catalog = match &inner.natives {
            Some(natives) => Catalog::with_native_tools(
                config,
                natives.tools.clone(),
                Arc::clone(&natives.dispatcher),
            )
            .map_err(ClientError::NativeTools)?,
            None => Catalog::new(config),
        };
        let governed = Arc::new(inner.layer.clone().layer_in(Arc::clone(&context), catalog));
        let events = Arc::clone(context.events());
        let settings = OpenSettings {
            default_connect_timeout: run.options.connect_timeout,
            policy: run.options.partial_failure,
            max_parallel: inner.max_parallel,
            grace: inner.grace,
            events: &*events,
            session: SessionOptions {
                limits: inner.list_limits,
                redactor: redactor.clone(),
                // The run's own handler wins for its private sessions.
                elicitation: options.elicitation.or_else(|| inner.elicitation.clone()),
                discover: inner.discover,
                known: inner.pool.known(),
            },
            tool_limits: &inner.catalog.tool_limits,
            pool: &inner.pool,
            shared_elicitation: inner.elicitation.clone(),
        };
        // The embedder is built (once per client) while the servers connect.
        let searching =
            crate::search::attach(inner.search.as_ref(), governed.inner(), events.clone());
        let (opened, searching) = tokio::join!(
            open_sessions(&inner.connectors, run.servers, settings),
            searching
        );
        searching?;
        let opened = opened.map_err(ClientError::Server)?;
        let runner = McpRunner::new(
            governed,
            opened.sessions,
            opened.skipped,
            run.options.partial_failure,
            inner.grace,
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
            Err(e) => Err(RunnerError::Other {
                message: String::from("the run could not be opened"),
                source: Some(Box::new(e)),
            }),
        }
    }
}
