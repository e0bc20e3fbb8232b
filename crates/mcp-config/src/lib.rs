//! MCP server specs: types, validation, loading and per-run selection.
//!
//! The types ([`ServerSpec`] and its parts) say how to reach one MCP server, how to
//! authenticate to it and which of its tools to use. Secrets live in [`Secret`], which never
//! prints its value.
//!
//! - **Loading** ([`Config`]): from the environment (`MCP_AGENT__…`, [`Config::from_env`]),
//!   from a TOML or JSON file in this crate's schema or the ecosystem's `mcpServers` format
//!   with `${VAR}` expansion ([`Config::from_file`]), or both ([`Config::load`]). Every loader
//!   validates everything and reports all problems at once, each with its path
//!   ([`ConfigError::Invalid`], [`Problem`]).
//! - **Per-run selection** ([`RunSelection`], [`Config::resolve`]): `RunInput.metadata["mcp"]`
//!   picks configured servers by name or brings inline specs for one run, which get safe
//!   defaults ([`InlinePolicy`]: no stdio, no environment secrets, SSRF guard).
//! - **Resolver** ([`ServerResolver`]): the replaceable step from a run's input to its servers;
//!   [`DefaultResolver`] implements the selection above.
//! - **Tables of the application** ([`read`]): `[serve]` and `[model]` are kept raw per
//!   source ([`read::Table`]) for the application to read with the same problem-collecting
//!   reader, its problems reported with the loader's ([`Config::load_with`]).
//! - **Boundary adapters** ([`adapters`]): AG-UI `forwardedProps.mcp` and A2A data parts to
//!   the same metadata.
//!
//! ```
//! use agent_core::RunInput;
//! use mcp_config::Config;
//! use serde_json::json;
//!
//! let config = Config::from_env_vars([(
//!     "MCP_AGENT__SERVERS",
//!     r#"[{"name": "weather", "transport": "stdio", "command": "weather-mcp-server"},
//!         {"name": "linear", "url": "https://mcp.example.com/linear",
//!          "auth": {"bearer_token_env": "LINEAR_MCP_TOKEN"}}]"#,
//! )])?;
//!
//! let input = RunInput::new("run-2", "inspect issue status").with_meta(
//!     "mcp",
//!     json!({"servers": [
//!         "linear",
//!         {"name": "tenant-search", "url": "https://tenant.example.com/mcp",
//!          "auth": {"bearer_token": "tok-from-the-user"}}
//!     ]}),
//! );
//! let run = config.resolve(&input)?;
//! let names: Vec<_> = run.servers.iter().map(|s| s.name.as_str()).collect();
//! assert_eq!(names, ["linear", "tenant-search"]);
//! assert!(!format!("{run:?}").contains("tok-from-the-user"));
//! # Ok::<(), mcp_config::ConfigError>(())
//! ```
//!
//! # Conventions
//!
//! - **Fields and setters.** Types of plain data have public fields: read them, or set them on
//!   a `mut` value. They are `#[non_exhaustive]`, so values come from a constructor (`new`),
//!   `Default` or a loader; specs ([`ServerSpec`], [`StdioSpec`], [`HttpSpec`], [`AuthSpec`],
//!   [`ToolFilter`], …) are only built that way. Settings a caller usually writes in one
//!   expression ([`Config`], [`InlinePolicy`], [`RunOptions`], [`McpSelection`], [`Problem`])
//!   also have setters, all of one shape: `with_<field>(self, value) -> Self`, `#[must_use]`.
//!   There are no `set_*` methods. ([`McpSelection::and`] and [`McpSelection::inline`] add to
//!   the server list rather than set it.)
//! - **Errors.** [`ConfigError`] is the crate's one error type. A variant with a cause keeps
//!   it typed behind [`source()`](std::error::Error::source) and does not repeat it in its
//!   own message, so print the whole chain. Configuration problems are data ([`Problem`]):
//!   all of them at once, each with its path, kind and message, plus the parser's error as
//!   [`Problem::cause`] where one found it.
//!
//! ```
//! use std::time::Duration;
//! use mcp_config::{Config, InlinePolicy, PartialFailure};
//!
//! let config = Config::default()
//!     .with_connect_timeout(Duration::from_secs(5))
//!     .with_partial_failure(PartialFailure::SkipUnavailable)
//!     .with_inline_policy(InlinePolicy::default().with_ssrf_guard(false));
//! assert!(!config.inline.ssrf_guard);
//! ```
//!
//! # Architecture invariant
//!
//! Pure data and validation: no I/O beyond reading the environment and config files, no
//! network (host names are never resolved), no MCP library.

pub mod adapters;
mod config;
mod env;
mod error;
mod expand;
mod federated;
mod file;
mod glob;
mod json;
mod metadata;
mod parse;
mod path;
mod policy;
pub mod read;
mod resolver;
mod safety;
mod search;
mod secret;
mod select;
mod spec;
mod table;

pub use config::{
    Config, DEFAULT_TOOL_SERVER_NAME, PartialFailure, ToolServerConfig, validate_specs,
};
pub use env::ENV_PREFIX;
pub use error::{BoxError, ConfigError, Problem, ProblemKind};
pub use federated::{EnterpriseAuth, TokenSource, WorkloadIdentity};
pub use file::FileFormat;
pub use metadata::{MCP_METADATA_KEY, McpSelection};
pub use policy::PolicyConfig;
pub use resolver::{DefaultResolver, ServerResolver};
pub use safety::{InlinePolicy, is_internal_host, is_internal_ip, is_loopback_host};
pub use search::{EmbedderConfig, LOCAL_MODEL_FILES, SearchConfig};
pub use secret::{
    MAX_LEARNED_SECRETS, MIN_SECRET_LEN, REDACTED, Redactor, Secret, SecretSink, SecretSource,
    bounded_text,
};
pub use select::{ResolvedRun, RunOptions, RunSelection, ServerRef};
pub use spec::{
    AuthSpec, CustomSpec, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DpopMode, HttpSpec,
    MAX_SERVER_NAME_CHARS, OAuthClientCredentials, OAuthLogin, ServerSpec, SpecOrigin, StdioSpec,
    TokenEndpointAuthMethod, ToolFilter, TransportKind, TransportSpec, is_secret_param_name,
};
