//! Which of the catalog's tools a downstream client may see and call (opt-in).

use std::collections::BTreeSet;

use agent_core::ToolDescriptor;

/// Which tools are served. Exposure is opt-in: nothing is served unless named here, or unless
/// the tool claims to be read-only. A tool that is not exposed is neither listed nor callable
/// (a call is refused before it reaches the dispatcher).
///
/// ```
/// use agent_core::{ToolAnnotations, ToolDescriptor};
/// use mcp_serve::Exposure;
///
/// let search = ToolDescriptor::new("search", Default::default());
/// let stats = ToolDescriptor::new("stats", Default::default())
///     .with_annotations(ToolAnnotations::read_only());
///
/// let only = Exposure::only(["search"]);
/// assert!(only.allows(&search));
/// assert!(!only.allows(&stats));
///
/// let read_only = Exposure::read_only();
/// assert!(!read_only.allows(&search));
/// assert!(read_only.allows(&stats));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exposure {
    /// Exactly these tools, by the catalog's names (a name the catalog does not list serves
    /// nothing).
    Only(BTreeSet<String>),
    /// Every tool whose annotations claim `readOnlyHint: true`. The hint is the tool's own
    /// claim: choose this only for catalogs whose hints you trust.
    ReadOnly,
}

impl Exposure {
    /// Exactly the tools named.
    pub fn only(names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::Only(names.into_iter().map(Into::into).collect())
    }

    /// Every tool annotated read-only.
    pub fn read_only() -> Self {
        Self::ReadOnly
    }

    /// True when `tool` is served.
    pub fn allows(&self, tool: &ToolDescriptor) -> bool {
        match self {
            Self::Only(names) => names.contains(&tool.name),
            Self::ReadOnly => tool.annotations.read_only_hint == Some(true),
        }
    }
}
