//! What a server offers beyond tools, as the catalog keeps it for search and `mcp_read`:
//! resources, resource templates, prompts and skills, bounded per server and cleaned (a server
//! chooses every byte of them).

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use serde_json::{Value, json};

use crate::sanitize::{Lines, clean};

/// What a search result or a read is.
///
/// ```
/// use mcp_catalog::FeatureKind;
/// assert_eq!(FeatureKind::ResourceTemplate.as_str(), "resource_template");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FeatureKind {
    /// A tool.
    Tool,
    /// A prompt (`prompts/get`).
    Prompt,
    /// A resource (`resources/read`).
    Resource,
    /// A resource template: a URI with `{placeholders}` to fill and read.
    ResourceTemplate,
    /// A skill (SEP-2640): files read as `skill://<skill>/<file>`.
    Skill,
}

impl FeatureKind {
    /// Its name in search results: `tool`, `prompt`, `resource`, `resource_template`, `skill`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
            Self::ResourceTemplate => "resource_template",
            Self::Skill => "skill",
        }
    }

    /// Its plural, for messages.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Tool => "tools",
            Self::Prompt => "prompts",
            Self::Resource => "resources",
            Self::ResourceTemplate => "resource templates",
            Self::Skill => "skills",
        }
    }
}

/// One skill a server lists: its name and what it is for.
///
/// ```
/// use mcp_catalog::SkillEntry;
/// let skill = SkillEntry::new("pdf-processing", "Extract text and tables from PDF files.");
/// assert_eq!(skill.name, "pdf-processing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillEntry {
    /// The skill's name.
    pub name: String,
    /// What it is for.
    pub description: String,
}

impl SkillEntry {
    /// A skill.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
        }
    }
}

/// What one server offers beyond tools, as the orchestration listed it at open: only what the
/// server declared a capability for (an undeclared kind stays `None`: `mcp_read` of it answers
/// "not offered"). Never the contents of a resource.
///
/// ```
/// use mcp_catalog::ServerFeatures;
/// use rmcp::model::Resource;
///
/// let offered = ServerFeatures::default()
///     .with_resources(vec![Resource::new("file:///srv/readme.md", "readme")]);
/// assert!(offered.offers_reads());
/// assert!(offered.prompts.is_none());
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ServerFeatures {
    /// Its resources (`resources/list`), when it declared the `resources` capability.
    pub resources: Option<Vec<Resource>>,
    /// Its resource templates (`resources/templates/list`).
    pub templates: Vec<ResourceTemplate>,
    /// Its prompts (`prompts/list`), when it declared the `prompts` capability.
    pub prompts: Option<Vec<Prompt>>,
    /// Its skills, when it offers them.
    pub skills: Option<Vec<SkillEntry>>,
}

impl ServerFeatures {
    /// Sets the resources (the server offers resources).
    #[must_use]
    pub fn with_resources(mut self, resources: Vec<Resource>) -> Self {
        self.resources = Some(resources);
        self
    }

    /// Sets the resource templates.
    #[must_use]
    pub fn with_templates(mut self, templates: Vec<ResourceTemplate>) -> Self {
        self.templates = templates;
        self
    }

    /// Sets the prompts (the server offers prompts).
    #[must_use]
    pub fn with_prompts(mut self, prompts: Vec<Prompt>) -> Self {
        self.prompts = Some(prompts);
        self
    }

    /// Sets the skills (the server offers skills).
    #[must_use]
    pub fn with_skills(mut self, skills: Vec<SkillEntry>) -> Self {
        self.skills = Some(skills);
        self
    }

    /// True when the server offers anything `mcp_read` reads.
    pub fn offers_reads(&self) -> bool {
        self.resources.is_some() || self.prompts.is_some() || self.skills.is_some()
    }
}

/// Bounds on what the catalog keeps of one server's resources, templates, prompts and skills.
///
/// ```
/// let limits = mcp_catalog::FeatureLimits::default();
/// assert_eq!(limits.max_per_kind, 500);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeatureLimits {
    /// The most entries of one kind kept per server (default 500); the rest are not indexed.
    pub max_per_kind: usize,
    /// The longest name, title or MIME type, in bytes (default 256). An entry whose name or URI
    /// holds control characters or is longer is left out (a cut name would name another).
    pub max_name_bytes: usize,
    /// The longest URI or URI template, in bytes (default 2048).
    pub max_uri_bytes: usize,
    /// The longest description kept, in bytes (default 1 KiB); a longer one is cut.
    pub max_description_bytes: usize,
    /// The most arguments of a prompt kept (default [`agent_core::MAX_PROMPT_ARGUMENTS`]).
    pub max_arguments: usize,
}

impl FeatureLimits {
    /// Sets the most entries of one kind kept per server.
    #[must_use]
    pub fn with_max_per_kind(mut self, max: usize) -> Self {
        self.max_per_kind = max;
        self
    }
}

impl Default for FeatureLimits {
    fn default() -> Self {
        Self {
            max_per_kind: 500,
            max_name_bytes: 256,
            max_uri_bytes: 2048,
            max_description_bytes: 1024,
            max_arguments: agent_core::MAX_PROMPT_ARGUMENTS,
        }
    }
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeatureArgument {
    /// Its name.
    pub name: String,
    /// What it is.
    pub description: Option<String>,
    /// Whether the prompt needs it.
    pub required: bool,
}

/// A resource, template, prompt or skill of a server, as the catalog keeps it: bounded and
/// clean, safe to show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Feature {
    /// What it is.
    pub kind: FeatureKind,
    /// The server key.
    pub server: String,
    /// Its name (a resource's or template's name, a prompt's, a skill's).
    pub name: String,
    /// A resource's URI or a template's URI template.
    pub uri: Option<String>,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// A resource's MIME type.
    pub mime_type: Option<String>,
    /// A prompt's arguments.
    pub arguments: Vec<FeatureArgument>,
}

impl Feature {
    /// Its key in the catalog's index: kind, server and URI or name.
    pub(crate) fn id(&self) -> String {
        format!(
            "{}\u{1f}{}\u{1f}{}",
            self.kind.as_str(),
            self.server,
            self.uri.as_deref().unwrap_or(&self.name)
        )
    }

    /// The arguments of `mcp_read` that read it.
    pub fn read_arguments(&self) -> Value {
        match self.kind {
            FeatureKind::Resource | FeatureKind::ResourceTemplate => {
                json!({"server": self.server, "uri": self.uri.as_deref().unwrap_or_default()})
            }
            FeatureKind::Prompt => json!({"server": self.server, "prompt": self.name}),
            FeatureKind::Skill => json!({"server": self.server, "skill": self.name}),
            FeatureKind::Tool => json!({}),
        }
    }

    /// The JSON a search result shows: `kind`, `server`, `name`, what it is, and `read_with`
    /// (the `mcp_read` arguments; a template's `{placeholders}` are to be filled).
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "kind": self.kind.as_str(),
            "server": self.server,
            "name": self.name,
            "description": self.description.as_deref().unwrap_or(""),
        });
        if let Some(uri) = &self.uri {
            out["uri"] = json!(uri);
        }
        if let Some(title) = &self.title {
            out["title"] = json!(title);
        }
        if let Some(mime) = &self.mime_type {
            out["mime_type"] = json!(mime);
        }
        if self.kind == FeatureKind::Prompt {
            out["arguments"] = self
                .arguments
                .iter()
                .map(|a| {
                    json!({
                        "name": a.name,
                        "description": a.description.as_deref().unwrap_or(""),
                        "required": a.required,
                    })
                })
                .collect();
        }
        out["read_with"] = self.read_arguments();
        out
    }
}

/// `text` when it can be kept as it is (not empty, within `max`, no control characters).
fn exact(text: &str, max: usize) -> Option<String> {
    (!text.is_empty()
        && matches!(
            clean(text, max, Lines::Single),
            std::borrow::Cow::Borrowed(_)
        ))
    .then(|| text.to_owned())
}

/// The entries `offered` holds, bounded by `limits` and cleaned, per kind in listing order.
/// Entries whose name or URI cannot be kept as it is are left out; a kind past
/// [`FeatureLimits::max_per_kind`] is cut there.
pub(crate) fn entries(
    server: &str,
    offered: &ServerFeatures,
    limits: &FeatureLimits,
) -> Vec<Feature> {
    let short = |s: &Option<String>| {
        s.as_deref()
            .map(|s| clean(s, limits.max_name_bytes, Lines::Single).into_owned())
    };
    let long = |s: Option<&str>| {
        s.map(|s| clean(s, limits.max_description_bytes, Lines::Single).into_owned())
            .filter(|s| !s.is_empty())
    };
    let feature = |kind, name: String| Feature {
        kind,
        server: server.to_owned(),
        name,
        uri: None,
        title: None,
        description: None,
        mime_type: None,
        arguments: Vec::new(),
    };
    let mut out = Vec::new();
    let resources = offered.resources.iter().flatten();
    out.extend(
        resources
            .filter_map(|r| {
                let uri = exact(&r.uri, limits.max_uri_bytes)?;
                let name = clean(&r.name, limits.max_name_bytes, Lines::Single).into_owned();
                Some(Feature {
                    uri: Some(uri),
                    title: short(&r.title),
                    description: long(r.description.as_deref()),
                    mime_type: short(&r.mime_type),
                    ..feature(FeatureKind::Resource, name)
                })
            })
            .take(limits.max_per_kind),
    );
    out.extend(
        offered
            .templates
            .iter()
            .filter_map(|t| {
                let uri = exact(&t.uri_template, limits.max_uri_bytes)?;
                let name = clean(&t.name, limits.max_name_bytes, Lines::Single).into_owned();
                Some(Feature {
                    uri: Some(uri),
                    title: short(&t.title),
                    description: long(t.description.as_deref()),
                    mime_type: short(&t.mime_type),
                    ..feature(FeatureKind::ResourceTemplate, name)
                })
            })
            .take(limits.max_per_kind),
    );
    out.extend(
        offered
            .prompts
            .iter()
            .flatten()
            .filter_map(|p| {
                let name = exact(&p.name, limits.max_name_bytes)?;
                let listed = p.arguments.as_deref().unwrap_or_default();
                if listed.len() > limits.max_arguments {
                    return None;
                }
                let arguments = listed
                    .iter()
                    .map(|a| {
                        Some(FeatureArgument {
                            name: exact(&a.name, limits.max_name_bytes)?,
                            description: long(a.description.as_deref()),
                            required: a.required == Some(true),
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(Feature {
                    title: short(&p.title),
                    description: long(p.description.as_deref()),
                    arguments,
                    ..feature(FeatureKind::Prompt, name)
                })
            })
            .take(limits.max_per_kind),
    );
    out.extend(
        offered
            .skills
            .iter()
            .flatten()
            .filter_map(|s| {
                let name = exact(&s.name, limits.max_name_bytes)?;
                Some(Feature {
                    description: long(Some(&s.description)),
                    ..feature(FeatureKind::Skill, name)
                })
            })
            .take(limits.max_per_kind),
    );
    out
}
