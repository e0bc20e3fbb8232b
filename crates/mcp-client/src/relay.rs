//! Input-required results (SEP-2322) relayed to the caller instead of answered: a gateway
//! whose client speaks 2026-07-28 sends its client's answers and the server's state upstream
//! and hands the next input-required result back, one round per request.
//!
//! [`McpRunner::relay_dispatch`], [`relay_get_prompt`](McpRunner::relay_get_prompt) and
//! [`relay_read_resource`](McpRunner::relay_read_resource) go the way of `dispatch`,
//! `get_prompt` and `read_resource` (the governed layer or the run's feature rules, events,
//! history, bounds, scrubbing); the round travels with the request as a task-local, so the
//! session sends it once ([`InputRound`]: the answers, the state, the client's capabilities)
//! and keeps what the server asked for. What comes back is bounded
//! ([`MAX_INPUT_REQUESTS`], [`MAX_REQUEST_STATE_BYTES`]) and its texts scrubbed of the run's
//! secrets. Without a relay, `Session::call_tool` answers the rounds itself, as before.

use std::sync::Mutex;

use agent_core::{ToolCall, ToolDispatcher as _, ToolError, ToolOutput};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientRequest, ContentBlock, GetPromptRequest, GetPromptRequestParams,
    GetPromptResult, InputRequiredResult, InputResponses, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResult, RequestId, RequestMetaObject, ResourceContents,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};

use crate::{FeatureError, McpRunner, Session};

/// At most this many input requests in one input-required result relayed.
pub const MAX_INPUT_REQUESTS: usize = 16;
/// The longest `requestState` of a server relayed, in bytes.
pub const MAX_REQUEST_STATE_BYTES: usize = 16 * 1024;

/// One round of a relayed request: the caller's answers to the server's last input requests,
/// the server's `requestState` echoed, and the capabilities the caller's client declared
/// (sent to the server as the request's `_meta` `io.modelcontextprotocol/clientCapabilities`
/// instead of this client's own, so the server asks only for what that client can give).
///
/// ```
/// let round = mcp_client::InputRound::default().with_request_state("opaque");
/// assert_eq!(round.request_state.as_deref(), Some("opaque"));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct InputRound {
    /// The answers, by the keys of the server's input requests.
    pub input_responses: Option<InputResponses>,
    /// The server's state, as it sent it.
    pub request_state: Option<String>,
    /// What the caller's client declared.
    pub client_capabilities: Option<ClientCapabilities>,
}

impl InputRound {
    /// With the caller's answers.
    #[must_use]
    pub fn with_input_responses(mut self, responses: InputResponses) -> Self {
        self.input_responses = Some(responses);
        self
    }

    /// With the server's state echoed.
    #[must_use]
    pub fn with_request_state(mut self, state: impl Into<String>) -> Self {
        self.request_state = Some(state.into());
        self
    }

    /// With the capabilities the caller's client declared.
    #[must_use]
    pub fn with_client_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.client_capabilities = Some(capabilities);
        self
    }
}

/// What a relayed request gave: its result, or the server's input-required result for the
/// caller to answer (its texts scrubbed, within the bounds).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Relayed<T> {
    /// The server completed the request.
    Complete(T),
    /// The server asks for input first.
    InputRequired(InputRequiredResult),
}

/// Why a relayed request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The server asked for more inputs at once than are relayed.
    #[error(
        "server `{server}` asked for {count} inputs at once; at most {limit} are relayed (the limit)"
    )]
    TooManyInputRequests {
        /// The server's configured name.
        server: String,
        /// How many it asked for.
        count: usize,
        /// [`MAX_INPUT_REQUESTS`].
        limit: usize,
    },
    /// The server's `requestState` is longer than is relayed.
    #[error(
        "server `{server}` sent a requestState of {bytes} bytes; at most {limit} are relayed (the limit)"
    )]
    StateTooLarge {
        /// The server's configured name.
        server: String,
        /// Its length.
        bytes: usize,
        /// [`MAX_REQUEST_STATE_BYTES`].
        limit: usize,
    },
    /// The tool call failed.
    #[error(transparent)]
    Tool(ToolError),
    /// The prompt or resource request failed.
    #[error(transparent)]
    Feature(FeatureError),
}

/// The round of the request in flight, and what its server asked for.
struct Slot {
    round: InputRound,
    asked: Mutex<Option<Result<InputRequiredResult, RelayError>>>,
}

tokio::task_local! {
    static RELAYING: Slot;
}

/// Runs `request` with `round` relayed; returns its outcome and what the server asked for.
async fn scoped<T>(
    round: InputRound,
    request: impl Future<Output = T>,
) -> (T, Option<Result<InputRequiredResult, RelayError>>) {
    let slot = Slot {
        round,
        asked: Mutex::new(None),
    };
    RELAYING
        .scope(slot, async {
            let outcome = request.await;
            let asked = RELAYING.with(|slot| {
                slot.asked
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
            });
            (outcome, asked)
        })
        .await
}

/// The round being relayed, if any.
fn round() -> Option<InputRound> {
    RELAYING.try_with(|slot| slot.round.clone()).ok()
}

fn keep(asked: Result<InputRequiredResult, RelayError>) {
    let _ = RELAYING.try_with(|slot| {
        *slot
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(asked);
    });
}

/// `outcome`, unless the server asked for input (or broke a bound asking).
fn finish<T, E>(
    outcome: Result<T, E>,
    asked: Option<Result<InputRequiredResult, RelayError>>,
    error: impl FnOnce(E) -> RelayError,
) -> Result<Relayed<T>, RelayError> {
    match asked {
        Some(Ok(asked)) => Ok(Relayed::InputRequired(asked)),
        Some(Err(e)) => Err(e),
        None => outcome.map(Relayed::Complete).map_err(error),
    }
}

/// The text a governed layer records for a round that asked for input.
const ASKED: &str = "the server asked for input; relayed to the caller";

impl McpRunner {
    /// [`dispatch`](agent_core::ToolDispatcher::dispatch) of `call` with `round` relayed to
    /// its server: through the governed layer like any call (policy, approval, output limit,
    /// events and history see each round), one `tools/call` sent, and an input-required
    /// result handed back instead of answered.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::RelayError> {
    /// use mcp_client::{InputRound, Relayed};
    /// let call = agent_core::ToolCall::new("1", "kit__ask", Default::default());
    /// if let Relayed::InputRequired(asked) = runner.relay_dispatch(call, InputRound::default()).await? {
    ///     println!("{:?}", asked.input_requests);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn relay_dispatch(
        &self,
        call: ToolCall,
        round: InputRound,
    ) -> Result<Relayed<ToolOutput>, RelayError> {
        let (outcome, asked) = scoped(round, self.dispatch(call)).await;
        finish(outcome, asked, RelayError::Tool)
    }

    /// [`get_prompt`](McpRunner::get_prompt) with `round` relayed (the run's `[policy]`
    /// rules and events as there).
    pub async fn relay_get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: std::collections::BTreeMap<String, String>,
        round: InputRound,
    ) -> Result<Relayed<GetPromptResult>, RelayError> {
        let (outcome, asked) = scoped(round, self.get_prompt(server, name, arguments)).await;
        finish(outcome, asked, RelayError::Feature)
    }

    /// [`read_resource`](McpRunner::read_resource) with `round` relayed (the run's `[policy]`
    /// rules, events and bounds as there).
    pub async fn relay_read_resource(
        &self,
        server: &str,
        uri: &str,
        round: InputRound,
    ) -> Result<Relayed<Vec<ResourceContents>>, RelayError> {
        let (outcome, asked) = scoped(round, self.read_resource(server, uri)).await;
        finish(outcome, asked, RelayError::Feature)
    }
}

/// Sends `notifications/cancelled` for a request dropped before its answer.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), None))
                    .await;
            });
        }
    }
}

impl Session {
    /// One round of `request` with `round`'s client capabilities in its `_meta`.
    async fn send_round(
        &self,
        request: ClientRequest,
        round: &InputRound,
    ) -> Result<ServerResult, ServiceError> {
        let mut options = PeerRequestOptions::no_options();
        if let Some(capabilities) = &round.client_capabilities {
            let mut meta = RequestMetaObject::new();
            meta.set_client_capabilities(capabilities.clone());
            options = options.with_meta(meta);
        }
        let handle = self
            .peer()
            .send_request_with_option(request, options)
            .await?;
        let mut guard = CancelOnDrop {
            peer: self.peer().clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response().await;
        guard.id = None;
        answer
    }

    /// Keeps what the server asked for, for the caller: bounded, its texts scrubbed.
    fn keep_asked(&self, mut asked: InputRequiredResult) -> Result<(), ServiceError> {
        let count = asked.input_requests.as_ref().map_or(0, |r| r.len());
        let bytes = asked.request_state.as_ref().map_or(0, String::len);
        let refused = if count > MAX_INPUT_REQUESTS {
            Some(RelayError::TooManyInputRequests {
                server: self.name().to_owned(),
                count,
                limit: MAX_INPUT_REQUESTS,
            })
        } else if bytes > MAX_REQUEST_STATE_BYTES {
            Some(RelayError::StateTooLarge {
                server: self.name().to_owned(),
                bytes,
                limit: MAX_REQUEST_STATE_BYTES,
            })
        } else {
            None
        };
        if let Some(refused) = refused {
            let message = refused.to_string();
            keep(Err(refused));
            return Err(ServiceError::McpError(rmcp::ErrorData::internal_error(
                message, None,
            )));
        }
        if let Some(requests) = asked.input_requests.take() {
            let mut value = serde_json::to_value(&requests).unwrap_or_default();
            self.redactor().scrub_json(&mut value);
            asked.input_requests = Some(serde_json::from_value(value).map_err(|e| {
                ServiceError::McpError(rmcp::ErrorData::internal_error(
                    format!("server `{}`'s input requests: {e}", self.name()),
                    None,
                ))
            })?);
        }
        asked.meta = None;
        keep(Ok(asked));
        Ok(())
    }

    /// With a relaying caller, one round of `tools/call` (an input-required result kept for
    /// the caller, the layer told so in a text); else `None`, decided before any future is
    /// made (a call that relays nothing carries no room for a round).
    pub(crate) fn call_tool_relayed<'a>(
        &'a self,
        params: &CallToolRequestParams,
    ) -> Option<BoxFuture<'a, Result<CallToolResult, ServiceError>>> {
        let round = round()?;
        let mut params = params.clone();
        params.input_responses.clone_from(&round.input_responses);
        params.request_state.clone_from(&round.request_state);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        Some(Box::pin(async move {
            match self.send_round(request, &round).await {
                Ok(ServerResult::CallToolResult(result)) => Ok(result),
                Ok(ServerResult::InputRequiredResult(asked)) => self
                    .keep_asked(asked)
                    .map(|()| CallToolResult::success(vec![ContentBlock::text(ASKED)])),
                Ok(_) => Err(ServiceError::UnexpectedResponse),
                Err(e) => Err(e),
            }
        }))
    }

    /// With a relaying caller, one round of `prompts/get`; else the server's answer with
    /// rmcp's own rounds.
    pub(crate) async fn get_prompt_round(
        &self,
        mut params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, ServiceError> {
        let Some(round) = round() else {
            return self.peer().get_prompt(params).await;
        };
        params.input_responses.clone_from(&round.input_responses);
        params.request_state.clone_from(&round.request_state);
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match self.send_round(request, &round).await? {
            ServerResult::GetPromptResult(result) => Ok(result),
            ServerResult::InputRequiredResult(asked) => self
                .keep_asked(asked)
                .map(|()| GetPromptResult::new(Vec::new())),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// With a relaying caller, one round of `resources/read`; else the server's answer with
    /// rmcp's own rounds.
    pub(crate) async fn read_resource_round(
        &self,
        mut params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, ServiceError> {
        let Some(round) = round() else {
            return self.peer().read_resource(params).await;
        };
        params.input_responses.clone_from(&round.input_responses);
        params.request_state.clone_from(&round.request_state);
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        match self.send_round(request, &round).await? {
            ServerResult::ReadResourceResult(result) => Ok(result),
            ServerResult::InputRequiredResult(asked) => self
                .keep_asked(asked)
                .map(|()| ReadResourceResult::new(Vec::new())),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }
}
