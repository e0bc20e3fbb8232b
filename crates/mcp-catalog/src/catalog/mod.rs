//! The catalog: tools of every server of a run, under model-safe names, searchable and callable.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use agent_core::{JsonObject, ToolAnnotations, ToolDescriptor, ToolDispatcher};
use async_trait::async_trait;
use rmcp::model::Tool;
use serde_json::Value;

use crate::SessionError;
use crate::names::{external_name, model_name};
use crate::search::{SearchIndex, ToolText};
use crate::session::ToolSession;
use crate::validate::{self, Compiled};
use crate::{CatalogConfig, CatalogError, SkippedTool};

/// The name of the search tool the model sees.
pub const SEARCH_TOOL: &str = "mcp_search_tools";
/// The name of the generic call tool the model sees.
pub const CALL_TOOL: &str = "mcp_call_tool";
/// The name of the tool the model reads the rest of a cut output with ([`ReadOutput`]).
pub const READ_OUTPUT_TOOL: &str = "mcp_read_output";
/// The name of the tool the model reads a server's resources, prompts and skill files with.
pub const READ_TOOL: &str = "mcp_read";

mod dispatch;
mod limits;
mod offered;
mod read;
mod read_output;
mod semantic;
mod surface;

pub use dispatch::{CallTarget, ResolvedTool};
use limits::texts;
use limits::{Checked, check_listing};
pub use offered::Found;
pub use read::ResolvedRead;
pub use read_output::ReadOutput;
pub use surface::{SearchRequest, SearchResponse};

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
    /// Its metric labels, worked out at its first call.
    labels: OnceLock<agent_core::telemetry::CallLabels>,
    /// Refused by the identity rules: never shown to the model (not listed, not searched, not
    /// promoted), while a call to it still resolves, so it is denied naming the rule.
    hidden: bool,
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

    /// True when the catalog's identity rules
    /// ([`CatalogConfig::identity_rules`](crate::CatalogConfig::identity_rules)) refuse the tool:
    /// the model is never shown it (tool list, search, promotion) and a call to it is denied.
    pub fn is_hidden(&self) -> bool {
        self.hidden
    }

    /// The server's description (cut to
    /// [`ToolLimits::max_description_bytes`](crate::ToolLimits::max_description_bytes), without
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

    /// Its calls' metric labels (server and remote name), worked out once.
    fn labels(&self) -> &agent_core::telemetry::CallLabels {
        self.labels.get_or_init(|| {
            agent_core::telemetry::CallLabels::of(Some(&self.server), &self.remote_name)
        })
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
    /// The servers' resources, templates, prompts and skills.
    offered: offered::Offered,
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

    /// [`find`](Self::find), for the model: a hidden tool is not found.
    fn find_shown(&self, name: &str) -> Option<&Arc<CatalogTool>> {
        self.find(name).filter(|t| !t.hidden)
    }

    /// The tool with this external id.
    fn get(&self, id: &str) -> Option<&Arc<CatalogTool>> {
        self.tools.get(id).map(|t| &t.0)
    }

    /// Every tool, in no order.
    fn all(&self) -> impl Iterator<Item = &Arc<CatalogTool>> {
        self.tools.iter().map(|t| &t.0)
    }

    /// Every tool the model may be shown, in no order.
    fn shown(&self) -> impl Iterator<Item = &Arc<CatalogTool>> {
        self.all().filter(|t| !t.hidden)
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

/// The lazy tool catalog of one run.
///
/// Holds the tools of every server of the run under model-safe `server__tool` names, ranks
/// them for `mcp_search_tools`, validates and forwards `mcp_call_tool` calls through each
/// server's [`ToolSession`], and normalises results. It implements
/// [`ToolCatalog`](agent_core::ToolCatalog) (what the model sees) and
/// [`CallResolver`](agent_core::CallResolver): it runs calls only as the wrapped side of a
/// [`Governed`](agent_core::Governed) layer, which learns the real tool behind each call
/// (also behind `mcp_call_tool`) and puts it through identity rules, policy, approval, output
/// limit, events and history before it runs. Tools the identity rules
/// ([`CatalogConfig::identity_rules`]) refuse are never shown to the model.
///
/// All methods take `&self`: servers can be added, re-listed (`tools/list_changed`) and
/// removed while calls run.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{GovernedLayer, ToolCall, ToolCatalog, ToolDispatcher};
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
/// let governed = GovernedLayer::new().layer(catalog);
/// let args = json!({"query": "echo the input"}).as_object().unwrap().clone();
/// let found = governed.dispatch(ToolCall::new("1", "mcp_search_tools", args)).await.unwrap();
/// assert_eq!(found.structured.unwrap()["tools"][0]["name"], "demo__echo");
///
/// // …and calls, through the governed layer.
/// let args = json!({"tool_name": "demo__echo", "arguments": {"text": "hi"}});
/// let out = governed
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
    semantic: semantic::Slot,
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
            semantic: semantic::Slot::default(),
        }
    }

    /// An empty catalog that also shows the agent's own tools and runs them with `dispatcher`.
    ///
    /// Fails when two native tools share a name or one is named like the lazy surface
    /// (`mcp_search_tools`, `mcp_call_tool`, `mcp_read`).
    pub fn with_native_tools(
        config: CatalogConfig,
        tools: Vec<ToolDescriptor>,
        dispatcher: Arc<dyn ToolDispatcher>,
    ) -> Result<Self, CatalogError> {
        let mut seen: HashMap<&str, ()> = HashMap::new();
        for tool in &tools {
            if [SEARCH_TOOL, CALL_TOOL, READ_TOOL].contains(&tool.name.as_str()) {
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
    /// Fails, changing nothing, when a tool would be shown under the same model-facing name as
    /// another tool of the catalog or a native tool; the error names both. A malformed tool —
    /// its name empty or listed more than once (every copy), or out of the
    /// [`ToolLimits`](crate::ToolLimits) — is left out and reported by
    /// [`skipped_tools`](Self::skipped_tools); its server's other tools join.
    pub fn add_server(&self, server: ServerTools) -> Result<(), CatalogError> {
        if server.key.is_empty() {
            return Err(CatalogError::InvalidServer {
                server: server.key,
                reason: "the key is empty".into(),
            });
        }
        let mut state = self.write();
        let identity = server.identity.as_deref();
        let (tools, skipped) = self.prepare(&state, &server.key, identity, &server.tools)?;
        Self::install(&mut state, &server.key, tools, skipped);
        let entry = state
            .servers
            .get_mut(&server.key)
            .expect("install registers the server");
        entry.identity = server.identity;
        entry.session = server.session;
        self.tools_changed(&state);
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
        let identity = state.servers.get(server).and_then(|s| s.identity.clone());
        let (prepared, skipped) = self.prepare(&state, server, identity.as_deref(), tools)?;
        Self::install(&mut state, server, prepared, skipped);
        self.tools_changed(&state);
        Ok(())
    }

    /// The tools of `server` that its last listing offered and the catalog left out (a name
    /// empty or listed more than once, a name or schema out of the
    /// [`ToolLimits`](crate::ToolLimits)), in listing order; a repeated name once.
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
        state.offered.remove(server);
        state.prune_promoted();
        self.tools_changed(&state);
        true
    }

    /// Builds the catalog entries for a server's tools, checking names and bounds, without
    /// changing anything. Each entry comes with the tool it was made from (whose parsed schema
    /// the index reads); tools out of bounds are returned apart.
    fn prepare<'t>(
        &self,
        state: &State,
        server: &str,
        identity: Option<&str>,
        tools: &'t [Tool],
    ) -> Result<(Prepared<'t>, Vec<SkippedTool>), CatalogError> {
        let limits = &self.config.tool_limits;
        let mut out: Prepared<'t> = Vec::with_capacity(tools.len());
        let mut skipped = Vec::new();
        let mut new_names: HashMap<String, String> = HashMap::new();
        for (tool, checked) in tools.iter().zip(check_listing(tools, limits)) {
            let remote: &str = &tool.name;
            let (input_schema, output_schema) = match checked {
                Checked::Kept(input, output) => (input, output),
                Checked::LeftOut(reason) => {
                    skipped.push(SkippedTool::new(server, remote, reason));
                    continue;
                }
                Checked::Repeat => continue,
            };
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
                            || name == READ_TOOL
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
                labels: OnceLock::new(),
                hidden: self.config.identity_rules.allows(identity, remote).is_err(),
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
        // Hidden tools are not indexed: a search never finds them, nor counts them.
        state.index.replace_server(
            server,
            tools.iter().filter(|(t, _)| !t.hidden).map(|(t, source)| {
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

    /// Every MCP tool, sorted by external name (for an operator's listings; the model sees
    /// [`Catalog::search`]). Tools the identity rules hide are included:
    /// [`CatalogTool::is_hidden`] tells them.
    pub fn entries(&self) -> Vec<Arc<CatalogTool>> {
        let mut all: Vec<_> = self.read().all().cloned().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
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
