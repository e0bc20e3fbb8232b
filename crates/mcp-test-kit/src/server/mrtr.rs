//! The tools and the prompt of the MCP conformance suite's `input-required-result-*` server
//! scenarios (SEP-2322, revision 2026-07-28), for a [`TestServer`](super::TestServer) built
//! [`with_suite_tools`](super::TestServerOptions::with_suite_tools) (the prompt
//! `test_input_required_result_prompt` with
//! [`with_suite_resources`](super::TestServerOptions::with_suite_resources)).
//!
//! Each answers a call without `inputResponses` with an input-required result of its
//! scenario's input requests, and a call answering all of them with a complete result; a call
//! whose answers are missing, of other keys or malformed is asked again. The tools that keep
//! state between rounds put it in `requestState`, HMAC-SHA256 over the tool's name, the round
//! and the state (a key per server, [`StateKey`]): a state changed, or issued for another tool
//! or round, is refused with -32602. `test_input_required_result_capabilities` asks only for
//! what the request's `_meta['io.modelcontextprotocol/clientCapabilities']` declares;
//! `input_required_huge_state` (hostile) sends a `requestState` of 64 KiB.
//! Over an older revision (no input-required results), the suite's elicitation tools send
//! their request to the client instead ([`super::suite`]).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, Prompt, PromptMessage, Role, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::schema::object;

/// The tools' names and descriptions, in the order they are listed.
const TOOLS: &[(&str, &str)] = &[
    (
        "test_input_required_result_elicitation",
        "Asks for the user's name (input-required result), then greets them.",
    ),
    (
        "test_input_required_result_sampling",
        "Asks the client's model for the capital of France, then reports its answer.",
    ),
    (
        "test_input_required_result_list_roots",
        "Asks for the client's roots, then lists them.",
    ),
    (
        "test_input_required_result_request_state",
        "Asks for a confirmation with a signed requestState, then answers `state-ok`.",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Asks for a name, a greeting and the roots at once, then completes.",
    ),
    (
        "test_input_required_result_multi_round",
        "Asks for a name, then a colour (two rounds of signed state), then completes.",
    ),
    (
        "test_input_required_result_tampered_state",
        "Asks for a confirmation with a signed requestState; a changed one is refused.",
    ),
    (
        "test_input_required_result_capabilities",
        "Asks only for the input the request's client capabilities declare.",
    ),
    (
        "input_required_huge_state",
        "Hostile: asks for a name with a requestState of 64 KiB.",
    ),
];

/// The prompt that asks for input before it is given.
pub(super) const PROMPT: &str = "test_input_required_result_prompt";

/// The key of the server's signed `requestState`s: random per server (its clones share it).
#[derive(Clone)]
pub(crate) struct StateKey(std::sync::Arc<ring::hmac::Key>);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl Default for StateKey {
    fn default() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .unwrap_or_else(|_| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"mcp-test-kit"));
        Self(std::sync::Arc::new(key))
    }
}

impl StateKey {
    /// `payload`, signed for `tool`: `payload.tag`, both base64url.
    fn seal(&self, tool: &str, payload: &str) -> String {
        let tag = ring::hmac::sign(&self.0, format!("{tool}\n{payload}").as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// The payload of `state` signed for `tool`, or -32602.
    fn open(&self, tool: &str, state: &str) -> Result<String, ErrorData> {
        let refused = || {
            ErrorData::invalid_params(
                format!("`{tool}`: the requestState failed its integrity check"),
                None,
            )
        };
        let (payload, tag) = state.split_once('.').ok_or_else(refused)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| refused())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| refused())?;
        let payload = String::from_utf8(payload).map_err(|_| refused())?;
        ring::hmac::verify(&self.0, format!("{tool}\n{payload}").as_bytes(), &tag)
            .map_err(|_| refused())?;
        Ok(payload)
    }
}

/// True for the name of one of these tools.
pub(super) fn is_tool(name: &str) -> bool {
    TOOLS.iter().any(|&(n, _)| n == name)
}

/// The tools as listed (none takes arguments).
pub(super) fn tools() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|&(name, description)| {
            Tool::new(
                name,
                description,
                object(json!({"type": "object", "properties": {}})),
            )
        })
        .collect()
}

/// The prompt as listed.
pub(super) fn prompt() -> Prompt {
    Prompt::new(
        PROMPT,
        Some("Asks for the context to use (input-required result), then gives the prompt."),
        None,
    )
}

/// An input request from its JSON.
fn request(value: Value) -> InputRequest {
    serde_json::from_value(value).expect("a well-formed input request")
}

fn elicit(message: &str, field: &str, kind: &str) -> InputRequest {
    request(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field]
            }
        }
    }))
}

fn sample(text: &str, max_tokens: u32) -> InputRequest {
    request(json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens
        }
    }))
}

fn list_roots() -> InputRequest {
    request(json!({"method": "roots/list", "params": {}}))
}

/// An accepted elicitation's `field`, if `answer` is one with that field.
fn accepted<'a>(answer: Option<&'a Value>, field: &str) -> Option<&'a Value> {
    let answer = answer?.as_object()?;
    (answer.get("action")?.as_str()? == "accept")
        .then(|| answer.get("content")?.get(field))
        .flatten()
}

/// A sampling answer's text, if `answer` is one.
fn sampled(answer: Option<&Value>) -> Option<&str> {
    answer?.get("content")?.get("text")?.as_str()
}

/// A roots answer's URIs, if `answer` is one.
fn roots(answer: Option<&Value>) -> Option<Vec<&str>> {
    answer?
        .get("roots")?
        .as_array()?
        .iter()
        .map(|r| r.get("uri").and_then(Value::as_str))
        .collect()
}

fn asks(requests: Vec<(&str, InputRequest)>, state: Option<String>) -> CallToolResponse {
    let requests: InputRequests = requests
        .into_iter()
        .map(|(k, r)| (k.to_owned(), r))
        .collect();
    CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), state))
}

fn done(text: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(
        text.into(),
    )]))
}

/// Runs the tool `name` (one of [`TOOLS`]) for one round.
pub(super) fn call(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    key: &StateKey,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.as_ref();
    let empty = InputResponses::new();
    let answers = request.input_responses.as_ref().unwrap_or(&empty);
    let answer = |k: &str| answers.get(k);
    // The round a signed state names (0 without one).
    let round = match &request.request_state {
        Some(state) => key.open(name, state)?,
        None => String::new(),
    };
    let name_q = || elicit("What is your name?", "name", "string");
    Ok(match name {
        "test_input_required_result_elicitation" => {
            match accepted(answer("user_name"), "name").and_then(Value::as_str) {
                Some(user) => done(format!("Hello, {user}!")),
                None => asks(vec![("user_name", name_q())], None),
            }
        }
        "test_input_required_result_sampling" => match sampled(answer("capital_question")) {
            Some(text) => done(format!("The model said: {text}")),
            None => asks(
                vec![(
                    "capital_question",
                    sample("What is the capital of France?", 100),
                )],
                None,
            ),
        },
        "test_input_required_result_list_roots" => match roots(answer("client_roots")) {
            Some(uris) => done(format!("The client's roots: {}", uris.join(", "))),
            None => asks(vec![("client_roots", list_roots())], None),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let ok = accepted(answer("confirm"), "ok").and_then(Value::as_bool);
            match (round.as_str(), ok) {
                ("confirm", Some(ok)) => done(format!("state-ok: confirmed={ok}")),
                _ => asks(
                    vec![("confirm", elicit("Please confirm", "ok", "boolean"))],
                    Some(key.seal(name, "confirm")),
                ),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let user = accepted(answer("user_name"), "name").and_then(Value::as_str);
            let greeting = sampled(answer("greeting"));
            let listed = roots(answer("client_roots"));
            match (round.as_str(), user, greeting, listed) {
                ("all", Some(user), Some(greeting), Some(listed)) => {
                    done(format!("{user}: {greeting} ({} roots)", listed.len()))
                }
                _ => asks(
                    vec![
                        ("user_name", name_q()),
                        ("greeting", sample("Generate a greeting", 50)),
                        ("client_roots", list_roots()),
                    ],
                    Some(key.seal(name, "all")),
                ),
            }
        }
        "test_input_required_result_multi_round" => {
            let step1 = || {
                asks(
                    vec![(
                        "step1",
                        elicit("Step 1: What is your name?", "name", "string"),
                    )],
                    Some(key.seal(name, "step1")),
                )
            };
            match round.split_once(':').unwrap_or((round.as_str(), "")) {
                ("step1", _) => match accepted(answer("step1"), "name").and_then(Value::as_str) {
                    Some(user) => asks(
                        vec![(
                            "step2",
                            elicit("Step 2: What is your favorite color?", "color", "string"),
                        )],
                        Some(key.seal(name, &format!("step2:{user}"))),
                    ),
                    None => step1(),
                },
                ("step2", user) => {
                    match accepted(answer("step2"), "color").and_then(Value::as_str) {
                        Some(color) => done(format!("{user} likes {color}")),
                        None => asks(
                            vec![(
                                "step2",
                                elicit("Step 2: What is your favorite color?", "color", "string"),
                            )],
                            Some(key.seal(name, &round)),
                        ),
                    }
                }
                _ => step1(),
            }
        }
        "input_required_huge_state" => {
            asks(vec![("user_name", name_q())], Some("x".repeat(64 * 1024)))
        }
        "test_input_required_result_capabilities" => {
            if !answers.is_empty() {
                return Ok(done("Completed with the input the client could give"));
            }
            let declared = context
                .meta
                .client_capabilities()
                .or_else(|| {
                    context
                        .peer
                        .peer_info()
                        .map(|info| info.capabilities.clone())
                })
                .unwrap_or_default();
            let mut wanted = Vec::new();
            if declared.elicitation.is_some() {
                wanted.push(("user_name", name_q()));
            }
            if declared.sampling.is_some() {
                wanted.push(("greeting", sample("Generate a greeting", 50)));
            }
            if declared.roots.is_some() {
                wanted.push(("client_roots", list_roots()));
            }
            if wanted.is_empty() {
                done("The client declared no way to give input")
            } else {
                asks(wanted, None)
            }
        }
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{other}`"),
                None,
            ));
        }
    })
}

/// `prompts/get` of [`PROMPT`] for one round.
pub(super) fn get_prompt(request: &GetPromptRequestParams) -> GetPromptResponse {
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|a| a.get("user_context"));
    match accepted(answer, "context").and_then(Value::as_str) {
        Some(context) => {
            GetPromptResponse::Complete(GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                format!("Use this context: {context}"),
            )]))
        }
        None => {
            let requests: InputRequests = [(
                "user_context".to_owned(),
                elicit("What context should the prompt use?", "context", "string"),
            )]
            .into_iter()
            .collect();
            GetPromptResponse::InputRequired(InputRequiredResult::from_input_requests(requests))
        }
    }
}

/// One round of a suite tool that asks the client for input (`elicitation` is its request's
/// params), at a revision with input-required results: asked under the key `elicitation`,
/// then `report`ed with the answer's action and content.
pub(super) fn elicitation_round(
    elicitation: Value,
    report: &str,
    request: &CallToolRequestParams,
) -> CallToolResponse {
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|a| a.get("elicitation"))
        .and_then(Value::as_object);
    match answer.and_then(|a| Some((a.get("action")?.as_str()?, a.get("content")))) {
        Some((action, content)) => {
            let content = content.cloned().unwrap_or(Value::Null);
            done(format!("{report}: action={action}, content={content}"))
        }
        None => asks(
            vec![("elicitation", request_of("elicitation/create", elicitation))],
            None,
        ),
    }
}

fn request_of(method: &str, params: Value) -> InputRequest {
    request(json!({"method": method, "params": params}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_opens_only_for_its_tool_unchanged() {
        let key = StateKey::default();
        let state = key.seal("a", "confirm");
        assert_eq!(key.open("a", &state).unwrap(), "confirm");
        assert!(key.open("b", &state).is_err());
        assert!(key.open("a", &format!("{state}-TAMPERED")).is_err());
        assert!(StateKey::default().open("a", &state).is_err());
    }
}
