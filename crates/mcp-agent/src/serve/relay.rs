//! A 2026-07-28 client's rounds of input relayed to the run's upstream servers: tool calls
//! through the run's governed layer, prompt gets and resource reads through its governed
//! features, each one round (`McpRunner::relay_dispatch`, `relay_get_prompt`,
//! `relay_read_resource`), an upstream's input-required result handed back to the gateway's
//! handler, which seals its state.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use agent_core::{ToolCall, ToolError, ToolOutput};
use mcp_client::{InputRound as UpstreamRound, RelayError, Relayed};
use mcp_serve::{InputRound, Round, resource_not_found};
use rmcp::ErrorData;
use rmcp::model::{GetPromptResult, ResourceContents};

use super::RunTools;
use super::features::shown_content;

/// The round as the run sends it upstream.
fn upstream(round: InputRound) -> UpstreamRound {
    let mut up = UpstreamRound::default();
    up.input_responses = round.input_responses;
    up.request_state = round.request_state;
    up.client_capabilities = round.client_capabilities;
    up
}

fn round_of<T>(relayed: Relayed<T>) -> Round<T> {
    match relayed {
        Relayed::InputRequired(asked) => Round::InputRequired(asked),
        Relayed::Complete(value) => Round::Complete(value),
        // `Relayed` may grow; nothing else is relayed today.
        #[allow(unreachable_patterns)]
        _ => unreachable!("a relayed round is complete or asks for input"),
    }
}

impl RunTools {
    /// One round of tool `call` (named as the client named it).
    pub(super) async fn relay_call(
        &self,
        call: ToolCall,
        round: InputRound,
    ) -> Result<Round<ToolOutput>, ToolError> {
        let call = self.to_run(call);
        let tool = call.name.clone();
        let outcome = self.runner.relay_dispatch(call, upstream(round)).await;
        match outcome {
            Ok(relayed) => Ok(round_of(relayed)),
            Err(RelayError::Tool(e)) => {
                if matches!(e, ToolError::Transport { .. }) {
                    self.broken.store(true, Ordering::Release);
                }
                Err(e)
            }
            Err(e) => Err(ToolError::Invocation {
                server: bound_server(&e),
                tool,
                message: self.runner.redactor().scrub(&e.to_string()).into_owned(),
            }),
        }
    }

    /// One round of prompt `name` (as the client named it).
    pub(super) async fn relay_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        round: InputRound,
    ) -> Result<Round<GetPromptResult>, ErrorData> {
        let (server, own) = self.upstream.route_prompt(name)?;
        self.runner
            .relay_get_prompt(server, own, arguments, upstream(round))
            .await
            .map(round_of)
            .map_err(|e| self.relay_answer(&e, None))
    }

    /// One round of a read of `uri` (as the client named it). A skill's file is read as the
    /// skill's (`McpRunner::read_resource`), which never asks for input.
    pub(super) async fn relay_read(
        &self,
        uri: &str,
        round: InputRound,
    ) -> Result<Round<Vec<ResourceContents>>, ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        let relayed = self
            .runner
            .relay_read_resource(server, &own, upstream(round))
            .await
            .map_err(|e| self.relay_answer(&e, Some(uri)))?;
        Ok(match relayed {
            Relayed::Complete(contents) if contents.is_empty() => {
                return Err(resource_not_found(uri));
            }
            Relayed::Complete(contents) => Round::Complete(
                contents
                    .into_iter()
                    .map(|content| shown_content(&self.upstream, server, content))
                    .collect(),
            ),
            other => round_of(other),
        })
    }

    /// `error` as the client is answered: a feature's as without a relay, a broken bound an
    /// internal error naming the server and the limit.
    fn relay_answer(&self, error: &RelayError, shown_uri: Option<&str>) -> ErrorData {
        match error {
            RelayError::Feature(e) => self.answer(e, shown_uri),
            other => ErrorData::internal_error(
                self.runner
                    .redactor()
                    .scrub(&other.to_string())
                    .into_owned(),
                None,
            ),
        }
    }
}

/// The server a broken bound names.
fn bound_server(error: &RelayError) -> Option<String> {
    match error {
        RelayError::TooManyInputRequests { server, .. }
        | RelayError::StateTooLarge { server, .. } => Some(server.clone()),
        _ => None,
    }
}
