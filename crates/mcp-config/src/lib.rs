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
//! let input = RunInput::new("run-2", "inspect issue status").with_metadata(
//!     json!({"mcp": {"servers": [
//!         "linear",
//!         {"name": "tenant-search", "url": "https://tenant.example.com/mcp",
//!          "auth": {"bearer_token": "tok-from-the-user"}}
//!     ]}}).as_object().unwrap().clone(),
//! );
//! let run = config.resolve(&input)?;
//! let names: Vec<_> = run.servers.iter().map(|s| s.name.as_str()).collect();
//! assert_eq!(names, ["linear", "tenant-search"]);
//! assert!(!format!("{run:?}").contains("tok-from-the-user"));
//! # Ok::<(), mcp_config::ConfigError>(())
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
mod file;
mod glob;
mod json;
mod metadata;
mod parse;
mod path;
mod resolver;
mod safety;
mod secret;
mod select;
mod spec;

pub use config::{
    Config, DEFAULT_TOOL_SERVER_NAME, PartialFailure, ToolServerConfig, validate_specs,
};
pub use env::ENV_PREFIX;
pub use error::{BoxError, ConfigError, Problem, ProblemKind};
pub use file::FileFormat;
pub use metadata::{MCP_METADATA_KEY, McpSelection};
pub use resolver::{DefaultResolver, ServerResolver};
pub use safety::{InlinePolicy, is_internal_host, is_internal_ip, is_loopback_host};
pub use secret::{MIN_SCRUBBED_LEN, REDACTED, Scrubber, Secret};
pub use select::{ResolvedRun, RunOptions, RunSelection, ServerRef};
pub use spec::{
    AuthSpec, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, HttpSpec, OAuthClientCredentials,
    SecretSource, ServerSpec, SpecOrigin, StdioSpec, TokenEndpointAuthMethod, ToolFilter,
    TransportKind, TransportSpec,
};
