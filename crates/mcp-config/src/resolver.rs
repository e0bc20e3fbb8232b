//! The replaceable resolver: (agent, run input) → the run's servers.

use std::sync::Arc;

use agent_core::RunInput;
use async_trait::async_trait;

use crate::{Config, ConfigError, ResolvedRun};

/// Turns one run's input into the servers it uses and its options.
///
/// The MCP client calls it once per run, before connecting anything. The
/// [`DefaultResolver`] takes configured names and inline specs from
/// `metadata["mcp"]`. Replace it to keep credentials server-side: the request carries opaque
/// connection ids, and the resolver looks up the real endpoint and token in a store the caller
/// never sees, so tokens never travel in the request (and never reach logs or the model
/// through the run's metadata).
///
/// Specs a resolver builds from its own store are the operator's (leave
/// [`origin`](crate::ServerSpec::origin) at [`SpecOrigin::Operator`](crate::SpecOrigin)):
/// [`InlinePolicy`](crate::InlinePolicy) applies only to specs the caller sent. Check specs
/// built in code with [`validate_specs`](crate::validate_specs).
///
/// # Example: connection ids resolved from a server-side store
///
/// ```
/// use std::collections::HashMap;
///
/// use agent_core::RunInput;
/// use async_trait::async_trait;
/// use mcp_config::{
///     ConfigError, HttpSpec, ResolvedRun, RunOptions, Secret, SecretSource,
///     ServerResolver, ServerSpec, TransportSpec, validate_specs,
/// };
/// use serde_json::json;
///
/// /// What the application stored when the user connected a server (a DB row, a vault entry).
/// struct Connection {
///     owner: String,
///     url: url::Url,
///     access_token: Secret,
/// }
///
/// /// Resolves `metadata.mcp.connections = ["conn-…"]` for the run's user.
/// struct ConnectionResolver {
///     store: HashMap<String, Connection>, // stands in for a DB or a vault
/// }
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("unknown connection `{0}`")]
/// struct UnknownConnection(String);
///
/// #[async_trait]
/// impl ServerResolver for ConnectionResolver {
///     async fn resolve(&self, _agent: &str, input: &RunInput) -> Result<ResolvedRun, ConfigError> {
///         let ids = input.metadata.get("mcp")
///             .and_then(|mcp| mcp.get("connections"))
///             .and_then(|c| c.as_array())
///             .map(|ids| ids.iter().filter_map(|id| id.as_str()).collect::<Vec<_>>())
///             .unwrap_or_default();
///         let mut servers = Vec::new();
///         for id in ids {
///             // Only the run's own user may use a connection: `state_id` stands in for the
///             // authenticated user here.
///             let conn = self.store.get(id)
///                 .filter(|c| c.owner == input.state_id)
///                 .ok_or_else(|| ConfigError::resolve(UnknownConnection(id.to_owned())))?;
///             let mut spec = ServerSpec::new(
///                 id.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
///                 TransportSpec::StreamableHttp(HttpSpec::new(conn.url.clone())),
///             );
///             spec.auth.bearer = Some(SecretSource::Inline(conn.access_token.clone()));
///             servers.push(spec);
///         }
///         validate_specs(&servers)?;
///         Ok(ResolvedRun::new(servers, RunOptions::default()))
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let resolver = ConnectionResolver {
///     store: HashMap::from([(
///         "conn-42".to_owned(),
///         Connection {
///             owner: "user-7".into(),
///             url: "https://tenant.example.com/mcp".parse().unwrap(),
///             access_token: Secret::new("tok-from-the-vault"),
///         },
///     )]),
/// };
/// let input = RunInput::new("user-7", "check my issues")
///     .with_meta("mcp", json!({"connections": ["conn-42"]}));
/// let run = resolver.resolve("support-agent", &input).await.unwrap();
/// assert_eq!(run.servers[0].name, "conn-42");
/// assert!(!format!("{run:?}").contains("tok-from-the-vault"));
///
/// let stranger = RunInput::new("user-8", "hi").with_metadata(input.metadata.clone());
/// assert!(resolver.resolve("support-agent", &stranger).await.is_err());
/// # });
/// ```
#[async_trait]
pub trait ServerResolver: Send + Sync {
    /// The servers and options of the run of `agent` (the agent's name) with `input`.
    async fn resolve(&self, agent: &str, input: &RunInput) -> Result<ResolvedRun, ConfigError>;
}

#[async_trait]
impl<T: ServerResolver + ?Sized> ServerResolver for Arc<T> {
    async fn resolve(&self, agent: &str, input: &RunInput) -> Result<ResolvedRun, ConfigError> {
        (**self).resolve(agent, input).await
    }
}

#[async_trait]
impl<T: ServerResolver + ?Sized> ServerResolver for Box<T> {
    async fn resolve(&self, agent: &str, input: &RunInput) -> Result<ResolvedRun, ConfigError> {
        (**self).resolve(agent, input).await
    }
}

/// The default resolver: configured servers selected by the run's `metadata["mcp"]`, with
/// inline specs under the operator's [`InlinePolicy`](crate::InlinePolicy)
/// (see [`Config::resolve`]). The agent's name is not used.
///
/// ```
/// use agent_core::RunInput;
/// use mcp_config::{Config, DefaultResolver, ServerResolver};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let config = Config::from_env_vars([(
///     "MCP_AGENT__SERVERS",
///     r#"[{"name": "git", "command": "git-mcp"}]"#,
/// )]).unwrap();
/// let resolver = DefaultResolver::new(config);
/// let run = resolver.resolve("agent", &RunInput::new("s1", "hi")).await.unwrap();
/// assert_eq!(run.servers.len(), 1, "no selection: every configured server");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct DefaultResolver {
    config: Arc<Config>,
}

impl DefaultResolver {
    /// A resolver over `config`.
    pub fn new(config: impl Into<Arc<Config>>) -> Self {
        Self {
            config: config.into(),
        }
    }

    /// The configuration it resolves against.
    pub fn config(&self) -> &Config {
        &self.config
    }
}

#[async_trait]
impl ServerResolver for DefaultResolver {
    async fn resolve(&self, _agent: &str, input: &RunInput) -> Result<ResolvedRun, ConfigError> {
        self.config.resolve(input)
    }
}
