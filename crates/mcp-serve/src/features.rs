//! What a session's tools offer beyond tools ([`SessionFeatures`]): resources, resource
//! templates, prompts, completions, resource subscriptions and skills (the skills extension),
//! with what they offer
//! ([`Offered`]) and the bounded inbox through which they report resource updates
//! ([`ResourceUpdates`]). The session's handler (`handler.rs`) checks what a client sends
//! before any of it reaches them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::{ToolCall, ToolError, ToolOutput};
use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::{
    CompletionInfo, GetPromptResult, Prompt, Reference, Resource, ResourceContents,
    ResourceTemplate, Skill,
};
use tokio::sync::Notify;

use crate::relay::{InputRound, Round};

/// The longest resource URI (or prompt name) a client may send, in bytes: a longer one is
/// refused (-32602) before it reaches the session's tools.
pub const MAX_FEATURE_URI_BYTES: usize = 4096;

/// The most resources one downstream session may subscribe to at once.
pub const MAX_SESSION_SUBSCRIPTIONS: usize = 256;

pub use agent_core::MAX_PROMPT_ARGUMENTS;

/// The most skills on one page of `skills/list` (a skill is never split across pages).
pub const SKILLS_PAGE: usize = 64;

/// The most children on one page of `resources/directory/read`.
pub const DIRECTORY_PAGE: usize = 64;

/// Which features beyond tools a session's tools offer: the session declares the matching
/// capabilities (`resources`, `resources.subscribe`, `prompts`, `completions`, and the skills
/// extension `io.modelcontextprotocol/skills` with `resources`, and its `directoryRead`).
///
/// ```
/// use mcp_serve::Offered;
/// let offered = Offered::default().with_resources(true).with_prompts(true);
/// assert!(offered.resources && !offered.completions);
/// assert!(offered.union(Offered::default().with_completions(true)).completions);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offered {
    /// `resources/list`, `resources/templates/list`, `resources/read`.
    pub resources: bool,
    /// `resources/subscribe`, `resources/unsubscribe` (with `resources`).
    pub subscribe: bool,
    /// `prompts/list`, `prompts/get`.
    pub prompts: bool,
    /// `completion/complete`.
    pub completions: bool,
    /// `skills/list`, `skills/get` (the skills extension), the skills' files read with
    /// `resources/read`.
    pub skills: bool,
    /// `resources/directory/read` (the skills extension's `directoryRead`, with `skills`).
    pub directory_read: bool,
}

impl Offered {
    /// Nothing beyond tools.
    pub const NONE: Self = Self {
        resources: false,
        subscribe: false,
        prompts: false,
        completions: false,
        skills: false,
        directory_read: false,
    };

    /// Resources with subscriptions, prompts, completions, skills and directory reads.
    pub const ALL: Self = Self {
        resources: true,
        subscribe: true,
        prompts: true,
        completions: true,
        skills: true,
        directory_read: true,
    };

    /// With resources offered or not.
    #[must_use]
    pub const fn with_resources(mut self, resources: bool) -> Self {
        self.resources = resources;
        self
    }

    /// With resource subscriptions offered or not.
    #[must_use]
    pub const fn with_subscribe(mut self, subscribe: bool) -> Self {
        self.subscribe = subscribe;
        self
    }

    /// With prompts offered or not.
    #[must_use]
    pub const fn with_prompts(mut self, prompts: bool) -> Self {
        self.prompts = prompts;
        self
    }

    /// With completions offered or not.
    #[must_use]
    pub const fn with_completions(mut self, completions: bool) -> Self {
        self.completions = completions;
        self
    }

    /// With skills offered or not.
    #[must_use]
    pub const fn with_skills(mut self, skills: bool) -> Self {
        self.skills = skills;
        self
    }

    /// With directory reads offered or not (declared only with skills).
    #[must_use]
    pub const fn with_directory_read(mut self, directory_read: bool) -> Self {
        self.directory_read = directory_read;
        self
    }

    /// What either offers.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self {
            resources: self.resources || other.resources,
            subscribe: self.subscribe || other.subscribe,
            prompts: self.prompts || other.prompts,
            completions: self.completions || other.completions,
            skills: self.skills || other.skills,
            directory_read: self.directory_read || other.directory_read,
        }
    }

    /// True when nothing beyond tools is offered.
    pub const fn is_empty(self) -> bool {
        !(self.resources
            || self.subscribe
            || self.prompts
            || self.completions
            || self.skills
            || self.directory_read)
    }
}

/// The features beyond tools of a session's tools ([`SessionTools::features`]). Every method
/// has a default that offers nothing; the handler has already checked what the client sent
/// (a URI or name no longer than [`MAX_FEATURE_URI_BYTES`] and free of control characters, at
/// most [`MAX_PROMPT_ARGUMENTS`] string arguments, at most [`MAX_SESSION_SUBSCRIPTIONS`]
/// subscriptions). An error is answered as it is: a missing resource or prompt is
/// `-32602` (invalid params; `ErrorData::resource_not_found` becomes -32602 for 2026-07-28
/// clients), a message naming what is wrong.
///
/// [`SessionTools::features`]: crate::SessionTools::features
///
/// ```
/// use mcp_serve::{Offered, SessionFeatures};
/// use rmcp::ErrorData;
/// use rmcp::model::{Resource, ResourceContents};
///
/// struct Notes;
/// #[async_trait::async_trait]
/// impl SessionFeatures for Notes {
///     fn offered(&self) -> Offered {
///         Offered::default().with_resources(true)
///     }
///     async fn list_resources(&self) -> Result<Vec<Resource>, ErrorData> {
///         Ok(vec![Resource::new("note://today", "today")])
///     }
///     async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, ErrorData> {
///         match uri {
///             "note://today" => Ok(vec![ResourceContents::text("buy milk", uri)]),
///             _ => Err(mcp_serve::resource_not_found(uri)),
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait SessionFeatures: Send + Sync {
    /// What is offered. Default nothing.
    fn offered(&self) -> Offered {
        Offered::default()
    }

    /// `resources/list`: every resource (the handler sends them in one page). Default none.
    async fn list_resources(&self) -> Result<Vec<Resource>, ErrorData> {
        Ok(Vec::new())
    }

    /// `resources/templates/list`. Default none.
    async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ErrorData> {
        Ok(Vec::new())
    }

    /// `resources/read` of `uri`. Default: not found.
    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, ErrorData> {
        Err(resource_not_found(uri))
    }

    /// `resources/subscribe` to `uri`: later changes of it are reported to `updates`
    /// ([`ResourceUpdates::updated`]), which the session relays to its client as
    /// `notifications/resources/updated`. Default: refused.
    async fn subscribe(&self, uri: &str, updates: &ResourceUpdates) -> Result<(), ErrorData> {
        let _ = updates;
        Err(ErrorData::invalid_params(
            format!("`{}` cannot be subscribed to", shown(uri)),
            None,
        ))
    }

    /// `resources/unsubscribe` from `uri`. Default nothing to do.
    async fn unsubscribe(&self, uri: &str) -> Result<(), ErrorData> {
        let _ = uri;
        Ok(())
    }

    /// `prompts/list`. Default none.
    async fn list_prompts(&self) -> Result<Vec<Prompt>, ErrorData> {
        Ok(Vec::new())
    }

    /// `prompts/get` of `name` with `arguments`. Default: no such prompt.
    async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, ErrorData> {
        let _ = arguments;
        Err(ErrorData::invalid_params(
            format!("no prompt `{}`", shown(name)),
            None,
        ))
    }

    /// `completion/complete` of `argument`'s `value` for `reference` (a prompt or a resource
    /// template), given the other arguments already chosen (`context`). Default no values.
    async fn complete(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
        context: BTreeMap<String, String>,
    ) -> Result<CompletionInfo, ErrorData> {
        let _ = (reference, argument, value, context);
        Ok(CompletionInfo::default())
    }

    /// `skills/list`: every skill (the handler pages them, [`SKILLS_PAGE`] a page, and leaves
    /// out an entry that breaks the extension's rules). No file of any skill is read. Default
    /// none.
    async fn list_skills(&self) -> Result<Vec<Skill>, ErrorData> {
        Ok(Vec::new())
    }

    /// `skills/get` of the skill whose `SKILL.md` is at `uri` (its files are read with
    /// [`read_resource`](Self::read_resource)). Default: no such skill (-32602).
    async fn get_skill(&self, uri: &str) -> Result<Skill, ErrorData> {
        Err(no_skill(uri))
    }

    /// `resources/directory/read` of `uri`: every direct child of the directory (the handler
    /// pages them, [`DIRECTORY_PAGE`] a page), a subdirectory with the MIME type
    /// `inode/directory`. Default: not a directory ([`not_a_directory`], -32602).
    async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>, ErrorData> {
        Err(not_a_directory(uri))
    }

    /// Whether a 2026-07-28 client's tool calls, prompt gets and resource reads go through
    /// the `*_round` methods below, so an upstream's input-required result reaches the client
    /// (`relay.rs`). Default no: they are dispatched, got and read as for any client.
    fn relays_input(&self) -> bool {
        false
    }

    /// One round of tool `call` with `round` relayed. Called only when
    /// [`relays_input`](Self::relays_input); default: the tool is unknown.
    async fn call_tool_round(
        &self,
        call: ToolCall,
        round: InputRound,
    ) -> Result<Round<ToolOutput>, ToolError> {
        let _ = round;
        Err(ToolError::UnknownTool {
            tool: call.name,
            suggestions: Vec::new(),
        })
    }

    /// One round of [`get_prompt`](Self::get_prompt) with `round` relayed. Default: got
    /// without it.
    async fn get_prompt_round(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        round: InputRound,
    ) -> Result<Round<GetPromptResult>, ErrorData> {
        let _ = round;
        self.get_prompt(name, arguments).await.map(Round::Complete)
    }

    /// One round of [`read_resource`](Self::read_resource) with `round` relayed. Default: read
    /// without it.
    async fn read_resource_round(
        &self,
        uri: &str,
        round: InputRound,
    ) -> Result<Round<Vec<ResourceContents>>, ErrorData> {
        let _ = round;
        self.read_resource(uri).await.map(Round::Complete)
    }
}

/// The error of `resources/directory/read` of a URI that names no directory served: -32602,
/// as the skills extension asks.
///
/// ```
/// let error = mcp_serve::not_a_directory("skill://pdf/SKILL.md");
/// assert_eq!(error.code.0, -32602);
/// ```
pub fn not_a_directory(uri: &str) -> ErrorData {
    ErrorData::invalid_params(format!("`{}` is not a directory served", shown(uri)), None)
}

/// The error of `skills/get` of a URI that names no skill served: -32602, as the extension
/// asks.
///
/// ```
/// let error = mcp_serve::no_skill("skill://none/SKILL.md");
/// assert_eq!(error.code.0, -32602);
/// ```
pub fn no_skill(uri: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no skill at `{}`", shown(uri)), None)
}

/// The error of a read of a resource that does not exist: `-32002` with the URI in its
/// `data` (rmcp answers `-32602` to 2026-07-28 clients, as SEP-2164 asks).
///
/// ```
/// let error = mcp_serve::resource_not_found("note://none");
/// assert_eq!(error.data.unwrap()["uri"], "note://none");
/// ```
pub fn resource_not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no resource `{}`", shown(uri)),
        Some(serde_json::json!({ "uri": uri })),
    )
}

/// `text` as a message may repeat it: cut and escaped.
pub(crate) fn shown(text: &str) -> String {
    let cut: String = text.chars().take(128).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", cut.escape_debug())
}

/// Why a URI or name a client sent is refused before it reaches anything: empty, longer than
/// [`MAX_FEATURE_URI_BYTES`], or holding control characters.
pub(crate) fn check_client_text(what: &str, text: &str) -> Result<(), ErrorData> {
    if text.is_empty() || text.len() > MAX_FEATURE_URI_BYTES || text.chars().any(char::is_control) {
        return Err(ErrorData::invalid_params(
            format!(
                "the {what} is empty, longer than {MAX_FEATURE_URI_BYTES} bytes or holds control \
                 characters"
            ),
            None,
        ));
    }
    Ok(())
}

/// The resource updates of one downstream session: what its tools report
/// ([`updated`](Self::updated)) for the URIs the session subscribed to, coalesced per URI until
/// the session relays them. A flood cannot grow it: it holds at most one pending update per
/// subscription, and at most [`MAX_SESSION_SUBSCRIPTIONS`] subscriptions; updates for URIs not
/// subscribed to are ignored.
///
/// ```
/// let updates = mcp_serve::ResourceUpdates::default();
/// updates.updated("note://today"); // not subscribed: ignored
/// assert_eq!(updates.pending(), 0);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ResourceUpdates {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct State {
    subscribed: BTreeSet<String>,
    pending: BTreeSet<String>,
}

impl ResourceUpdates {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Reports a change of `uri` (as the session's client knows it): relayed once however
    /// often it is reported before the relay, and only if the session subscribed to it.
    pub fn updated(&self, uri: &str) {
        let mut state = self.state();
        if !state.subscribed.contains(uri) || state.pending.contains(uri) {
            return;
        }
        state.pending.insert(uri.to_owned());
        drop(state);
        self.inner.ready.notify_one();
    }

    /// Updates not yet relayed.
    pub fn pending(&self) -> usize {
        self.state().pending.len()
    }

    /// Adds a subscription; false when [`MAX_SESSION_SUBSCRIPTIONS`] are held already.
    pub(crate) fn add(&self, uri: &str) -> bool {
        let mut state = self.state();
        if state.subscribed.len() >= MAX_SESSION_SUBSCRIPTIONS && !state.subscribed.contains(uri) {
            return false;
        }
        state.subscribed.insert(uri.to_owned());
        true
    }

    /// Removes a subscription and its pending update.
    pub(crate) fn remove(&self, uri: &str) {
        let mut state = self.state();
        state.pending.remove(uri);
        state.subscribed.remove(uri);
    }

    /// Waits for updates, then takes them.
    pub(crate) async fn next(&self) -> Vec<String> {
        loop {
            let taken: Vec<String> = std::mem::take(&mut self.state().pending)
                .into_iter()
                .collect();
            if !taken.is_empty() {
                return taken;
            }
            self.inner.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_flood_is_coalesced_per_subscribed_uri() {
        let updates = ResourceUpdates::default();
        assert!(updates.add("a://1"));
        for _ in 0..100_000 {
            updates.updated("a://1");
            updates.updated("a://other");
        }
        assert_eq!(updates.pending(), 1);
        assert_eq!(updates.next().await, vec!["a://1".to_owned()]);
        assert_eq!(updates.pending(), 0);
    }

    #[test]
    fn subscriptions_are_bounded() {
        let updates = ResourceUpdates::default();
        for n in 0..MAX_SESSION_SUBSCRIPTIONS {
            assert!(updates.add(&format!("a://{n}")));
        }
        assert!(!updates.add("a://one-more"));
        assert!(updates.add("a://0"), "held already");
        updates.remove("a://0");
        assert!(updates.add("a://one-more"));
    }

    #[test]
    fn client_text_is_checked() {
        assert!(check_client_text("URI", "test://ok").is_ok());
        assert!(check_client_text("URI", "").is_err());
        assert!(check_client_text("URI", "test://a\u{7}b").is_err());
        assert!(check_client_text("URI", &"x".repeat(MAX_FEATURE_URI_BYTES + 1)).is_err());
    }
}
