//! The servers' resources, resource templates, prompts and skills in the catalog: indexed in a
//! lexical index of their own beside the tools' (so the tools' ranking, statistics and vectors
//! never change), ranked together with the tools by `mcp_search_tools`, read by `mcp_read`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use agent_core::JsonObject;
use serde_json::{Value, json};

use crate::features::{Feature, FeatureKind, ServerFeatures, entries};
use crate::search::{SearchIndex, SearchResults, ToolText};
use crate::{CatalogError, FeatureLimits};

use super::{Catalog, CatalogTool};

/// What one server offers to read.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Reads {
    pub(super) resources: bool,
    pub(super) prompts: bool,
    pub(super) skills: bool,
}

impl Reads {
    pub(super) fn any(self) -> bool {
        self.resources || self.prompts || self.skills
    }

    /// Whether `kind` is offered.
    pub(super) fn offers(self, kind: FeatureKind) -> bool {
        match kind {
            FeatureKind::Resource | FeatureKind::ResourceTemplate => self.resources,
            FeatureKind::Prompt => self.prompts,
            FeatureKind::Skill => self.skills,
            FeatureKind::Tool => false,
        }
    }
}

/// The catalog's features, of every server.
#[derive(Debug, Default)]
pub(super) struct Offered {
    /// What each server offers, and its entries the model may see, in listing order.
    servers: BTreeMap<String, (Reads, Vec<Arc<Feature>>)>,
    /// Every entry the model may see, by index id.
    entries: HashMap<String, Arc<Feature>>,
    index: SearchIndex,
}

/// One result of a search: a tool or another kind.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Found {
    /// A tool.
    Tool(Arc<CatalogTool>),
    /// A resource, template, prompt or skill.
    Feature(Arc<Feature>),
}

impl Found {
    /// What it is.
    pub fn kind(&self) -> FeatureKind {
        match self {
            Self::Tool(_) => FeatureKind::Tool,
            Self::Feature(f) => f.kind,
        }
    }
}

impl Offered {
    /// What `server` offers to read.
    pub(super) fn reads(&self, server: &str) -> Reads {
        self.servers.get(server).map(|s| s.0).unwrap_or_default()
    }

    /// True when some server offers something to read.
    pub(super) fn any(&self) -> bool {
        self.servers.values().any(|(reads, _)| reads.any())
    }

    /// The skills the model may see, of every server, by server then listing order.
    pub(super) fn skills(&self) -> impl Iterator<Item = &Arc<Feature>> {
        self.servers
            .values()
            .flat_map(|(_, features)| features)
            .filter(|f| f.kind == FeatureKind::Skill)
    }

    pub(super) fn remove(&mut self, server: &str) {
        if let Some((_, old)) = self.servers.remove(server) {
            for feature in old {
                self.entries.remove(&feature.id());
            }
            self.index.remove_server(server);
        }
    }

    fn replace(&mut self, server: &str, reads: Reads, features: Vec<Arc<Feature>>) {
        self.remove(server);
        let ids: Vec<String> = features.iter().map(|f| f.id()).collect();
        let texts: Vec<(String, Option<JsonObject>)> = features.iter().map(|f| text(f)).collect();
        self.index.replace_server(
            server,
            features
                .iter()
                .zip(&ids)
                .zip(&texts)
                .map(|((f, id), (description, schema))| {
                    ToolText::new(id, server, &f.name)
                        .with_title(f.title.as_deref())
                        .with_description(Some(description.as_str()))
                        .with_input_schema(schema.as_ref())
                }),
        );
        for (feature, id) in features.iter().zip(ids) {
            self.entries.insert(id, Arc::clone(feature));
        }
        self.servers.insert(server.to_owned(), (reads, features));
    }

    /// Merges this index's ranking of `query` into the tools' ranking: each entry goes before
    /// the first tool whose lexical score is lower than its own, so the tools keep their order
    /// (a hybrid ranking's too); ties go to the tool. `tools_lexical` gives the tools' lexical
    /// scores (only asked when an entry matched).
    pub(super) fn merge(
        &self,
        query: &str,
        server: Option<&str>,
        limit: usize,
        tools: &[Arc<CatalogTool>],
        tools_lexical: impl FnOnce() -> SearchResults,
    ) -> (Vec<Found>, usize) {
        let ranked = self.index.search(query, server, limit);
        if ranked.hits.is_empty() {
            let found = tools.iter().map(|t| Found::Tool(Arc::clone(t))).collect();
            return (found, 0);
        }
        let lexical: HashMap<Arc<str>, f32> = tools_lexical()
            .hits
            .into_iter()
            .map(|h| (h.id, h.score))
            .collect();
        let mut features = ranked
            .hits
            .iter()
            .filter_map(|h| self.entries.get(&*h.id).map(|f| (h.score, f)))
            .peekable();
        let mut out = Vec::with_capacity(limit.min(tools.len() + ranked.hits.len()));
        for tool in tools {
            let score = lexical.get(tool.id.as_str()).copied().unwrap_or(0.0);
            while let Some((_, feature)) = features.next_if(|(s, _)| *s > score) {
                out.push(Found::Feature(Arc::clone(feature)));
            }
            out.push(Found::Tool(Arc::clone(tool)));
        }
        out.extend(features.map(|(_, f)| Found::Feature(Arc::clone(f))));
        out.truncate(limit);
        (out, ranked.total)
    }
}

/// What the index reads of an entry beside its name and title: its description with its URI,
/// and a prompt's arguments as the parameters of a schema.
fn text(feature: &Feature) -> (String, Option<JsonObject>) {
    let mut description = feature.description.clone().unwrap_or_default();
    if let Some(uri) = &feature.uri {
        description.push('\n');
        description.push_str(uri);
    }
    let schema = (!feature.arguments.is_empty()).then(|| {
        let properties: JsonObject = feature
            .arguments
            .iter()
            .map(|a| {
                let description = a.description.as_deref().unwrap_or("");
                (
                    a.name.clone(),
                    json!({"type": "string", "description": description}),
                )
            })
            .collect();
        let mut schema = JsonObject::new();
        schema.insert("type".into(), Value::from("object"));
        schema.insert("properties".into(), Value::Object(properties));
        schema
    });
    (description, schema)
}

impl Catalog {
    /// Sets what `server` offers beyond tools — its resources, resource templates, prompts and
    /// skills as listed at open — replacing what was set before. Each kind is bounded by
    /// [`FeatureLimits`] and cleaned; entries the identity rules refuse (`[policy]` `resource`
    /// / `prompt` rules; a skill as its `skill://<name>/SKILL.md`) are never shown or searched.
    /// What a server offers decides what `mcp_read` reads of it, and whether the lazy surface
    /// shows `mcp_read` at all.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_catalog::{Catalog, CatalogConfig, SearchRequest, ServerFeatures};
    /// use mcp_catalog::testing::FakeServer;
    /// use rmcp::model::{Prompt, Resource};
    ///
    /// let catalog = Catalog::new(CatalogConfig::default());
    /// catalog.add_server(Arc::new(FakeServer::everything()).into_server("docs")).unwrap();
    /// let offered = ServerFeatures::default()
    ///     .with_resources(vec![Resource::new("file:///guide/install.md", "installation guide")])
    ///     .with_prompts(vec![Prompt::new("review", Some("Review a change"), None)]);
    /// catalog.set_features("docs", offered).unwrap();
    ///
    /// let found = catalog.search(&SearchRequest::new("installation guide")).unwrap();
    /// let best = found.to_json()["tools"][0].clone();
    /// assert_eq!(best["kind"], "resource");
    /// assert_eq!(best["read_with"]["uri"], "file:///guide/install.md");
    /// ```
    pub fn set_features(&self, server: &str, offered: ServerFeatures) -> Result<(), CatalogError> {
        let mut state = self.write();
        let Some(entry) = state.servers.get(server) else {
            return Err(CatalogError::InvalidServer {
                server: server.to_owned(),
                reason: "no such server in the catalog".into(),
            });
        };
        let identity = entry.identity.clone();
        let identity = identity.as_deref();
        let rules = &self.config.identity_rules;
        let reads = Reads {
            resources: offered.resources.is_some(),
            prompts: offered.prompts.is_some(),
            skills: offered.skills.is_some(),
        };
        let features = entries(server, &offered, &self.config.feature_limits)
            .into_iter()
            .filter(|f| {
                let uri = f.uri.as_deref().unwrap_or_default();
                match f.kind {
                    FeatureKind::Resource | FeatureKind::ResourceTemplate => {
                        rules.allows_resource(identity, uri).is_ok()
                    }
                    FeatureKind::Prompt => rules.allows_prompt(identity, &f.name).is_ok(),
                    FeatureKind::Skill => rules.allows_skill(identity, &f.name).is_ok(),
                    FeatureKind::Tool => false,
                }
            })
            .map(Arc::new)
            .collect();
        state.offered.replace(server, reads, features);
        Ok(())
    }

    /// The resources, templates, prompts and skills of `server` the model may see, in listing
    /// order (kind by kind).
    pub fn features(&self, server: &str) -> Vec<Arc<Feature>> {
        self.read()
            .offered
            .servers
            .get(server)
            .map(|(_, f)| f.clone())
            .unwrap_or_default()
    }

    /// The skills of every server the model may see (server by server, in listing order).
    pub fn skills(&self) -> Vec<Arc<Feature>> {
        self.read().offered.skills().cloned().collect()
    }

    /// The bounds on features, from the settings.
    pub fn feature_limits(&self) -> &FeatureLimits {
        &self.config.feature_limits
    }
}
