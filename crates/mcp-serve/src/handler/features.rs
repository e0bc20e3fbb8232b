//! A session's features beyond tools: what the client sends is checked (URIs, names,
//! arguments, the subscription bound, the session's request bound) before it reaches the
//! session's [`SessionFeatures`], and resource updates are relayed to the client, coalesced.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_core::MAX_PROMPT_ARGUMENT_BYTES;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Reference, ResourceUpdatedNotificationParam,
    ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::OwnedSemaphorePermit;

use super::{Served, Session};
use crate::features::{
    MAX_PROMPT_ARGUMENTS, MAX_SESSION_SUBSCRIPTIONS, Offered, SessionFeatures, check_client_text,
    shown,
};
use crate::per_session::SessionTools;
use crate::relay::Round;

/// The shortest time between two rounds of `notifications/resources/updated` of one session:
/// updates arriving faster are coalesced per URI.
pub(crate) const UPDATE_INTERVAL: Duration = Duration::from_millis(100);

/// Features that offer nothing (tools without any): the defaults of [`SessionFeatures`].
pub(super) struct NoFeatures;
impl SessionFeatures for NoFeatures {}

impl Session {
    /// What the session declares beyond tools: what its opener says its tools may offer, and
    /// what its tools, once open, offer.
    pub(super) fn offered(&self) -> Offered {
        let hint = match &self.server().source {
            crate::server::Source::PerSession(opener) => opener.offered(),
            crate::server::Source::Fixed(_) => Offered::default(),
        };
        let now = match self.served_now() {
            Some(Served::Session(tools)) => tools
                .features()
                .map_or_else(Offered::default, |f| f.offered()),
            _ => Offered::default(),
        };
        hint.union(now)
    }

    /// The session's tools for a request beyond tools, the request bound to the session's
    /// principal first.
    pub(super) async fn featured(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<dyn SessionTools>, ErrorData> {
        self.bind(&context.extensions)?;
        self.note_session(&context.extensions);
        self.note_stateless(&context.extensions);
        let _ = self.peer.set(context.peer.clone());
        match self.served().await {
            Ok(Served::Session(tools)) => Ok(tools),
            Ok(Served::Fixed(_)) => Err(ErrorData::invalid_request(
                "this server serves tools only",
                None,
            )),
            Err(reason) => Err(ErrorData::internal_error(
                format!("the tools could not be opened: {reason}"),
                None,
            )),
        }
    }

    /// A place among the session's and the server's requests in flight.
    pub(super) fn permits(
        &self,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), ErrorData> {
        let session = self.calls.clone().try_acquire_owned().map_err(|_| {
            ErrorData::internal_error(
                format!(
                    "too many requests in flight on this session (at most {})",
                    self.server().max_calls_per_session
                ),
                None,
            )
        })?;
        let server = self.shared.calls.clone().try_acquire_owned().map_err(|_| {
            ErrorData::internal_error(
                format!(
                    "too many requests in flight on this server (at most {})",
                    self.server().max_calls
                ),
                None,
            )
        })?;
        Ok((session, server))
    }

    pub(super) async fn serve_list_resources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let listed = tools
            .features()
            .unwrap_or(&NoFeatures)
            .list_resources()
            .await?;
        Ok(ListResourcesResult::with_all_items(listed))
    }

    pub(super) async fn serve_list_templates(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let listed = tools
            .features()
            .unwrap_or(&NoFeatures)
            .list_resource_templates()
            .await?;
        Ok(ListResourceTemplatesResult::with_all_items(listed))
    }

    pub(super) async fn serve_read(
        &self,
        request: &ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        check_client_text("resource URI", &request.uri)?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let features = tools.features().unwrap_or(&NoFeatures);
        let relaying = self.relay_round(
            Some(features),
            ("resources/read", &request.uri),
            None,
            request.input_responses.clone(),
            request.request_state.as_deref(),
            context,
        )?;
        let contents = match &relaying {
            Some(relaying) => {
                match features
                    .read_resource_round(&request.uri, relaying.round.clone())
                    .await?
                {
                    Round::Complete(contents) => contents,
                    Round::InputRequired(asked) => {
                        return Ok(ReadResourceResponse::InputRequired(
                            self.seal_asked(relaying, asked)?,
                        ));
                    }
                }
            }
            None => features.read_resource(&request.uri).await?,
        };
        if contents.is_empty() {
            // An empty read is no answer for a resource (SEP-2164): it does not exist.
            return Err(crate::features::resource_not_found(&request.uri));
        }
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            contents,
        )))
    }

    pub(super) async fn serve_subscribe(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        check_client_text("resource URI", uri)?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        if !self.updates.add(uri) {
            return Err(ErrorData::invalid_request(
                format!(
                    "this session holds {MAX_SESSION_SUBSCRIPTIONS} subscriptions already (the \
                     limit); unsubscribe from one first"
                ),
                None,
            ));
        }
        let subscribed = tools
            .features()
            .unwrap_or(&NoFeatures)
            .subscribe(uri, &self.updates)
            .await;
        if let Err(e) = subscribed {
            self.updates.remove(uri);
            return Err(e);
        }
        self.relay_updates(context.peer.clone());
        Ok(())
    }

    pub(super) async fn serve_unsubscribe(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        check_client_text("resource URI", uri)?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        self.updates.remove(uri);
        tools
            .features()
            .unwrap_or(&NoFeatures)
            .unsubscribe(uri)
            .await
    }

    pub(super) async fn serve_list_prompts(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let listed = tools
            .features()
            .unwrap_or(&NoFeatures)
            .list_prompts()
            .await?;
        Ok(ListPromptsResult::with_all_items(listed))
    }

    pub(super) async fn serve_get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        check_client_text("prompt name", &request.name)?;
        let arguments = prompt_arguments(request.arguments.unwrap_or_default())?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let features = tools.features().unwrap_or(&NoFeatures);
        let relaying = self.relay_round(
            Some(features),
            ("prompts/get", &request.name),
            None,
            request.input_responses,
            request.request_state.as_deref(),
            context,
        )?;
        let mut result = match &relaying {
            Some(relaying) => {
                match features
                    .get_prompt_round(&request.name, arguments, relaying.round.clone())
                    .await?
                {
                    Round::Complete(result) => result,
                    Round::InputRequired(asked) => {
                        return Ok(GetPromptResponse::InputRequired(
                            self.seal_asked(relaying, asked)?,
                        ));
                    }
                }
            }
            None => features.get_prompt(&request.name, arguments).await?,
        };
        // A result read from an older server has no `resultType`; this one is complete (rmcp
        // drops the field again for a client of an older revision).
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(GetPromptResponse::Complete(result))
    }

    pub(super) async fn serve_complete(
        &self,
        request: CompleteRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        match &request.r#ref {
            Reference::Prompt(p) => check_client_text("prompt name", &p.name)?,
            Reference::Resource(r) => check_client_text("resource URI", &r.uri)?,
            _ => {
                return Err(ErrorData::invalid_params(
                    "the completion's reference is neither a prompt nor a resource template",
                    None,
                ));
            }
        }
        check_argument(&request.argument.name, &request.argument.value)?;
        let others = request
            .context
            .and_then(|c| c.arguments)
            .unwrap_or_default();
        if others.len() > MAX_PROMPT_ARGUMENTS {
            return Err(too_many_arguments());
        }
        for (name, value) in &others {
            check_argument(name, value)?;
        }
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let info = tools
            .features()
            .unwrap_or(&NoFeatures)
            .complete(
                request.r#ref,
                &request.argument.name,
                &request.argument.value,
                others.into_iter().collect(),
            )
            .await?;
        Ok(CompleteResult::new(info))
    }

    /// Relays the session's resource updates to its client (once started, until the session
    /// ends): a round at most each [`UPDATE_INTERVAL`], one notification per URI updated.
    fn relay_updates(&self, peer: rmcp::Peer<RoleServer>) {
        if self.relaying.swap(true, Ordering::AcqRel) {
            return;
        }
        let updates = self.updates.clone();
        let ended = self.ended.clone();
        tokio::spawn(async move {
            loop {
                let uris = tokio::select! {
                    () = ended.cancelled() => break,
                    uris = updates.next() => uris,
                };
                for uri in uris {
                    let sent = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await;
                    if sent.is_err() {
                        return;
                    }
                }
                tokio::select! {
                    () = ended.cancelled() => break,
                    () = tokio::time::sleep(UPDATE_INTERVAL) => {}
                }
            }
        });
    }
}

fn too_many_arguments() -> ErrorData {
    ErrorData::invalid_params(
        format!("more than {MAX_PROMPT_ARGUMENTS} arguments (the limit)"),
        None,
    )
}

/// An argument's name and value, bounded.
fn check_argument(name: &str, value: &str) -> Result<(), ErrorData> {
    if name.is_empty()
        || name.len() > MAX_PROMPT_ARGUMENT_BYTES
        || value.len() > MAX_PROMPT_ARGUMENT_BYTES
    {
        return Err(ErrorData::invalid_params(
            format!(
                "argument `{}`: an empty name, or a name or value longer than {MAX_PROMPT_ARGUMENT_BYTES} \
                 bytes",
                shown(name)
            ),
            None,
        ));
    }
    Ok(())
}

/// A prompt's arguments as strings (what `prompts/get` takes), bounded.
fn prompt_arguments(
    arguments: serde_json::Map<String, serde_json::Value>,
) -> Result<BTreeMap<String, String>, ErrorData> {
    if arguments.len() > MAX_PROMPT_ARGUMENTS {
        return Err(too_many_arguments());
    }
    arguments
        .into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::String(text) => {
                check_argument(&name, &text)?;
                Ok((name, text))
            }
            _ => Err(ErrorData::invalid_params(
                format!("argument `{}` is not a string", shown(&name)),
                None,
            )),
        })
        .collect()
}
