use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

use crate::{
    AgentError, AgentLoop, AsNative, CallOutcome, Event, EventKind, EventSink, GovernedLayer,
    Message, ModelError, ModelResponse, Role, ScriptedModel, ToolCall, ToolCatalog, ToolDescriptor,
    ToolDispatcher, ToolError, ToolOutput, Usage,
};

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::from_json(id, name, args).unwrap()
}

#[derive(Default)]
struct Collect(Mutex<Vec<Event>>);

impl EventSink for Collect {
    fn emit(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

impl Collect {
    fn kinds(&self) -> Vec<EventKind> {
        self.0.lock().unwrap().iter().map(|e| e.kind).collect()
    }
}

/// `echo` returns its arguments; `hang` never returns; `fail` fails; `gate` waits on a
/// barrier, counting how many calls are in flight.
struct Tools {
    barrier: Barrier,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl Tools {
    fn new(parties: usize) -> Self {
        Self {
            barrier: Barrier::new(parties),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl ToolDispatcher for Tools {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        match call.name.as_str() {
            "echo" => Ok(ToolOutput::structured(call.arguments.into())),
            "hang" => std::future::pending().await,
            "fail" => Err(ToolError::Invocation {
                server: None,
                tool: call.name,
                message: "the disk is full".into(),
            }),
            "gate" => {
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.most_in_flight.fetch_max(now, Ordering::SeqCst);
                self.barrier.wait().await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolOutput::text(format!("gate {}", call.id)))
            }
            other => Err(ToolError::unknown_tool(other, Vec::new())),
        }
    }
}

impl ToolCatalog for Tools {
    fn tools(&self) -> Vec<ToolDescriptor> {
        ["echo", "hang", "fail", "gate"]
            .into_iter()
            .map(|name| ToolDescriptor::new(name, Default::default()))
            .collect()
    }
}

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("the loop did not finish within 10 s")
}

#[tokio::test]
async fn tool_results_go_back_to_the_model_in_order_and_usage_is_summed() {
    let model = Arc::new(ScriptedModel::from_responses([
        ModelResponse::new(Message::tool_calls(vec![
            call("a", "echo", json!({"n": 1})),
            call("b", "echo", json!({"n": 2})),
        ]))
        .with_usage(Usage::new(100, 10)),
        ModelResponse::new(Message::assistant("done")).with_usage(Usage::new(150, 5)),
    ]));
    let events = Arc::new(Collect::default());
    let outcome = bounded(
        AgentLoop::new(model.clone())
            .event_sink(events.clone())
            .run(&Tools::new(1), "go"),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "done");
    assert_eq!(outcome.steps, 2);
    assert_eq!(outcome.usage, Usage::new(250, 15));
    let second = &model.requests()[1].messages;
    let results: Vec<_> = second
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap(), m.content.clone()))
        .collect();
    assert_eq!(
        results,
        [
            ("a".to_owned(), r#"{"n":1}"#.to_owned()),
            ("b".to_owned(), r#"{"n":2}"#.to_owned())
        ]
    );
    assert_eq!(
        events.kinds(),
        [
            EventKind::ModelResponded,
            EventKind::ModelResponded,
            EventKind::RunFinished
        ]
    );
    let finished = events.0.lock().unwrap().last().cloned().unwrap();
    assert_eq!(finished.usage, Some(Usage::new(250, 15)));
    assert_eq!(finished.step, Some(2));
    let first = events.0.lock().unwrap()[0].clone();
    assert_eq!(
        (first.step, first.tool_call_count, first.usage),
        (Some(1), Some(2), Some(Usage::new(100, 10)))
    );
}

#[tokio::test]
async fn calls_of_one_answer_run_concurrently_up_to_the_bound() {
    // Four calls, at most two at once: the barrier of two lets a pair through only when both
    // are in flight together, so the run finishes only if they do run concurrently.
    let calls = (0..4)
        .map(|i| call(&format!("c{i}"), "gate", json!({})))
        .collect();
    let model = Arc::new(ScriptedModel::new([
        Message::tool_calls(calls),
        Message::assistant("ok"),
    ]));
    let tools = Tools::new(2);
    let outcome = bounded(
        AgentLoop::new(model)
            .max_concurrent_calls(2)
            .run(&tools, "go"),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "ok");
    assert_eq!(tools.most_in_flight.load(Ordering::SeqCst), 2);
    let answered: Vec<_> = outcome
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    assert_eq!(answered, ["c0", "c1", "c2", "c3"]);
}

#[tokio::test]
async fn errors_and_denials_reach_the_model_and_the_run_goes_on() {
    let model = Arc::new(ScriptedModel::new([
        Message::tool_calls(vec![
            call("1", "fail", json!({})),
            call("2", "nope", json!({})),
            call("3", "echo", json!({"secret": "no"})),
            call("4", "gate", json!({})),
        ]),
        Message::assistant("recovered"),
    ]));
    struct NoGates;
    impl crate::ToolPolicy for NoGates {
        fn before_call(&self, call: &crate::CallInfo<'_>) -> crate::PolicyDecision {
            if call.tool == "gate" {
                crate::PolicyDecision::Deny {
                    reason: "gates are closed".into(),
                }
            } else {
                crate::PolicyDecision::Allow
            }
        }
    }
    let governed = GovernedLayer::new()
        .policy(Arc::new(NoGates))
        .layer(AsNative::new(Tools::new(1)));
    let outcome = bounded(AgentLoop::new(model.clone()).run(&governed, "go"))
        .await
        .unwrap();
    assert_eq!(outcome.answer, "recovered");
    let texts: Vec<_> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect();
    assert!(texts[0].contains("the disk is full"), "{texts:?}");
    assert!(texts[1].contains("unknown tool `nope`"), "{texts:?}");
    assert_eq!(texts[2], r#"{"secret":"no"}"#);
    assert!(
        texts[3].contains("denied") && texts[3].contains("gates are closed"),
        "{texts:?}"
    );
}

#[tokio::test]
async fn a_model_that_calls_tools_forever_stops_at_the_step_limit() {
    let model = Arc::new(ScriptedModel::from_fn(|_| {
        Ok(ModelResponse::new(Message::tool_calls(vec![call(
            "x",
            "echo",
            json!({}),
        )])))
    }));
    let events = Arc::new(Collect::default());
    let error = bounded(
        AgentLoop::new(model.clone())
            .max_steps(3)
            .event_sink(events.clone())
            .run(&Tools::new(1), "go"),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, AgentError::StepLimit { max_steps: 3 }));
    assert_eq!(model.requests().len(), 3);
    assert_eq!(events.kinds().last(), Some(&EventKind::RunFailed));
}

#[tokio::test]
async fn a_model_failure_names_the_step() {
    let model = Arc::new(ScriptedModel::new([Message::tool_calls(vec![call(
        "1",
        "echo",
        json!({}),
    )])]));
    let error = bounded(AgentLoop::new(model).run(&Tools::new(1), "go"))
        .await
        .unwrap_err();
    match error {
        AgentError::Model { step, source } => {
            assert_eq!(step, 2);
            assert!(matches!(source, ModelError::Unusable(_)));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn cancelling_stops_a_run_with_a_call_in_flight() {
    let model = Arc::new(ScriptedModel::new([Message::tool_calls(vec![call(
        "1",
        "hang",
        json!({}),
    )])]));
    let governed = GovernedLayer::new().layer(AsNative::new(Tools::new(1)));
    let mut tool_events = governed.subscribe();
    let token = CancellationToken::new();
    let agent = AgentLoop::new(model).cancel_on(token.clone());
    let run = agent.run(&governed, "go");
    let cancel = async {
        // Cancel once the hanging call has started.
        let started = tool_events.recv().await.unwrap();
        assert_eq!(started.kind, EventKind::ToolCallStarted);
        token.cancel();
    };
    let (result, ()) = bounded(async { tokio::join!(run, cancel) }).await;
    assert!(matches!(result, Err(AgentError::Cancelled)));
    let ended = tool_events.recv().await.unwrap();
    assert_eq!(ended.kind, EventKind::ToolCallFailed);
    assert_eq!(ended.outcome, Some(CallOutcome::Cancelled));
}

#[tokio::test]
async fn missing_and_repeated_call_ids_are_made_unique() {
    let model = Arc::new(ScriptedModel::new([
        Message::tool_calls(vec![
            call("", "echo", json!({"n": 1})),
            call("same", "echo", json!({"n": 2})),
            call("same", "echo", json!({"n": 3})),
        ]),
        Message::assistant("ok"),
    ]));
    let outcome = bounded(AgentLoop::new(model).run(&Tools::new(1), "go"))
        .await
        .unwrap();
    let ids: Vec<_> = outcome
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    assert_eq!(ids, ["call_1_0", "same", "call_1_2"]);
}

#[tokio::test]
async fn text_is_streamed_and_the_conversation_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let history = Arc::new(crate::History::create(dir.path(), crate::Redactor::new()).unwrap());
    let model = Arc::new(ScriptedModel::new([Message::assistant("it is noon")]));
    let pieces = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = {
        let pieces = pieces.clone();
        move |piece: &str| pieces.lock().unwrap().push(piece.to_owned())
    };
    bounded(
        AgentLoop::new(model)
            .system_prompt("be brief")
            .text_sink(Arc::new(sink))
            .history(history.clone())
            .run(&Tools::new(1), "what time is it?"),
    )
    .await
    .unwrap();
    assert_eq!(pieces.lock().unwrap().concat(), "it is noon");
    assert!(pieces.lock().unwrap().len() > 1, "streamed in pieces");
    history.close().unwrap();
    let read = crate::History::read(dir.path()).unwrap();
    let recorded: Vec<Message> = read
        .messages
        .records
        .iter()
        .map(|l| serde_json::from_value(l.clone()).unwrap())
        .collect();
    assert_eq!(
        recorded,
        [
            Message::new(Role::User, "what time is it?"),
            Message::assistant("it is noon")
        ]
    );
}

#[tokio::test]
async fn a_call_with_unreadable_arguments_is_never_run_and_the_model_is_told() {
    let model = Arc::new(ScriptedModel::new([
        Message::tool_calls(vec![
            ToolCall::malformed("1", "fail", "invalid JSON (EOF while parsing at column 9)"),
            call("2", "echo", json!({"n": 1})),
        ]),
        Message::assistant("fixed"),
    ]));
    let events = Arc::new(Collect::default());
    let outcome = bounded(
        AgentLoop::new(model.clone())
            .event_sink(events.clone())
            .run(&Tools::new(1), "go"),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "fixed");
    let texts: Vec<_> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect();
    // `fail` would have said "the disk is full": it did not run.
    assert_eq!(
        texts[0],
        "invalid arguments for tool `fail`: the arguments could not be read: invalid JSON (EOF while parsing at column 9)"
    );
    assert_eq!(texts[1], r#"{"n":1}"#);
    let refused = events.0.lock().unwrap()[1].clone();
    assert_eq!(refused.kind, EventKind::ToolCallFailed);
    assert_eq!(refused.outcome, Some(CallOutcome::InvalidArguments));
    assert_eq!(refused.call_id.as_deref(), Some("1"));
}

#[tokio::test]
async fn the_governed_layer_refuses_a_call_with_unreadable_arguments() {
    let governed = GovernedLayer::new().layer(AsNative::new(Tools::new(1)));
    let mut events = governed.subscribe();
    let error = governed
        .dispatch(ToolCall::malformed("1", "fail", "not an object"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ToolError::InvalidArguments { .. }),
        "{error}"
    );
    let event = events.recv().await.unwrap();
    assert_eq!(event.kind, EventKind::ToolCallFailed);
    assert_eq!(event.outcome, Some(CallOutcome::InvalidArguments));
}
