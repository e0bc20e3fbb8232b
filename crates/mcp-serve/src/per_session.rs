//! Tools opened for each downstream session (a gateway: one upstream run per session), and
//! the count of sessions whose tools are still open.

use std::sync::Arc;

use agent_core::{ToolCall, ToolCatalog, ToolDispatcher};
use async_trait::async_trait;

use crate::downstream::Downstream;
use crate::features::{Offered, SessionFeatures};
use crate::list_changes::ToolListChanges;

/// Why a session's tools could not be opened: shown to the downstream client, so it must
/// hold no secret.
pub type OpenError = Box<dyn std::error::Error + Send + Sync>;

/// The tools one downstream session uses, opened for it by an [`OpenTools`] (for a gateway:
/// a governed run over the upstream servers) and closed when the session ends. Their calls
/// may run concurrently: a session's calls, or (lent by a [`PooledTools`](crate::PooledTools))
/// those of several stateless requests.
///
/// ```
/// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use mcp_serve::SessionTools;
///
/// struct Upstream;
/// impl ToolCatalog for Upstream {
///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
/// }
/// #[async_trait::async_trait]
/// impl ToolDispatcher for Upstream {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Err(ToolError::unknown_tool(call.name, Vec::new()))
///     }
/// }
/// #[async_trait::async_trait]
/// impl SessionTools for Upstream {
///     async fn close(&self) { /* close the upstream sessions */ }
/// }
/// ```
#[async_trait]
pub trait SessionTools: ToolCatalog + ToolDispatcher + Send + Sync + 'static {
    /// Raised when this session's tool list changes: the session then sends
    /// `notifications/tools/list_changed` to its client. Default none.
    fn list_changes(&self) -> Option<ToolListChanges> {
        None
    }

    /// The upstream `call` goes to (for a gateway: the server of the tool it runs), if
    /// known: requests for user input that upstream sends while the call runs
    /// ([`Downstream::elicit_from`]) then ride this call's stream. Default none.
    fn origin(&self, call: &ToolCall) -> Option<String> {
        let _ = call;
        None
    }

    /// The tools the session promoted so far (ids its [`OpenTools`] can promote again, in
    /// promotion order): a fleet keeps them with the session, and a replica restoring it
    /// gives them to the opener ([`Downstream::promoted`]). Default none.
    fn promoted(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the tools can serve another request as if they were opened for it: a pool
    /// ([`PooledTools`](crate::PooledTools)) hands them out again only then, and closes them
    /// otherwise. False once something they hold failed or closed (an upstream process that
    /// died, a connection that broke), or once a request changed what the next one would see
    /// (for a gateway: a tool it promoted). Default true.
    fn reusable(&self) -> bool {
        true
    }

    /// What the tools offer beyond tools (resources, prompts, completions), if anything: the
    /// session serves it, within its checks. Default none.
    fn features(&self) -> Option<&dyn SessionFeatures> {
        None
    }

    /// Closes what was opened for the session (upstream sessions, child processes). Called
    /// once, when the downstream session ends or the server shuts down.
    async fn close(&self) {}
}

/// Opens the tools of each new downstream session (see [`ToolServer::per_session`]).
///
/// [`ToolServer::per_session`]: crate::ToolServer::per_session
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
/// use mcp_serve::{OpenError, OpenTools, SessionTools};
///
/// struct Fresh;
/// impl ToolCatalog for Fresh {
///     fn tools(&self) -> Vec<ToolDescriptor> { Vec::new() }
/// }
/// #[async_trait::async_trait]
/// impl ToolDispatcher for Fresh {
///     async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
///         Err(ToolError::unknown_tool(call.name, Vec::new()))
///     }
/// }
/// impl SessionTools for Fresh {}
///
/// struct Opener;
/// #[async_trait::async_trait]
/// impl OpenTools for Opener {
///     async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
///         Ok(Arc::new(Fresh))
///     }
/// }
/// ```
#[async_trait]
pub trait OpenTools: Send + Sync + 'static {
    /// Opens one session's tools. An error is shown to the client (on listing, and as the
    /// `isError` result of each call), and the session goes on without tools.
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError>;

    /// Opens one session's tools, which may reach the session's client through `downstream`
    /// (a gateway forwards its upstream servers' requests for user input there). The default
    /// ignores it and calls [`open`](Self::open).
    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        let _ = downstream;
        self.open().await
    }

    /// A digest of what the tools opened now reach (for a gateway: its upstream servers'
    /// specs), which changes whenever that does: [`PooledTools`](crate::PooledTools) keys the
    /// tools it keeps by it, with the principal, so tools opened before a change are not handed
    /// out after it. Default 0: they always reach the same.
    fn upstream_digest(&self) -> u64 {
        0
    }

    /// What the tools this opener opens may offer beyond tools: a session declares it in its
    /// capabilities before its own tools are open (at `initialize`, `server/discover`), then
    /// serves what they offer (empty listings where they offer nothing). Default nothing.
    fn offered(&self) -> Offered {
        Offered::default()
    }

    /// Closes what the opener keeps across sessions (a pool's idle tools). Called once by
    /// [`HttpServer::shutdown`](crate::HttpServer::shutdown), after every session's tools were
    /// closed; an opener serving several endpoints is shut down with the first. Default
    /// nothing.
    async fn shutdown(&self) {}
}
