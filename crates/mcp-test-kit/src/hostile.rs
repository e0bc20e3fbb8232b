//! Hostile MCP servers: well-formed MCP that abuses what a server may choose.
//!
//! A [`HostileServer`] speaks correct JSON-RPC through rmcp's server side, but its answers are
//! what a client must survive: `tools/list` pages that never end ([`Pages::RepeatCursor`],
//! [`Pages::CursorCycle`], [`Pages::Endless`]), tools with escape-laden or enormous names
//! ([`Pages::Fixed`] with [`tool`]), a `serverInfo` of any size, and an `echo` text (say a
//! secret from the server's environment) that it repeats in every error and result it can.
//! Every `tools/list` request is counted ([`HostileServer::list_requests`]).
//!
//! Serve one with [`crate::serve_handler_in_memory`] or [`crate::serve_handler_http`].
//!
//! ```
//! use mcp_test_kit::hostile::{HostileOptions, HostileServer, Pages};
//! use mcp_test_kit::serve_handler_in_memory;
//! use rmcp::model::PaginatedRequestParams;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = HostileServer::new(HostileOptions::new(Pages::CursorCycle));
//! let requests = server.list_requests();
//! let stream = serve_handler_in_memory(server, Default::default());
//! let client = rmcp::serve_client((), stream).await?;
//! let first = client.list_tools(None).await?;
//! let second = client
//!     .list_tools(Some(PaginatedRequestParams::default().with_cursor(first.next_cursor.clone())))
//!     .await?;
//! let third = client
//!     .list_tools(Some(PaginatedRequestParams::default().with_cursor(second.next_cursor)))
//!     .await?;
//! assert_eq!(third.next_cursor, first.next_cursor); // a to b to a …
//! assert_eq!(requests.get(), 3);
//! client.cancel().await?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverRequestMethod,
    DiscoverResult, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::schema::object;

/// What a [`HostileServer`] answers to `tools/list`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Pages {
    /// One page holding these tools.
    Fixed(Vec<Tool>),
    /// Every page holds one tool and the same `nextCursor`, forever.
    RepeatCursor,
    /// Pages hold one tool each and alternate between two cursors, forever.
    CursorCycle,
    /// Every page holds the same tools and `nextCursor: ""` (some servers end their list so; a
    /// client that follows the empty cursor asks forever).
    EmptyCursor,
    /// Every page holds `tools_per_page` tools never listed before and a cursor never sent
    /// before, forever.
    Endless {
        /// Tools per page.
        tools_per_page: usize,
    },
    /// As [`Pages::Endless`], but the list ends after `pages` pages: many tools, made as they
    /// are asked for (the server holds none of them).
    Many {
        /// Pages in all.
        pages: u64,
        /// Tools per page.
        tools_per_page: usize,
    },
}

/// How a [`HostileServer`] behaves.
///
/// ```
/// use mcp_test_kit::hostile::{HostileOptions, Pages};
///
/// let options = HostileOptions::new(Pages::RepeatCursor)
///     .with_server_info("evil", "9".repeat(100_000))
///     .with_echo("sk-live-0123456789");
/// assert_eq!(options.version.len(), 100_000);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostileOptions {
    /// The `tools/list` behaviour.
    pub pages: Pages,
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// `instructions` of the initialize result.
    pub instructions: Option<String>,
    /// A text repeated in every error and result: the `leak*` tools return it, and a failing
    /// `initialize` or `tools/list` names it.
    pub echo: String,
    /// Answer `initialize` with a JSON-RPC error naming [`echo`](Self::echo).
    pub fail_initialize: bool,
    /// Answer `tools/list` with a JSON-RPC error naming [`echo`](Self::echo).
    pub fail_list: bool,
}

impl HostileOptions {
    /// A server listing tools as `pages` says, with an ordinary identity.
    pub fn new(pages: Pages) -> Self {
        Self {
            pages,
            name: "hostile".into(),
            version: "1.0.0".into(),
            instructions: None,
            echo: String::new(),
            fail_initialize: false,
            fail_list: false,
        }
    }

    /// Sets `serverInfo.name` and `serverInfo.version`.
    pub fn with_server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// Sets the initialize result's `instructions`.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets the text the server repeats in its errors and results.
    pub fn with_echo(mut self, text: impl Into<String>) -> Self {
        self.echo = text.into();
        self
    }

    /// Makes `initialize` fail, naming the echo text.
    pub fn with_fail_initialize(mut self) -> Self {
        self.fail_initialize = true;
        self
    }

    /// Makes `tools/list` fail, naming the echo text.
    pub fn with_fail_list(mut self) -> Self {
        self.fail_list = true;
        self
    }
}

/// A shared counter of requests, readable while the server runs.
#[derive(Debug, Clone, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn bump(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// A tool named `name` with an empty object schema and `description`.
///
/// ```
/// let tool = mcp_test_kit::hostile::tool("\u{1b}[31mred\r\nINJECTED", "evil");
/// assert!(tool.name.contains('\u{1b}'));
/// ```
pub fn tool(name: impl Into<String>, description: impl Into<String>) -> Tool {
    Tool::new(
        name.into(),
        description.into(),
        object(json!({"type": "object"})),
    )
}

/// The tools a hostile server answers calls of, beside whatever it lists.
///
/// - `leak` — a result whose text and structured content carry the echo text.
/// - `leak_is_error` — an `isError` result whose text carries it.
/// - `leak_rpc_error` — a JSON-RPC error whose message and data carry it.
pub const CALLABLE: [&str; 3] = ["leak", "leak_is_error", "leak_rpc_error"];

/// The [`CALLABLE`] tools.
fn callable() -> impl Iterator<Item = Tool> {
    CALLABLE
        .iter()
        .map(|name| tool(*name, "Leaks the echo text."))
}

/// An MCP server that abuses what a server may choose (see the [module](self) docs).
#[derive(Debug, Clone)]
pub struct HostileServer {
    options: Arc<HostileOptions>,
    list_requests: Counter,
}

impl HostileServer {
    /// A server behaving as `options` says.
    pub fn new(options: HostileOptions) -> Self {
        Self {
            options: Arc::new(options),
            list_requests: Counter::default(),
        }
    }

    /// The count of `tools/list` requests this server (and its clones) answered.
    pub fn list_requests(&self) -> Counter {
        self.list_requests.clone()
    }

    fn page(&self, cursor: Option<&str>) -> (Vec<Tool>, Option<String>) {
        match &self.options.pages {
            Pages::Fixed(tools) => (callable().chain(tools.iter().cloned()).collect(), None),
            Pages::RepeatCursor => {
                let tools = if cursor.is_none() {
                    callable().collect()
                } else {
                    vec![tool("again", "The same page again.")]
                };
                (tools, Some("same".into()))
            }
            Pages::EmptyCursor => (callable().collect(), Some(String::new())),
            Pages::CursorCycle => {
                let next = if cursor == Some("a") { "b" } else { "a" };
                let tools = if cursor.is_none() {
                    callable().collect()
                } else {
                    vec![tool(format!("cycle_{next}"), "A page of the cycle.")]
                };
                (tools, Some(next.into()))
            }
            Pages::Many {
                pages,
                tools_per_page,
            } => {
                let (tools, next) = Self::synthetic_page(cursor, *tools_per_page);
                let last = next.as_deref() == Some(&format!("page-{pages}"));
                (tools, next.filter(|_| !last))
            }
            Pages::Endless { tools_per_page } => Self::synthetic_page(cursor, *tools_per_page),
        }
    }

    /// A page of new synthetic tools after `cursor` (`page-N`), and the next cursor.
    fn synthetic_page(cursor: Option<&str>, tools_per_page: usize) -> (Vec<Tool>, Option<String>) {
        let page = cursor
            .and_then(|c| c.strip_prefix("page-"))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        let mut tools: Vec<Tool> = if page == 0 {
            callable().collect()
        } else {
            Vec::new()
        };
        tools.extend((0..tools_per_page).map(|i| {
            Tool::new(
                format!("tool_{page}_{i}"),
                format!("Synthetic tool {i} of page {page}: does nothing at all, at length."),
                object(json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for."},
                        "limit": {"type": "integer", "minimum": 1}
                    }
                })),
            )
        }));
        (tools, Some(format!("page-{}", page + 1)))
    }

    fn echo_error(&self, what: &str) -> ErrorData {
        ErrorData::internal_error(
            format!("{what}: bad key {}", self.options.echo),
            Some(json!({"key": self.options.echo})),
        )
    }
}

impl ServerHandler for HostileServer {
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.options.name.clone(),
                self.options.version.clone(),
            ));
        match &self.options.instructions {
            Some(instructions) => config.with_instructions(instructions.clone()),
            None => config,
        }
    }

    /// Of revision 2025-11-25: `server/discover` is method-not-found, so a discovering
    /// client falls back to `initialize` at once.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::method_not_found::<DiscoverRequestMethod>())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.options.fail_initialize {
            return Err(self.echo_error("initialize refused"));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.list_requests.bump();
        if self.options.fail_list {
            return Err(self.echo_error("cannot list tools"));
        }
        let cursor = request.and_then(|r| r.cursor);
        let (tools, next) = self.page(cursor.as_deref());
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let echo = &self.options.echo;
        let result = match &*request.name {
            "leak" => {
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(format!("the key is {echo}"))]);
                result.structured_content = Some(json!({"key": echo, "nested": [echo]}));
                result
            }
            "leak_is_error" => {
                CallToolResult::error(vec![ContentBlock::text(format!("rejected key {echo}"))])
            }
            "leak_rpc_error" => return Err(self.echo_error("call refused")),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool `{other}`"),
                    Some(Value::Null),
                ));
            }
        };
        Ok(result.into())
    }
}
