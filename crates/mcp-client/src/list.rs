//! Listing a server's tools, page by page, within bounds the server cannot move.

use std::collections::HashSet;

use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient, ServiceError};

/// Bounds on one listing of a server's tools (`tools/list` over all its pages).
///
/// A server chooses how many pages it returns, what each holds and which cursor comes next;
/// without bounds one that repeats its cursor, cycles, or returns ever-new pages keeps the
/// client asking (and growing) until the connect timeout. The listing stops at the first page
/// that breaks a bound, with [`SessionError::ListLimit`](crate::SessionError::ListLimit) naming
/// the server and the limit. A cursor seen before always stops it (a cycle never ends).
///
/// ```
/// use mcp_client::ListLimits;
///
/// let limits = ListLimits::default();
/// assert_eq!((limits.max_pages, limits.max_tools, limits.max_bytes), (100, 10_000, 32 << 20));
/// let small = ListLimits::default().with_max_pages(10).with_max_tools(500);
/// assert_eq!(small.max_pages, 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListLimits {
    /// The most pages one listing reads (default 100).
    pub max_pages: usize,
    /// The most tools one server may list (default 10,000).
    pub max_tools: usize,
    /// The most bytes of tool definitions one server may list, counted as their JSON
    /// (default 32 MiB).
    pub max_bytes: usize,
}

impl Default for ListLimits {
    fn default() -> Self {
        Self {
            max_pages: 100,
            max_tools: 10_000,
            max_bytes: 32 * 1024 * 1024,
        }
    }
}

impl ListLimits {
    /// Sets the most pages one listing reads (at least 1).
    #[must_use]
    pub fn with_max_pages(mut self, max: usize) -> Self {
        self.max_pages = max.max(1);
        self
    }

    /// Sets the most tools one server may list.
    #[must_use]
    pub fn with_max_tools(mut self, max: usize) -> Self {
        self.max_tools = max;
        self
    }

    /// Sets the most bytes of tool definitions one server may list.
    #[must_use]
    pub fn with_max_bytes(mut self, max: usize) -> Self {
        self.max_bytes = max;
        self
    }
}

/// The bound a server's tool listing broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListLimit {
    /// A page named a cursor the listing had already followed: the pages form a cycle.
    #[error("page {page} repeats an earlier cursor, so the pages would never end")]
    RepeatedCursor {
        /// The page (counted from 1) whose `nextCursor` was seen before.
        page: usize,
    },
    /// The server had more pages than [`ListLimits::max_pages`].
    #[error("more than {limit} pages (the page limit)")]
    Pages {
        /// The limit.
        limit: usize,
    },
    /// The server listed more tools than [`ListLimits::max_tools`].
    #[error("more than {limit} tools (the tool limit)")]
    Tools {
        /// The limit.
        limit: usize,
    },
    /// A listing of resources, templates or prompts held more entries than
    /// [`ListLimits::max_tools`] (the same bound as tools).
    #[error("more than {limit} entries (the entry limit)")]
    Entries {
        /// The limit.
        limit: usize,
    },
    /// The server's tool definitions exceed [`ListLimits::max_bytes`].
    #[error("more than {} of tool definitions (the size limit)", bytes(*limit))]
    Bytes {
        /// The limit, in bytes.
        limit: usize,
    },
}

fn bytes(n: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

/// Why a listing failed.
pub(crate) enum ListError {
    /// The request failed.
    Service(ServiceError),
    /// The server broke a bound.
    Limit(ListLimit),
}

/// Lists every tool of `peer`'s server, page by page, within `limits`. An empty `nextCursor`
/// ends the listing like an absent one (some servers send `""` on their last page). rmcp's
/// own `list_all_tools` has no such bounds (docs/upstream.md#rmcp-list-all-unbounded).
pub(crate) async fn list_all_tools(
    peer: &Peer<RoleClient>,
    limits: ListLimits,
) -> Result<Vec<Tool>, ListError> {
    let mut tools: Vec<Tool> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut bytes = 0usize;
    let mut cursor: Option<String> = None;
    let mut page = 0usize;
    loop {
        page += 1;
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let result = peer.list_tools(params).await.map_err(ListError::Service)?;
        if tools.len().saturating_add(result.tools.len()) > limits.max_tools {
            return Err(ListError::Limit(ListLimit::Tools {
                limit: limits.max_tools,
            }));
        }
        // A `Tool` always serialises.
        let page_bytes = result.next_cursor.as_ref().map_or(0, String::len)
            + agent_core::json_len(&result.tools).unwrap_or_default();
        bytes = bytes.saturating_add(page_bytes);
        if bytes > limits.max_bytes {
            return Err(ListError::Limit(ListLimit::Bytes {
                limit: limits.max_bytes,
            }));
        }
        tools.extend(result.tools);
        let Some(next) = result.next_cursor.filter(|c| !c.is_empty()) else {
            return Ok(tools);
        };
        if !seen.insert(next.clone()) {
            return Err(ListError::Limit(ListLimit::RepeatedCursor { page }));
        }
        if page >= limits.max_pages {
            return Err(ListError::Limit(ListLimit::Pages {
                limit: limits.max_pages,
            }));
        }
        cursor = Some(next);
    }
}
