//! Server specs: how to reach one MCP server, authenticate to it, and which of its tools to use.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use url::Url;

use crate::{EnterpriseAuth, Secret, SecretSource, WorkloadIdentity};

/// The call timeout when a spec sets none.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest server name, in characters: a name is part of every tool name
/// (`server__tool`), of log lines and of error messages, so it is kept short enough to show
/// whole.
pub const MAX_SERVER_NAME_CHARS: usize = 64;

/// The connect timeout when neither the spec nor the environment sets one.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn is_true(value: &bool) -> bool {
    *value
}

/// One MCP server, as configured.
///
/// Built by the loaders of this crate (which validate it); `Serialize` prints it with every
/// secret redacted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ServerSpec {
    /// The server's key: `[A-Za-z0-9_-]+`, without `__`, unique in a run.
    pub name: String,
    /// How to reach it.
    #[serde(flatten)]
    pub transport: TransportSpec,
    /// How to authenticate (HTTP only).
    #[serde(skip_serializing_if = "AuthSpec::is_empty")]
    pub auth: AuthSpec,
    /// Time allowed to connect, initialise and list every tool. `None`: the global default.
    #[serde(
        with = "opt_secs",
        skip_serializing_if = "Option::is_none",
        rename = "connect_timeout_seconds"
    )]
    pub connect_timeout: Option<Duration>,
    /// Time allowed for one tool call.
    #[serde(with = "secs", rename = "call_timeout_seconds")]
    pub call_timeout: Duration,
    /// Which tools to use.
    #[serde(skip_serializing_if = "ToolFilter::is_empty")]
    pub tools: ToolFilter,
    /// Who supplied the spec.
    pub origin: SpecOrigin,
    /// For a caller-supplied ([`SpecOrigin::Inline`]) spec: the operator turned the SSRF guard
    /// off (`ssrf_guard = false`), so its connections may reach internal addresses. `false`
    /// (the default): they may not — see [`ServerSpec::ssrf_guarded`].
    ///
    /// Set by the run's selection from the operator's [`InlinePolicy`](crate::InlinePolicy);
    /// never read from a spec document, so a caller cannot set it. A custom resolver that
    /// builds inline specs gets the guard unless it sets this. Operator specs are never
    /// guarded, whatever it says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_internal_addresses: bool,
    /// The operator's `shared = true`: runs of one client reuse one session of this server
    /// from the client's session pool instead of opening their own. Honoured for
    /// operator specs only: a caller-supplied ([`SpecOrigin::Inline`]) spec always gets a
    /// private session, whatever it says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// The roots the client tells the server it may work in (`roots = ["file:///srv/data"]`),
    /// answered to the server's `roots/list`; with none the client declares no roots
    /// capability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// Whether the server's `instructions` (from its initialize result) go into a run's system
    /// prompt (default `true`; `instructions = false` leaves them out for this server).
    #[serde(skip_serializing_if = "is_true")]
    pub instructions: bool,
    /// The values `${VAR}` references of a config file put into `command`, `args`, `url` or
    /// `headers`: secrets of the spec ([`secret_values`](Self::secret_values)), so they are
    /// scrubbed wherever a server echoes them, and redacted where a [`Config`](crate::Config)
    /// is serialized (`mcp-agent config check`). A variable is how a config file keeps a
    /// value out of the file; what it holds is taken for a credential. (Like every secret, a
    /// value under [`MIN_SECRET_LEN`](crate::MIN_SECRET_LEN) characters is not scrubbed.)
    #[serde(skip)]
    pub expanded: Vec<Secret>,
}

impl ServerSpec {
    /// A spec with defaults for everything but the name and the transport. Validate it with
    /// the crate's loaders before use; this constructor checks nothing.
    pub fn new(name: impl Into<String>, transport: TransportSpec) -> Self {
        Self {
            name: name.into(),
            transport,
            auth: AuthSpec::default(),
            connect_timeout: None,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tools: ToolFilter::default(),
            origin: SpecOrigin::Operator,
            allow_internal_addresses: false,
            shared: false,
            roots: Vec::new(),
            instructions: true,
            expanded: Vec::new(),
        }
    }

    /// True when connections for this spec must not reach internal addresses (the SSRF
    /// guard): a caller-supplied ([`SpecOrigin::Inline`]) spec, unless the operator turned
    /// the guard off ([`allow_internal_addresses`](Self::allow_internal_addresses)).
    ///
    /// The HTTP transport then connects only to addresses that [`is_internal_ip`](crate::is_internal_ip)
    /// accepts — after DNS resolution, so a public name pointing at `127.0.0.1` is refused
    /// too — for MCP requests and for the spec's OAuth requests alike.
    ///
    /// ```
    /// use mcp_config::{HttpSpec, ServerSpec, SpecOrigin, TransportSpec};
    ///
    /// let url = "https://mcp.example.com/mcp".parse().unwrap();
    /// let mut spec = ServerSpec::new("s", TransportSpec::StreamableHttp(HttpSpec::new(url)));
    /// assert!(!spec.ssrf_guarded(), "the operator's own specs are not guarded");
    /// spec.origin = SpecOrigin::Inline;
    /// assert!(spec.ssrf_guarded(), "caller-supplied specs are, by default");
    /// spec.allow_internal_addresses = true;
    /// assert!(!spec.ssrf_guarded());
    /// ```
    pub fn ssrf_guarded(&self) -> bool {
        self.origin == SpecOrigin::Inline && !self.allow_internal_addresses
    }

    /// Every secret value this spec knows now: the values `${VAR}` put into its command,
    /// arguments, URL or headers ([`expanded`](Self::expanded)), header values, an inline bearer token or one
    /// read from its variable, an OAuth client secret (inline or from its variable), the
    /// `env` values of a stdio server, and the string values of a custom transport's
    /// parameters whose name says they are secret ([`is_secret_param_name`]: `password`,
    /// `api_key`, `token`, `dsn`…; every string beneath such a parameter, at any depth).
    /// Tokens obtained at run time (OAuth access and refresh tokens) are not here: whoever
    /// obtains one reports it to the [`SecretSink`](crate::SecretSink)s of the runs that use
    /// it.
    ///
    /// ```
    /// use mcp_config::{CustomSpec, ServerSpec, TransportSpec};
    ///
    /// let custom = CustomSpec::new("queue")
    ///     .with_param("password", "hunter2-queue")
    ///     .with_param("nodes", serde_json::json!([{"dsn": "amqp://u:p@mq.internal"}]))
    ///     .with_param("host", "mq.internal")
    ///     .with_param("partition", 3);
    /// let spec = ServerSpec::new("q", TransportSpec::Custom(custom));
    /// let values: Vec<String> = spec.secret_values().iter().map(|s| s.expose().to_owned()).collect();
    /// assert!(values.contains(&"hunter2-queue".to_owned()));
    /// assert!(values.contains(&"amqp://u:p@mq.internal".to_owned()));
    /// assert_eq!(values.len(), 2);
    /// ```
    pub fn secret_values(&self) -> Vec<Secret> {
        let mut out = Vec::new();
        match &self.transport {
            TransportSpec::Stdio(stdio) => out.extend(stdio.env.values().cloned()),
            TransportSpec::StreamableHttp(http) => out.extend(http.headers.values().cloned()),
            TransportSpec::Custom(custom) => {
                for (name, value) in &custom.params {
                    secret_params(name, value, false, &mut out);
                }
            }
        }
        out.extend(self.expanded.iter().cloned());
        out.extend(self.auth.headers.values().cloned());
        out.extend(self.auth.bearer.as_ref().and_then(SecretSource::resolve));
        if let Some(oauth) = &self.auth.oauth_client_credentials {
            out.extend(oauth.client_secret.resolve());
        }
        if let Some(login) = &self.auth.oauth {
            out.extend(login.client_secret.as_ref().and_then(SecretSource::resolve));
        }
        if let Some(enterprise) = &self.auth.enterprise {
            out.extend(enterprise.secret_values());
        }
        if let Some(workload) = &self.auth.workload_identity {
            out.extend(workload.token.resolve_env());
        }
        out
    }

    /// The transport's kind.
    pub fn kind(&self) -> TransportKind {
        match &self.transport {
            TransportSpec::Stdio(_) => TransportKind::Stdio,
            TransportSpec::StreamableHttp(_) => TransportKind::StreamableHttp,
            TransportSpec::Custom(custom) => TransportKind::Other(custom.kind.clone()),
        }
    }
}

/// Words that make a custom transport parameter secret when its name holds one (see
/// [`is_secret_param_name`]).
const SECRET_PARAM_WORDS: &[&str] = &[
    "secret",
    "secrets",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "token",
    "key",
    "apikey",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "private",
    "dsn",
];

/// True when a custom transport parameter named `name` holds a secret: one of the words of
/// its name (split at `_`, `-`, `.`, spaces and lower-to-upper case changes, compared
/// case-insensitively) is `secret`, `password`, `passwd`, `pwd`, `passphrase`, `token`, `key`,
/// `apikey`, `auth`, `authorization`, `credential(s)`, `cookie`, `private` or `dsn` (a
/// connection string, which carries its password). Every string beneath such a parameter, at
/// any depth, is then a secret of the spec ([`ServerSpec::secret_values`]); other parameters
/// (a host, a port, a server identity) are not, so that what servers say about them stays
/// readable. A custom transport names its secret parameters accordingly.
///
/// ```
/// use mcp_config::is_secret_param_name;
///
/// assert!(is_secret_param_name("api_key"));
/// assert!(is_secret_param_name("clientSecret"));
/// assert!(is_secret_param_name("AUTH-TOKEN"));
/// assert!(is_secret_param_name("dsn"));
/// assert!(!is_secret_param_name("monkey"));
/// assert!(!is_secret_param_name("identity"));
/// assert!(!is_secret_param_name("host"));
/// ```
pub fn is_secret_param_name(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut lower_before = false;
    for c in name.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            words.push(std::mem::take(&mut word));
            lower_before = false;
            continue;
        }
        if c.is_uppercase() && lower_before {
            words.push(std::mem::take(&mut word));
        }
        lower_before = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    words.push(word);
    words
        .iter()
        .any(|w| SECRET_PARAM_WORDS.contains(&w.as_str()))
}

/// The secrets among a custom transport's parameter `name`: every string beneath it when its
/// name (or an enclosing one, `secret`) says it is secret.
fn secret_params(name: &str, value: &serde_json::Value, secret: bool, out: &mut Vec<Secret>) {
    let secret = secret || is_secret_param_name(name);
    match value {
        serde_json::Value::String(s) if secret && !s.is_empty() => {
            out.push(Secret::new(s.as_str()));
        }
        serde_json::Value::Array(items) => items
            .iter()
            .for_each(|v| secret_params(name, v, secret, out)),
        serde_json::Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| secret_params(k, v, secret, out)),
        _ => {}
    }
}

/// Who supplied a spec. Caller-supplied (inline) specs get safe defaults (no stdio, no
/// environment secrets, optional SSRF guard) and are never pooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SpecOrigin {
    /// From the operator's environment or files.
    Operator,
    /// From the request of one run.
    Inline,
}

/// The kind of transport, without its parameters: one of the built-in kinds, or the name a
/// transport from outside this workspace registers its connector under (`transport =
/// "<kind>"` in a server entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// A child process speaking MCP on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// Any other transport, by the name its connector registers.
    Other(String),
}

impl TransportKind {
    /// The kind as written in a config file: `stdio`, `streamable_http`, or the custom name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stdio => "stdio",
            Self::StreamableHttp => "streamable_http",
            Self::Other(kind) => kind,
        }
    }
}

impl Serialize for TransportKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TransportSpec {
    /// Spawn a child process.
    Stdio(StdioSpec),
    /// Connect over streamable HTTP.
    StreamableHttp(HttpSpec),
    /// A transport from outside this workspace: its kind and its own parameters, which its
    /// connector reads and checks when the session opens.
    Custom(CustomSpec),
}

impl Serialize for TransportSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        #[derive(Serialize)]
        struct Tagged<'a, T> {
            transport: &'static str,
            #[serde(flatten)]
            spec: &'a T,
        }
        match self {
            Self::Stdio(spec) => Tagged {
                transport: "stdio",
                spec,
            }
            .serialize(s),
            Self::StreamableHttp(spec) => Tagged {
                transport: "streamable_http",
                spec,
            }
            .serialize(s),
            Self::Custom(custom) => {
                let mut map = s.serialize_map(Some(custom.params.len() + 1))?;
                map.serialize_entry("transport", &custom.kind)?;
                for (key, value) in &custom.params {
                    map.serialize_entry(key, &redacted(value))?;
                }
                map.end()
            }
        }
    }
}

/// A custom transport's parameter as shown: its shape, with every string replaced (this crate
/// cannot tell which of them are secrets).
fn redacted(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(_) => Value::String(crate::REDACTED.into()),
        Value::Array(items) => Value::Array(items.iter().map(redacted).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), redacted(v))).collect())
        }
        other => other.clone(),
    }
}

/// A server reached through a transport registered from outside this workspace.
///
/// In a config file it is a server entry whose `transport` names the kind; every field but the
/// common ones (`name`, `transport`, `connect_timeout_seconds`, `call_timeout_seconds`,
/// `tools`) is a parameter, given to the connector as JSON. `Serialize` shows parameters with
/// their strings redacted.
///
/// ```
/// use mcp_config::{ServerSpec, SpecOrigin, TransportKind, TransportSpec};
/// use serde_json::json;
///
/// let spec = ServerSpec::from_json(
///     &json!({"name": "bus", "transport": "message_bus", "topic": "tools", "partition": 3}),
///     SpecOrigin::Operator,
/// )?;
/// assert_eq!(spec.kind(), TransportKind::Other("message_bus".into()));
/// let TransportSpec::Custom(custom) = &spec.transport else { unreachable!() };
/// assert_eq!(custom.params["partition"], 3);
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CustomSpec {
    /// The kind its connector registers under.
    pub kind: String,
    /// Its parameters.
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl CustomSpec {
    /// A spec of `kind` with no parameters.
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            params: serde_json::Map::new(),
        }
    }

    /// Adds a parameter.
    #[must_use]
    pub fn with_param(
        mut self,
        key: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }
}

/// A child process speaking MCP on stdin/stdout.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StdioSpec {
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for it, on top of a small safe inherited set. Values are
    /// treated as secrets (they often hold API keys).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Secret>,
    /// Its working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Inherit the whole parent environment instead of the safe set (operator opt-in).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inherit_env: bool,
}

impl StdioSpec {
    /// A spec running `command` with `args`.
    pub fn new(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
            inherit_env: false,
        }
    }
}

/// A streamable HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct HttpSpec {
    /// The endpoint (`http` or `https`).
    pub url: Url,
    /// Headers sent with every request. Values are secrets (they often grant access).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
}

impl HttpSpec {
    /// A spec for `url` with no headers.
    pub fn new(url: Url) -> Self {
        Self {
            url,
            headers: BTreeMap::new(),
        }
    }
}

/// How to authenticate to an HTTP server.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AuthSpec {
    /// Extra headers (secret values).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
    /// A bearer token (`bearer_token` or `bearer_token_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bearer: Option<SecretSource>,
    /// OAuth2 client credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth_client_credentials: Option<OAuthClientCredentials>,
    /// A user's OAuth login (authorization code with PKCE): the `oauth` table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthLogin>,
    /// Enterprise-managed authorization (SEP-990): the `enterprise` table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enterprise: Option<EnterpriseAuth>,
    /// Workload identity federation: the `workload_identity` table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_identity: Option<WorkloadIdentity>,
}

impl AuthSpec {
    /// True when no auth is configured.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
            && self.bearer.is_none()
            && self.oauth_client_credentials.is_none()
            && self.oauth.is_none()
            && self.enterprise.is_none()
            && self.workload_identity.is_none()
    }
}

/// A user's OAuth login: the authorization code grant with PKCE (S256), as the MCP
/// authorization spec asks of clients. Every field is optional: with none, the authorization
/// server is discovered from the MCP server, the client registers itself (a client ID metadata
/// document when [`client_metadata_url`](Self::client_metadata_url) is set and the server
/// supports them, else dynamic client registration), and the scope comes from the server.
///
/// The user logs in once (`mcp-agent auth login <server>`); sessions then use the stored
/// tokens and refresh them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct OAuthLogin {
    /// A client registered with the authorization server beforehand. `None`: a client ID
    /// metadata document or dynamic client registration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The pre-registered client's secret (`client_secret` or `client_secret_env`), for a
    /// confidential client. `None`: a public client (`token_endpoint_auth_method` `none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretSource>,
    /// The HTTPS URL of this client's metadata document (SEP-991): used as the client id when
    /// the authorization server supports client ID metadata documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<Url>,
    /// The scopes to ask for. `None`: the `scope` of the server's `WWW-Authenticate`
    /// challenge, else the protected resource's `scopes_supported`, else no scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// The RFC 8707 resource indicator. `None`: the protected resource's identifier from its
    /// metadata, else the server's URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// How the client authenticates at the token endpoint (`none`, `client_secret_basic`,
    /// `client_secret_post`). `None`: `none` for a public client, else what the metadata
    /// supports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<TokenEndpointAuthMethod>,
    /// Where the browser is sent back after the login (a loopback `http` URL or an `https`
    /// one, as registered for a pre-registered client). `None`: a loopback URL on a free port,
    /// `http://127.0.0.1:<port>/callback`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<Url>,
    /// With a client secret: authorization servers (issuer URLs) the secret may go to besides
    /// one on the MCP server's own host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_issuers: Vec<Url>,
    /// DPoP (RFC 9449) sender-constrained tokens (`dpop`). Default: bearer tokens only.
    #[serde(skip_serializing_if = "DpopMode::is_off")]
    pub dpop: DpopMode,
}

/// Whether a client asks for DPoP-bound tokens (RFC 9449): `dpop = false | true | "preferred"`.
///
/// With DPoP, every token request and every request to the MCP server carries a proof signed
/// by a key of the client's (ES256), so a stolen access token is useless without that key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DpopMode {
    /// Bearer tokens only (`false`, the default).
    #[default]
    Off,
    /// DPoP-bound tokens only (`true`): an authorization server issuing a bearer token is an
    /// error.
    Required,
    /// DPoP when the authorization server binds the token, else bearer (`"preferred"`).
    Preferred,
}

impl DpopMode {
    /// True for [`DpopMode::Off`].
    pub fn is_off(&self) -> bool {
        *self == Self::Off
    }
}

impl Serialize for DpopMode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Off => serializer.serialize_bool(false),
            Self::Required => serializer.serialize_bool(true),
            Self::Preferred => serializer.serialize_str("preferred"),
        }
    }
}

/// OAuth2 client-credentials grant settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct OAuthClientCredentials {
    /// The token endpoint. `None`: discover it from the server (RFC 9728, RFC 8414).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_url: Option<Url>,
    /// The client id.
    pub client_id: String,
    /// The client secret (`client_secret` or `client_secret_env`).
    pub client_secret: SecretSource,
    /// Requested scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// RFC 8707 resource indicator (audience) of every token request. `None`: the protected
    /// resource's identifier from its metadata, else, with the token endpoint discovered, the
    /// server's URL (without fragment); with `token_url` set and no metadata, none is sent (some
    /// authorization servers refuse the parameter). Either way a server's token is never
    /// another server's, even on one token endpoint and client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// How the client authenticates at the token endpoint. `None`: what the metadata supports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<TokenEndpointAuthMethod>,
    /// Authorization servers (issuer URLs) that discovery may use besides one on the MCP
    /// server's own host. Without `token_url`, the token endpoint is discovered from what the
    /// MCP server names; the client credential is sent only to an issuer on the MCP server's
    /// host or listed here (and only to a token endpoint on that issuer's host).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_issuers: Vec<Url>,
    /// DPoP (RFC 9449) sender-constrained tokens (`dpop`). Default: bearer tokens only.
    #[serde(skip_serializing_if = "DpopMode::is_off")]
    pub dpop: DpopMode,
}

/// Client authentication at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenEndpointAuthMethod {
    /// HTTP Basic with id and secret.
    ClientSecretBasic,
    /// Id and secret in the form body.
    ClientSecretPost,
    /// A JWT signed with the client's private key (RFC 7523).
    PrivateKeyJwt,
    /// No client authentication: a public client (only for a user's login, [`OAuthLogin`]).
    None,
}

/// Which of a server's tools to use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ToolFilter {
    /// If non-empty, only these tools (globs over the server's tool names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Never these tools (globs); wins over `allow`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// Always exposed to the model as first-class tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
}

impl ToolFilter {
    /// True when nothing is filtered or pinned.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.pinned.is_empty()
    }

    /// True when the server's tool `name` may be used: it matches an `allow` glob (or `allow`
    /// is empty) and no `deny` glob. In globs, `*` matches any run of characters and `?` one.
    ///
    /// ```
    /// use mcp_config::ToolFilter;
    ///
    /// let mut filter = ToolFilter::default();
    /// filter.allow = vec!["get_*".into(), "search".into()];
    /// filter.deny = vec!["get_secret*".into()];
    /// assert!(filter.allows("get_issue"));
    /// assert!(filter.allows("search"));
    /// assert!(!filter.allows("delete_issue"));
    /// assert!(!filter.allows("get_secret_key"));
    /// ```
    pub fn allows(&self, name: &str) -> bool {
        let allowed =
            self.allow.is_empty() || self.allow.iter().any(|g| crate::glob::matches(g, name));
        allowed && !self.deny.iter().any(|g| crate::glob::matches(g, name))
    }

    /// True when `name` is pinned (always exposed to the model as a first-class tool).
    pub fn is_pinned(&self, name: &str) -> bool {
        self.pinned.iter().any(|p| p == name)
    }
}

mod secs {
    use std::time::Duration;

    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

mod opt_secs {
    use std::time::Duration;

    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}
