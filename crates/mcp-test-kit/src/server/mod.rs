//! The test server: every fault and feature a client must handle, as tools of one MCP server.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, DiscoverRequestMethod, DiscoverResult, Implementation, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::model::{
    CompleteRequestMethod, CompleteRequestParams, CompleteResult, GetPromptRequestMethod,
    GetPromptRequestParams, GetPromptResponse, ListPromptsRequestMethod, ListPromptsResult,
    ListResourceTemplatesRequestMethod, ListResourceTemplatesResult, ListResourcesRequestMethod,
    ListResourcesResult, ReadResourceRequestMethod, ReadResourceRequestParams,
    ReadResourceResponse, SubscribeRequestMethod, SubscribeRequestParams, UnsubscribeRequestMethod,
    UnsubscribeRequestParams,
};
use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListSkillsResult, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::escape::{Escape, sleep_child};
use crate::observe::{Event, Observations};

mod ask;
mod content;
mod features;
mod skills;

pub use features::HUGE_RESOURCE_BYTES;
pub use skills::{DIRECTORY_PAGE, SkillHostility, Skills, write_example_skills};
mod mrtr;
mod route;
mod suite;
mod suite_features;

use crate::schema::object;
use crate::schema::structured;
use content::{content_blocks, huge_text, repeated};

/// What the `crash` tool does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CrashAction {
    /// Exit the whole process with this code (the stdio binary).
    ExitProcess(i32),
    /// Cancel this token, which the serving code passed to rmcp, so the connection drops
    /// (in memory and over HTTP: the test process must survive).
    Disconnect(CancellationToken),
}

/// How a [`TestServer`] behaves.
///
/// ```
/// use std::time::Duration;
/// use mcp_test_kit::TestServerOptions;
///
/// let options = TestServerOptions::default()
///     .with_extra_tools(1_000)
///     .with_page_size(100)
///     .with_init_delay(Duration::from_millis(50));
/// assert_eq!(options.extra_tools, 1_000);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TestServerOptions {
    /// `serverInfo.name`.
    pub name: String,
    /// How long `initialize` waits before answering.
    pub init_delay: Duration,
    /// How many synthetic tools (`tool_0000`, …) to list after the built-in ones.
    pub extra_tools: usize,
    /// Tools per `tools/list` page; `None`: one page.
    pub page_size: Option<usize>,
    /// Where calls and cancellations are recorded.
    pub observations: Observations,
    /// What the `crash` tool does.
    pub crash: CrashAction,
    /// Whether the server speaks revision 2026-07-28's `server/discover` (then
    /// [`init_delay`](Self::init_delay) delays the discover answer too). Off by default: the
    /// server is of revision 2025-11-25, like most servers a client meets, and answers
    /// `server/discover` with method-not-found, so a discovering client falls back to
    /// `initialize` at once.
    pub discover: bool,
    /// Whether the `ask` tool is listed: it sends the client the elicitation request given
    /// as its `request` argument and returns the answer.
    pub ask: bool,
    /// Whether the `route` tool is listed, whose arguments declare `x-mcp-header`.
    pub header_params: bool,
    /// Whether the tools the MCP conformance suite's server scenarios call by name are listed
    /// (`test_simple_text`, `test_image_content`, …, `json_schema_2020_12_tool`).
    pub suite_tools: bool,
    /// Whether the server offers resources (with subscriptions), resource templates, prompts
    /// and completions, well-formed and hostile ones, and lists the `flood_updates` and
    /// `roots` tools.
    pub features: bool,
    /// Whether the server offers the resources, templates, prompts and completions the MCP
    /// conformance suite's server scenarios read by name (`test://static-text`, …,
    /// `test_simple_prompt`, …), instead of [`features`](Self::features)' ones.
    pub suite_resources: bool,
    /// The `instructions` of the initialize result; `None`: a one-line default.
    pub instructions: Option<String>,
    /// Whether the server declares `tools.listChanged` (on by default). Off, it still sends
    /// `notifications/tools/list_changed` when `add_tool` or `remove_tool` changes its tools,
    /// as a server that does not keep its word would.
    pub list_changed: bool,
    /// The skills served (the skills extension, with `resources/list` and `resources/read`
    /// of their files, `resources/directory/read` of their directories); every `skills/list`,
    /// `skills/get`, directory read and read of a skill file is recorded as an
    /// [`Event::Request`].
    pub skills: Option<Arc<Skills>>,
    /// The key of the `requestState`s the input-required tools sign (shared by clones).
    pub(crate) state_key: mrtr::StateKey,
}

impl Default for TestServerOptions {
    fn default() -> Self {
        Self {
            name: "mcp-test-kit".into(),
            init_delay: Duration::ZERO,
            extra_tools: 0,
            page_size: None,
            observations: Observations::new(),
            crash: CrashAction::Disconnect(CancellationToken::new()),
            discover: false,
            ask: false,
            header_params: false,
            suite_tools: false,
            features: false,
            suite_resources: false,
            list_changed: true,
            instructions: None,
            skills: None,
            state_key: mrtr::StateKey::default(),
        }
    }
}

impl TestServerOptions {
    /// Sets `serverInfo.name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Delays the `initialize` response (and the `server/discover` one of a discovering
    /// server).
    pub fn with_init_delay(mut self, delay: Duration) -> Self {
        self.init_delay = delay;
        self
    }

    /// Answers `server/discover` (revision 2026-07-28) instead of method-not-found.
    pub fn with_discover(mut self, discover: bool) -> Self {
        self.discover = discover;
        self
    }

    /// Lists the `ask` tool (an elicitation request sent to the client).
    pub fn with_ask(mut self, ask: bool) -> Self {
        self.ask = ask;
        self
    }

    /// Lists the `route` tool, whose `region` and `shard` declare `x-mcp-header` (SEP-2243).
    pub fn with_header_params(mut self, header_params: bool) -> Self {
        self.header_params = header_params;
        self
    }

    /// Lists the tools the MCP conformance suite's server scenarios call by name.
    pub fn with_suite_tools(mut self, suite_tools: bool) -> Self {
        self.suite_tools = suite_tools;
        self
    }

    /// Offers resources, templates, prompts and completions, and lists `flood_updates`.
    pub fn with_features(mut self, features: bool) -> Self {
        self.features = features;
        self
    }

    /// Serves `skills` (see [`skills`](Self::skills)).
    pub fn with_skills(mut self, skills: Skills) -> Self {
        self.skills = Some(Arc::new(skills));
        self
    }

    /// Offers the resources, templates, prompts and completions the MCP conformance suite's
    /// server scenarios read by name.
    pub fn with_suite_resources(mut self, suite_resources: bool) -> Self {
        self.suite_resources = suite_resources;
        self
    }

    /// Sets the `instructions` of the initialize result.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Adds `count` synthetic tools.
    pub fn with_extra_tools(mut self, count: usize) -> Self {
        self.extra_tools = count;
        self
    }

    /// Serves `tools/list` in pages of `size` (at least 1).
    pub fn with_page_size(mut self, size: usize) -> Self {
        self.page_size = Some(size.max(1));
        self
    }

    /// Records into `observations` (keep a clone to assert on).
    pub fn with_observations(mut self, observations: Observations) -> Self {
        self.observations = observations;
        self
    }

    /// Sets what the `crash` tool does.
    pub fn with_crash(mut self, crash: CrashAction) -> Self {
        self.crash = crash;
        self
    }

    /// Sets [`list_changed`](Self::list_changed).
    pub fn with_list_changed(mut self, declared: bool) -> Self {
        self.list_changed = declared;
        self
    }
}

/// The built-in tools. Each row: name, description, input schema, output schema.
const BUILT_IN: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "echo",
        "Returns its arguments as structured content and as JSON text.",
        r#"{"type":"object","additionalProperties":true}"#,
        None,
    ),
    (
        "add",
        "Adds two numbers (annotated read-only and closed-world).",
        r#"{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}"#,
        Some(r#"{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}"#),
    ),
    (
        "slow",
        "Sleeps for `ms` milliseconds; stops early when the call is cancelled.",
        r#"{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}"#,
        None,
    ),
    (
        "fail",
        "Always fails with a tool-level error (isError) carrying `message`, padded with lines of ASCII to `bytes` bytes when given.",
        r#"{"type":"object","properties":{"message":{"type":"string"},"bytes":{"type":"integer","minimum":0}}}"#,
        None,
    ),
    (
        "env",
        "Returns the server's environment variables (only `names` if given).",
        r#"{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"}}}}"#,
        None,
    ),
    (
        "stderr",
        "Writes `text` as one line to the server's stderr.",
        r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        None,
    ),
    (
        "content",
        "Returns one block of each content type: text, image, audio, embedded resource, resource link.",
        r#"{"type":"object","properties":{}}"#,
        None,
    ),
    (
        "huge",
        "Returns a text block of `bytes` bytes (default 8 MiB): lines of ASCII, or `unit` repeated (cut at a character boundary, so at most `bytes`).",
        r#"{"type":"object","properties":{"bytes":{"type":"integer","minimum":0},"unit":{"type":"string","minLength":1}}}"#,
        None,
    ),
    (
        "crash",
        "Crashes the server during the call (the process exits, or the connection drops in memory).",
        r#"{"type":"object","properties":{"code":{"type":"integer"}}}"#,
        None,
    ),
    (
        "add_tool",
        "Adds an echo tool called `name` and sends notifications/tools/list_changed.",
        r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#,
        None,
    ),
    (
        "remove_tool",
        "Removes the tool called `name` and sends notifications/tools/list_changed.",
        r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#,
        None,
    ),
    (
        "spawn_child",
        "Starts a long `sleep` child process (stdio server only) and returns its pid; with `inherit_stdio` it shares the server's stdout and stderr; `escape` = `setsid` starts it in a session of its own, `detach` also through a shell that exits at once (a daemon's double fork: the sleep is orphaned), `orphan` through such a shell but in the server's process group.",
        r#"{"type":"object","properties":{"seconds":{"type":"integer","minimum":1},"inherit_stdio":{"type":"boolean"},"escape":{"enum":["setsid","detach","orphan"]}}}"#,
        Some(r#"{"type":"object","properties":{"pid":{"type":"integer"}},"required":["pid"]}"#),
    ),
    (
        "observations",
        "What the server saw: calls and cancellations. Waits up to `timeout_ms` for `cancelled` cancellations first.",
        r#"{"type":"object","properties":{"cancelled":{"type":"integer"},"timeout_ms":{"type":"integer"}}}"#,
        None,
    ),
];

/// Words for the descriptions of synthetic tools, so searches over 1,000 tools have something
/// to rank.
const VERBS: &[&str] = &[
    "create", "list", "delete", "update", "search", "export", "import", "archive",
];
const NOUNS: &[&str] = &[
    "invoice",
    "ticket",
    "user",
    "repository",
    "calendar event",
    "document",
    "payment",
    "report",
    "message",
    "dataset",
    "deployment",
];

/// An MCP server whose tools exercise every path of a client: echo, add, slow (cancellable),
/// fail, env, stderr, content types, huge output, crash, list changes, a grandchild process,
/// and an `observations` tool; optionally many synthetic tools served in pages, and a slow
/// `initialize`.
///
/// ```
/// use mcp_test_kit::{TestServer, TestServerOptions};
///
/// let server = TestServer::new(TestServerOptions::default().with_extra_tools(10));
/// assert!(server.tool_names().contains(&"echo".to_string()));
/// assert!(server.tool_names().contains(&"tool_0009".to_string()));
/// ```
#[derive(Debug, Clone)]
pub struct TestServer {
    options: TestServerOptions,
    built_in: Arc<Vec<Tool>>,
    added: Arc<Mutex<BTreeMap<String, Tool>>>,
}

impl TestServer {
    /// A server with `options`.
    pub fn new(options: TestServerOptions) -> Self {
        let built_in = BUILT_IN
            .iter()
            .map(|(name, description, input, output)| {
                let mut tool = Tool::new(*name, *description, parse_schema(input));
                if *name == "add" {
                    tool = tool.annotate(ToolAnnotations::new().read_only(true).open_world(false));
                }
                match output {
                    Some(output) => tool.with_raw_output_schema(parse_schema(output)),
                    None => tool,
                }
            })
            .collect();
        Self {
            options,
            built_in: Arc::new(built_in),
            added: Arc::default(),
        }
    }

    /// The options it was built with.
    pub fn options(&self) -> &TestServerOptions {
        &self.options
    }

    /// The token the `crash` tool cancels, if it disconnects rather than exits. Serving code
    /// passes it to rmcp's `serve_with_ct`.
    pub fn crash_token(&self) -> Option<CancellationToken> {
        match &self.options.crash {
            CrashAction::Disconnect(token) => Some(token.clone()),
            CrashAction::ExitProcess(_) => None,
        }
    }

    /// Every tool it lists now, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.all_tools()
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect()
    }

    fn all_tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = self.built_in.as_ref().clone();
        if self.options.ask {
            tools.push(ask::tool());
        }
        if self.options.header_params {
            tools.push(route::tool());
        }
        if self.options.suite_tools {
            tools.extend(suite::tools());
            tools.extend(mrtr::tools());
        }
        if self.options.features {
            tools.push(features::flood_tool());
            tools.push(features::roots_tool());
        }
        tools.extend(lock(&self.added).values().cloned());
        tools.extend((0..self.options.extra_tools).map(synthetic_tool));
        tools
    }

    async fn call(
        &self,
        name: &str,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let result = match name {
            "echo" => structured(Value::Object(args)),
            "add" => {
                let (Some(a), Some(b)) = (number(&args, "a"), number(&args, "b")) else {
                    return Ok(tool_error("`a` and `b` must be numbers"));
                };
                structured(json!({ "sum": a + b }))
            }
            "slow" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(1_000);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => structured(json!({ "slept_ms": ms })),
                    () = context.ct.cancelled() => tool_error("cancelled"),
                }
            }
            "fail" => {
                let message = args
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("it failed");
                let mut text = format!("the failing tool failed: {message}");
                if let Some(bytes) = args.get("bytes").and_then(Value::as_u64) {
                    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
                    text.push('\n');
                    text.push_str(&huge_text(bytes.saturating_sub(text.len())));
                }
                tool_error(&text)
            }
            "env" => {
                let names: Option<Vec<&str>> = args
                    .get("names")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect());
                let env: serde_json::Map<String, Value> = std::env::vars_os()
                    .map(|(k, v)| {
                        (
                            k.to_string_lossy().into_owned(),
                            v.to_string_lossy().into_owned(),
                        )
                    })
                    .filter(|(k, _)| names.as_ref().is_none_or(|n| n.contains(&k.as_str())))
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect();
                structured(json!({ "env": env }))
            }
            "stderr" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                eprintln!("{text}");
                structured(json!({ "written": text.len() }))
            }
            "content" => CallToolResult::success(content_blocks()),
            "huge" => {
                let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(8 << 20);
                let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
                let text = match args.get("unit").and_then(Value::as_str) {
                    Some(unit) if !unit.is_empty() => repeated(unit, bytes),
                    _ => huge_text(bytes),
                };
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            "crash" => {
                let code = args.get("code").and_then(Value::as_i64).unwrap_or(3);
                eprintln!("mcp-test-kit: crashing during a call, as asked");
                match &self.options.crash {
                    CrashAction::ExitProcess(default) => {
                        std::process::exit(i32::try_from(code).unwrap_or(*default))
                    }
                    CrashAction::Disconnect(token) => {
                        token.cancel();
                        // Never answer: the connection is going away.
                        std::future::pending::<()>().await;
                        unreachable!("pending never completes")
                    }
                }
            }
            "add_tool" | "remove_tool" => {
                let Some(tool) = args.get("name").and_then(Value::as_str) else {
                    return Ok(tool_error("`name` must be a string"));
                };
                let changed = {
                    let mut added = lock(&self.added);
                    if name == "add_tool" {
                        let t = Tool::new(
                            tool.to_owned(),
                            "A tool added at run time; echoes its arguments.",
                            parse_schema(BUILT_IN[0].2),
                        );
                        added.insert(tool.to_owned(), t).is_none()
                    } else {
                        added.remove(tool).is_some()
                    }
                };
                if changed {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                structured(json!({ "changed": changed }))
            }
            "spawn_child" => return Ok(self.spawn_child(&args)),
            "observations" => {
                let want = args.get("cancelled").and_then(Value::as_u64).unwrap_or(0);
                let timeout = args.get("timeout_ms").and_then(Value::as_u64).unwrap_or(0);
                let seen = &self.options.observations;
                let snapshot = seen
                    .wait_for_cancelled(
                        usize::try_from(want).unwrap_or(usize::MAX),
                        Duration::from_millis(timeout),
                    )
                    .await
                    .unwrap_or_else(|| seen.snapshot());
                structured(serde_json::to_value(&snapshot).unwrap_or_default())
            }
            "ask" if self.options.ask => return ask::call(&args, context).await,
            "flood_updates" if self.options.features => {
                return features::flood(&args, context).await;
            }
            "roots" if self.options.features => features::roots(context).await,
            "route" if self.options.header_params => route::call(args),
            other if self.options.suite_tools && suite::is_suite_tool(other) => {
                return suite::call(other, &args, context).await;
            }
            other if self.is_echo_like(other) => structured(Value::Object(args)),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ));
            }
        };
        Ok(result)
    }

    /// Method-not-found unless the server was built [`with_features`](TestServerOptions::with_features).
    fn featured<M: rmcp::model::ConstString>(&self) -> Result<(), ErrorData> {
        if self.options.features || self.options.suite_resources {
            Ok(())
        } else {
            Err(ErrorData::method_not_found::<M>())
        }
    }

    fn record(&self, method: &str, target: &str) {
        self.options.observations.record(Event::Request {
            method: method.to_owned(),
            target: target.to_owned(),
        });
    }

    fn is_echo_like(&self, name: &str) -> bool {
        lock(&self.added).contains_key(name)
            || name
                .strip_prefix("tool_")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n < self.options.extra_tools)
    }

    fn spawn_child(&self, args: &JsonObject) -> CallToolResult {
        if matches!(self.options.crash, CrashAction::Disconnect(_)) {
            return tool_error("spawn_child works only in the stdio server process");
        }
        let seconds = args.get("seconds").and_then(Value::as_u64).unwrap_or(600);
        let inherit = args.get("inherit_stdio").and_then(Value::as_bool) == Some(true);
        let spawned = Escape::parse(args.get("escape").and_then(Value::as_str))
            .and_then(|escape| sleep_child(escape, seconds, inherit));
        match spawned {
            Ok(pid) => structured(json!({ "pid": pid })),
            Err(e) => tool_error(&e),
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let tools = ServerCapabilities::builder().enable_tools();
        let mut capabilities = if self.options.list_changed {
            tools.enable_tool_list_changed().build()
        } else {
            tools.build()
        };
        if self.options.features || self.options.suite_resources {
            let more = ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_completions()
                .build();
            capabilities.resources = more.resources;
            capabilities.prompts = more.prompts;
            capabilities.completions = more.completions;
        }
        if let Some(skills) = &self.options.skills {
            let builder = ServerCapabilities::builder().enable_resources();
            let more = if skills.reads_directories() {
                builder.enable_skills_with_directory_read().build()
            } else {
                builder.enable_skills().build()
            };
            capabilities.resources = capabilities.resources.or(more.resources);
            capabilities.extensions = more.extensions;
        }
        let instructions = self
            .options
            .instructions
            .clone()
            .unwrap_or_else(|| "A test server: every tool exercises one client path.".into());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                self.options.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(instructions)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let skills = self.options.skills.as_ref().map(|s| s.resources());
        if let (Some(skills), false) = (&skills, self.options.features) {
            return Ok(ListResourcesResult::with_all_items(skills.clone()));
        }
        self.featured::<ListResourcesRequestMethod>()?;
        if self.options.suite_resources {
            return Ok(suite_features::resources());
        }
        let mut listed = features::resources();
        listed.resources.extend(skills.unwrap_or_default());
        Ok(listed)
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.record("skills/list", "");
        Ok(self.options.skills.as_ref().map_or_else(
            || ListSkillsResult::with_all_items(Vec::new()),
            |s| s.list(),
        ))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.record("skills/get", &request.uri);
        match &self.options.skills {
            Some(skills) => skills.get(&request.uri),
            None => Err(ErrorData::invalid_params("no skills", None)),
        }
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.record("resources/directory/read", &request.uri);
        match &self.options.skills {
            Some(skills) => skills.directory(&request.uri, request.cursor.as_deref()),
            None => Err(ErrorData::invalid_params("no skills", None)),
        }
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.featured::<ListResourceTemplatesRequestMethod>()?;
        if self.options.suite_resources {
            return Ok(suite_features::templates());
        }
        Ok(features::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if let Some(read) = self
            .options
            .skills
            .as_ref()
            .and_then(|s| s.read(&request.uri))
        {
            self.record("resources/read", &request.uri);
            return Ok(ReadResourceResponse::Complete(read));
        }
        self.featured::<ReadResourceRequestMethod>()?;
        self.options.observations.record(Event::Request {
            method: "resources/read".to_owned(),
            target: request.uri.clone(),
        });
        if self.options.suite_resources {
            return suite_features::read(&request).map(ReadResourceResponse::Complete);
        }
        features::read(&request).map(ReadResourceResponse::Complete)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.featured::<SubscribeRequestMethod>()?;
        self.options.observations.record(Event::Request {
            method: "resources/subscribe".to_owned(),
            target: request.uri.clone(),
        });
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.featured::<UnsubscribeRequestMethod>()?;
        self.options.observations.record(Event::Request {
            method: "resources/unsubscribe".to_owned(),
            target: request.uri.clone(),
        });
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.featured::<ListPromptsRequestMethod>()?;
        if self.options.suite_resources {
            let mut listed = suite_features::prompts();
            listed.prompts.push(mrtr::prompt());
            return Ok(listed);
        }
        Ok(features::prompts())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.featured::<GetPromptRequestMethod>()?;
        self.options.observations.record(Event::Request {
            method: "prompts/get".to_owned(),
            target: request.name.clone(),
        });
        if self.options.suite_resources && request.name == mrtr::PROMPT {
            return Ok(mrtr::get_prompt(&request));
        }
        if self.options.suite_resources {
            return suite_features::get_prompt(&request).map(GetPromptResponse::Complete);
        }
        features::get_prompt(&request).map(GetPromptResponse::Complete)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.featured::<CompleteRequestMethod>()?;
        if self.options.suite_resources {
            return suite_features::complete(&request);
        }
        features::complete(&request)
    }

    /// The `route` tool's schema, so that rmcp's HTTP server checks the `Mcp-Param-*`
    /// headers of a 2026-07-28 call to it against its arguments (`-32020` on a mismatch);
    /// no other tool declares one.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        (self.options.header_params && name == "route").then(route::tool)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        if !self.options.discover {
            return Err(ErrorData::method_not_found::<DiscoverRequestMethod>());
        }
        if !self.options.init_delay.is_zero() {
            tokio::time::sleep(self.options.init_delay).await;
        }
        self.options.observations.record(Event::Handshake {
            method: "server/discover".to_owned(),
        });
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if !self.options.init_delay.is_zero() {
            tokio::time::sleep(self.options.init_delay).await;
        }
        context.peer.set_peer_info(request.clone());
        self.options.observations.record(Event::Handshake {
            method: "initialize".to_owned(),
        });
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.options.observations.record(Event::Listing {
            cursor: request.as_ref().and_then(|r| r.cursor.clone()),
        });
        let tools = self.all_tools();
        let Some(page) = self.options.page_size else {
            return Ok(ListToolsResult::with_all_items(tools));
        };
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= tools.len())
                .ok_or_else(|| ErrorData::invalid_params(format!("bad cursor `{cursor}`"), None))?,
        };
        let end = (start + page).min(tools.len());
        let mut result = ListToolsResult::with_all_items(tools[start..end].to_vec());
        result.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.options.observations.record(Event::Call {
            tool: request.name.to_string(),
            request_id: context.id.to_string(),
            traceparent: context.meta.get_traceparent().map(str::to_owned),
            tracestate: context.meta.get_tracestate().map(str::to_owned),
            traceparent_header: context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.headers.get("traceparent"))
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
        });
        if self.options.suite_tools {
            if mrtr::is_tool(&request.name) {
                return mrtr::call(&request, &context, &self.options.state_key);
            }
            // At a revision without server-to-client requests, the suite's elicitation tools
            // ask with an input-required result.
            let args = request.arguments.clone().unwrap_or_default();
            let stateless = context
                .protocol_version()
                .is_some_and(|v| !v.has_initialize());
            if stateless
                && let Some((elicitation, report)) = suite::elicitation(&request.name, &args)
            {
                return Ok(mrtr::elicitation_round(elicitation, report, &request));
            }
        }
        let args = request.arguments.unwrap_or_default();
        self.call(&request.name, args, &context)
            .await
            .map(Into::into)
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.options.observations.record(Event::Cancelled {
            request_id: notification
                .request_id
                .map(|id| id.to_string())
                .unwrap_or_default(),
            reason: notification.reason,
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn parse_schema(text: &str) -> Arc<JsonObject> {
    object(serde_json::from_str(text).unwrap_or_else(|e| panic!("bad schema {text}: {e}")))
}

fn number(args: &JsonObject, key: &str) -> Option<f64> {
    args.get(key).and_then(Value::as_f64)
}

fn tool_error(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_owned())])
}

fn synthetic_tool(i: usize) -> Tool {
    let verb = VERBS[i % VERBS.len()];
    let noun = NOUNS[(i / VERBS.len()) % NOUNS.len()];
    Tool::new(
        Cow::Owned(format!("tool_{i:04}")),
        Cow::Owned(format!(
            "Synthetic tool {i}: {verb} a {noun}. Echoes its arguments."
        )),
        parse_schema(BUILT_IN[0].2),
    )
}

#[cfg(test)]
mod tests {
    use super::content::base64;
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn huge_text_has_the_asked_size() {
        assert_eq!(huge_text(0).len(), 0);
        assert_eq!(huge_text(1_000_003).len(), 1_000_003);
        assert_eq!(repeated("é", 10), "ééééé");
        assert_eq!(repeated("é", 9), "éééé");
    }

    #[test]
    fn synthetic_tools_are_distinct() {
        let names: std::collections::BTreeSet<_> =
            (0..1_000).map(|i| synthetic_tool(i).name).collect();
        assert_eq!(names.len(), 1_000);
    }
}
