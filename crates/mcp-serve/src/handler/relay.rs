//! A 2026-07-28 client's rounds of input (SEP-2322) through a session whose tools relay them
//! ([`SessionFeatures::relays_input`]): the client's `requestState` opened with the
//! endpoint's [`RelaySeal`](crate::relay::RelaySeal) (refused -32602 unless issued for this
//! request, upstream, principal and session), its answers and capabilities passed on, and an
//! upstream's input-required result handed back, its input requests as they came and its
//! state sealed. A client of an older revision is asked through `downstream.rs` instead.

use agent_core::{ToolCall, ToolError, ToolOutput};
use rmcp::model::{InputRequiredResult, InputResponses};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{Served, Session};
use crate::features::SessionFeatures;
use crate::relay::{Binding, InputRound, Round};

/// One request relayed: its round and what its state is bound to.
pub(super) struct Relaying {
    pub(super) round: InputRound,
    method: &'static str,
    name: String,
    upstream: Option<String>,
}

impl Session {
    fn binding<'a>(&'a self, relaying: &'a Relaying, principal: &'a str) -> Binding<'a> {
        Binding {
            method: relaying.method,
            name: &relaying.name,
            upstream: relaying.upstream.as_deref(),
            principal,
            session: self.label.get().map_or("", String::as_str),
        }
    }

    fn principal_text(&self) -> String {
        self.principal
            .get()
            .cloned()
            .flatten()
            .and_then(|p| serde_json::to_string(&p).ok())
            .unwrap_or_default()
    }

    /// The round of `method` of `name` (`target`, sent to `upstream`) when its client speaks
    /// 2026-07-28 and `features` relay input; `None` otherwise (the request goes as for any
    /// client).
    pub(super) fn relay_round(
        &self,
        features: Option<&dyn SessionFeatures>,
        (method, name): (&'static str, &str),
        upstream: Option<String>,
        answers: Option<InputResponses>,
        state: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Relaying>, ErrorData> {
        let stateless = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        if !stateless || !features.is_some_and(SessionFeatures::relays_input) {
            return Ok(None);
        }
        let mut relaying = Relaying {
            round: InputRound::default(),
            method,
            name: name.to_owned(),
            upstream,
        };
        if let Some(state) = state {
            let principal = self.principal_text();
            let opened = self
                .shared
                .seal
                .open(&self.binding(&relaying, &principal), state)?;
            relaying.round.request_state = Some(opened);
        }
        relaying.round.input_responses = answers;
        relaying.round.client_capabilities = context.meta.client_capabilities();
        Ok(Some(relaying))
    }

    /// `asked` as the client gets it: its state sealed for this request.
    pub(super) fn seal_asked(
        &self,
        relaying: &Relaying,
        mut asked: InputRequiredResult,
    ) -> Result<InputRequiredResult, ErrorData> {
        if let Some(state) = asked.request_state.take() {
            let principal = self.principal_text();
            asked.request_state = Some(
                self.shared
                    .seal
                    .seal(&self.binding(relaying, &principal), &state)?,
            );
        }
        Ok(asked)
    }
}

/// `call` dispatched by `served`, through its features' relay when `round` is given.
pub(super) async fn dispatch_round(
    served: &Served,
    call: ToolCall,
    round: Option<InputRound>,
) -> Result<Round<ToolOutput>, ToolError> {
    match (served, round) {
        (Served::Session(tools), Some(round)) => match tools.features() {
            Some(features) if features.relays_input() => {
                features.call_tool_round(call, round).await
            }
            _ => tools.dispatch(call).await.map(Round::Complete),
        },
        _ => served.dispatch(call).await.map(Round::Complete),
    }
}
