//! Writing a run's MCP selection into `RunInput.metadata["mcp"]`, typed.

use serde_json::{Map, Value};

use crate::config::PartialFailure;

/// The key of a run's MCP selection in `RunInput.metadata`.
pub const MCP_METADATA_KEY: &str = "mcp";

/// A run's MCP selection, built in code and written as `RunInput.metadata["mcp"]` — the
/// document that [`RunSelection::from_run_input`](crate::RunSelection::from_run_input)
/// reads back (and validates) when the run opens.
///
/// ```
/// use agent_core::RunInput;
/// use mcp_config::{McpSelection, PartialFailure, RunSelection, ServerRef};
/// use serde_json::json;
///
/// let input = RunInput::new("conversation-7", "file the bug").with_meta(
///     "mcp",
///     McpSelection::servers(["github"])
///         .inline(json!({"name": "tenant", "url": "https://tenant.example.com/mcp"}))
///         .with_partial_failure(PartialFailure::SkipUnavailable),
/// );
/// let selection = RunSelection::from_run_input(&input)?;
/// assert_eq!(selection.servers.as_ref().unwrap()[0], ServerRef::Named("github".into()));
/// assert_eq!(selection.partial_failure, Some(PartialFailure::SkipUnavailable));
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpSelection {
    servers: Option<Vec<Value>>,
    partial_failure: Option<PartialFailure>,
    allow_mcp: Option<bool>,
}

impl McpSelection {
    /// Every configured server (the same as no `mcp` metadata).
    pub fn all() -> Self {
        Self::default()
    }

    /// No server at all.
    pub fn none() -> Self {
        Self {
            servers: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// Configured servers, by name.
    pub fn servers(names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::none().and(names)
    }

    /// Adds configured servers by name.
    #[must_use]
    pub fn and(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let list = self.servers.get_or_insert_with(Vec::new);
        list.extend(names.into_iter().map(|n| Value::String(n.into())));
        self
    }

    /// Adds a caller-supplied server spec for this run only (the JSON form of a server
    /// entry). It is validated when the run opens, with the operator's safe defaults for
    /// inline specs.
    #[must_use]
    pub fn inline(mut self, spec: Value) -> Self {
        self.servers.get_or_insert_with(Vec::new).push(spec);
        self
    }

    /// Overrides the configured partial-failure policy for this run.
    #[must_use]
    pub fn with_partial_failure(mut self, policy: PartialFailure) -> Self {
        self.partial_failure = Some(policy);
        self
    }

    /// The run's MCP opt-in (`false` turns MCP off for the run; with the operator's
    /// `require_allow_mcp`, only `true` turns it on).
    #[must_use]
    pub fn with_allow_mcp(mut self, allow: bool) -> Self {
        self.allow_mcp = Some(allow);
        self
    }
}

impl From<McpSelection> for Value {
    fn from(selection: McpSelection) -> Self {
        let mut map = Map::new();
        if let Some(servers) = selection.servers {
            map.insert("servers".into(), Value::Array(servers));
        }
        if let Some(policy) = selection.partial_failure {
            map.insert(
                "partial_failure".into(),
                serde_json::to_value(policy).unwrap_or(Value::Null),
            );
        }
        if let Some(allow) = selection.allow_mcp {
            map.insert("allow_mcp".into(), Value::Bool(allow));
        }
        Value::Object(map)
    }
}
