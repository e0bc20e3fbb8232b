//! Per-run MCP orchestration.
//!
//! For one agent run, [`McpClient::open_runner`] resolves the run's servers
//! ([`mcp_config::ServerResolver`]), connects them in parallel through [`Connectors`]
//! (bounded; each within its connect timeout, which covers the handshake and the full tool
//! listing), builds the [`mcp_catalog::Catalog`] and returns an [`McpRunner`]: the lazy
//! `mcp_search_tools` / `mcp_call_tool` surface over those sessions. Closing the runner (or
//! the [`agent_core::RunScope`] that [`McpClient`] hands out as an
//! [`agent_core::RunnerFactory`]) closes every session.
//!
//! # Governed calls
//!
//! Each run has its own [`agent_core::Governed`] layer around its catalog, built from the
//! client's template: the configuration's `[policy]` ([`mcp_config::PolicyConfig`]: identity
//! rules, approval rules, `max_output_bytes`), adjusted by [`McpClientBuilder::govern`]
//! (approval gate, tool policy, timeouts, event sink). Every call of the runner goes through
//! it — there is no other way to run a tool of the run — and native tools
//! ([`McpClientBuilder::native_tools`]) share it. Server events go to the layer's event bus,
//! so the sink, subscribers ([`McpRunner::governed`]) and the history see one stream. A run
//! records its history under [`McpClientBuilder::history_root`] or in the directory given to
//! [`McpClient::open_runner_with_history`]; a directory that cannot be written fails the run
//! before any server is contacted ([`ClientError::History`]). The history and the layer's
//! redactor know every secret value of the run's specs.
//!
//! A server that fails is fatal under `fail_fast` and reported in [`McpRunner::skipped`] under
//! `skip_unavailable`. Each session keeps the server's initialize identity
//! ([`ServerIdentity`]) and re-lists its tools on `notifications/tools/list_changed`. A run's
//! sessions are reachable only as read-only [`SessionView`]s ([`McpRunner::sessions`]); the
//! one ungoverned way to call a server is the explicitly low-level
//! [`Session::open_standalone`], a single session outside any run.
//!
//! # Shared sessions
//!
//! A server the operator marks `shared = true` ([`mcp_config::ServerSpec::shared`]) is not
//! opened per run: the client keeps one session of it in its pool, keyed by the
//! spec's fingerprint, opened by the first run that needs it (concurrent first opens make
//! one), checked before each reuse (its tools listed again unless its last listing still
//! stands: see `pool.rs`) and re-opened when that fails. A run's
//! close leaves it open; [`McpClient::shutdown`] closes it. Each run still has its own
//! governed layer, catalog, events and history over it, and its tool-list changes reach every
//! run using it. Caller-supplied specs are never pooled: they always get a private session.
//!
//! # Skills
//!
//! A server's skills (the skills extension) are listed ([`McpRunner::list_skills`]) without
//! reading any of their files; a skill's `SKILL.md` is read when it is loaded
//! ([`McpRunner::load_skill`]) and each other file on its first use
//! ([`McpRunner::read_skill_file`]), every read checked against the size and digest the
//! server listed (and the `SKILL.md`'s frontmatter against the listing's) before any of it is
//! used: a mismatch is [`FeatureError::Skill`]. `[policy]` `skill` rules decide first; every
//! load and read is a `skill_read` event. A gateway serves them on ([`McpRunner::served_skill`],
//! [`McpRunner::read_skill_resource`]: a file passed on only once it matches its manifest), and
//! a skill's directories are read with [`McpRunner::read_directory`] where the server declares
//! `directoryRead`.
//!
//! # A hostile server
//!
//! Everything a server chooses is bounded: its tool listing by [`ListLimits`] (pages, tools,
//! bytes; a repeated cursor stops it at once, with [`SessionError::ListLimit`]), its identity
//! by [`ServerIdentity`]'s bounds, its tools by the catalog's
//! [`ToolLimits`](mcp_catalog::ToolLimits) (a tool out of bounds is left out and named in the
//! `server_connected` event). And every text it chooses that the client passes on — error
//! messages and causes, stderr tails, event messages, skipped-server causes, tool results for
//! the model — has the run's known secret values
//! ([`ServerSpec::secret_values`](mcp_config::ServerSpec::secret_values)) replaced by
//! [`mcp_config::REDACTED`].

mod addendum;
mod client;
mod directory;
mod error;
mod feature_error;
mod features;
mod fingerprint;
mod handler;
mod last_listing;
pub mod lifecycle;
mod list;
mod offered;
mod open;
mod pool;
mod prompts;
mod relay;
mod resources;
mod runner;
mod scrub;
mod search;
mod session;
mod skill_runner;
mod skill_serve;
mod skill_session;
mod skills;
mod standalone;
mod timer_anchor;
mod trace_context;
mod updates;

pub use addendum::{MAX_ADDENDUM_BYTES, MAX_PROMPT_SKILLS, MAX_SERVER_INSTRUCTIONS_BYTES};
pub use client::{McpClient, McpClientBuilder};
pub use error::{ClientError, ProtocolError, SessionError};
pub use feature_error::FeatureError;
pub use handler::{DeclineElicitation, ElicitationHandler, SessionHandler};
pub use list::{ListLimit, ListLimits};
pub use mcp_connector::Connectors;
pub use open::{OpenOptions, SkippedServer};
pub use prompts::{MAX_COMPLETION_VALUES, MAX_PROMPT_ARGUMENTS};
pub use relay::{InputRound, MAX_INPUT_REQUESTS, MAX_REQUEST_STATE_BYTES, RelayError, Relayed};
pub use resources::{
    MAX_FEATURE_DESCRIPTION_BYTES, MAX_FEATURE_NAME_BYTES, MAX_RESOURCE_BYTES, MAX_URI_BYTES,
};
pub use runner::{McpRunner, SessionView};
pub use scrub::Scrubbed;
#[cfg(feature = "embed")]
pub use search::LocalModelLoader;
pub use search::SearchSetupError;
pub use session::{
    MAX_ERROR_MESSAGE_BYTES, MAX_INSTRUCTIONS_BYTES, MAX_SERVER_NAME_BYTES,
    MAX_SERVER_VERSION_BYTES, ServerIdentity, Session,
};
pub use skills::{
    LoadedSkill, MAX_FRONTMATTER_BYTES, MAX_SKILL_BYTES, MAX_SKILL_FILES, MAX_SKILL_NAME_BYTES,
    SkillData, SkillEntry, SkillFile, SkillFileContents, SkillFiles, SkillProblem,
};
pub use updates::{MAX_SUBSCRIPTIONS, UPDATE_EVENT_INTERVAL};
