//! The catalog: tools of every server of a run, under model-safe names, searchable and callable.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use agent_core::{
    ApprovalRequest, CallInfo, JsonObject, ToolAnnotations, ToolCall, ToolCatalog, ToolDescriptor,
    ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::names::{external_name, model_name};
use crate::sanitize::{Lines, clean, is_unsafe_char};
use crate::search::{SearchIndex, ToolText};
use crate::session::{SessionError, ToolSession};
use crate::suggest::suggest;
use crate::validate::{self, Compiled};
use crate::{
    CatalogConfig, CatalogError, Exposure, SkipReason, SkippedTool, ToolLimits, normalize_result,
};

/// The name of the search tool the model sees.
pub const SEARCH_TOOL: &str = "mcp_search_tools";
/// The name of the generic call tool the model sees.
pub const CALL_TOOL: &str = "mcp_call_tool";

/// One server of a run, as the orchestration hands it to the catalog: its key, its identity,
/// the session to call through and the tools it listed (all pages).
///
/// ```
/// use std::sync::Arc;
/// use mcp_catalog::ServerTools;
/// use mcp_catalog::testing::FakeServer;
///
/// let fake = Arc::new(FakeServer::everything());
/// let server = ServerTools::new("demo", fake.clone(), fake.tools()).with_identity("demo-server");
/// assert_eq!(server.identity.as_deref(), Some("demo-server"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerTools {
    /// The configured server key (the `server` of `server__tool`).
    pub key: String,
    /// The server's self-declared name (`serverInfo.name` of its initialize result).
    pub identity: Option<String>,
    /// The session that calls its tools.
    pub session: Arc<dyn ToolSession>,
    /// Its tools, as listed.
    pub tools: Vec<Tool>,
}

impl ServerTools {
    /// A server with no identity.
    pub fn new(key: impl Into<String>, session: Arc<dyn ToolSession>, tools: Vec<Tool>) -> Self {
        Self {
            key: key.into(),
            identity: None,
            session,
            tools,
        }
    }

    /// Sets the identity.
    #[must_use]
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }
}

impl std::fmt::Debug for ServerTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTools")
            .field("key", &self.key)
            .field("identity", &self.identity)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

/// One MCP tool in the catalog.
///
/// Its schemas are kept as their compact JSON text, which takes a fraction of the memory of
/// parsed JSON; [`descriptor`](Self::descriptor) and [`input_schema`](Self::input_schema) parse
/// the input schema the first time they are asked for it and keep it from then on (a catalog of
/// thousands of tools shown lazily parses only the few that are shown first-class).
#[derive(Debug)]
#[non_exhaustive]
pub struct CatalogTool {
    /// The external name, `server__tool`: what policy, approval, events and history name.
    pub id: String,
    /// The server key.
    pub server: String,
    /// The tool's name on its server.
    pub remote_name: String,
    /// The model-facing name.
    name: String,
    description: Option<Box<str>>,
    annotations: ToolAnnotations,
    input_schema: Schema,
    output_schema: Option<Schema>,
    validator: OnceLock<Compiled>,
}

/// A JSON Schema as its compact JSON text, parsed on demand.
#[derive(Debug)]
struct Schema {
    text: Box<str>,
    parsed: OnceLock<Arc<JsonObject>>,
}

impl Schema {
    fn new(text: String) -> Self {
        Self {
            text: text.into_boxed_str(),
            parsed: OnceLock::new(),
        }
    }

    /// The schema, parsed once and kept.
    fn get(&self) -> Arc<JsonObject> {
        Arc::clone(self.parsed.get_or_init(|| Arc::new(self.parse())))
    }

    /// The schema, freshly parsed (kept nowhere), or the kept one.
    fn value(&self) -> Value {
        match self.parsed.get() {
            Some(kept) => Value::Object((**kept).clone()),
            None => Value::Object(self.parse()),
        }
    }

    fn parse(&self) -> JsonObject {
        // The text is what the catalog wrote from a parsed object: it parses back to it.
        serde_json::from_str(&self.text).unwrap_or_default()
    }
}

impl CatalogTool {
    /// The model-facing name.
    pub fn model_name(&self) -> &str {
        &self.name
    }

    /// The server's description (cut to [`ToolLimits::max_description_bytes`], without
    /// control characters other than `\n` and `\t`).
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The tool's hints.
    pub fn annotations(&self) -> &ToolAnnotations {
        &self.annotations
    }

    /// The input schema exactly as the server sent it (the same JSON, key order included).
    pub fn input_schema(&self) -> Arc<JsonObject> {
        self.input_schema.get()
    }

    /// The input schema as compact JSON text, without parsing it.
    pub fn input_schema_json(&self) -> &str {
        &self.input_schema.text
    }

    /// What the model sees when the tool is first-class: the model-facing name, the
    /// description, the hints and the schemas exactly as the server sent them.
    pub fn descriptor(&self) -> ToolDescriptor {
        let mut d = ToolDescriptor::new(self.name.clone(), JsonObject::new());
        d.input_schema = self.input_schema.get();
        d.output_schema = self.output_schema.as_ref().map(Schema::get);
        d.description = self.description.as_deref().map(str::to_owned);
        d.annotations = self.annotations.clone();
        d
    }

    fn schema_bytes(&self) -> usize {
        self.input_schema.text.len()
    }

    fn validator(&self) -> &Compiled {
        self.validator
            .get_or_init(|| validate::compile(self.input_schema.value()))
    }
}

/// What a model's call resolves to, before it runs: what a policy or approval layer needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CallTarget {
    /// `mcp_search_tools`: reads the catalog, calls no server.
    Search,
    /// A native tool, run by the native dispatcher.
    Native {
        /// Its name.
        name: String,
    },
    /// An MCP tool, called first-class or through `mcp_call_tool`.
    Mcp(ResolvedTool),
}

/// An MCP tool call resolved to the real tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResolvedTool {
    /// The tool.
    pub tool: Arc<CatalogTool>,
    /// Its server's self-declared name, when known.
    pub server_identity: Option<String>,
    /// The argument object, exactly as the model gave it.
    pub arguments: JsonObject,
    /// True when the model called it through `mcp_call_tool`.
    pub via_call_tool: bool,
    /// The model's call id.
    pub call_id: String,
}

impl ResolvedTool {
    /// What [`agent_core::ToolPolicy`] sees: the real tool (`server__tool`), its server, identity,
    /// remote name, arguments and hints.
    pub fn call_info(&self) -> CallInfo<'_> {
        CallInfo::native(&self.tool.id, &self.arguments, self.tool.annotations()).with_server(
            &self.tool.server,
            self.server_identity.as_deref(),
            &self.tool.remote_name,
        )
    }

    /// An approval request naming the real tool: action ref `server__tool`, a prompt naming it
    /// and its server, metadata `mcp_tool_name` and `mcp_arguments` (SPEC F2).
    pub fn approval_request(&self) -> ApprovalRequest {
        let mut metadata = JsonObject::new();
        metadata.insert("mcp_tool_name".into(), self.tool.id.clone().into());
        metadata.insert("mcp_server".into(), self.tool.server.clone().into());
        metadata.insert(
            "mcp_arguments".into(),
            Value::Object(self.arguments.clone()),
        );
        ApprovalRequest::new(
            self.tool.id.clone(),
            format!(
                "Allow the tool `{}` of MCP server `{}` to run?",
                self.tool.remote_name, self.tool.server
            ),
        )
        .with_metadata(metadata)
    }
}

/// What `mcp_search_tools` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchRequest {
    /// Words in any order, `select:name[,name]`, or empty to list every tool.
    pub query: String,
    /// How many results (default and cap from [`CatalogConfig`]).
    pub limit: Option<usize>,
    /// Only tools of this server.
    pub server: Option<String>,
    /// Promote the returned tools to first-class for the rest of the run.
    pub promote: bool,
}

impl SearchRequest {
    /// A request for `query` with defaults.
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            ..Self::default()
        }
    }

    /// Sets the limit.
    #[must_use]
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the server filter.
    #[must_use]
    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Parses the model's `mcp_search_tools` arguments.
    pub fn from_arguments(arguments: &JsonObject) -> Result<Self, String> {
        let query = match arguments.get("query") {
            Some(Value::String(q)) => q.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => return Err(format!("`/query`: {other} is not a string")),
        };
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                None => {
                    return Err(format!("`/limit`: {n} is not a positive integer"));
                }
            },
            Some(other) => return Err(format!("`/limit`: {other} is not an integer")),
        };
        let server = match arguments.get("server") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => return Err(format!("`/server`: {other} is not a string")),
        };
        let promote = match arguments.get("promote") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(format!("`/promote`: {other} is not a boolean")),
        };
        Ok(Self {
            query,
            limit,
            server,
            promote,
        })
    }
}

/// What `mcp_search_tools` found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SearchResponse {
    /// The tools, best first.
    pub tools: Vec<Arc<CatalogTool>>,
    /// How many tools matched before the limit.
    pub total: usize,
    /// Names of a `select:` query that match no tool.
    pub not_found: Vec<String>,
    /// Model-facing names of the tools this search promoted.
    pub promoted: Vec<String>,
}

impl SearchResponse {
    /// The JSON the model reads:
    /// `{"tools":[{"name","description","input_schema"}],"count","total"}`, plus `not_found`
    /// and `promoted` when they are not empty.
    pub fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.model_name(),
                    "description": t.description().unwrap_or(""),
                    "input_schema": t.input_schema.value(),
                })
            })
            .collect();
        let mut out = json!({"tools": tools, "count": self.tools.len(), "total": self.total});
        if !self.not_found.is_empty() {
            out["not_found"] = json!(self.not_found);
        }
        if !self.promoted.is_empty() {
            out["promoted"] = json!(self.promoted);
        }
        out
    }
}

/// Prepared catalog entries, each with the listed tool it was made from.
type Prepared<'t> = Vec<(Arc<CatalogTool>, &'t Tool)>;

struct ServerState {
    identity: Option<String>,
    session: Arc<dyn ToolSession>,
    /// Its tools, in listing order.
    tools: Vec<Arc<CatalogTool>>,
    /// The tools it listed that were left out.
    skipped: Vec<SkippedTool>,
}

/// A catalog tool in a set keyed by one of its names, so that the set holds no copy of the
/// name: `K` picks the name (the id, or the model-facing name).
struct Keyed<const K: u8>(Arc<CatalogTool>);

/// [`Keyed`] by external id.
type ById = Keyed<0>;
/// [`Keyed`] by model-facing name.
type ByName = Keyed<1>;

impl<const K: u8> Keyed<K> {
    fn key(&self) -> &str {
        match K {
            0 => &self.0.id,
            _ => &self.0.name,
        }
    }
}

impl<const K: u8> std::borrow::Borrow<str> for Keyed<K> {
    fn borrow(&self) -> &str {
        self.key()
    }
}

impl<const K: u8> std::hash::Hash for Keyed<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that lookups by `&str` find it.
        self.key().hash(state);
    }
}

impl<const K: u8> PartialEq for Keyed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<const K: u8> Eq for Keyed<K> {}

#[derive(Default)]
struct State {
    servers: BTreeMap<String, ServerState>,
    /// Every tool, by external id.
    tools: HashSet<ById>,
    /// Every tool, by model-facing name.
    model_names: HashSet<ByName>,
    index: SearchIndex,
    /// External ids, in promotion order.
    promoted: Vec<String>,
}

impl State {
    /// The tool a model (or an operator) names: model-facing name, external id, or a remote
    /// name that only one server has.
    fn find(&self, name: &str) -> Option<&Arc<CatalogTool>> {
        if let Some(tool) = self.model_names.get(name) {
            return Some(&tool.0);
        }
        if let Some(tool) = self.tools.get(name) {
            return Some(&tool.0);
        }
        let mut by_remote = self.all().filter(|t| t.remote_name == name);
        match (by_remote.next(), by_remote.next()) {
            (Some(tool), None) => Some(tool),
            _ => None,
        }
    }

    /// The tool with this external id.
    fn get(&self, id: &str) -> Option<&Arc<CatalogTool>> {
        self.tools.get(id).map(|t| &t.0)
    }

    /// Every tool, in no order.
    fn all(&self) -> impl Iterator<Item = &Arc<CatalogTool>> {
        self.tools.iter().map(|t| &t.0)
    }

    /// Removes a server's tools from the sets (not from the index).
    fn forget(&mut self, tools: &[Arc<CatalogTool>]) {
        for tool in tools {
            self.tools.remove(tool.id.as_str());
            self.model_names.remove(tool.model_name());
        }
    }

    /// Drops promotions of tools that are gone.
    fn prune_promoted(&mut self) {
        let Self {
            promoted, tools, ..
        } = self;
        promoted.retain(|id| tools.contains(id.as_str()));
    }
}

/// The lazy tool catalog of one run (SPEC D1–D8).
///
/// Holds the tools of every server of the run under model-safe `server__tool` names, ranks
/// them for `mcp_search_tools`, validates and forwards `mcp_call_tool` calls through each
/// server's [`ToolSession`], and normalises results. It implements [`ToolCatalog`] (what the
/// model sees) and [`ToolDispatcher`] (what runs a call); a policy/approval layer wraps it and
/// uses [`Catalog::resolve`] to learn the real tool behind a call before it runs.
///
/// All methods take `&self`: servers can be added, re-listed (`tools/list_changed`) and
/// removed while calls run.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{ToolCall, ToolCatalog, ToolDispatcher};
/// use mcp_catalog::{Catalog, CatalogConfig, ServerTools};
/// use mcp_catalog::testing::FakeServer;
/// use serde_json::json;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let fake = Arc::new(FakeServer::everything());
/// let catalog = Catalog::new(CatalogConfig::default());
/// catalog.add_server(ServerTools::new("demo", fake.clone(), fake.tools())).unwrap();
///
/// // The model sees the lazy surface…
/// let names: Vec<String> = catalog.tools().into_iter().map(|t| t.name).collect();
/// assert_eq!(names, ["mcp_search_tools", "mcp_call_tool"]);
///
/// // …searches…
/// let args = json!({"query": "echo the input"}).as_object().unwrap().clone();
/// let found = catalog.dispatch(ToolCall::new("1", "mcp_search_tools", args)).await.unwrap();
/// assert_eq!(found.structured.unwrap()["tools"][0]["name"], "demo__echo");
///
/// // …and calls.
/// let args = json!({"tool_name": "demo__echo", "arguments": {"text": "hi"}});
/// let out = catalog
///     .dispatch(ToolCall::new("2", "mcp_call_tool", args.as_object().unwrap().clone()))
///     .await
///     .unwrap();
/// assert_eq!(out.structured, Some(json!({"text": "hi"})));
/// # });
/// ```
pub struct Catalog {
    config: CatalogConfig,
    natives: Vec<ToolDescriptor>,
    native_dispatcher: Option<Arc<dyn ToolDispatcher>>,
    state: RwLock<State>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.read();
        f.debug_struct("Catalog")
            .field("config", &self.config)
            .field("natives", &self.natives.len())
            .field("servers", &state.servers.keys().collect::<Vec<_>>())
            .field("tools", &state.tools.len())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// An empty catalog with no native tools.
    pub fn new(config: CatalogConfig) -> Self {
        let state = State {
            index: SearchIndex::new(config.ranking.clone()),
            ..State::default()
        };
        Self {
            config,
            natives: Vec::new(),
            native_dispatcher: None,
            state: RwLock::new(state),
        }
    }

    /// An empty catalog that also shows the agent's own tools and runs them with `dispatcher`.
    ///
    /// Fails when two native tools share a name or one is named like the lazy surface
    /// (`mcp_search_tools`, `mcp_call_tool`).
    pub fn with_native_tools(
        config: CatalogConfig,
        tools: Vec<ToolDescriptor>,
        dispatcher: Arc<dyn ToolDispatcher>,
    ) -> Result<Self, CatalogError> {
        let mut seen: HashMap<&str, ()> = HashMap::new();
        for tool in &tools {
            if tool.name == SEARCH_TOOL || tool.name == CALL_TOOL {
                return Err(CatalogError::NameCollision {
                    name: tool.name.clone(),
                    existing: tool.name.clone(),
                    incoming: format!("native tool `{}`", tool.name),
                });
            }
            if seen.insert(&tool.name, ()).is_some() {
                return Err(CatalogError::NameCollision {
                    name: tool.name.clone(),
                    existing: tool.name.clone(),
                    incoming: tool.name.clone(),
                });
            }
        }
        let mut catalog = Self::new(config);
        catalog.natives = tools;
        catalog.native_dispatcher = Some(dispatcher);
        Ok(catalog)
    }

    /// The settings.
    pub fn config(&self) -> &CatalogConfig {
        &self.config
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a server with its tools, or replaces the server of the same key.
    ///
    /// Fails, changing nothing, when a tool's name is empty or listed twice, or when a tool
    /// would be shown under the same model-facing name as another tool of the catalog or a
    /// native tool; the error names both. A tool out of the [`ToolLimits`] is left out and
    /// reported by [`skipped_tools`](Self::skipped_tools); its server's other tools join.
    pub fn add_server(&self, server: ServerTools) -> Result<(), CatalogError> {
        if server.key.is_empty() {
            return Err(CatalogError::InvalidServer {
                server: server.key,
                reason: "the key is empty".into(),
            });
        }
        let mut state = self.write();
        let (tools, skipped) = self.prepare(&state, &server.key, &server.tools)?;
        Self::install(&mut state, &server.key, tools, skipped);
        let entry = state
            .servers
            .get_mut(&server.key)
            .expect("install registers the server");
        entry.identity = server.identity;
        entry.session = server.session;
        Ok(())
    }

    /// Replaces the tools of a known server (after `notifications/tools/list_changed`),
    /// re-indexing that server only. Promoted tools that still exist stay promoted.
    pub fn replace_tools(&self, server: &str, tools: &[Tool]) -> Result<(), CatalogError> {
        let mut state = self.write();
        if !state.servers.contains_key(server) {
            return Err(CatalogError::InvalidServer {
                server: server.to_owned(),
                reason: "no such server in the catalog".into(),
            });
        }
        let (prepared, skipped) = self.prepare(&state, server, tools)?;
        Self::install(&mut state, server, prepared, skipped);
        Ok(())
    }

    /// The tools of `server` that its last listing offered and the catalog left out (a name or
    /// schema out of the [`ToolLimits`]), in listing order.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_catalog::{Catalog, CatalogConfig, ServerTools, SkipReason};
    /// use mcp_catalog::testing::{Behavior, FakeServer, tool};
    /// use serde_json::json;
    ///
    /// let fake = Arc::new(
    ///     FakeServer::new()
    ///         .with_tool(tool("fine", "Fine.", json!({"type": "object"})), Behavior::Echo)
    ///         .with_tool(tool("red\u{1b}[31m", "Escapes.", json!({"type": "object"})), Behavior::Echo),
    /// );
    /// let catalog = Catalog::new(CatalogConfig::default());
    /// catalog.add_server(fake.into_server("evil")).unwrap();
    /// assert_eq!(catalog.len(), 1);
    /// let skipped = catalog.skipped_tools("evil");
    /// assert_eq!(skipped[0].reason, SkipReason::NameCharacters);
    /// assert_eq!(skipped[0].tool, "red\\u{1b}[31m");
    /// ```
    pub fn skipped_tools(&self, server: &str) -> Vec<SkippedTool> {
        self.read()
            .servers
            .get(server)
            .map(|s| s.skipped.clone())
            .unwrap_or_default()
    }

    /// Removes a server and its tools. Returns whether it was there.
    pub fn remove_server(&self, server: &str) -> bool {
        let mut state = self.write();
        let Some(old) = state.servers.remove(server) else {
            return false;
        };
        state.forget(&old.tools);
        state.index.remove_server(server);
        state.prune_promoted();
        true
    }

    /// Builds the catalog entries for a server's tools, checking names and bounds, without
    /// changing anything. Each entry comes with the tool it was made from (whose parsed schema
    /// the index reads); tools out of bounds are returned apart.
    fn prepare<'t>(
        &self,
        state: &State,
        server: &str,
        tools: &'t [Tool],
    ) -> Result<(Prepared<'t>, Vec<SkippedTool>), CatalogError> {
        let limits = &self.config.tool_limits;
        let mut out: Prepared<'t> = Vec::with_capacity(tools.len());
        let mut skipped = Vec::new();
        let mut new_names: HashMap<String, String> = HashMap::new();
        let mut remote_seen: HashMap<&str, ()> = HashMap::new();
        for tool in tools {
            let remote: &str = &tool.name;
            if remote.is_empty() {
                return Err(CatalogError::InvalidTool {
                    server: server.to_owned(),
                    tool: String::new(),
                    reason: "the name is empty".into(),
                });
            }
            let (input_schema, output_schema) = match check_tool(tool, limits) {
                Ok(schemas) => schemas,
                Err(reason) => {
                    skipped.push(SkippedTool::new(server, remote, reason));
                    continue;
                }
            };
            if remote_seen.insert(remote, ()).is_some() {
                return Err(CatalogError::InvalidTool {
                    server: server.to_owned(),
                    tool: remote.to_owned(),
                    reason: "listed twice".into(),
                });
            }
            let id = external_name(server, remote);
            let name = model_name(server, remote);
            let collision = new_names.get(&name).cloned().or_else(|| {
                state
                    .model_names
                    .get(name.as_str())
                    .filter(|existing| existing.0.server != server)
                    .map(|existing| existing.0.id.clone())
                    .or_else(|| {
                        (name == SEARCH_TOOL
                            || name == CALL_TOOL
                            || self.natives.iter().any(|n| n.name == name))
                        .then(|| format!("native tool `{name}`"))
                    })
            });
            if let Some(existing) = collision {
                return Err(CatalogError::NameCollision {
                    name,
                    existing,
                    incoming: id,
                });
            }
            debug_assert!(crate::names::is_model_safe(&name), "{name}");
            new_names.insert(name.clone(), id.clone());
            let (description, annotations) = texts(tool, limits);
            let entry = CatalogTool {
                id,
                server: server.to_owned(),
                remote_name: remote.to_owned(),
                name,
                description,
                annotations,
                input_schema: Schema::new(input_schema),
                output_schema: output_schema.map(Schema::new),
                validator: OnceLock::new(),
            };
            out.push((Arc::new(entry), tool));
        }
        Ok((out, skipped))
    }

    /// Puts prepared tools in place of the server's old ones and re-indexes that server.
    fn install(state: &mut State, server: &str, tools: Prepared<'_>, skipped: Vec<SkippedTool>) {
        if let Some(old) = state.servers.get_mut(server) {
            let old = std::mem::take(&mut old.tools);
            state.forget(&old);
        }
        state.index.replace_server(
            server,
            tools.iter().map(|(t, source)| {
                ToolText::new(&t.id, &t.server, &t.remote_name)
                    .with_title(t.annotations.title.as_deref())
                    .with_description(t.description())
                    .with_input_schema(Some(&source.input_schema))
            }),
        );
        let tools: Vec<Arc<CatalogTool>> = tools.into_iter().map(|(t, _)| t).collect();
        for tool in &tools {
            state.model_names.replace(Keyed(Arc::clone(tool)));
            state.tools.replace(Keyed(Arc::clone(tool)));
        }
        match state.servers.get_mut(server) {
            Some(entry) => {
                entry.tools = tools;
                entry.skipped = skipped;
            }
            None => {
                state.servers.insert(
                    server.to_owned(),
                    ServerState {
                        identity: None,
                        session: Arc::new(Closed),
                        tools,
                        skipped,
                    },
                );
            }
        }
        state.prune_promoted();
    }

    /// The server keys, sorted.
    pub fn servers(&self) -> Vec<String> {
        self.read().servers.keys().cloned().collect()
    }

    /// How many MCP tools the catalog holds.
    pub fn len(&self) -> usize {
        self.read().tools.len()
    }

    /// True when the catalog holds no MCP tool.
    pub fn is_empty(&self) -> bool {
        self.read().tools.is_empty()
    }

    /// Any MCP tool by model-facing name, external `server__tool` id, or a remote name only one
    /// server has — exposed first-class or not.
    pub fn lookup(&self, name: &str) -> Option<Arc<CatalogTool>> {
        self.read().find(name).cloned()
    }

    /// Every MCP tool, sorted by external name (for listings; the model sees [`Catalog::search`]).
    pub fn entries(&self) -> Vec<Arc<CatalogTool>> {
        let mut all: Vec<_> = self.read().all().cloned().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// Whether the model currently sees every tool first-class.
    pub fn is_eager(&self) -> bool {
        let state = self.read();
        self.eager(&state)
    }

    fn eager(&self, state: &State) -> bool {
        match self.config.exposure {
            Exposure::Lazy => false,
            Exposure::Eager => true,
            Exposure::Auto {
                max_tools,
                max_schema_bytes,
            } => {
                let bytes: usize = state.all().map(|t| t.schema_bytes()).sum();
                state.tools.len() <= max_tools && bytes <= max_schema_bytes
            }
        }
    }

    /// Promotes a tool to first-class for the rest of the run (SPEC D6): from now on
    /// [`tools`](ToolCatalog::tools) lists it with its own schema. Promoting a tool twice is a
    /// no-op. Returns its descriptor.
    pub fn promote(&self, name: &str) -> Result<ToolDescriptor, CatalogError> {
        let mut state = self.write();
        let tool = state
            .find(name)
            .cloned()
            .ok_or_else(|| CatalogError::UnknownTool {
                tool: name.to_owned(),
            })?;
        if !state.promoted.contains(&tool.id) {
            if state.promoted.len() >= self.config.max_promoted {
                return Err(CatalogError::PromotionLimit {
                    tool: tool.id.clone(),
                    limit: self.config.max_promoted,
                });
            }
            state.promoted.push(tool.id.clone());
        }
        Ok(tool.descriptor())
    }

    /// Runs a search as `mcp_search_tools` does.
    ///
    /// `select:a,b` returns the named tools (model-facing or external names) in that order;
    /// any other query is ranked; an empty query lists every tool by name. Fails for an
    /// unknown `server` filter, with the list of known servers, and for a query longer than
    /// [`MAX_QUERY_CHARS`](crate::search::MAX_QUERY_CHARS) characters, naming the limit. Only
    /// the first [`MAX_QUERY_TERMS`](crate::search::MAX_QUERY_TERMS) distinct words of a query
    /// are ranked on, so one search costs about the same whatever the model sends.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_catalog::{Catalog, CatalogConfig, SearchRequest, ServerTools};
    /// use mcp_catalog::testing::FakeServer;
    ///
    /// let fake = Arc::new(FakeServer::everything());
    /// let catalog = Catalog::new(CatalogConfig::default());
    /// catalog.add_server(ServerTools::new("demo", fake.clone(), fake.tools())).unwrap();
    /// let found = catalog.search(&SearchRequest::new("select:demo__fail,demo__echo")).unwrap();
    /// let names: Vec<&str> = found.tools.iter().map(|t| t.model_name()).collect();
    /// assert_eq!(names, ["demo__fail", "demo__echo"]);
    /// ```
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse, ToolError> {
        let limit = request
            .limit
            .unwrap_or(self.config.default_limit)
            .clamp(1, self.config.max_limit.max(1));
        let max_chars = crate::search::MAX_QUERY_CHARS;
        if request.query.len() > max_chars && request.query.chars().nth(max_chars).is_some() {
            return Err(ToolError::InvalidArguments {
                server: None,
                tool: SEARCH_TOOL.into(),
                message: format!(
                    "`/query`: longer than the limit of {max_chars} characters; search with a \
                     few words"
                ),
            });
        }
        let mut response = {
            let state = self.read();
            if let Some(server) = &request.server
                && !state.servers.contains_key(server)
            {
                let known: Vec<&str> = state.servers.keys().map(String::as_str).collect();
                return Err(ToolError::InvalidArguments {
                    server: None,
                    tool: SEARCH_TOOL.into(),
                    message: format!(
                        "unknown server `{server}`; the servers are: {}",
                        known.join(", ")
                    ),
                });
            }
            let query = request.query.trim();
            if let Some(names) = query.strip_prefix("select:") {
                let mut response = SearchResponse::default();
                for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    match state.find(name) {
                        Some(tool) if request.server.as_ref().is_none_or(|s| *s == tool.server) => {
                            if !response.tools.iter().any(|t| t.id == tool.id) {
                                response.tools.push(Arc::clone(tool));
                            }
                        }
                        _ => response.not_found.push(name.to_owned()),
                    }
                }
                response.total = response.tools.len();
                response.tools.truncate(limit);
                response
            } else {
                let found = state.index.search(query, request.server.as_deref(), limit);
                SearchResponse {
                    tools: found
                        .hits
                        .iter()
                        .filter_map(|h| state.get(&h.id).cloned())
                        .collect(),
                    total: found.total,
                    ..SearchResponse::default()
                }
            }
        };
        if request.promote && self.config.max_promoted > 0 {
            for tool in &response.tools {
                if self.promote(&tool.id).is_ok() {
                    response.promoted.push(tool.model_name().to_owned());
                }
            }
        }
        Ok(response)
    }

    /// Resolves a model's call to what it will run, without running it: the lazy surface's
    /// own tools, a native tool, or the real MCP tool (also behind `mcp_call_tool`).
    ///
    /// Fails for an unknown tool (with up to three close matches) and for a malformed
    /// `mcp_call_tool` input. Arguments are validated later, by [`Catalog::call`].
    pub fn resolve(&self, call: &ToolCall) -> Result<CallTarget, ToolError> {
        match call.name.as_str() {
            SEARCH_TOOL => return Ok(CallTarget::Search),
            CALL_TOOL => {
                let (name, arguments) = call_tool_input(&call.arguments)?;
                return self
                    .resolve_mcp(&name, arguments, true, &call.id)
                    .map(CallTarget::Mcp);
            }
            _ => {}
        }
        if self.natives.iter().any(|n| n.name == call.name) {
            return Ok(CallTarget::Native {
                name: call.name.clone(),
            });
        }
        self.resolve_mcp(&call.name, call.arguments.clone(), false, &call.id)
            .map(CallTarget::Mcp)
    }

    fn resolve_mcp(
        &self,
        name: &str,
        arguments: JsonObject,
        via_call_tool: bool,
        call_id: &str,
    ) -> Result<ResolvedTool, ToolError> {
        let state = self.read();
        let Some(tool) = state.find(name) else {
            let mut candidates: Vec<&str> = state.all().map(|t| t.model_name()).collect();
            if !via_call_tool {
                candidates.extend(self.natives.iter().map(|n| n.name.as_str()));
                candidates.extend([SEARCH_TOOL, CALL_TOOL]);
            }
            candidates.sort_unstable();
            return Err(ToolError::unknown_tool(name, suggest(name, candidates, 3)));
        };
        let server_identity = state
            .servers
            .get(&tool.server)
            .and_then(|s| s.identity.clone());
        Ok(ResolvedTool {
            tool: Arc::clone(tool),
            server_identity,
            arguments,
            via_call_tool,
            call_id: call_id.to_owned(),
        })
    }

    /// Calls a resolved MCP tool: validates the arguments against its input schema, sends them
    /// unchanged through its server's session, and normalises the result.
    pub async fn call(&self, resolved: ResolvedTool) -> Result<ToolOutput, ToolError> {
        let tool = &resolved.tool;
        match tool.validator() {
            Ok(validator) => {
                if let Err(message) = validate::check(validator, &resolved.arguments) {
                    return Err(ToolError::InvalidArguments {
                        server: Some(tool.server.clone()),
                        tool: tool.id.clone(),
                        message,
                    });
                }
            }
            Err(reason) => tracing::warn!(
                tool = %tool.id,
                %reason,
                "the input schema does not compile; calling without validation"
            ),
        }
        let session = {
            let state = self.read();
            match state.servers.get(&tool.server) {
                Some(server) if state.tools.contains(tool.id.as_str()) => {
                    Arc::clone(&server.session)
                }
                _ => {
                    return Err(ToolError::unknown_tool(tool.id.clone(), Vec::new()));
                }
            }
        };
        let result = session
            .call_tool(&tool.remote_name, resolved.arguments)
            .await
            .map_err(|e| session_error(&tool.server, &tool.id, e))?;
        normalize_result(&tool.server, &tool.id, result)
    }

    fn search_descriptor(&self, state: &State) -> ToolDescriptor {
        let servers: Vec<&str> = state.servers.keys().map(String::as_str).collect();
        let shown = servers
            .iter()
            .take(20)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let more = servers.len().saturating_sub(20);
        let servers_text = match (servers.len(), more) {
            (0, _) => String::from("no servers connected"),
            (_, 0) => format!("servers: {shown}"),
            (_, n) => format!("servers: {shown} and {n} more"),
        };
        let mut properties = json!({
            "query": {
                "type": "string",
                "description": "What you want to do, in words (any order), e.g. \"create github issue\". \
                    `select:server__tool,other` fetches tools by name; an empty query lists every tool.",
                "maxLength": crate::search::MAX_QUERY_CHARS
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": self.config.max_limit,
                "description": format!(
                    "How many tools to return (default {}, at most {}).",
                    self.config.default_limit, self.config.max_limit
                )
            },
            "server": {"type": "string", "description": "Only tools of this server."}
        });
        if self.config.max_promoted > 0 {
            properties["promote"] = json!({
                "type": "boolean",
                "description": "Also make the returned tools directly callable for the rest of the run."
            });
        }
        let schema = json!({"type": "object", "properties": properties, "required": ["query"]});
        ToolDescriptor::new(SEARCH_TOOL, object(schema))
            .with_description(format!(
                "Search the tools of the connected MCP servers ({} tools; {servers_text}). \
                 Returns the best matches with their name, description and input_schema; \
                 run one with mcp_call_tool.",
                state.tools.len()
            ))
            .with_annotations(ToolAnnotations::read_only())
    }

    fn call_descriptor() -> ToolDescriptor {
        let schema = json!({
            "type": "object",
            "properties": {
                "tool_name": {
                    "type": "string",
                    "description": "The tool's name, as mcp_search_tools returned it."
                },
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments, matching its input_schema."
                }
            },
            "required": ["tool_name", "arguments"]
        });
        ToolDescriptor::new(CALL_TOOL, object(schema)).with_description(
            "Call a tool of a connected MCP server by the name mcp_search_tools returned, \
             with arguments matching its input_schema.",
        )
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// Checks a tool against the limits: its name, then the size and depth of its schemas. Returns
/// the input and output schemas as compact JSON text.
pub(crate) fn check_tool(
    tool: &Tool,
    limits: &ToolLimits,
) -> Result<(String, Option<String>), SkipReason> {
    let chars = tool.name.chars().count();
    if chars > limits.max_name_chars {
        return Err(SkipReason::NameTooLong {
            chars,
            limit: limits.max_name_chars,
        });
    }
    if tool.name.chars().any(is_unsafe_char) {
        return Err(SkipReason::NameCharacters);
    }
    let input = check_schema("input", &tool.input_schema, limits)?;
    let output = match &tool.output_schema {
        Some(output) => Some(check_schema("output", output, limits)?),
        None => None,
    };
    Ok((input, output))
}

/// The schema as compact JSON text, if it is within the limits of size and depth.
fn check_schema(
    which: &'static str,
    schema: &JsonObject,
    limits: &ToolLimits,
) -> Result<String, SkipReason> {
    /// Keeps the bytes written, failing past the limit (so a huge schema is not written whole).
    struct Bounded {
        text: Vec<u8>,
        limit: usize,
    }
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.text.len() + buf.len() > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            self.text.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded {
        text: Vec::new(),
        limit: limits.max_schema_bytes,
    };
    if serde_json::to_writer(&mut out, schema).is_err() {
        return Err(SkipReason::SchemaTooLarge {
            which,
            limit: limits.max_schema_bytes,
        });
    }
    if object_too_deep(schema, limits.max_schema_depth) {
        return Err(SkipReason::SchemaTooDeep {
            which,
            limit: limits.max_schema_depth,
        });
    }
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out.text).unwrap_or_default())
}

/// True when `object` (one level) and what it holds need more than `levels` levels.
fn object_too_deep(object: &JsonObject, levels: usize) -> bool {
    levels == 0 || object.values().any(|v| too_deep(v, levels - 1))
}

fn too_deep(value: &Value, levels: usize) -> bool {
    match value {
        Value::Object(o) => object_too_deep(o, levels),
        Value::Array(a) => levels == 0 || a.iter().any(|v| too_deep(v, levels - 1)),
        _ => false,
    }
}

/// The texts a model sees of an MCP tool: the server's description and its hints with the title
/// (bounded, without control characters).
fn texts(tool: &Tool, limits: &ToolLimits) -> (Option<Box<str>>, ToolAnnotations) {
    let title = |t: &String| clean(t, limits.max_title_bytes, Lines::Single).into_owned();
    let description = tool
        .description
        .as_ref()
        .map(|s| clean(s, limits.max_description_bytes, Lines::Multi).into());
    let mut hints = ToolAnnotations::default();
    if let Some(a) = &tool.annotations {
        hints.title = a.title.as_ref().map(title);
        hints.read_only_hint = a.read_only_hint;
        hints.destructive_hint = a.destructive_hint;
        hints.idempotent_hint = a.idempotent_hint;
        hints.open_world_hint = a.open_world_hint;
    }
    if hints.title.is_none() {
        hints.title = tool.title.as_ref().map(title);
    }
    (description, hints)
}

/// Parses `mcp_call_tool`'s input: `tool_name` (a string) and `arguments` (an object; absent or
/// `null` means `{}`, and a string holding a JSON object is accepted, as some models send one).
fn call_tool_input(input: &JsonObject) -> Result<(String, JsonObject), ToolError> {
    let invalid = |message: String| ToolError::InvalidArguments {
        server: None,
        tool: CALL_TOOL.into(),
        message,
    };
    let name = match input.get("tool_name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(invalid(
                "`(root)`: \"tool_name\" is a required property".into(),
            ));
        }
        Some(other) => return Err(invalid(format!("`/tool_name`: {other} is not a string"))),
    };
    let arguments = match input.get("arguments") {
        None | Some(Value::Null) => JsonObject::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Err(invalid(
                    "`/arguments`: must be an object of the tool's arguments".into(),
                ));
            }
        },
        Some(other) => {
            return Err(invalid(format!(
                "`/arguments`: {other} is not an object of the tool's arguments"
            )));
        }
    };
    Ok((name, arguments))
}

/// Maps a session failure to the error the model and the events see.
pub(crate) fn session_error(server: &str, tool: &str, error: SessionError) -> ToolError {
    let server = Some(server.to_owned());
    let tool = tool.to_owned();
    match error {
        SessionError::Rpc { code, message } => ToolError::Invocation {
            server,
            tool,
            message: format!("{message} (JSON-RPC error {code})"),
        },
        SessionError::Timeout { after } => ToolError::Timeout {
            server,
            tool,
            after,
        },
        other => ToolError::Transport {
            server,
            tool,
            source: Box::new(other),
        },
    }
}

/// The session of a server entry created before its real session is set.
struct Closed;

#[async_trait]
impl ToolSession for Closed {
    async fn call_tool(
        &self,
        _: &str,
        _: JsonObject,
    ) -> Result<rmcp::model::CallToolResult, SessionError> {
        Err(SessionError::Closed)
    }
}

impl ToolCatalog for Catalog {
    /// Native tools first, then — lazily — `mcp_search_tools` and `mcp_call_tool`, then pinned
    /// tools (in configuration order) and promoted ones (in promotion order); or, eagerly,
    /// every MCP tool sorted by name.
    fn tools(&self) -> Vec<ToolDescriptor> {
        let state = self.read();
        let mut out = self.natives.clone();
        if self.eager(&state) {
            let mut all: Vec<&Arc<CatalogTool>> = state.all().collect();
            all.sort_by(|a, b| a.model_name().cmp(b.model_name()));
            out.extend(all.into_iter().map(|t| t.descriptor()));
            return out;
        }
        out.push(self.search_descriptor(&state));
        out.push(Self::call_descriptor());
        let mut shown: Vec<&str> = Vec::new();
        let pinned = self.config.pinned.iter().filter_map(|p| state.find(p));
        let promoted = state.promoted.iter().filter_map(|id| state.get(id));
        for tool in pinned.chain(promoted) {
            if !shown.contains(&tool.id.as_str()) {
                shown.push(&tool.id);
                out.push(tool.descriptor());
            }
        }
        out
    }

    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        self.tools().into_iter().find(|t| t.name == name)
    }
}

#[async_trait]
impl ToolDispatcher for Catalog {
    /// Runs `mcp_search_tools`, `mcp_call_tool`, first-class MCP tools (eager, pinned,
    /// promoted — or any MCP tool called by its model-facing name) and native tools.
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        match self.resolve(&call)? {
            CallTarget::Search => {
                let request =
                    SearchRequest::from_arguments(&call.arguments).map_err(|message| {
                        ToolError::InvalidArguments {
                            server: None,
                            tool: SEARCH_TOOL.into(),
                            message,
                        }
                    })?;
                let response = self.search(&request)?;
                Ok(ToolOutput::structured(response.to_json()))
            }
            CallTarget::Native { .. } => match &self.native_dispatcher {
                Some(native) => native.dispatch(call).await,
                None => Err(ToolError::unknown_tool(call.name, Vec::new())),
            },
            CallTarget::Mcp(resolved) => self.call(resolved).await,
        }
    }
}
