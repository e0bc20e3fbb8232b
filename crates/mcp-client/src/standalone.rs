//! The low-level way to one server: a single session opened outside any run, called directly.
//!
//! Nothing governs such a session: no identity rule, policy, approval, output limit, event or
//! history — it is the protocol client and nothing more, for tools that speak to one server
//! (conformance checks, protocol tests, diagnostics). An agent's calls go through a run
//! ([`McpClient::open_runner`](crate::McpClient::open_runner)), whose sessions are reachable
//! only as read-only [`SessionView`](crate::SessionView)s and whose calls all go through the
//! run's governed layer.

use std::sync::Arc;

use mcp_config::{DEFAULT_CONNECT_TIMEOUT, Redactor, ServerSpec};
use rmcp::model::Tool;

use crate::session::SessionOptions;
use crate::{Connectors, ListLimits, Session, SessionError};

impl Session {
    /// **Low-level and ungoverned.** Opens one session to `spec`'s server outside any run —
    /// connect, initialise (`initialize` alone), list every tool page within the spec's
    /// connect timeout (default [`DEFAULT_CONNECT_TIMEOUT`]) and [`ListLimits::default`] —
    /// and returns it with its tools. Its [`call_tool`](Session::call_tool) runs a tool with
    /// no rule, policy, approval, output limit, event or history: use a run
    /// ([`McpClient::open_runner`](crate::McpClient::open_runner)) for an agent's calls.
    ///
    /// What the server chooses is still bounded and scrubbed of the spec's own secrets. The
    /// caller closes the session ([`close`](Session::close)); dropping it releases the
    /// transport too.
    ///
    /// ```no_run
    /// use mcp_client::{Connectors, Session};
    /// use mcp_config::{ServerSpec, StdioSpec, TransportSpec};
    ///
    /// # async fn run(connectors: Connectors) -> Result<(), mcp_client::SessionError> {
    /// let spec = ServerSpec::new(
    ///     "everything",
    ///     TransportSpec::Stdio(StdioSpec::new("npx", vec!["server-everything".to_owned()])),
    /// );
    /// let (session, tools) = Session::open_standalone(&connectors, spec).await?;
    /// println!("{} tools", tools.len());
    /// let result = session.call_tool("echo", Default::default()).await;
    /// session.close(std::time::Duration::from_secs(2)).await;
    /// # Ok(()) }
    /// ```
    pub async fn open_standalone(
        connectors: &Connectors,
        spec: ServerSpec,
    ) -> Result<(Arc<Session>, Vec<Tool>), SessionError> {
        let connect_timeout = spec.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let options = SessionOptions {
            limits: ListLimits::default(),
            redactor: Redactor::new().with_secrets(spec.secret_values()),
            elicitation: None,
            discover: false,
            known: Default::default(),
        };
        let (session, crate::last_listing::Listing { tools, .. }) =
            Session::open(connectors, Arc::new(spec), connect_timeout, options).await?;
        Ok((Arc::new(session), tools))
    }
}
