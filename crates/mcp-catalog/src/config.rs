//! How the catalog shows tools to the model.

use agent_core::IdentityRules;
use serde::{Deserialize, Serialize};

use crate::search::RankingConfig;

/// Which MCP tools the model sees as first-class tools.
///
/// ```
/// use mcp_catalog::Exposure;
/// let auto: Exposure = serde_json::from_str(r#"{"auto": {"max_tools": 20, "max_schema_bytes": 16384}}"#).unwrap();
/// assert_eq!(auto, Exposure::Auto { max_tools: 20, max_schema_bytes: 16384 });
/// assert_eq!(serde_json::from_str::<Exposure>(r#""eager""#).unwrap(), Exposure::Eager);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Exposure {
    /// Only `mcp_search_tools` and `mcp_call_tool` (plus pinned and promoted tools). The default:
    /// the model's context holds two small schemas instead of hundreds.
    #[default]
    Lazy,
    /// Every tool first-class, with its input schema exactly as the server sent it.
    Eager,
    /// Eager while the catalog is small, lazy once it has more than `max_tools` tools or their
    /// input schemas add up to more than `max_schema_bytes` bytes of JSON.
    Auto {
        /// The most tools still shown eagerly.
        max_tools: usize,
        /// The most schema bytes still shown eagerly.
        max_schema_bytes: usize,
    },
}

impl Exposure {
    /// [`Exposure::Auto`] with the default thresholds: 32 tools, 32 KiB of schemas.
    pub fn auto() -> Self {
        Self::Auto {
            max_tools: 32,
            max_schema_bytes: 32 * 1024,
        }
    }
}

/// The catalog's settings.
///
/// ```
/// use mcp_catalog::{CatalogConfig, Exposure};
/// let config = CatalogConfig::default()
///     .with_exposure(Exposure::auto())
///     .with_pinned(["github__create_issue"]);
/// assert_eq!(config.default_limit, 10);
/// assert_eq!(config.max_limit, 50);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CatalogConfig {
    /// Lazy, eager or automatic exposure.
    pub exposure: Exposure,
    /// Tools always shown first-class, by external (`server__tool`) or model-facing name.
    /// Names that match no tool are ignored (a server may be unavailable for a run).
    pub pinned: Vec<String>,
    /// How many tools a run may promote to first-class (0 turns promotion off).
    pub max_promoted: usize,
    /// Results of `mcp_search_tools` when the model gives no `limit`.
    pub default_limit: usize,
    /// The most results one search returns, whatever `limit` says.
    pub max_limit: usize,
    /// The ranking constants.
    pub ranking: RankingConfig,
    /// Bounds on each tool definition a server lists.
    pub tool_limits: ToolLimits,
    /// Which servers' tools the model may see (`[policy]` `allow` / `deny`, matched against
    /// each server's identity and the tool's remote name): a tool they refuse is hidden
    /// ([`CatalogTool::is_hidden`](crate::CatalogTool::is_hidden)). A governed layer with the
    /// same rules denies calls to it.
    pub identity_rules: IdentityRules,
    /// Bounds on the resources, templates, prompts and skills kept per server
    /// ([`Catalog::set_features`](crate::Catalog::set_features)).
    pub feature_limits: crate::FeatureLimits,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            exposure: Exposure::Lazy,
            pinned: Vec::new(),
            max_promoted: 16,
            default_limit: 10,
            max_limit: 50,
            ranking: RankingConfig::default(),
            tool_limits: ToolLimits::default(),
            identity_rules: IdentityRules::default(),
            feature_limits: crate::FeatureLimits::default(),
        }
    }
}

impl CatalogConfig {
    /// Sets the exposure mode.
    #[must_use]
    pub fn with_exposure(mut self, exposure: Exposure) -> Self {
        self.exposure = exposure;
        self
    }

    /// Sets the pinned tools.
    #[must_use]
    pub fn with_pinned<S: Into<String>>(mut self, pinned: impl IntoIterator<Item = S>) -> Self {
        self.pinned = pinned.into_iter().map(Into::into).collect();
        self
    }

    /// Sets how many tools a run may promote.
    #[must_use]
    pub fn with_max_promoted(mut self, max: usize) -> Self {
        self.max_promoted = max;
        self
    }

    /// Sets the identity rules that hide tools from the model.
    ///
    /// ```
    /// use agent_core::{IdentityRules, Rule};
    /// use mcp_catalog::CatalogConfig;
    ///
    /// let config = CatalogConfig::default()
    ///     .with_identity_rules(IdentityRules::default().allow(Rule::new("acme/*", "*")));
    /// assert_eq!(config.identity_rules.allow.len(), 1);
    /// ```
    #[must_use]
    pub fn with_identity_rules(mut self, rules: IdentityRules) -> Self {
        self.identity_rules = rules;
        self
    }

    /// Sets the bounds on tool definitions.
    #[must_use]
    pub fn with_tool_limits(mut self, limits: ToolLimits) -> Self {
        self.tool_limits = limits;
        self
    }

    /// Sets the bounds on the resources, templates, prompts and skills kept per server.
    #[must_use]
    pub fn with_feature_limits(mut self, limits: crate::FeatureLimits) -> Self {
        self.feature_limits = limits;
        self
    }
}

/// Bounds on what one tool definition of a server may hold: a server chooses every byte of it.
///
/// A tool whose name or schema is out of bounds is **left out** of the catalog — the server's
/// other tools stay usable — and reported by [`Catalog::skipped_tools`](crate::Catalog::skipped_tools)
/// with the server, the tool (escaped and cut) and the limit. Texts are **cut** instead: a
/// description or title is kept up to its bound, without control characters (see
/// [`sanitize::clean`](crate::sanitize::clean)).
///
/// ```
/// use mcp_catalog::ToolLimits;
///
/// let limits = ToolLimits::default();
/// assert_eq!(limits.max_name_chars, 128);
/// assert_eq!(limits.max_description_bytes, 4 * 1024);
/// assert_eq!(limits.max_schema_bytes, 64 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolLimits {
    /// The longest tool name, in characters (the MCP specification's 128). Names that are
    /// longer, or that hold control or bidirectional-override characters, leave the tool out.
    pub max_name_chars: usize,
    /// The longest description kept, in bytes (default 4 KiB); a longer one is cut. Control
    /// characters other than `\n` and `\t` are removed.
    pub max_description_bytes: usize,
    /// The longest title kept, in bytes (default 256); a longer one is cut. Control characters
    /// are removed.
    pub max_title_bytes: usize,
    /// The largest input or output schema, in bytes of JSON (default 64 KiB); a larger one
    /// leaves the tool out.
    pub max_schema_bytes: usize,
    /// The deepest nesting of objects and arrays in a schema (default 32); a deeper one leaves
    /// the tool out.
    pub max_schema_depth: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_name_chars: 128,
            max_description_bytes: 4 * 1024,
            max_title_bytes: 256,
            max_schema_bytes: 64 * 1024,
            max_schema_depth: 32,
        }
    }
}
