//! What the governed-call tests share: configurations with a `[policy]`, scripted and faulty
//! approval gates, calls with their own ids.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::{
    ApprovalDecision, ApprovalGate, ApprovalRequest, ContentPart, Event, EventKind, ToolCall,
    ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use integration_tests::harness::{bounded, object, stdio_server};
use mcp_config::{Config, ServerSpec};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::{Value, json};

/// The test kit's server over stdio, configured as `key` (its identity is `mcp-test-kit`).
pub(crate) fn kit(key: &str) -> ServerSpec {
    stdio_server(key, &StdioServerArgs::new(Mode::Test))
}

/// The identity every test-kit server declares.
pub(crate) const KIT_IDENTITY: &str = "mcp-test-kit";

/// A configuration of `specs` whose `[policy]` is `policy`, read by the configuration's own
/// parser (so the keys are the documented ones).
pub(crate) fn config(specs: Vec<ServerSpec>, policy: Value) -> Config {
    let policy = Config::from_json(&json!({ "policy": policy }))
        .expect("a valid policy")
        .policy;
    Config::new(specs).expect("valid specs").with_policy(policy)
}

/// `mcp_call_tool` of `tool` with `arguments`, under the call id `id`.
pub(crate) async fn call_via(
    runner: &dyn ToolDispatcher,
    id: &str,
    tool: &str,
    arguments: Value,
) -> Result<ToolOutput, ToolError> {
    let args = json!({"tool_name": tool, "arguments": arguments});
    let call = ToolCall::new(id, mcp_catalog::CALL_TOOL, object(args));
    bounded(runner.dispatch(call)).await
}

/// A first-class call of `tool` (its model-facing name) with `arguments`, under `id`.
pub(crate) async fn call_direct(
    runner: &dyn ToolDispatcher,
    id: &str,
    tool: &str,
    arguments: Value,
) -> Result<ToolOutput, ToolError> {
    bounded(runner.dispatch(ToolCall::new(id, tool, object(arguments)))).await
}

/// The reason of a denial (panics on any other outcome).
#[track_caller]
pub(crate) fn denial(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Denied { reason, .. }) => reason,
        other => panic!("expected a denial, got {other:?}"),
    }
}

/// The text of a content part that is text.
pub(crate) fn text_of(part: &ContentPart) -> &str {
    match part {
        ContentPart::Text { text } => text,
        other => panic!("not text: {other:?}"),
    }
}

/// The events about call `id`, in order.
pub(crate) fn of_call(events: &[Event], id: &str) -> Vec<Event> {
    events
        .iter()
        .filter(|e| e.call_id.as_deref() == Some(id))
        .cloned()
        .collect()
}

/// The kinds of `events`.
pub(crate) fn kinds(events: &[Event]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

/// A gate answering from a script (then refusing), remembering every request.
#[derive(Debug, Default)]
pub(crate) struct ScriptedGate {
    answers: Mutex<VecDeque<ApprovalDecision>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedGate {
    pub(crate) fn new(answers: impl IntoIterator<Item = ApprovalDecision>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into_iter().collect()),
            asked: Mutex::default(),
        })
    }

    /// Every request so far.
    pub(crate) fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl ApprovalGate for ScriptedGate {
    async fn request(&self, request: ApprovalRequest) -> ApprovalDecision {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or(ApprovalDecision::Rejected {
                reason: "the script ran out".into(),
            })
    }
}

/// A gate that fails in one way.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FaultyGate {
    /// Panics while asked.
    Panics,
    /// Never answers.
    Hangs,
    /// Answers that it could not ask anyone.
    Fails,
}

#[async_trait]
impl ApprovalGate for FaultyGate {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalDecision {
        match self {
            Self::Panics => panic!("the approval gate broke"),
            Self::Hangs => std::future::pending().await,
            Self::Fails => ApprovalDecision::Failed {
                message: "the approval service is down".into(),
            },
        }
    }
}
