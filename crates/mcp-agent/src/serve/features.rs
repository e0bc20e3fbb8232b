//! A run's resources, templates, prompts, completions, subscriptions and skills served to a
//! gateway's client: names mapped by [`UpstreamNames`], every request through the run's
//! governed features, each error answered with the JSON-RPC code the client can act on.

use std::collections::BTreeMap;

use agent_core::{EventKind, EventRecvError, ToolCall, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_client::{FeatureError, McpRunner, SessionView};
use mcp_serve::{
    InputRound, Offered, ResourceUpdates, Round, SessionFeatures, UpstreamNames, resource_not_found,
};
use rmcp::ErrorData;
use rmcp::model::{
    CompletionInfo, GetPromptResult, Prompt, Reference, Resource, ResourceContents,
    ResourceTemplate, Skill,
};

use super::RunTools;

/// The JSON-RPC codes by which a server says a resource does not exist: `-32002` before
/// 2026-07-28, `-32602` since (SEP-2164).
const NOT_FOUND_CODES: [i32; 2] = [-32002, -32602];

/// What a session's capabilities (as its server declared them) offer beyond tools.
fn offered_by(session: &SessionView) -> Offered {
    let identity = session.identity();
    let resources = identity.capabilities.get("resources");
    Offered::default()
        .with_resources(identity.declares("resources"))
        .with_subscribe(
            resources
                .and_then(|r| r.get("subscribe"))
                .and_then(serde_json::Value::as_bool)
                == Some(true),
        )
        .with_prompts(identity.declares("prompts"))
        .with_completions(identity.declares("completions"))
        .with_skills(session.offers_skills())
        .with_directory_read(session.offers_skills() && session.offers_directory_read())
}

impl RunTools {
    /// The run's sessions offering what `wanted` picks.
    fn offering(&self, wanted: impl Fn(Offered) -> bool) -> impl Iterator<Item = &SessionView> {
        self.runner
            .sessions()
            .iter()
            .filter(move |s| wanted(offered_by(s)))
    }

    /// `error` as the client is answered: what it can fix is -32602 (a missing resource with
    /// its URI in `data`), the rest an internal error; the message scrubbed of the run's
    /// secrets.
    pub(super) fn answer(&self, error: &FeatureError, shown_uri: Option<&str>) -> ErrorData {
        let message = self
            .runner
            .redactor()
            .scrub(&error.to_string())
            .into_owned();
        match error {
            FeatureError::Rpc { code, .. } if NOT_FOUND_CODES.contains(code) => match shown_uri {
                Some(uri) => {
                    ErrorData::resource_not_found(message, Some(serde_json::json!({ "uri": uri })))
                }
                None => ErrorData::invalid_params(message, None),
            },
            FeatureError::Denied { .. }
            | FeatureError::UnknownServer { .. }
            | FeatureError::InvalidUri { .. }
            | FeatureError::UnknownPrompt { .. }
            | FeatureError::MissingArguments { .. } => ErrorData::invalid_params(message, None),
            FeatureError::TooManySubscriptions { .. } => ErrorData::invalid_request(message, None),
            _ => ErrorData::internal_error(message, None),
        }
    }

    /// Relays the run's `resource_updated` events to `updates` (under the URIs the client
    /// knows), from the first subscription until the session closes.
    fn relay_to(&self, updates: &ResourceUpdates) {
        let mut relay = self
            .relay
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if relay.is_some() {
            return;
        }
        let mut events = self.runner.governed().subscribe();
        let updates = updates.clone();
        let names = self.upstream.clone();
        *relay = Some(tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) if event.kind == EventKind::ResourceUpdated => {
                        if let (Some(server), Some(uri)) = (&event.server, &event.target)
                            && let Some(shown) = names.uri(server, uri)
                        {
                            updates.updated(&shown);
                        }
                    }
                    // Missed events were mostly others (calls); an update missed is a
                    // notification the client does not get, its subscription stays.
                    Ok(_) | Err(EventRecvError::Lagged { .. }) => {}
                    Err(_) => return,
                }
            }
        }));
    }
}

/// Logs an upstream listing that failed (the others are still served).
pub(super) fn warn(runner: &McpRunner, server: &str, what: &str, error: &FeatureError) {
    tracing::warn!(
        server,
        what,
        error = %runner.redactor().scrub(&error.to_string()),
        "an upstream listing failed; its items are left out"
    );
}

#[async_trait]
impl SessionFeatures for RunTools {
    /// What the run's open servers declared, together.
    fn offered(&self) -> Offered {
        self.runner
            .sessions()
            .iter()
            .map(offered_by)
            .fold(Offered::default(), Offered::union)
    }

    async fn list_resources(&self) -> Result<Vec<Resource>, ErrorData> {
        let mut all = Vec::new();
        for session in self.offering(|o| o.resources) {
            let server = session.name();
            // The files of a skill the run's `[policy]` refuses are not listed either.
            let refused = match self.runner.refused_skills(server).await {
                Ok(refused) => refused,
                Err(e) => {
                    warn(&self.runner, server, "skills/list", &e);
                    continue;
                }
            };
            match self.runner.list_resources(server).await {
                // A resource whose URI could not be routed back is left out.
                Ok(listed) => all.extend(listed.into_iter().filter_map(|mut r| {
                    if Self::hidden(&refused, &r.uri) {
                        return None;
                    }
                    r.uri = self.upstream.uri(server, &r.uri)?;
                    Some(r)
                })),
                Err(e) => warn(&self.runner, server, "resources/list", &e),
            }
        }
        Ok(all)
    }

    async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ErrorData> {
        let mut all = Vec::new();
        for session in self.offering(|o| o.resources) {
            let server = session.name();
            match self.runner.list_resource_templates(server).await {
                Ok(listed) => all.extend(listed.into_iter().filter_map(|mut t| {
                    t.uri_template = self.upstream.uri(server, &t.uri_template)?;
                    Some(t)
                })),
                Err(e) => warn(&self.runner, server, "resources/templates/list", &e),
            }
        }
        Ok(all)
    }

    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        // A skill's file is read as the skill's (`McpRunner::read_resource`): decided by its
        // skill's rules, checked against its manifest.
        let contents = self
            .runner
            .read_resource(server, &own)
            .await
            .map_err(|e| self.answer(&e, Some(uri)))?;
        if contents.is_empty() {
            return Err(resource_not_found(uri));
        }
        Ok(contents
            .into_iter()
            .map(|content| shown_content(&self.upstream, server, content))
            .collect())
    }

    async fn subscribe(&self, uri: &str, updates: &ResourceUpdates) -> Result<(), ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        // Relaying first, so an update right after the subscription is not missed.
        self.relay_to(updates);
        self.runner
            .subscribe_resource(server, &own)
            .await
            .map_err(|e| self.answer(&e, None))
    }

    async fn unsubscribe(&self, uri: &str) -> Result<(), ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        self.runner
            .unsubscribe_resource(server, &own)
            .await
            .map_err(|e| self.answer(&e, None))
    }

    async fn list_prompts(&self) -> Result<Vec<Prompt>, ErrorData> {
        let mut all = Vec::new();
        for session in self.offering(|o| o.prompts) {
            let server = session.name();
            match self.runner.list_prompts(server).await {
                Ok(listed) => all.extend(listed.into_iter().map(|mut p| {
                    p.name = self.upstream.prompt(server, &p.name);
                    p
                })),
                Err(e) => warn(&self.runner, server, "prompts/list", &e),
            }
        }
        Ok(all)
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, ErrorData> {
        let (server, own) = self.upstream.route_prompt(name)?;
        self.runner
            .get_prompt(server, own, arguments)
            .await
            .map_err(|e| self.answer(&e, None))
    }

    async fn complete(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
        context: BTreeMap<String, String>,
    ) -> Result<CompletionInfo, ErrorData> {
        let (server, reference) = match &reference {
            Reference::Prompt(p) => {
                let (server, own) = self.upstream.route_prompt(&p.name)?;
                (server, Reference::for_prompt(own))
            }
            Reference::Resource(r) => {
                let (server, own) = self.upstream.route_uri(&r.uri)?;
                (server, Reference::for_resource(own.into_owned()))
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "the completion's reference is neither a prompt nor a resource template",
                    None,
                ));
            }
        };
        // A server that offers no completions has none to give.
        let offers = self
            .runner
            .sessions()
            .iter()
            .any(|s| s.name() == server && offered_by(s).completions);
        if !offers {
            return Ok(CompletionInfo::default());
        }
        self.runner
            .complete_in_context(server, reference, argument, value, context)
            .await
            .map_err(|e| self.answer(&e, None))
    }

    async fn list_skills(&self) -> Result<Vec<Skill>, ErrorData> {
        Ok(self.served_skills().await)
    }

    async fn get_skill(&self, uri: &str) -> Result<Skill, ErrorData> {
        self.served_skill(uri).await
    }

    async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>, ErrorData> {
        self.served_directory(uri).await
    }

    /// A 2026-07-28 client's input requests are relayed (`relay.rs`).
    fn relays_input(&self) -> bool {
        true
    }

    async fn call_tool_round(
        &self,
        call: ToolCall,
        round: InputRound,
    ) -> Result<Round<ToolOutput>, ToolError> {
        self.relay_call(call, round).await
    }

    async fn get_prompt_round(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        round: InputRound,
    ) -> Result<Round<GetPromptResult>, ErrorData> {
        self.relay_prompt(name, arguments, round).await
    }

    async fn read_resource_round(
        &self,
        uri: &str,
        round: InputRound,
    ) -> Result<Round<Vec<ResourceContents>>, ErrorData> {
        self.relay_read(uri, round).await
    }
}

/// A content read from `server`, its URI as the client knows it.
pub(super) fn shown_content(
    names: &UpstreamNames,
    server: &str,
    mut content: ResourceContents,
) -> ResourceContents {
    if let ResourceContents::TextResourceContents { uri, .. }
    | ResourceContents::BlobResourceContents { uri, .. } = &mut content
    {
        // A content's URI that could not be routed back stays the server's own.
        if let Some(shown) = names.uri(server, uri) {
            *uri = shown;
        }
    }
    content
}
