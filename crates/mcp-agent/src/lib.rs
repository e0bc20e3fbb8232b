//! Give an AI agent the tools of external MCP servers, safely and per run.
//!
//! This is the library's front door: an application depends on this one crate, picks
//! transports with features, and finds the types of a run at the root and the traits in
//! [`prelude`].
//!
//! ```no_run
//! use mcp_agent::prelude::*;
//! use mcp_agent::{Config, McpClient, McpSelection, RunInput, ToolCall};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = McpClient::builder(Config::from_env()?)
//!     .connectors(mcp_agent::connectors()?)
//!     .build();
//! let input = RunInput::new("conversation-7", "file the bug")
//!     .with_meta("mcp", McpSelection::servers(["github"]));
//! let runner = client.open_runner(&input).await?;
//! let found = runner
//!     .dispatch(ToolCall::from_json("1", "mcp_search_tools", json!({"query": "create issue"}))?)
//!     .await?;
//! println!("{}", found.to_model_text());
//! runner.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Governed calls
//!
//! Every call of a run — `mcp_search_tools`, `mcp_call_tool`, pinned and promoted MCP tools,
//! the application's native tools ([`McpClientBuilder::native_tools`]), `mcp_read_output` —
//! goes through the run's [`GovernedLayer`]: identity rules (`[policy]` `allow` / `deny`,
//! matched against each server's `serverInfo.name`; refused tools are not even shown), the
//! [`ToolPolicy`](prelude::ToolPolicy), approval of the real tool (`server__tool`, also behind
//! `mcp_call_tool`) by an [`ApprovalGate`](prelude::ApprovalGate), the call timeout, the output
//! limit (`max_output_bytes`; the rest is read with [`READ_OUTPUT_TOOL`]), `tool_call_*`
//! [`EventKind`]s beside the server events, and the run's [`History`]
//! (`messages.jsonl`, `events.jsonl`, secrets redacted). The layer starts from the
//! configuration's `[policy]`; [`McpClientBuilder::govern`] adjusts it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::path::Path;
//! use mcp_agent::prelude::*;
//! use mcp_agent::{AutoApprove, Config, EventKind, McpClient, RunInput};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // mcp.toml:
//! //   [policy]
//! //   allow = [{ server = "mcp-servers/everything", tool = "*" }]
//! //   deny = [{ server = "*", tool = "delete_*" }]
//! //   approve_destructive = true
//! let client = McpClient::builder(Config::load(Some(Path::new("mcp.toml")))?)
//!     .connectors(mcp_agent::connectors()?)
//!     .govern(|layer| layer.approval_gate(Arc::new(AutoApprove)))
//!     .history_root("history")
//!     .build();
//! let runner = client.open_runner(&RunInput::new("conversation-7", "tidy up")).await?;
//! let mut events = runner.governed().subscribe();
//! // … the model calls tools through `runner.dispatch(…)` …
//! while let Ok(Some(event)) = events.try_recv() {
//!     if event.kind == EventKind::ToolCallDenied {
//!         println!("denied: {:?} {:?}", event.tool, event.message);
//!     }
//! }
//! runner.shutdown().await?; // sessions closed, history/conversation-7/*.jsonl synced
//! # Ok(())
//! # }
//! ```
//!
//! # What is here
//!
//! - At the root: what a run is made of — the client ([`McpClient`], [`McpClientBuilder`],
//!   [`McpRunner`], [`connectors`]), the configuration ([`Config`], [`ServerSpec`],
//!   [`McpSelection`]), tool calls ([`ToolCall`], [`ToolOutput`], [`ToolDescriptor`]), the
//!   governed layer, approval, events and history, and the errors of each.
//! - [`prelude`]: the traits a run is used through.
//! - [`config`]: the configuration's parts beyond the root (transports, `[serve]`, `[model]`).
//! - [`agent`]: the agent loop and the model seam ([`agent::AgentLoop`], [`agent::Model`]).
//! - [`events`]: the event bus and the history files.
//! - [`telemetry`]: the metrics a run counts through the `metrics` facade — tool calls by
//!   server, tool and outcome, their durations, upstream opens, OAuth token requests (and, in
//!   the gateway, requests, sessions, rate refusals, shared-state errors); the host installs
//!   the recorder (exporter) it chooses, or none, and labels stay bounded whatever peers send.
//! - [`stdio`], [`http`], [`auth`]: each transport's connector and options, and the HTTP
//!   transport's auth hooks, present with their features.
//! - `state` (feature `redis`): a fleet's shared state on Redis, and `RedisTokens`, the OAuth
//!   tokens its replicas share ([`connectors_with_shared_tokens`]).
//! - [`skills`]: what a runner's `list_skills`, `load_skill` and `read_skill_file` return.
//! - The escape hatch: [`rmcp`], the protocol crate (a custom connector must use this one; a
//!   standalone [`Session`] hands out its results and capabilities).
//!
//! The server direction (a governed MCP gateway, `ToolServer`) is the `mcp-serve` crate,
//! kept out of this one so that a library build has no server side of rmcp; feature `serve`
//! adds `serve::RunTools`, a run as the tools (and resources, prompts, completions) of a
//! gateway's session.
//!
//! # Feature Flags
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `stdio` | yes | MCP servers run as child processes ([`stdio`]) |
//! | `http` | yes | MCP servers over streamable HTTP on hyper + rustls ([`http`]), with static headers and bearer tokens ([`auth`]) |
//! | `oauth` | yes | `http` plus OAuth: client credentials (`private_key_jwt` signed with `ring`) and a user's login with PKCE |
//! | `redis` | no | `oauth` plus OAuth tokens shared by a fleet's replicas in Redis (`state`, on `mcp-state`) |
//! | `embed` | no | hybrid tool search for the config's `[search]` with an OpenAI-compatible embeddings endpoint (`mcp_embed`; no ML dependency) |
//! | `serve` | no | `serve::RunTools`: a run served as a gateway session's tools, resources and prompts (`mcp-serve`, rmcp's server side) |
//! | `embed-local` | no | `embed` plus a local sentence-transformers model (`mcp_embed_local`: candle, tokenizers), which every client loads for `[search] embedder = { local = … }` |
//!
//! A `[search]` whose back end is not compiled in fails a run's opening, naming the feature
//! ([`SearchSetupError::NotBuilt`]).
//!
//! A spec whose transport is not compiled in is refused when its session opens, with an error
//! naming the missing feature ([`ConnectError::Unsupported`]); an OAuth spec without `oauth`
//! is refused when its session opens, naming the feature.
//!
//! The command-line tool is the separate `mcp-agent-cli` package (its binary is named
//! `mcp-agent`), so a library build pulls in no argument parser and no server side of rmcp.

mod error;
#[cfg(feature = "otlp")]
pub mod otlp;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "redis")]
pub mod state;

pub use error::SetupError;

/// The metrics the library counts through the `metrics` facade, by name, and their bounded
/// labels. Install a recorder (e.g. `metrics-exporter-prometheus`) with
/// `metrics::set_global_recorder`, then call [`telemetry::describe`].
///
/// ```
/// assert_eq!(mcp_agent::telemetry::TOOL_CALLS, "mcp_tool_calls_total");
/// mcp_agent::telemetry::describe();
/// ```
pub use agent_core::telemetry;

/// The MCP protocol crate this library is built on; a custom connector must use this one.
pub use rmcp;

pub use agent_core::{
    ApprovalDecision, ApprovalRequest, ApprovalRules, ApprovalTrigger, AutoApprove, CallOutcome,
    DEFAULT_APPROVAL_TIMEOUT, Event, EventKind, EventReceiver, Governed, GovernedLayer, History,
    HistoryError, IdentityRules, OutputLimits, OutputStore, Redactor, Rule, RunInput, Secret,
    SecretSink, ToolCall, ToolDescriptor, ToolError, ToolOutput, error_chain,
};
pub use mcp_catalog::{
    CALL_TOOL, CallTarget, Catalog, CatalogConfig, Exposure, READ_OUTPUT_TOOL, READ_TOOL,
    SEARCH_TOOL, SearchRequest, external_name,
};
#[cfg(feature = "embed")]
pub use mcp_client::LocalModelLoader;
pub use mcp_client::{
    ClientError, Connectors, DeclineElicitation, ElicitationHandler, FeatureError,
    MAX_RESOURCE_BYTES, MAX_SUBSCRIPTIONS, McpClient, McpClientBuilder, McpRunner, OpenOptions,
    SearchSetupError, ServerIdentity, Session, SessionError, SessionHandler, SessionView,
};
pub use mcp_config::{
    Config, ConfigError, McpSelection, PartialFailure, PolicyConfig, RunSelection, ServerSpec,
};
pub use mcp_connector::{ConnectError, Connector};

/// The traits a run is used through: `use mcp_agent::prelude::*;`.
pub mod prelude {
    pub use agent_core::{
        ApprovalGate, CallResolver, EventSink, Model, Runner, RunnerFactory, ToolCatalog,
        ToolDispatcher, ToolPolicy,
    };
}

/// The configuration beyond [`Config`] and [`ServerSpec`]: transports, auth, per-run
/// options, the raw `[model]` and `[serve]` tables ([`read::Table`](config::read::Table)) and the reader
/// that reads them ([`read`](config::read)).
///
/// ```
/// use mcp_agent::config::{StdioSpec, TransportSpec};
/// use mcp_agent::ServerSpec;
///
/// let spec = ServerSpec::new("fs", TransportSpec::Stdio(StdioSpec::new("mcp-server-fs", ["/srv"])));
/// assert_eq!(spec.name, "fs");
/// ```
pub mod config {
    pub use mcp_config::{
        AuthSpec, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, FileFormat, HttpSpec, Problem,
        ProblemKind, REDACTED, ResolvedRun, RunOptions, SecretSource, SpecOrigin, StdioSpec,
        TransportKind, TransportSpec, read,
    };
}

/// A server's skills (the skills extension), as a runner lists and reads them:
/// [`McpRunner::list_skills`] gives [`SkillEntry`](skills::SkillEntry)s, `load_skill` a checked
/// [`LoadedSkill`](skills::LoadedSkill), `read_skill_file` its other files, each within the
/// bounds named here.
///
/// ```no_run
/// # async fn demo(runner: mcp_agent::McpRunner) -> Result<(), mcp_agent::FeatureError> {
/// let listed: Vec<mcp_agent::skills::SkillEntry> = runner.list_skills("docs").await?;
/// for skill in &listed {
///     println!("{}: {}", skill.name, skill.description);
/// }
/// # Ok(())
/// # }
/// ```
pub mod skills {
    pub use mcp_client::{
        LoadedSkill, MAX_FRONTMATTER_BYTES, MAX_SKILL_BYTES, MAX_SKILL_FILES, MAX_SKILL_NAME_BYTES,
        SkillData, SkillEntry, SkillFile, SkillFileContents, SkillFiles, SkillProblem,
    };
}

/// The agent loop and the model seam: [`AgentLoop`](agent::AgentLoop) runs a
/// [`Model`](agent::Model) against a run's tools until an answer or `max_steps`.
///
/// ```
/// use mcp_agent::agent::{Message, Role};
///
/// let asked = Message::new(Role::User, "file the bug");
/// assert_eq!(asked.role, Role::User);
/// ```
pub mod agent {
    pub use agent_core::progress;
    pub use agent_core::{
        AgentError, AgentLoop, AgentOutcome, CancellationToken, DEFAULT_MAX_STEPS, Message, Model,
        ModelError, ModelRequest, ModelResponse, Role, ScriptedModel, TextSink,
    };
}

/// A run's events and its history files, beside the root's [`Event`] and [`History`].
///
/// ```
/// assert_eq!(mcp_agent::events::EVENTS_FILE, "events.jsonl");
/// ```
pub mod events {
    pub use agent_core::{
        EVENTS_FILE, EventBus, EventRecvError, EventSink, JsonlLines, MESSAGES_FILE,
    };
}

/// Child-process MCP servers (feature `stdio`).
///
/// ```
/// let connector = mcp_agent::stdio::StdioConnector::new();
/// # drop(connector);
/// ```
#[cfg(feature = "stdio")]
pub mod stdio {
    pub use mcp_transport_stdio::{
        StdioConnector, StdioError, StdioHandle, StdioOptions, ZYGOTE_COMM,
    };
}

/// Streamable HTTP MCP servers (feature `http`).
///
/// ```
/// use mcp_agent::http::{HttpConnector, HttpOptions};
///
/// let connector = HttpConnector::new(HttpOptions::default()).unwrap();
/// # drop(connector);
/// ```
#[cfg(feature = "http")]
pub mod http {
    pub use mcp_transport_http::{AuthFactory, HttpConnector, HttpError, HttpOptions, Resolve};
}

/// The HTTP transport's auth hooks (feature `http`): static headers and bearer tokens; with
/// feature `oauth`, OAuth client credentials and a user's login.
///
/// ```
/// use mcp_agent::Secret;
/// use mcp_agent::auth::{AuthProvider, BearerToken};
///
/// let token = BearerToken::new("docs", &Secret::from("tok-123")).unwrap();
/// # let _: &dyn AuthProvider = &token;
/// ```
#[cfg(feature = "http")]
pub mod auth {
    pub use mcp_auth::{
        AuthError, AuthProvider, BearerToken, Chain, Challenge, Credentials, NoAuth,
        OnUnauthorized, StaticHeaders, from_spec,
    };
    #[cfg(feature = "oauth")]
    pub use mcp_auth::{
        AuthRegistry, Callback, CallbackListener, FileTokenStore, Login, LoginOnDemand,
        LoginTokens, MemoryTokenStore, OAuthOptions, PendingLogin, ShareError, SharedEntry,
        SharedTokens, StoreError, StoredLogin, TokenStore,
    };
}

/// A [`Connectors`] registry with every transport compiled in, with default options. A
/// built-in transport left out of the build is registered as disabled, so a spec that needs it
/// is refused with the feature that adds it. Add a custom transport with
/// [`Connectors::with`].
pub fn connectors() -> Result<Connectors, SetupError> {
    #[cfg(feature = "oauth")]
    return connectors_sharing(None);
    #[cfg(not(feature = "oauth"))]
    return connectors_sharing();
}

/// [`connectors`] whose HTTP transport shares OAuth tokens with the other replicas of a fleet
/// through `tokens` (say `state::RedisTokens`, with feature `redis`): see
/// [`AuthRegistry::use_shared_tokens`](auth::AuthRegistry::use_shared_tokens). Hand them to
/// [`McpClientBuilder::connectors`].
#[cfg(feature = "oauth")]
pub fn connectors_with_shared_tokens(
    tokens: std::sync::Arc<dyn mcp_auth::SharedTokens>,
) -> Result<Connectors, SetupError> {
    connectors_sharing(Some(tokens))
}

/// Every transport compiled in, the HTTP one sharing `tokens` when given.
fn connectors_sharing(
    #[cfg(feature = "oauth")] tokens: Option<std::sync::Arc<dyn mcp_auth::SharedTokens>>,
) -> Result<Connectors, SetupError> {
    let connectors = Connectors::new();
    #[cfg(feature = "stdio")]
    let connectors = connectors.with(mcp_transport_stdio::StdioConnector::new());
    #[cfg(not(feature = "stdio"))]
    let connectors = connectors.disabled(mcp_config::TransportKind::Stdio, "stdio");
    #[cfg(feature = "http")]
    let http = mcp_transport_http::HttpConnector::new(mcp_transport_http::HttpOptions::default())?;
    #[cfg(feature = "oauth")]
    if let Some(tokens) = tokens {
        http.auth_registry().use_shared_tokens(tokens);
    }
    #[cfg(feature = "http")]
    let connectors = connectors.with(http);
    #[cfg(not(feature = "http"))]
    let connectors = connectors.disabled(mcp_config::TransportKind::StreamableHttp, "http");
    Ok(connectors)
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
