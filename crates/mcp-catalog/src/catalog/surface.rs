//! The model-facing surface: the lazy or eager tool list, `mcp_search_tools` and
//! `mcp_call_tool`, search and promotion.

use std::sync::Arc;

use agent_core::{JsonObject, ToolAnnotations, ToolCatalog, ToolDescriptor, ToolError};
use serde_json::{Value, json};

use crate::search::{SearchIndex, SearchResults};
use crate::{CatalogError, Exposure};

use super::{CALL_TOOL, Catalog, CatalogTool, Found, READ_TOOL, SEARCH_TOOL, State};

/// A ranking of a query: (index, query, server filter, limit) → results.
pub(crate) type Ranker<'a> = dyn Fn(&SearchIndex, &str, Option<&str>, usize) -> SearchResults + 'a;

/// What `mcp_search_tools` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchRequest {
    /// Words in any order, `select:name[,name]`, or empty to list every tool.
    pub query: String,
    /// How many results (default and cap from [`CatalogConfig`](crate::CatalogConfig)).
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
    /// Set when hybrid ranking is configured but this search ranked by words alone (the
    /// embedder failed, stalled or answered nonsense): why. Not shown to the model.
    pub warning: Option<String>,
    /// Every result, tools and the servers' resources, templates, prompts and skills, best
    /// first (empty when it is [`tools`](Self::tools) alone).
    pub found: Vec<Found>,
}

impl SearchResponse {
    /// The JSON the model reads:
    /// `{"tools":[{"name","description","input_schema","kind":"tool"}],"count","total"}`, plus
    /// `not_found` and `promoted` when they are not empty. A resource, template, prompt or
    /// skill found with the tools is one entry of `tools` too, saying its `kind`, its `server`
    /// and the `mcp_read` arguments that read it (`read_with`).
    pub fn to_json(&self) -> Value {
        let tool = |t: &CatalogTool| {
            json!({
                "name": t.model_name(),
                "description": t.description().unwrap_or(""),
                "input_schema": t.input_schema.value(),
                "kind": "tool",
            })
        };
        let tools: Vec<Value> = if self.found.is_empty() {
            self.tools.iter().map(|t| tool(t)).collect()
        } else {
            self.found
                .iter()
                .map(|f| match f {
                    Found::Tool(t) => tool(t),
                    Found::Feature(f) => f.to_json(),
                })
                .collect()
        };
        let count = tools.len();
        let mut out = json!({"tools": tools, "count": count, "total": self.total});
        if !self.not_found.is_empty() {
            out["not_found"] = json!(self.not_found);
        }
        if !self.promoted.is_empty() {
            out["promoted"] = json!(self.promoted);
        }
        out
    }
}

impl Catalog {
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
                let (count, bytes) = state
                    .shown()
                    .fold((0, 0), |(n, b), t| (n + 1, b + t.schema_bytes()));
                count <= max_tools && bytes <= max_schema_bytes
            }
        }
    }

    /// Promotes a tool to first-class for the rest of the run: from now on
    /// [`tools`](ToolCatalog::tools) lists it with its own schema. Promoting a tool twice is a
    /// no-op. Returns its descriptor.
    pub fn promote(&self, name: &str) -> Result<ToolDescriptor, CatalogError> {
        let mut state = self.write();
        let tool = state
            .find_shown(name)
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

    /// The ids of the tools promoted so far, in promotion order: what [`promote`](Self::promote)
    /// takes to promote them again (in another run of the same servers, say).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_catalog::{Catalog, CatalogConfig, ServerTools};
    /// use mcp_catalog::testing::FakeServer;
    ///
    /// let fake = Arc::new(FakeServer::everything());
    /// let catalog = Catalog::new(CatalogConfig::default());
    /// catalog.add_server(ServerTools::new("demo", fake.clone(), fake.tools())).unwrap();
    /// assert!(catalog.promoted().is_empty());
    /// catalog.promote("demo__echo").unwrap();
    /// let again = Catalog::new(CatalogConfig::default());
    /// again.add_server(ServerTools::new("demo", fake.clone(), fake.tools())).unwrap();
    /// for id in catalog.promoted() {
    ///     again.promote(&id).unwrap();
    /// }
    /// assert_eq!(again.promoted(), catalog.promoted());
    /// ```
    pub fn promoted(&self) -> Vec<String> {
        self.read().promoted.clone()
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
    ///
    /// This ranking is lexical; [`search_ranked`](Self::search_ranked) is the one
    /// `mcp_search_tools` runs, hybrid when an embedder is set.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse, ToolError> {
        self.search_by(request, &|index, query, server, limit| {
            index.search(query, server, limit)
        })
    }

    /// The limit a request gets.
    pub(crate) fn limit_of(&self, request: &SearchRequest) -> usize {
        request
            .limit
            .unwrap_or(self.config.default_limit)
            .clamp(1, self.config.max_limit.max(1))
    }

    /// Refuses a query over [`MAX_QUERY_CHARS`](crate::search::MAX_QUERY_CHARS) characters,
    /// naming the limit, before anything reads it.
    pub(crate) fn check_query(request: &SearchRequest) -> Result<(), ToolError> {
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
        Ok(())
    }

    /// [`search`](Self::search) with the ranking of a non-`select:` query done by `rank`
    /// (index, query, server filter, limit).
    pub(crate) fn search_by(
        &self,
        request: &SearchRequest,
        rank: &Ranker<'_>,
    ) -> Result<SearchResponse, ToolError> {
        let limit = self.limit_of(request);
        Self::check_query(request)?;
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
                    match state.find_shown(name) {
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
                let server = request.server.as_deref();
                let found = rank(&state.index, query, server, limit);
                let tools: Vec<Arc<CatalogTool>> = found
                    .hits
                    .iter()
                    .filter_map(|h| state.get(&h.id).cloned())
                    .collect();
                let (all, more) = state.offered.merge(query, server, limit, &tools, || {
                    state.index.search(query, server, limit)
                });
                let tools = if more == 0 {
                    tools
                } else {
                    all.iter()
                        .filter_map(|f| match f {
                            Found::Tool(t) => Some(Arc::clone(t)),
                            Found::Feature(_) => None,
                        })
                        .collect()
                };
                SearchResponse {
                    tools,
                    total: found.total + more,
                    found: if more == 0 { Vec::new() } else { all },
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
        let reads = if state.offered.any() {
            " Prompts, resources, resource templates and skills are found too, each result \
             saying its kind: read those with mcp_read."
        } else {
            ""
        };
        ToolDescriptor::new(SEARCH_TOOL, object(schema))
            .with_description(format!(
                "Search the tools of the connected MCP servers ({} tools; {servers_text}). \
                 Returns the best matches with their name, description and input_schema; \
                 run one with mcp_call_tool.{reads}",
                state.shown().count()
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

impl ToolCatalog for Catalog {
    /// Native tools first, then — lazily — `mcp_search_tools` and `mcp_call_tool` (and
    /// `mcp_read` when a server offers something to read), then pinned tools (in configuration
    /// order) and promoted ones (in promotion order); or, eagerly, every MCP tool sorted by
    /// name (then `mcp_read`, when offered).
    fn tools(&self) -> Vec<ToolDescriptor> {
        let state = self.read();
        let mut out = self.natives.clone();
        if self.eager(&state) {
            let mut all: Vec<&Arc<CatalogTool>> = state.shown().collect();
            all.sort_by(|a, b| a.model_name().cmp(b.model_name()));
            out.extend(all.into_iter().map(|t| t.descriptor()));
            if state.offered.any() {
                out.push(self.read_descriptor());
            }
            return out;
        }
        out.push(self.search_descriptor(&state));
        out.push(Self::call_descriptor());
        if state.offered.any() {
            out.push(self.read_descriptor());
        }
        let mut shown: Vec<&str> = Vec::new();
        for tool in self.pinned_then_promoted(&state) {
            if !shown.contains(&tool.id.as_str()) {
                shown.push(&tool.id);
                out.push(tool.descriptor());
            }
        }
        out
    }

    /// What [`tools`](Self::tools) lists under `name`, found without building the others.
    fn tool(&self, name: &str) -> Option<ToolDescriptor> {
        if let Some(native) = self.natives.iter().find(|t| t.name == name) {
            return Some(native.clone());
        }
        let state = self.read();
        if name == READ_TOOL && state.offered.any() {
            return Some(self.read_descriptor());
        }
        if self.eager(&state) {
            return state
                .model_names
                .get(name)
                .map(|t| &t.0)
                .filter(|t| !t.hidden)
                .map(|t| t.descriptor());
        }
        match name {
            SEARCH_TOOL => return Some(self.search_descriptor(&state)),
            CALL_TOOL => return Some(Self::call_descriptor()),
            _ => {}
        }
        self.pinned_then_promoted(&state)
            .find(|t| t.model_name() == name)
            .map(|t| t.descriptor())
    }
}

impl Catalog {
    /// The lazy surface's extra tools: pinned ones (in configuration order), then promoted
    /// ones (in promotion order), hidden ones left out; a tool may come twice.
    fn pinned_then_promoted<'a>(
        &'a self,
        state: &'a State,
    ) -> impl Iterator<Item = &'a Arc<CatalogTool>> + 'a {
        let pinned = self
            .config
            .pinned
            .iter()
            .filter_map(|p| state.find_shown(p));
        let promoted = state
            .promoted
            .iter()
            .filter_map(|id| state.get(id))
            .filter(|t| !t.hidden);
        pinned.chain(promoted)
    }
}
