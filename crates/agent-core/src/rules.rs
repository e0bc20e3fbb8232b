//! Server identity rules (which servers' tools may run) and approval rules (which calls need a
//! human), both written as `{ server, tool }` globs.
//!
//! Rules match the server's *identity* — the name it declares in its MCP `initialize` answer
//! (`serverInfo.name`, which may contain `/`) — never the key the operator gave it in the
//! configuration, and the tool's name on that server.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Principal, ToolAnnotations};

/// True when `text` matches `pattern`: `*` matches any run of characters (also none), `?`
/// exactly one character, every other character itself (`/` included). Case-sensitive.
fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // The last `*` seen and the text position it currently stands for the end of.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and retry from there.
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

fn any_tool() -> String {
    String::from("*")
}

/// One `{ server, tool }` rule. `server` is a glob over the server's identity
/// (`serverInfo.name`), `tool` a glob over the tool's name on that server (`*` when omitted).
/// In globs `*` matches any run of characters and `?` one character; `/` is an ordinary
/// character.
///
/// A rule may also name who it is for: `subject` (a glob over the principal's subject),
/// `scopes` (all of them granted) and `claims` (each named claim has a value matching its
/// glob). Such a rule applies only to the principals it names ([`applies_to`](Self::applies_to));
/// a run without a principal (anonymous) is never one of them.
///
/// ```
/// use agent_core::{Principal, Rule};
///
/// let rule = Rule::new("mcp-servers/*", "delete_*");
/// assert!(rule.matches(Some("mcp-servers/everything"), "delete_file"));
/// assert!(!rule.matches(Some("mcp-servers/everything"), "read_file"));
/// assert_eq!(rule.to_string(), r#"{ server = "mcp-servers/*", tool = "delete_*" }"#);
///
/// // The TOML/JSON shape of the `[policy]` keys; `tool` defaults to `*`.
/// let rule: Rule = serde_json::from_str(r#"{"server": "github"}"#).unwrap();
/// assert_eq!(rule, Rule::new("github", "*"));
///
/// // A rule for admins only.
/// let admins = Rule::new("*", "*").for_claim("groups", "admins");
/// let alice = Principal::new("alice").with_claim("groups", ["admins"]);
/// assert!(admins.applies_to(Some(&alice)));
/// assert!(!admins.applies_to(Some(&Principal::new("bob"))));
/// assert!(!admins.applies_to(None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Rule {
    /// A glob over the server's identity.
    pub server: String,
    /// A glob over the tool's name on its server (ignored by a resource, prompt or skill rule).
    #[serde(default = "any_tool")]
    pub tool: String,
    /// A glob over a resource's URI: set, the rule is about resources (`resources/read`,
    /// subscriptions, listings), not tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// A glob over a prompt's name: set, the rule is about prompts (`prompts/get`,
    /// listings), not tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A glob over a skill's name (skills extension): set, the rule is about skills (their
    /// listing, their `SKILL.md` and files), not tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// A glob over the principal's subject: the rule applies only to matching principals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Scopes the principal must all have been granted for the rule to apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Claims (name → glob) the principal must each hold a matching value of.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub claims: BTreeMap<String, String>,
    /// Set on a run's copy when the rule does not apply to the run's principal: it then
    /// matches nothing ([`IdentityRules::for_principal`]).
    #[serde(skip)]
    inert: bool,
}

impl Rule {
    /// A rule for tools matching `tool` of servers whose identity matches `server`.
    pub fn new(server: impl Into<String>, tool: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            tool: tool.into(),
            resource: None,
            prompt: None,
            skill: None,
            subject: None,
            scopes: Vec::new(),
            claims: BTreeMap::new(),
            inert: false,
        }
    }

    /// A rule for resources whose URI matches `uri` of servers whose identity matches
    /// `server`. It covers no tool and no prompt.
    ///
    /// ```
    /// use agent_core::Rule;
    ///
    /// let rule = Rule::resource("docs", "file:///public/*");
    /// assert!(rule.matches_resource(Some("docs"), "file:///public/a.md"));
    /// assert!(!rule.matches_resource(Some("docs"), "file:///private/a.md"));
    /// assert!(!rule.matches(Some("docs"), "anything"), "not a tool rule");
    /// assert_eq!(rule.to_string(), r#"{ server = "docs", resource = "file:///public/*" }"#);
    /// ```
    pub fn resource(server: impl Into<String>, uri: impl Into<String>) -> Self {
        let mut rule = Self::new(server, "*");
        rule.resource = Some(uri.into());
        rule
    }

    /// A rule for prompts whose name matches `name` of servers whose identity matches
    /// `server`. It covers no tool and no resource.
    ///
    /// ```
    /// use agent_core::Rule;
    ///
    /// let rule = Rule::prompt("*", "review_*");
    /// assert!(rule.matches_prompt(Some("git"), "review_code"));
    /// assert!(!rule.matches_prompt(Some("git"), "deploy"));
    /// ```
    pub fn prompt(server: impl Into<String>, name: impl Into<String>) -> Self {
        let mut rule = Self::new(server, "*");
        rule.prompt = Some(name.into());
        rule
    }

    /// A rule for skills whose name matches `name` of servers whose identity matches
    /// `server`. It covers no tool, resource or prompt.
    ///
    /// ```
    /// use agent_core::Rule;
    ///
    /// let rule = Rule::skill("docs", "pdf-*");
    /// assert!(rule.matches_skill(Some("docs"), "pdf-processing"));
    /// assert!(!rule.matches_skill(Some("docs"), "deploy"));
    /// assert_eq!(rule.to_string(), r#"{ server = "docs", skill = "pdf-*" }"#);
    /// ```
    pub fn skill(server: impl Into<String>, name: impl Into<String>) -> Self {
        let mut rule = Self::new(server, "*");
        rule.skill = Some(name.into());
        rule
    }

    /// True for a rule about tools (none of `resource`, `prompt` and `skill` set).
    pub fn is_tool_rule(&self) -> bool {
        self.resource.is_none() && self.prompt.is_none() && self.skill.is_none()
    }

    /// The same rule, for principals whose subject matches `glob` only.
    #[must_use]
    pub fn for_subject(mut self, glob: impl Into<String>) -> Self {
        self.subject = Some(glob.into());
        self
    }

    /// The same rule, for principals granted `scope` (among any others named) only.
    #[must_use]
    pub fn for_scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.push(scope.into());
        self
    }

    /// The same rule, for principals holding a value of claim `name` that matches `glob` only.
    #[must_use]
    pub fn for_claim(mut self, name: impl Into<String>, glob: impl Into<String>) -> Self {
        self.claims.insert(name.into(), glob.into());
        self
    }

    /// True when the rule names who it is for (a subject, scopes or claims).
    pub fn names_a_principal(&self) -> bool {
        self.subject.is_some() || !self.scopes.is_empty() || !self.claims.is_empty()
    }

    /// True when the rule applies to a run acting for `principal`: always for a rule that
    /// names no principal; for one that does, only when `principal` matches all it names
    /// (an anonymous run, `None`, never does).
    pub fn applies_to(&self, principal: Option<&Principal>) -> bool {
        if !self.names_a_principal() {
            return true;
        }
        let Some(principal) = principal else {
            return false;
        };
        self.subject
            .as_deref()
            .is_none_or(|glob| glob_match(glob, principal.subject()))
            && self.scopes.iter().all(|s| principal.has_scope(s))
            && self
                .claims
                .iter()
                .all(|(name, glob)| principal.claim(name).iter().any(|v| glob_match(glob, v)))
    }

    /// True when the rule covers `tool` of the server with `identity`. An unknown identity is
    /// matched as the empty string, so only a server glob such as `*` covers it. A rule made
    /// inert for a run's principal covers nothing.
    pub fn matches(&self, identity: Option<&str>, tool: &str) -> bool {
        self.is_tool_rule() && self.covers_server(identity) && glob_match(&self.tool, tool)
    }

    /// True when the rule is a resource rule covering `uri` of the server with `identity`.
    pub fn matches_resource(&self, identity: Option<&str>, uri: &str) -> bool {
        self.resource
            .as_deref()
            .is_some_and(|glob| self.covers_server(identity) && glob_match(glob, uri))
    }

    /// True when the rule is a prompt rule covering prompt `name` of the server with
    /// `identity`.
    pub fn matches_prompt(&self, identity: Option<&str>, name: &str) -> bool {
        self.prompt
            .as_deref()
            .is_some_and(|glob| self.covers_server(identity) && glob_match(glob, name))
    }

    /// True when the rule is a skill rule covering skill `name` of the server with
    /// `identity`.
    pub fn matches_skill(&self, identity: Option<&str>, name: &str) -> bool {
        self.skill
            .as_deref()
            .is_some_and(|glob| self.covers_server(identity) && glob_match(glob, name))
    }

    fn covers_server(&self, identity: Option<&str>) -> bool {
        !self.inert && glob_match(&self.server, identity.unwrap_or(""))
    }

    fn matches_target(&self, identity: Option<&str>, target: Target<'_>) -> bool {
        match target {
            Target::Tool(tool) => self.matches(identity, tool),
            Target::Resource(uri) => self.matches_resource(identity, uri),
            Target::Prompt(name) => self.matches_prompt(identity, name),
            Target::Skill(name) => self.matches_skill(identity, name),
        }
    }

    /// This rule for a run acting for `principal`: inert (matching nothing) when it does not
    /// apply to it.
    fn for_principal(&self, principal: Option<&Principal>) -> Self {
        let mut rule = self.clone();
        rule.inert = !self.applies_to(principal);
        rule
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.resource, &self.prompt, &self.skill) {
            (Some(uri), _, _) => write!(f, "{{ server = {:?}, resource = {uri:?}", self.server)?,
            (None, Some(name), _) => write!(f, "{{ server = {:?}, prompt = {name:?}", self.server)?,
            (None, None, Some(name)) => {
                write!(f, "{{ server = {:?}, skill = {name:?}", self.server)?
            }
            (None, None, None) => {
                write!(f, "{{ server = {:?}, tool = {:?}", self.server, self.tool)?
            }
        }
        if let Some(subject) = &self.subject {
            write!(f, ", subject = {subject:?}")?;
        }
        if !self.scopes.is_empty() {
            write!(f, ", scopes = {:?}", self.scopes)?;
        }
        if !self.claims.is_empty() {
            let claims: Vec<String> = self
                .claims
                .iter()
                .map(|(name, glob)| format!("{name} = {glob:?}"))
                .collect();
            write!(f, ", claims = {{ {} }}", claims.join(", "))?;
        }
        write!(f, " }}")
    }
}

fn identity_text(identity: &Option<String>) -> String {
    match identity {
        Some(identity) => format!("server identity `{identity}`"),
        None => String::from("a server with no identity"),
    }
}

/// Why [`IdentityRules::allows`] refused a tool. `Display` names the rule (as its `[policy]`
/// key) and not the tool, which the surrounding error names.
///
/// ```
/// use agent_core::{Denial, IdentityRules, Rule};
///
/// let rules = IdentityRules::default().deny(Rule::new("*", "delete_*"));
/// let denial = rules.allows(Some("files"), "delete_all").unwrap_err();
/// assert_eq!(
///     denial.to_string(),
///     r#"rule `policy.deny[0]` { server = "*", tool = "delete_*" } matches"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Denial {
    /// A deny rule matches (deny wins over allow).
    #[error("rule `policy.deny[{index}]` {rule} matches")]
    DenyRule {
        /// The rule's position in `deny`.
        index: usize,
        /// The rule.
        rule: Box<Rule>,
    },
    /// An allowlist is set and none of its rules matches.
    #[error(
        "no rule of `policy.allow` matches {} and this tool",
        identity_text(identity)
    )]
    NotAllowed {
        /// The server's identity, when known.
        identity: Option<String>,
    },
    /// An allowlist is set and none of its rules matches this resource or prompt.
    #[error(
        "no rule of `policy.allow` matches {} and this {what}",
        identity_text(identity)
    )]
    NotAllowedTarget {
        /// The server's identity, when known.
        identity: Option<String>,
        /// `"resource"`, `"prompt"` or `"skill"`.
        what: &'static str,
    },
}

/// What a rule check is about.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    Tool(&'a str),
    Resource(&'a str),
    Prompt(&'a str),
    Skill(&'a str),
}

/// Which servers' tools may run: `allow` and `deny` lists of [`Rule`]s matched
/// against the server's identity and the tool's remote name. Deny wins; with a non-empty
/// `allow`, a tool no allow rule matches is denied. Empty lists allow everything.
///
/// The same check serves two places: the governed layer denies calls with it, and a catalog
/// hides the tools it refuses, so the model is never shown a tool it may not call.
///
/// ```
/// use agent_core::{IdentityRules, Rule};
///
/// let rules = IdentityRules::default()
///     .allow(Rule::new("mcp-servers/everything", "*"))
///     .deny(Rule::new("*", "delete_*"));
/// assert!(rules.allows(Some("mcp-servers/everything"), "echo").is_ok());
/// assert!(rules.allows(Some("mcp-servers/everything"), "delete_file").is_err());
/// assert!(rules.allows(Some("someone-else"), "echo").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct IdentityRules {
    /// When not empty, only tools matching one of these rules may run.
    #[serde(default)]
    pub allow: Vec<Rule>,
    /// Tools matching one of these rules never run.
    #[serde(default)]
    pub deny: Vec<Rule>,
}

impl IdentityRules {
    /// Adds an allow rule.
    #[must_use]
    pub fn allow(mut self, rule: Rule) -> Self {
        self.allow.push(rule);
        self
    }

    /// Adds a deny rule.
    #[must_use]
    pub fn deny(mut self, rule: Rule) -> Self {
        self.deny.push(rule);
        self
    }

    /// True when there is no rule at all (everything is allowed).
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// The rules of a run acting for `principal`: those that do not apply to it
    /// ([`Rule::applies_to`]) match nothing, and keep their place (a denial names the rule by
    /// its position in the configuration). An `allow` list stays set even when none of its
    /// rules applies: a principal no allow rule is for may run nothing, never everything.
    ///
    /// ```
    /// use agent_core::{IdentityRules, Principal, Rule};
    ///
    /// let rules = IdentityRules::default()
    ///     .allow(Rule::new("*", "*").for_scope("tools:all"))
    ///     .allow(Rule::new("*", "read_*"));
    /// let reader = rules.for_principal(Some(&Principal::new("bob")));
    /// assert!(reader.allows(Some("files"), "read_file").is_ok());
    /// assert!(reader.allows(Some("files"), "delete_file").is_err());
    /// let admin = Principal::new("alice").with_scopes(["tools:all"]);
    /// assert!(rules.for_principal(Some(&admin)).allows(Some("files"), "delete_file").is_ok());
    /// ```
    #[must_use]
    pub fn for_principal(&self, principal: Option<&Principal>) -> Self {
        Self {
            allow: self
                .allow
                .iter()
                .map(|r| r.for_principal(principal))
                .collect(),
            deny: self
                .deny
                .iter()
                .map(|r| r.for_principal(principal))
                .collect(),
        }
    }

    /// True when a rule names a principal (a subject, scopes or claims).
    pub fn names_principals(&self) -> bool {
        self.allow
            .iter()
            .chain(&self.deny)
            .any(Rule::names_a_principal)
    }

    /// Whether `tool` (its name on the server) of the server with `identity` may run; the
    /// refusal names the rule that decided.
    pub fn allows(&self, identity: Option<&str>, tool: &str) -> Result<(), Denial> {
        self.check(identity, Target::Tool(tool))
    }

    /// Whether the resource at `uri` of the server with `identity` may be read (listed,
    /// subscribed to): by the `resource` rules, as [`allows`](Self::allows) is by the tool
    /// rules. A non-empty `allow` list admits only what one of its rules matches, so an
    /// allowlist of tools alone admits no resource.
    ///
    /// ```
    /// use agent_core::{IdentityRules, Rule};
    ///
    /// let rules = IdentityRules::default()
    ///     .allow(Rule::resource("docs", "file:///public/*"))
    ///     .allow(Rule::new("docs", "*"));
    /// assert!(rules.allows_resource(Some("docs"), "file:///public/a").is_ok());
    /// assert!(rules.allows_resource(Some("docs"), "file:///etc/passwd").is_err());
    /// assert!(rules.allows_prompt(Some("docs"), "summarise").is_err());
    /// ```
    pub fn allows_resource(&self, identity: Option<&str>, uri: &str) -> Result<(), Denial> {
        self.check(identity, Target::Resource(uri))
    }

    /// Whether prompt `name` of the server with `identity` may be got (listed), by the
    /// `prompt` rules (see [`allows_resource`](Self::allows_resource)).
    pub fn allows_prompt(&self, identity: Option<&str>, name: &str) -> Result<(), Denial> {
        self.check(identity, Target::Prompt(name))
    }

    /// Whether skill `name` of the server with `identity` may be listed and loaded (its
    /// `SKILL.md` and files read), by the `skill` rules (see
    /// [`allows_resource`](Self::allows_resource)).
    ///
    /// ```
    /// use agent_core::{IdentityRules, Rule};
    ///
    /// let rules = IdentityRules::default().deny(Rule::skill("*", "deploy-*"));
    /// assert!(rules.allows_skill(Some("docs"), "pdf-processing").is_ok());
    /// assert!(rules.allows_skill(Some("docs"), "deploy-prod").is_err());
    /// ```
    pub fn allows_skill(&self, identity: Option<&str>, name: &str) -> Result<(), Denial> {
        self.check(identity, Target::Skill(name))
    }

    fn check(&self, identity: Option<&str>, target: Target<'_>) -> Result<(), Denial> {
        if let Some((index, rule)) = self
            .deny
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches_target(identity, target))
        {
            return Err(Denial::DenyRule {
                index,
                rule: Box::new(rule.clone()),
            });
        }
        if self.allow.is_empty()
            || self
                .allow
                .iter()
                .any(|r| r.matches_target(identity, target))
        {
            return Ok(());
        }
        let identity = identity.map(str::to_owned);
        Err(match target {
            Target::Tool(_) => Denial::NotAllowed { identity },
            Target::Resource(_) => Denial::NotAllowedTarget {
                identity,
                what: "resource",
            },
            Target::Prompt(_) => Denial::NotAllowedTarget {
                identity,
                what: "prompt",
            },
            Target::Skill(_) => Denial::NotAllowedTarget {
                identity,
                what: "skill",
            },
        })
    }
}

/// Why a call needs approval. `Display` names the `[policy]` key (or the policy) that asked.
///
/// ```
/// use agent_core::{ApprovalRules, ApprovalTrigger, ToolAnnotations};
///
/// let rules = ApprovalRules::default().with_approve_destructive(true);
/// // No hints at all: the MCP defaults say "may be destructive".
/// let trigger = rules.requires(Some("files"), Some("rm"), &ToolAnnotations::default());
/// assert_eq!(trigger, Some(ApprovalTrigger::Destructive));
/// assert_eq!(trigger.unwrap().to_string(), "`policy.approve_destructive`");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
// One per call that needs approval, short-lived: the rule is kept whole, unboxed.
#[allow(clippy::large_enum_variant)]
pub enum ApprovalTrigger {
    /// An `approve` rule matches.
    Rule {
        /// The rule's position in `approve`.
        index: usize,
        /// The rule.
        rule: Rule,
    },
    /// `approve_destructive` is set and the tool may be destructive.
    Destructive,
    /// `approve_open_world` is set and the tool may reach an open world.
    OpenWorld,
    /// The tool policy answered [`RequireApproval`](crate::PolicyDecision::RequireApproval).
    Policy,
}

impl fmt::Display for ApprovalTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule { index, rule } => write!(f, "rule `policy.approve[{index}]` {rule}"),
            Self::Destructive => f.write_str("`policy.approve_destructive`"),
            Self::OpenWorld => f.write_str("`policy.approve_open_world`"),
            Self::Policy => f.write_str("the tool policy"),
        }
    }
}

/// Which calls need approval: `approve` rules (globs over server identity and remote
/// tool name, for external tools), and the annotation rules `approve_destructive` and
/// `approve_open_world`, which read the tool's hints with the MCP defaults: a tool may be
/// destructive unless it says `destructiveHint: false` or `readOnlyHint: true`, and reaches an
/// open world unless it says `openWorldHint: false`. Hints only ever *add* a need for approval.
///
/// ```
/// use agent_core::{ApprovalRules, Rule, ToolAnnotations};
///
/// let rules = ApprovalRules::default()
///     .approve(Rule::new("github*", "create_*"))
///     .with_approve_destructive(true);
/// let read_only = ToolAnnotations::read_only();
/// assert!(rules.requires(Some("github"), Some("create_issue"), &read_only).is_some());
/// assert!(rules.requires(Some("github"), Some("list_issues"), &read_only).is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApprovalRules {
    /// Calls of matching external tools need approval.
    #[serde(default)]
    pub approve: Vec<Rule>,
    /// Calls of tools that may be destructive need approval.
    #[serde(default)]
    pub approve_destructive: bool,
    /// Calls of tools that may reach an open world need approval.
    #[serde(default)]
    pub approve_open_world: bool,
}

impl ApprovalRules {
    /// Adds an `approve` rule.
    #[must_use]
    pub fn approve(mut self, rule: Rule) -> Self {
        self.approve.push(rule);
        self
    }

    /// The rules of a run acting for `principal`: `approve` rules that do not apply to it
    /// match nothing (see [`IdentityRules::for_principal`]).
    #[must_use]
    pub fn for_principal(&self, principal: Option<&Principal>) -> Self {
        Self {
            approve: self
                .approve
                .iter()
                .map(|r| r.for_principal(principal))
                .collect(),
            ..self.clone()
        }
    }

    /// Sets `approve_destructive`.
    #[must_use]
    pub fn with_approve_destructive(mut self, on: bool) -> Self {
        self.approve_destructive = on;
        self
    }

    /// Sets `approve_open_world`.
    #[must_use]
    pub fn with_approve_open_world(mut self, on: bool) -> Self {
        self.approve_open_world = on;
        self
    }

    /// The first reason the call needs approval, if any. `remote_tool` is `None` for a native
    /// tool, which `approve` rules (about servers) never match; annotation rules apply to
    /// native and external tools alike.
    pub fn requires(
        &self,
        identity: Option<&str>,
        remote_tool: Option<&str>,
        annotations: &ToolAnnotations,
    ) -> Option<ApprovalTrigger> {
        if let Some(tool) = remote_tool
            && let Some((index, rule)) = self
                .approve
                .iter()
                .enumerate()
                .find(|(_, r)| r.matches(identity, tool))
        {
            return Some(ApprovalTrigger::Rule {
                index,
                rule: rule.clone(),
            });
        }
        if self.approve_destructive && may_be_destructive(annotations) {
            return Some(ApprovalTrigger::Destructive);
        }
        if self.approve_open_world && annotations.open_world_hint != Some(false) {
            return Some(ApprovalTrigger::OpenWorld);
        }
        None
    }
}

/// `destructiveHint: true` selects the tool whatever else it claims (a hint never exempts a
/// call); without it, the MCP default applies: destructive unless it says it is read-only.
fn may_be_destructive(annotations: &ToolAnnotations) -> bool {
    match annotations.destructive_hint {
        Some(true) => true,
        Some(false) => false,
        None => annotations.read_only_hint != Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_single_characters_and_slashes() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "a/b/c"));
        assert!(glob_match("mcp-servers/*", "mcp-servers/everything"));
        assert!(!glob_match("mcp-servers/*", "mcp-servers"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("a?c", "a/c"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("a?c", "aéc"), "? is one character, not one byte");
        assert!(glob_match("*_file", "delete_file"));
        assert!(glob_match("a*b*c", "axxbyybzc"));
        assert!(!glob_match("a*b*c", "axxbyyb"));
        assert!(glob_match("**x", "x"));
        assert!(!glob_match("abc", "abcd"));
        assert!(!glob_match("Abc", "abc"), "case-sensitive");
        assert!(glob_match("", ""));
        assert!(!glob_match("", "a"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let rules = IdentityRules::default()
            .allow(Rule::new("*", "*"))
            .deny(Rule::new("files", "rm"));
        assert_eq!(
            rules.allows(Some("files"), "rm"),
            Err(Denial::DenyRule {
                index: 0,
                rule: Box::new(Rule::new("files", "rm"))
            })
        );
        assert_eq!(rules.allows(Some("files"), "ls"), Ok(()));
    }

    #[test]
    fn an_allowlist_matching_nothing_denies_everything_and_names_the_rule() {
        let rules = IdentityRules::default().allow(Rule::new("nobody", "*"));
        for (identity, tool) in [(Some("files"), "ls"), (None, "ls"), (Some(""), "x")] {
            let denial = rules.allows(identity, tool).unwrap_err();
            assert!(denial.to_string().contains("`policy.allow`"), "{denial}");
        }
    }

    #[test]
    fn an_unknown_identity_is_matched_only_by_wildcards() {
        let rules = IdentityRules::default().allow(Rule::new("*", "*"));
        assert!(rules.allows(None, "ls").is_ok());
        let rules = IdentityRules::default().allow(Rule::new("files", "*"));
        assert!(rules.allows(None, "ls").is_err());
    }

    #[test]
    fn no_rules_allow_everything() {
        assert!(IdentityRules::default().allows(None, "anything").is_ok());
        assert!(IdentityRules::default().is_empty());
    }

    #[test]
    fn annotation_rules_follow_the_mcp_defaults() {
        let destructive = ApprovalRules::default().with_approve_destructive(true);
        let hints = |ro: Option<bool>, de: Option<bool>, ow: Option<bool>| ToolAnnotations {
            read_only_hint: ro,
            destructive_hint: de,
            open_world_hint: ow,
            ..ToolAnnotations::default()
        };
        let needs = |rules: &ApprovalRules, h: ToolAnnotations| rules.requires(None, None, &h);
        assert!(needs(&destructive, hints(None, None, None)).is_some());
        assert!(needs(&destructive, hints(Some(false), None, None)).is_some());
        assert!(needs(&destructive, hints(None, Some(true), None)).is_some());
        assert!(needs(&destructive, hints(None, Some(false), None)).is_none());
        assert!(needs(&destructive, hints(Some(true), None, None)).is_none());
        // A hint never exempts a call: a tool that says it is destructive is asked about, also
        // when it claims to be read-only too.
        assert!(needs(&destructive, hints(Some(true), Some(true), None)).is_some());

        let open = ApprovalRules::default().with_approve_open_world(true);
        assert_eq!(
            needs(&open, hints(None, None, None)),
            Some(ApprovalTrigger::OpenWorld)
        );
        assert_eq!(
            needs(&open, hints(None, None, Some(true))),
            Some(ApprovalTrigger::OpenWorld)
        );
        assert!(needs(&open, hints(None, None, Some(false))).is_none());
        assert!(needs(&ApprovalRules::default(), hints(None, None, None)).is_none());
    }

    #[test]
    fn approve_rules_match_external_tools_only() {
        let rules = ApprovalRules::default().approve(Rule::new("*", "*"));
        let none = ToolAnnotations::read_only();
        assert_eq!(
            rules.requires(Some("a/b"), Some("x"), &none),
            Some(ApprovalTrigger::Rule {
                index: 0,
                rule: Rule::new("*", "*")
            })
        );
        assert!(rules.requires(None, None, &none).is_none());
    }

    #[test]
    fn rules_deserialize_from_the_policy_shape() {
        let rules: IdentityRules = serde_json::from_value(serde_json::json!({
            "allow": [{"server": "mcp-servers/everything", "tool": "*"}],
            "deny": [{"server": "*", "tool": "delete_*"}]
        }))
        .unwrap();
        assert_eq!(rules.allow, vec![Rule::new("mcp-servers/everything", "*")]);
        let err =
            serde_json::from_value::<Rule>(serde_json::json!({"server": "a", "tool": "b", "x": 1}))
                .unwrap_err();
        assert!(err.to_string().contains("unknown field `x`"), "{err}");
    }
}
