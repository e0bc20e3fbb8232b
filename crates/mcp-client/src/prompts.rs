//! A session's prompts and completions: listed within the session's bounds, got with their
//! required arguments checked first, completed with bounded suggestions.

use std::collections::BTreeMap;

use mcp_catalog::sanitize::{Lines, clean};
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CompletionContext, CompletionInfo, GetPromptRequestParams,
    GetPromptResult, JsonObject, Prompt, Reference,
};

use crate::resources::{MAX_FEATURE_DESCRIPTION_BYTES, MAX_FEATURE_NAME_BYTES, MAX_RESOURCE_BYTES};
use crate::scrub::shown_text;
use crate::{FeatureError, Session};

pub use agent_core::MAX_PROMPT_ARGUMENTS;
/// The most completion values kept (the protocol's own cap).
pub const MAX_COMPLETION_VALUES: usize = CompletionInfo::MAX_VALUES;

/// True when `name` can be kept as it is.
fn is_clean_name(name: &str) -> bool {
    !name.is_empty()
        && matches!(
            clean(name, MAX_FEATURE_NAME_BYTES, Lines::Single),
            std::borrow::Cow::Borrowed(_)
        )
}

impl Session {
    /// Lists the server's prompts (`prompts/list`, every page) within the session's
    /// [`ListLimits`](crate::ListLimits). A prompt whose name (or one of whose argument names)
    /// is empty, longer than [`MAX_FEATURE_NAME_BYTES`], holds control characters or one of
    /// the run's secrets is left out, as is one with more than [`MAX_PROMPT_ARGUMENTS`]
    /// arguments; titles and
    /// descriptions are cleaned, cut and scrubbed; icons and `_meta` dropped.
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// for prompt in session.list_prompts().await? {
    ///     println!("{}", prompt.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, FeatureError> {
        let peer = self.peer().clone();
        let listed = self
            .feature_listing("prompts/list", move |params| {
                let peer = peer.clone();
                async move {
                    let page = peer.list_prompts(params).await?;
                    Ok((page.prompts, page.next_cursor))
                }
            })
            .await?;
        let redactor = self.redactor();
        let title = |s: &str| shown_text(redactor, s, MAX_FEATURE_NAME_BYTES, Lines::Single);
        let description =
            |s: &str| shown_text(redactor, s, MAX_FEATURE_DESCRIPTION_BYTES, Lines::Multi);
        Ok(listed
            .into_iter()
            .filter(|p| {
                let arguments = p.arguments.as_deref().unwrap_or_default();
                is_clean_name(&p.name)
                    && arguments.len() <= MAX_PROMPT_ARGUMENTS
                    && arguments.iter().all(|a| is_clean_name(&a.name))
                    && !self.holds_secret(&p.name)
                    && !arguments.iter().any(|a| self.holds_secret(&a.name))
            })
            .map(|mut p| {
                p.title = p.title.as_deref().map(title);
                p.description = p.description.as_deref().map(description);
                for argument in p.arguments.iter_mut().flatten() {
                    argument.title = argument.title.as_deref().map(title);
                    argument.description = argument.description.as_deref().map(description);
                }
                p.icons = None;
                p.meta = None;
                p
            })
            .collect())
    }

    /// Gets a prompt (`prompts/get`) with `arguments`, within the call timeout. The prompt must
    /// be listed ([`FeatureError::UnknownPrompt`]), and every argument it marks required must
    /// be given ([`FeatureError::MissingArguments`], naming them) — both checked before the
    /// request is sent. The messages have the run's secrets replaced; more than
    /// [`MAX_RESOURCE_BYTES`] of them (as JSON) is refused ([`FeatureError::TooLarge`]).
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// let args = [("code".to_owned(), "fn main() {}".to_owned())].into_iter().collect();
    /// let prompt = session.get_prompt("review_code", args).await?;
    /// println!("{} messages", prompt.messages.len());
    /// # Ok(()) }
    /// ```
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, FeatureError> {
        let listed = self.list_prompts().await?;
        let Some(prompt) = listed.iter().find(|p| p.name == name) else {
            return Err(FeatureError::UnknownPrompt {
                server: self.name().to_owned(),
                prompt: clean(name, MAX_FEATURE_NAME_BYTES, Lines::Single).into_owned(),
            });
        };
        let missing: Vec<String> = prompt
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true) && !arguments.contains_key(&a.name))
            .map(|a| a.name.clone())
            .collect();
        if !missing.is_empty() {
            return Err(FeatureError::MissingArguments {
                server: self.name().to_owned(),
                prompt: prompt.name.clone(),
                missing,
            });
        }
        let arguments: JsonObject = arguments
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        let mut params = GetPromptRequestParams::new(name).with_arguments(arguments);
        crate::trace_context::inject(&mut params);
        let result = self
            .feature_request("prompts/get", self.get_prompt_round(params))
            .await?;
        if agent_core::json_len(&result).unwrap_or_default() > MAX_RESOURCE_BYTES {
            return Err(FeatureError::TooLarge {
                server: self.name().to_owned(),
                target: prompt.name.clone(),
                limit: MAX_RESOURCE_BYTES,
            });
        }
        self.scrubbed_prompt(result)
    }

    fn scrubbed_prompt(&self, result: GetPromptResult) -> Result<GetPromptResult, FeatureError> {
        let redactor = self.redactor();
        let mut result = result;
        result.description = result
            .description
            .as_deref()
            .map(|d| shown_text(redactor, d, MAX_FEATURE_DESCRIPTION_BYTES, Lines::Multi));
        result.meta = None;
        if redactor.is_empty() {
            return Ok(result);
        }
        let failed = |_| FeatureError::Failed {
            server: self.name().to_owned(),
            method: "prompts/get",
            source: crate::ProtocolError::Unexpected,
        };
        let mut value = serde_json::to_value(&result).map_err(failed)?;
        redactor.scrub_json(&mut value);
        serde_json::from_value(value).map_err(failed)
    }

    /// Asks the server to complete `argument`'s `value` (`completion/complete`) for a prompt
    /// ([`Reference::for_prompt`]) or a resource template ([`Reference::for_resource`]),
    /// within the call timeout. At most [`MAX_COMPLETION_VALUES`] values are kept, each
    /// without control characters, cut to [`MAX_FEATURE_DESCRIPTION_BYTES`], scrubbed.
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// use rmcp::model::Reference;
    /// let info = session.complete(Reference::for_prompt("review_code"), "language", "ru").await?;
    /// println!("{:?}", info.values);
    /// # Ok(()) }
    /// ```
    pub async fn complete(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
    ) -> Result<CompletionInfo, FeatureError> {
        self.complete_in_context(reference, argument, value, BTreeMap::new())
            .await
    }

    /// [`complete`](Self::complete), telling the server the values already chosen for the
    /// other arguments (`context.arguments`), so it can complete one argument depending on
    /// another (a repository's branches once the repository is chosen).
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// use rmcp::model::Reference;
    /// let chosen = [("owner".to_owned(), "acme".to_owned())].into_iter().collect();
    /// let info = session
    ///     .complete_in_context(Reference::for_prompt("review_pr"), "repo", "we", chosen)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete_in_context(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
        context: BTreeMap<String, String>,
    ) -> Result<CompletionInfo, FeatureError> {
        let mut params = CompleteRequestParams::new(reference, ArgumentInfo::new(argument, value));
        if !context.is_empty() {
            params.context = Some(CompletionContext::with_arguments(
                context.into_iter().collect(),
            ));
        }
        crate::trace_context::inject(&mut params);
        let result = self
            .feature_request("completion/complete", self.peer().complete(params))
            .await?;
        let mut info = result.completion;
        info.values.truncate(MAX_COMPLETION_VALUES);
        let redactor = self.redactor();
        for value in &mut info.values {
            *value = shown_text(
                redactor,
                value,
                MAX_FEATURE_DESCRIPTION_BYTES,
                Lines::Single,
            );
        }
        Ok(info)
    }
}
