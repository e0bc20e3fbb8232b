//! Per-run selection: which servers one run uses, from `RunInput.metadata["mcp"]`.

use std::time::Duration;

use agent_core::{JsonObject, RunInput};
use serde_json::Value;

use crate::config::PartialFailure;
use crate::parse::did_you_mean;
use crate::parse::{Dialect, as_bool, as_str, expect_object, field, parse_server, reject_unknown};
use crate::path::{JsonPath, Problems};
use crate::safety::check_inline;
use crate::{Config, ConfigError, DEFAULT_CONNECT_TIMEOUT, ProblemKind, ServerSpec, SpecOrigin};

/// The keys of `metadata["mcp"]`.
const MCP_FIELDS: &[&str] = &["servers", "partial_failure", "allow_mcp"];

/// What one run asks for in `RunInput.metadata["mcp"]`.
///
/// ```json
/// {"mcp": {
///     "servers": ["github", {"name": "tenant-search", "url": "https://tenant.example.com/mcp"}],
///     "partial_failure": "skip_unavailable",
///     "allow_mcp": true
/// }}
/// ```
///
/// `servers` omitted (or `null`): every configured server. `[]`: none. A string names a
/// configured server; an object is an inline spec for this run only
/// ([`SpecOrigin::Inline`], subject to the operator's [`InlinePolicy`](crate::InlinePolicy)).
/// No `${VAR}` expansion happens in a run's metadata.
///
/// ```
/// use agent_core::RunInput;
/// use mcp_config::{RunSelection, ServerRef};
/// use serde_json::json;
///
/// let input = RunInput::new("s1", "hi").with_meta(
///     "mcp",
///     json!({"servers": ["github", {"name": "t", "url": "https://t.example/mcp"}]}),
/// );
/// let selection = RunSelection::from_run_input(&input)?;
/// let servers = selection.servers.unwrap();
/// assert_eq!(servers[0], ServerRef::Named("github".into()));
/// assert!(matches!(&servers[1], ServerRef::Inline(spec) if spec.name == "t"));
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RunSelection {
    /// The servers asked for; `None`: every configured server.
    pub servers: Option<Vec<ServerRef>>,
    /// Overrides the configured [`PartialFailure`] policy for this run.
    pub partial_failure: Option<PartialFailure>,
    /// The run's MCP opt-in: `Some(false)` turns MCP off for the run; when the operator sets
    /// `require_allow_mcp`, only `Some(true)` turns it on.
    pub allow_mcp: Option<bool>,
}

/// One entry of a run's server list.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerRef {
    /// A configured server, by name.
    Named(String),
    /// A spec supplied by the caller for this run only (origin [`SpecOrigin::Inline`]).
    Inline(Box<ServerSpec>),
}

impl RunSelection {
    /// Every configured server (the selection of a run without `metadata["mcp"]`).
    pub fn all() -> Self {
        Self::default()
    }

    /// Configured servers by name.
    pub fn names(names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            servers: Some(
                names
                    .into_iter()
                    .map(|n| ServerRef::Named(n.into()))
                    .collect(),
            ),
            ..Self::default()
        }
    }

    /// The selection in a run's metadata.
    pub fn from_run_input(input: &RunInput) -> Result<Self, ConfigError> {
        Self::from_metadata(&input.metadata)
    }

    /// The selection in `metadata["mcp"]`; paths of problems start with `metadata.mcp`.
    /// Inline specs are parsed and validated here; whether the operator allows them is
    /// checked by [`Config::select`].
    pub fn from_metadata(metadata: &JsonObject) -> Result<Self, ConfigError> {
        let mut p = Problems::new();
        let mut selection = Self::default();
        let root = JsonPath::root().key("metadata").key("mcp");
        let Some(mcp) = metadata.get("mcp").filter(|v| !v.is_null()) else {
            return Ok(selection);
        };
        let Some(mcp) = expect_object(mcp, &root, "`mcp`", &mut p) else {
            return p.finish(selection);
        };
        reject_unknown(mcp, MCP_FIELDS, &root, &mut p);
        if let Some(v) = field(mcp, "servers") {
            selection.servers = parse_refs(v, &root.key("servers"), &mut p);
        }
        if let Some(v) = field(mcp, "partial_failure") {
            selection.partial_failure =
                PartialFailure::from_value(v, &root.key("partial_failure"), &mut p);
        }
        if let Some(v) = field(mcp, "allow_mcp") {
            selection.allow_mcp = as_bool(v, &root.key("allow_mcp"), &mut p);
        }
        p.finish(selection)
    }
}

fn parse_refs(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<ServerRef>> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            ProblemKind::WrongType,
            format!(
                "must be an array of server names and inline servers, found {}",
                crate::parse::type_name(value)
            ),
        );
        return None;
    };
    let mut refs = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        match item {
            Value::String(name) => refs.push(ServerRef::Named(name.clone())),
            Value::Object(_) => {
                if let Some(spec) =
                    parse_server(item, &at, Dialect::Native, None, SpecOrigin::Inline, p)
                {
                    refs.push(ServerRef::Inline(Box::new(spec)));
                }
            }
            other => {
                as_str(other, &at, p);
            }
        }
    }
    Some(refs)
}

/// Run-wide options that come with a run's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The run's partial-failure policy (its override, else the configured one).
    pub partial_failure: PartialFailure,
    /// Whether MCP is on for this run. When `false` the run's server list is empty.
    pub allow_mcp: bool,
    /// The connect timeout of servers that set none (already filled into resolved specs).
    pub connect_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            partial_failure: PartialFailure::default(),
            allow_mcp: true,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl RunOptions {
    /// Sets the partial-failure policy.
    #[must_use]
    pub fn with_partial_failure(mut self, policy: PartialFailure) -> Self {
        self.partial_failure = policy;
        self
    }

    /// Turns MCP on or off for the run (off: the resolver returns no server).
    #[must_use]
    pub fn with_allow_mcp(mut self, allow: bool) -> Self {
        self.allow_mcp = allow;
        self
    }
}

/// The servers of one run and its options: what a [`ServerResolver`](crate::ServerResolver)
/// returns.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResolvedRun {
    /// The run's servers, in selection order, uniquely named.
    pub servers: Vec<ServerSpec>,
    /// The run's options.
    pub options: RunOptions,
}

impl ResolvedRun {
    /// A resolved run.
    pub fn new(servers: Vec<ServerSpec>, options: RunOptions) -> Self {
        Self { servers, options }
    }
}

impl Config {
    /// The servers `selection` asks for (ignoring its `allow_mcp` and `partial_failure`; see
    /// [`Config::resolve`] for the whole run).
    ///
    /// Named entries must be configured; inline specs must not reuse a configured name and
    /// must pass the operator's [`InlinePolicy`](crate::InlinePolicy); no name may appear
    /// twice. Every problem is reported at once, at `metadata.mcp.servers[i]`. Specs without
    /// a connect timeout get [`Config::connect_timeout`].
    ///
    /// ```
    /// use mcp_config::{Config, ProblemKind, RunSelection};
    ///
    /// let config = Config::from_env_vars([(
    ///     "MCP_AGENT__SERVERS",
    ///     r#"[{"name": "git", "command": "git-mcp"}, {"name": "web", "url": "https://web.example/mcp"}]"#,
    /// )])?;
    /// assert_eq!(config.select(&RunSelection::all())?.len(), 2);
    /// assert_eq!(config.select(&RunSelection::names(["web"]))?[0].name, "web");
    /// assert!(config.select(&RunSelection::names(Vec::<String>::new()))?.is_empty());
    ///
    /// let err = config.select(&RunSelection::names(["gti"])).unwrap_err();
    /// assert_eq!(err.problems()[0].kind, ProblemKind::UnknownServer);
    /// assert!(err.to_string().contains("did you mean `git`?"));
    /// # Ok::<(), mcp_config::ConfigError>(())
    /// ```
    pub fn select(&self, selection: &RunSelection) -> Result<Vec<ServerSpec>, ConfigError> {
        let Some(refs) = &selection.servers else {
            return Ok(self
                .servers
                .iter()
                .map(|s| self.with_defaults(s.clone()))
                .collect());
        };
        let mut p = Problems::new();
        let root = JsonPath::root().key("metadata").key("mcp").key("servers");
        let mut out: Vec<ServerSpec> = Vec::with_capacity(refs.len());
        for (i, r) in refs.iter().enumerate() {
            let at = root.index(i);
            let (spec, name_at) = match r {
                ServerRef::Named(name) => match self.server(name) {
                    Some(spec) => (spec.clone(), at.clone()),
                    None => {
                        p.push(
                            &at,
                            ProblemKind::UnknownServer,
                            format!(
                                "server `{name}` is not configured{}",
                                did_you_mean(name, self.servers.iter().map(|s| s.name.as_str()))
                            ),
                        );
                        continue;
                    }
                },
                ServerRef::Inline(spec) => {
                    let name_at = at.key("name");
                    let mut spec = (**spec).clone();
                    spec.origin = SpecOrigin::Inline;
                    spec.allow_internal_addresses = !self.inline.ssrf_guard;
                    if self.server(&spec.name).is_some() {
                        p.push(
                            &name_at,
                            ProblemKind::ShadowsConfigured,
                            format!(
                                "inline server `{}` has the name of a configured server; choose another name",
                                spec.name
                            ),
                        );
                        continue;
                    }
                    check_inline(&spec, &self.inline, &at, &mut p);
                    (spec, name_at)
                }
            };
            if out.iter().any(|s| s.name == spec.name) {
                p.push(
                    &name_at,
                    ProblemKind::DuplicateName,
                    format!("server `{}` is selected twice in this run", spec.name),
                );
                continue;
            }
            out.push(self.with_defaults(spec));
        }
        p.finish(out)
    }

    /// Configured servers by name (a factory call that selects explicitly).
    pub fn select_names(
        &self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Vec<ServerSpec>, ConfigError> {
        self.select(&RunSelection::names(names))
    }

    /// A whole run: parses `input.metadata["mcp"]`, applies `allow_mcp` (and the
    /// operator's `require_allow_mcp`) and the `partial_failure` override, and selects the
    /// servers. This is what the [`DefaultResolver`](crate::DefaultResolver) does.
    ///
    /// ```
    /// use agent_core::RunInput;
    /// use mcp_config::{Config, PartialFailure};
    /// use serde_json::json;
    ///
    /// let config = Config::from_env_vars([(
    ///     "MCP_AGENT__SERVERS",
    ///     r#"[{"name": "git", "command": "git-mcp"}]"#,
    /// )])?;
    /// let input = RunInput::new("s1", "hi").with_meta(
    ///     "mcp",
    ///     json!({"servers": ["git"], "partial_failure": "skip_unavailable"}),
    /// );
    /// let run = config.resolve(&input)?;
    /// assert_eq!(run.servers[0].name, "git");
    /// assert_eq!(run.options.partial_failure, PartialFailure::SkipUnavailable);
    /// # Ok::<(), mcp_config::ConfigError>(())
    /// ```
    pub fn resolve(&self, input: &RunInput) -> Result<ResolvedRun, ConfigError> {
        let selection = RunSelection::from_run_input(input)?;
        self.resolve_selection(&selection)
    }

    /// [`Config::resolve`] for a selection already parsed (or built in code).
    pub fn resolve_selection(&self, selection: &RunSelection) -> Result<ResolvedRun, ConfigError> {
        let allow_mcp = match selection.allow_mcp {
            Some(allow) => allow,
            None => !self.require_allow_mcp,
        };
        let options = RunOptions {
            partial_failure: selection.partial_failure.unwrap_or(self.partial_failure),
            allow_mcp,
            connect_timeout: self.connect_timeout,
        };
        let servers = if allow_mcp {
            self.select(selection)?
        } else {
            Vec::new()
        };
        Ok(ResolvedRun { servers, options })
    }

    fn with_defaults(&self, mut spec: ServerSpec) -> ServerSpec {
        spec.connect_timeout.get_or_insert(self.connect_timeout);
        spec
    }
}
