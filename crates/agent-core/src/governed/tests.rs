use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::*;
use crate::{
    ApprovalDecision, ApprovalGate, ApprovalRequest, ApprovalRules, AutoApprove, CallOutcome,
    EVENTS_FILE, Event, EventKind, EventRecvError, EventSink, GovernedLayer, History,
    IdentityRules, MESSAGES_FILE, OutputLimits, OutputStore, PolicyDecision, Redactor, Rule,
    ToolPolicy,
};

const SECRET: &str = "sk-live-0123456789";

/// The name of [`Reader`].
const READER: &str = "read_output";

/// An output reader: `handle` and `offset` in, the chunk's text out.
struct Reader;

impl OutputReader for Reader {
    fn name(&self) -> &str {
        READER
    }

    fn descriptor(&self, _outputs: &OutputStore) -> ToolDescriptor {
        ToolDescriptor::new(READER, JsonObject::new())
            .with_annotations(ToolAnnotations::read_only())
    }

    fn read(&self, outputs: &OutputStore, arguments: &JsonObject) -> Result<ToolOutput, ToolError> {
        let handle = arguments["handle"].as_str().unwrap();
        let offset = arguments.get("offset").and_then(Value::as_u64).unwrap_or(0);
        match outputs.read(handle, offset, outputs.chunk_limit()) {
            Ok(chunk) => Ok(ToolOutput::text(chunk.text)),
            Err(e) => Err(ToolError::InvalidArguments {
                server: None,
                tool: READER.to_owned(),
                message: e.to_string(),
            }),
        }
    }
}

/// Servers by key with their identity, and tools `key__remote`; `mcp_call_tool` and
/// `mcp_search_tools` like a lazy catalog; `clock` is native.
struct Fake {
    servers: Vec<(&'static str, Option<&'static str>)>,
    tools: Vec<(&'static str, &'static str, ToolAnnotations)>,
    ran: Mutex<Vec<String>>,
    release: Notify,
}

#[derive(Debug)]
enum Target {
    Search,
    Native,
    /// Runs on the call's arguments, which the layer hands back with the call.
    Mcp {
        server: String,
        remote: String,
    },
}

impl Fake {
    fn new() -> Self {
        Self {
            servers: vec![("files", Some("acme/files")), ("web", Some("acme/web"))],
            tools: vec![
                ("files", "read", ToolAnnotations::read_only()),
                ("files", "rm", ToolAnnotations::default()),
                ("files", "echo", ToolAnnotations::read_only()),
                ("files", "big", ToolAnnotations::read_only()),
                ("files", "fail", ToolAnnotations::read_only()),
                ("files", "slow", ToolAnnotations::read_only()),
                ("web", "fetch", ToolAnnotations::read_only()),
                ("web", "echo", ToolAnnotations::read_only()),
            ],
            ran: Mutex::new(Vec::new()),
            release: Notify::new(),
        }
    }

    fn with_servers(mut self, servers: Vec<(&'static str, Option<&'static str>)>) -> Self {
        for (key, _) in &servers {
            self.tools.push((key, "echo", ToolAnnotations::read_only()));
        }
        self.servers = servers;
        self
    }

    fn ran(&self) -> Vec<String> {
        self.ran.lock().unwrap().clone()
    }

    /// Resolves `name`, then moves its arguments out of `call` (the inner ones for
    /// `mcp_call_tool`), as a catalog does.
    fn resolve_mcp(
        &self,
        name: &str,
        call: &mut ToolCall,
    ) -> Result<(ResolvedCall, Target), ToolError> {
        let unknown = || ToolError::unknown_tool(name, Vec::new());
        let (server, remote) = name.split_once("__").ok_or_else(unknown)?;
        let (_, _, annotations) = self
            .tools
            .iter()
            .find(|(s, r, _)| *s == server && *r == remote)
            .ok_or_else(unknown)?;
        let identity = self.servers.iter().find(|(k, _)| *k == server).unwrap().1;
        let arguments = if call.name == "mcp_call_tool" {
            match call.arguments.remove("arguments") {
                Some(Value::Object(inner)) => inner,
                _ => JsonObject::new(),
            }
        } else {
            std::mem::take(&mut call.arguments)
        };
        let mut resolved = ResolvedCall::external(name, server, remote, arguments)
            .with_annotations(annotations.clone());
        resolved.server_identity = identity.map(str::to_owned);
        let target = Target::Mcp {
            server: server.into(),
            remote: remote.into(),
        };
        Ok((resolved, target))
    }
}

#[async_trait]
impl CallResolver for Fake {
    type Target = Target;

    fn resolve(&self, call: &mut ToolCall) -> Result<(ResolvedCall, Target), ToolError> {
        match call.name.as_str() {
            "mcp_search_tools" => Ok((
                ResolvedCall::meta(&call.name, std::mem::take(&mut call.arguments)),
                Target::Search,
            )),
            "clock" => Ok((
                ResolvedCall::native(&call.name, std::mem::take(&mut call.arguments)),
                Target::Native,
            )),
            "mcp_call_tool" => {
                let name = call.arguments["tool_name"].as_str().unwrap_or_default();
                let name = name.to_owned();
                self.resolve_mcp(&name, call)
            }
            _ => self.resolve_mcp(&call.name.clone(), call),
        }
    }

    async fn dispatch_resolved(
        &self,
        _permit: Permit,
        call: ToolCall,
        target: Target,
    ) -> Result<ToolOutput, ToolError> {
        let (server, remote, arguments) = match target {
            Target::Search => return Ok(ToolOutput::text("found nothing")),
            Target::Native => {
                self.ran.lock().unwrap().push(call.name);
                return Ok(ToolOutput::text("12:00"));
            }
            Target::Mcp { server, remote } => (server, remote, call.arguments),
        };
        self.ran.lock().unwrap().push(format!("{server}__{remote}"));
        let tool = format!("{server}__{remote}");
        match remote.as_str() {
            "big" => Ok(ToolOutput::text(
                "b".repeat(arguments["bytes"].as_u64().unwrap() as usize),
            )),
            "fail" => Err(ToolError::Invocation {
                server: Some(server),
                tool,
                message: format!(
                    "token {} rejected",
                    arguments["token"].as_str().unwrap_or("")
                ),
            }),
            "slow" => {
                self.release.notified().await;
                Ok(ToolOutput::text("done"))
            }
            _ => Ok(ToolOutput::structured(Value::Object(arguments))),
        }
    }
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

    fn last(&self) -> Event {
        self.0.lock().unwrap().last().unwrap().clone()
    }
}

enum Act {
    Decide(ApprovalDecision),
    Panic,
    Hang,
}

/// Answers from a script (then approves once), recording every request.
#[derive(Default)]
struct Gate {
    script: Mutex<VecDeque<Act>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Gate {
    fn answering(acts: impl IntoIterator<Item = Act>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(acts.into_iter().collect()),
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl ApprovalGate for Gate {
    async fn request(&self, request: ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request);
        let act = self.script.lock().unwrap().pop_front();
        match act {
            None => ApprovalDecision::Approved,
            Some(Act::Decide(decision)) => decision,
            Some(Act::Panic) => panic!("the approval UI crashed"),
            Some(Act::Hang) => std::future::pending().await,
        }
    }
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall::from_json("c1", name, arguments).unwrap()
}

fn via_call_tool(tool: &str, arguments: Value) -> ToolCall {
    call(
        "mcp_call_tool",
        json!({"tool_name": tool, "arguments": arguments}),
    )
}

fn denial(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(err @ ToolError::Denied { .. }) => err.to_string(),
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[tokio::test]
async fn the_call_that_runs_carries_the_arguments_the_layers_decided_on() {
    // The resolved call is moved back when nothing else holds it, and copied when a layer
    // keeps it past the dispatch (the timeout, for its error).
    for timeout in [None, Some(Duration::from_secs(30))] {
        let mut layer = GovernedLayer::new();
        if let Some(timeout) = timeout {
            layer = layer.call_timeout(timeout);
        }
        let governed = layer.layer(Fake::new());
        let out = governed
            .dispatch(via_call_tool("files__echo", json!({"x": 1})))
            .await
            .unwrap();
        assert_eq!(out.structured, Some(json!({"x": 1})), "{timeout:?}");
        let out = governed
            .dispatch(call("files__echo", json!({"y": 2})))
            .await
            .unwrap();
        assert_eq!(out.structured, Some(json!({"y": 2})), "{timeout:?}");
        assert_eq!(governed.inner().ran(), ["files__echo", "files__echo"]);
    }
}

#[tokio::test]
async fn an_allowlist_matching_nothing_denies_every_call_and_names_the_rule() {
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .identity_rules(IdentityRules::default().allow(Rule::new("nobody/*", "*")))
        .event_sink(sink.clone())
        .layer(Fake::new());
    for tool in ["files__read", "web__fetch"] {
        let err = denial(governed.dispatch(call(tool, json!({}))).await);
        assert!(
            err.contains("no rule of `policy.allow` matches server identity `acme/"),
            "{err}"
        );
        let err = denial(governed.dispatch(via_call_tool(tool, json!({}))).await);
        assert!(err.contains(&format!("`{tool}`")), "{err}");
    }
    assert!(governed.inner().ran().is_empty(), "nothing ran");
    assert_eq!(
        sink.kinds(),
        [EventKind::ToolCallDenied; 4],
        "denied, never started"
    );
    // The tool surface itself and native tools are not about servers.
    assert!(
        governed
            .dispatch(call("mcp_search_tools", json!({})))
            .await
            .is_ok()
    );
    assert!(governed.dispatch(call("clock", json!({}))).await.is_ok());
}

#[tokio::test]
async fn rules_match_the_identity_of_every_server_that_claims_it_never_the_key() {
    let fake = Fake::new().with_servers(vec![
        ("one", Some("mcp-servers/everything")),
        ("two", Some("mcp-servers/everything")),
        ("other", Some("someone/else")),
    ]);
    let governed = GovernedLayer::new()
        .identity_rules(
            IdentityRules::default()
                .allow(Rule::new("mcp-servers/*", "*"))
                .allow(Rule::new("other", "*"))
                .deny(Rule::new("mcp-servers/everything", "ech?")),
        )
        .layer(fake);
    for key in ["one", "two"] {
        let err = denial(
            governed
                .dispatch(call(&format!("{key}__echo"), json!({})))
                .await,
        );
        assert!(
            err.contains(r#"rule `policy.deny[0]` { server = "mcp-servers/everything", tool = "ech?" } matches"#),
            "{err}"
        );
    }
    // `other` is the key, not the identity: the allow rule naming it does not apply.
    let err = denial(governed.dispatch(call("other__echo", json!({}))).await);
    assert!(err.contains("server identity `someone/else`"), "{err}");
}

#[tokio::test]
async fn approval_is_asked_about_the_real_tool_with_redacted_arguments() {
    let gate = Gate::answering([]);
    let governed = GovernedLayer::new()
        .approval_rules(ApprovalRules::default().approve(Rule::new("acme/files", "r?")))
        .approval_gate(gate.clone())
        .redactor(Redactor::new().with_secrets([SECRET]))
        .layer(Fake::new());
    let args = json!({"path": "/tmp/x", "note": format!("key {SECRET}"), "headers": {"Authorization": "Bearer abc"}});
    let out = governed
        .dispatch(via_call_tool("files__rm", args))
        .await
        .unwrap();
    assert_eq!(
        out.structured.unwrap()["path"],
        "/tmp/x",
        "the tool got the real arguments"
    );
    let asked = gate.asked();
    assert_eq!(asked.len(), 1);
    let request = &asked[0];
    assert_eq!(request.action_ref, "files__rm");
    assert!(
        request
            .prompt
            .contains("tool `rm` of MCP server `files` (`acme/files`)"),
        "{}",
        request.prompt
    );
    assert!(request.prompt.contains("/tmp/x"), "{}", request.prompt);
    assert!(
        request.prompt.contains(r#"rule `policy.approve[0]`"#),
        "{}",
        request.prompt
    );
    assert_eq!(request.metadata["mcp_tool_name"], "files__rm");
    assert_eq!(
        request.metadata["mcp_arguments"],
        json!({"path": "/tmp/x", "note": "key [REDACTED]", "headers": {"Authorization": "[REDACTED]"}})
    );
    let shown = format!("{request:?}");
    assert!(!shown.contains(SECRET) && !shown.contains("abc"), "{shown}");
    // Rules not matching the real tool ask nothing, whatever the generic caller's name.
    governed
        .dispatch(via_call_tool("files__echo", json!({})))
        .await
        .unwrap();
    assert_eq!(gate.asked().len(), 1);
}

#[tokio::test]
async fn once_for_the_run_and_rejections() {
    let gate = Gate::answering([
        Act::Decide(ApprovalDecision::Approved),
        Act::Decide(ApprovalDecision::ApprovedForRun),
        Act::Decide(ApprovalDecision::Rejected {
            reason: "not today".into(),
        }),
    ]);
    let governed = GovernedLayer::new()
        .approval_rules(ApprovalRules::default().with_approve_destructive(true))
        .approval_gate(gate.clone())
        .layer(Fake::new());
    let rm = || call("files__rm", json!({}));
    governed.dispatch(rm()).await.unwrap(); // approved once
    governed.dispatch(rm()).await.unwrap(); // asked again: approved for the run
    governed.dispatch(rm()).await.unwrap(); // not asked
    governed.dispatch(rm()).await.unwrap();
    assert_eq!(gate.asked().len(), 2);
    // Another tool is asked about on its own: rejected.
    let err = denial(governed.dispatch(call("clock", json!({}))).await);
    assert_eq!(
        err,
        "call of tool `clock` denied: approval required by `policy.approve_destructive` was not given: it was refused: not today"
    );
    assert_eq!(gate.asked().len(), 3);
    assert_eq!(governed.inner().ran(), ["files__rm"; 4]);
}

#[tokio::test]
async fn hints_never_grant_and_the_policy_decides_first() {
    struct Policy(Mutex<Vec<String>>);
    impl ToolPolicy for Policy {
        fn before_call(&self, call: &CallInfo<'_>) -> PolicyDecision {
            match call.remote_tool {
                Some("fetch") => PolicyDecision::Deny {
                    reason: "no network".into(),
                },
                Some("read") => PolicyDecision::RequireApproval,
                _ => PolicyDecision::Allow,
            }
        }
        fn after_call(&self, call: &CallInfo<'_>, outcome: &Result<ToolOutput, ToolError>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {}", call.tool, outcome.is_ok()));
        }
    }
    let policy = Arc::new(Policy(Mutex::default()));
    let gate = Gate::answering([Act::Decide(ApprovalDecision::Rejected {
        reason: "no".into(),
    })]);
    let governed = GovernedLayer::new()
        .policy(policy.clone())
        .approval_rules(ApprovalRules::default().approve(Rule::new("acme/files", "echo")))
        .approval_gate(gate.clone())
        .layer(Fake::new());
    // Read-only, yet an approve rule matches: asked (and rejected).
    denial(governed.dispatch(call("files__echo", json!({}))).await);
    // The policy's own approval requirement.
    governed
        .dispatch(call("files__read", json!({})))
        .await
        .unwrap();
    let asked = gate.asked();
    assert!(
        asked[1]
            .prompt
            .contains("approval required by the tool policy"),
        "{}",
        asked[1].prompt
    );
    let err = denial(governed.dispatch(call("web__fetch", json!({}))).await);
    assert!(
        err.ends_with("denied: the tool policy refused it: no network"),
        "{err}"
    );
    assert_eq!(
        *policy.0.lock().unwrap(),
        ["files__read true"],
        "after_call sees calls that ran"
    );
}

#[tokio::test]
async fn a_gate_that_panics_or_fails_denies_and_the_next_call_works() {
    let gate = Gate::answering([
        Act::Panic,
        Act::Decide(ApprovalDecision::Failed {
            message: format!("terminal gone while showing {SECRET}"),
        }),
    ]);
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .approval_rules(ApprovalRules::default().with_approve_destructive(true))
        .approval_gate(gate)
        .event_sink(sink.clone())
        .redactor(Redactor::new().with_secrets([SECRET]))
        .layer(Fake::new());
    let err = denial(governed.dispatch(call("files__rm", json!({}))).await);
    assert!(
        err.ends_with("was not given: the approval gate panicked"),
        "{err}"
    );
    let err = denial(governed.dispatch(call("files__rm", json!({}))).await);
    assert!(
        err.contains("the approval gate failed: terminal gone"),
        "{err}"
    );
    assert!(!err.contains(SECRET), "{err}");
    assert!(
        governed
            .dispatch(call("files__rm", json!({})))
            .await
            .is_ok()
    );
    assert_eq!(
        sink.kinds(),
        [
            EventKind::ToolCallDenied,
            EventKind::ToolCallDenied,
            EventKind::ToolCallStarted,
            EventKind::ToolCallFinished
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_gate_that_hangs_is_denied_after_its_timeout_and_the_next_call_works() {
    let gate = Gate::answering([Act::Hang]);
    let governed = GovernedLayer::new()
        .approval_rules(ApprovalRules::default().with_approve_destructive(true))
        .approval_gate(gate)
        .layer(Fake::new());
    let began = tokio::time::Instant::now();
    let err = denial(governed.dispatch(call("files__rm", json!({}))).await);
    assert_eq!(began.elapsed(), DEFAULT_APPROVAL_TIMEOUT);
    assert!(
        err.ends_with("the approval gate did not answer within 300 s"),
        "{err}"
    );
    assert!(
        governed
            .dispatch(call("files__rm", json!({})))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn without_a_gate_a_call_that_needs_approval_is_denied() {
    let governed = GovernedLayer::new()
        .approval_rules(ApprovalRules::default().with_approve_open_world(true))
        .layer(Fake::new());
    let err = denial(governed.dispatch(call("web__fetch", json!({}))).await);
    assert!(err.contains("`policy.approve_open_world`"), "{err}");
    assert!(err.contains("no approval gate is configured"), "{err}");
    // Meta calls need no approval.
    assert!(
        governed
            .dispatch(call("mcp_search_tools", json!({})))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn events_name_the_real_tool_and_come_in_order() {
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .event_sink(sink.clone())
        .output_limits(OutputLimits::default().with_max_output_bytes(2048))
        .output_reader(Reader)
        .layer(Fake::new());
    let mut events = governed.subscribe();
    governed
        .dispatch(via_call_tool("files__echo", json!({"a": 1})))
        .await
        .unwrap();
    let started = events.recv().await.unwrap();
    let finished = events.recv().await.unwrap();
    assert_eq!(started.kind, EventKind::ToolCallStarted);
    assert_eq!(finished.kind, EventKind::ToolCallFinished);
    for e in [&started, &finished] {
        assert_eq!(e.tool.as_deref(), Some("files__echo"));
        assert_eq!(e.server.as_deref(), Some("files"));
        assert_eq!(e.server_identity.as_deref(), Some("acme/files"));
        assert_eq!(e.call_id.as_deref(), Some("c1"));
        assert_eq!(e.input_bytes, Some(7), "the real arguments, {{\"a\":1}}");
    }
    assert_eq!(finished.outcome, Some(CallOutcome::Ok));
    assert_eq!(
        (finished.output_bytes, finished.result_bytes),
        (Some(7), Some(7))
    );
    assert!(finished.duration.is_some());
    assert_eq!(
        sink.0.lock().unwrap()[..],
        [started, finished],
        "the sink sees the same"
    );

    let out = governed
        .dispatch(call("files__big", json!({"bytes": 5000})))
        .await
        .unwrap();
    let _ = events.recv().await.unwrap();
    let finished = events.recv().await.unwrap();
    assert_eq!(finished.outcome, Some(CallOutcome::Truncated));
    assert_eq!(finished.result_bytes, Some(5000));
    assert_eq!(
        finished.output_bytes,
        Some(out.to_model_text().len() as u64)
    );
    assert!(finished.output_bytes.unwrap() <= 2048);
    let handle = finished.output_handle.unwrap();

    assert!(
        out.to_model_text().contains(&format!(
            "read the rest with {READER} {{\"handle\": \"{handle}\""
        )),
        "the marker names the reader"
    );
    // The rest, through the reader the layer serves and lists.
    let rest = governed
        .dispatch(call(READER, json!({"handle": handle, "offset": 4990})))
        .await
        .unwrap();
    assert_eq!(rest.to_model_text(), "bbbbbbbbbb");
    let err = governed
        .dispatch(call(READER, json!({"handle": "out_42"})))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown output handle `out_42`"),
        "{err}"
    );
    let kinds: Vec<EventKind> = std::iter::from_fn(|| events.try_recv().unwrap())
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            EventKind::ToolCallStarted,
            EventKind::ToolCallFinished,
            EventKind::ToolCallStarted,
            EventKind::ToolCallFailed
        ]
    );

    // An unknown tool fails without starting.
    assert!(
        governed
            .dispatch(call("files__nope", json!({})))
            .await
            .is_err()
    );
    let failed = events.recv().await.unwrap();
    assert_eq!(
        (failed.kind, failed.outcome),
        (EventKind::ToolCallFailed, Some(CallOutcome::UnknownTool))
    );
    assert_eq!(failed.tool.as_deref(), Some("files__nope"));
}

#[tokio::test]
async fn a_slow_subscriber_never_holds_up_calls() {
    let governed = GovernedLayer::new().event_capacity(4).layer(Fake::new());
    let mut slow = governed.subscribe();
    for _ in 0..20 {
        governed
            .dispatch(call("files__echo", json!({})))
            .await
            .unwrap();
    }
    assert_eq!(
        slow.recv().await,
        Err(EventRecvError::Lagged { missed: 36 })
    );
    assert_eq!(slow.recv().await.unwrap().kind, EventKind::ToolCallStarted);
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_timeout_fails_and_ends_its_events() {
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .call_timeout(Duration::from_secs(30))
        .event_sink(sink.clone())
        .layer(Fake::new());
    let err = governed
        .dispatch(call("files__slow", json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool `files__slow` on server `files` timed out after 30.0 s"
    );
    assert_eq!(
        sink.kinds(),
        [EventKind::ToolCallStarted, EventKind::ToolCallFailed]
    );
    let failed = sink.last();
    assert_eq!(failed.outcome, Some(CallOutcome::Timeout));
    assert_eq!(failed.duration, Some(Duration::from_secs(30)));
}

#[tokio::test]
async fn an_abandoned_call_still_ends_its_events() {
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .event_sink(sink.clone())
        .layer(Fake::new());
    let mut running = Box::pin(governed.dispatch(call("files__slow", json!({}))));
    assert!(futures::poll!(&mut running).is_pending());
    assert_eq!(sink.kinds(), [EventKind::ToolCallStarted]);
    drop(running);
    assert_eq!(
        sink.kinds(),
        [EventKind::ToolCallStarted, EventKind::ToolCallFailed]
    );
    assert_eq!(sink.last().outcome, Some(CallOutcome::Cancelled));
}

#[tokio::test]
async fn native_tools_get_the_same_treatment() {
    struct Clock;
    #[async_trait]
    impl ToolDispatcher for Clock {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(format!("{} at 12:00", call.name)))
        }
    }
    let gate = Gate::answering([]);
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .identity_rules(IdentityRules::default().allow(Rule::new("nobody", "*")))
        .approval_rules(ApprovalRules::default().with_approve_destructive(true))
        .approval_gate(gate.clone())
        .event_sink(sink.clone())
        .layer(
            AsNative::new(Clock).with_descriptors([ToolDescriptor::new("now", JsonObject::new())
                .with_annotations(ToolAnnotations::read_only())]),
        );
    // Server rules do not reach a native tool; its hints do.
    assert!(governed.dispatch(call("now", json!({}))).await.is_ok());
    assert!(gate.asked().is_empty());
    assert!(governed.dispatch(call("wipe", json!({}))).await.is_ok());
    assert_eq!(gate.asked().len(), 1, "no hints: may be destructive");
    assert_eq!(gate.asked()[0].action_ref, "wipe");
    let finished = sink.last();
    assert_eq!(
        (finished.tool.as_deref(), finished.server.as_deref()),
        (Some("wipe"), None)
    );
}

#[tokio::test]
async fn the_catalog_lists_the_output_reader_when_it_has_one() {
    struct Listed;
    impl ToolCatalog for Listed {
        fn tools(&self) -> Vec<ToolDescriptor> {
            vec![ToolDescriptor::new("a", JsonObject::new())]
        }
    }
    #[async_trait]
    impl ToolDispatcher for Listed {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Err(ToolError::unknown_tool(call.name, Vec::new()))
        }
    }
    let without = GovernedLayer::new().layer(AsNative::new(Listed));
    let names: Vec<String> = without.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["a"], "no reader, none listed");
    assert_eq!(without.tool(READER), None);
    let governed = GovernedLayer::new()
        .output_reader(Reader)
        .layer(AsNative::new(Listed));
    let names: Vec<String> = governed.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["a", READER]);
    assert_eq!(
        governed.tool(READER).unwrap().annotations.read_only_hint,
        Some(true)
    );
    // One tool by name is the one the list shows.
    for name in ["a", READER, "missing"] {
        let listed = governed.tools().into_iter().find(|t| t.name == name);
        assert_eq!(governed.tool(name), listed, "{name}");
    }
}

#[tokio::test]
async fn a_wrapped_read_output_tool_is_the_one_looked_up() {
    struct Own;
    impl ToolCatalog for Own {
        fn tools(&self) -> Vec<ToolDescriptor> {
            vec![ToolDescriptor::new(READER, JsonObject::new()).with_description("own")]
        }
    }
    #[async_trait]
    impl ToolDispatcher for Own {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Err(ToolError::unknown_tool(call.name, Vec::new()))
        }
    }
    let governed = GovernedLayer::new()
        .output_reader(Reader)
        .layer(AsNative::new(Own));
    assert_eq!(governed.tools().len(), 1);
    let found = governed.tool(READER).unwrap();
    assert_eq!(found.description.as_deref(), Some("own"));
}

#[tokio::test]
async fn secrets_in_arguments_and_error_texts_never_reach_events_or_history() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session");
    let redactor = Redactor::new().with_secrets([SECRET]);
    let sink = Arc::new(Collect::default());
    let governed = GovernedLayer::new()
        .history(History::create(&session, redactor.clone()).unwrap())
        .redactor(redactor)
        .approval_rules(ApprovalRules::default().approve(Rule::new("*", "echo")))
        .approval_gate(Arc::new(AutoApprove))
        .event_sink(sink.clone())
        .layer(Fake::new());
    governed
        .events()
        .emit(Event::new(EventKind::ServerConnected).with_server("files"));
    let out = governed
        .dispatch(via_call_tool(
            "files__echo",
            json!({"q": SECRET, "headers": {"Cookie": "sid=abcdef"}}),
        ))
        .await
        .unwrap();
    assert_eq!(
        out.structured.unwrap()["q"],
        SECRET,
        "the tool itself gets the real value"
    );
    let err = governed
        .dispatch(call("files__fail", json!({"token": SECRET})))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(SECRET),
        "the model-facing error is the tool's own"
    );
    governed.shutdown().unwrap();

    for event in sink.0.lock().unwrap().iter() {
        let text = serde_json::to_string(event).unwrap();
        assert!(!text.contains(SECRET), "{text}");
    }
    let failed = sink.last();
    assert_eq!(
        failed.message.as_deref(),
        Some("tool `files__fail` on server `files` failed: token [REDACTED] rejected")
    );
    for file in [EVENTS_FILE, MESSAGES_FILE] {
        let text = std::fs::read_to_string(session.join(file)).unwrap();
        assert!(!text.contains(SECRET), "{file}: {text}");
        assert!(!text.contains("sid=abcdef"), "{file}: {text}");
        assert!(text.contains(REDACTED_MARK), "{file}: {text}");
    }
    let read = History::read(&session).unwrap();
    let kinds: Vec<&str> = read
        .events
        .records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "server_connected",
            "tool_call_started",
            "tool_call_finished",
            "tool_call_started",
            "tool_call_failed"
        ]
    );
    let roles: Vec<&str> = read
        .messages
        .records
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["assistant", "tool", "assistant", "tool"]);
    assert_eq!(read.messages.records[1]["tool_call_id"], "c1");
    assert!(read.events.torn.is_none() && read.events.invalid.is_empty());
}

const REDACTED_MARK: &str = crate::REDACTED;

#[tokio::test]
async fn a_call_dropped_while_awaiting_approval_emits_nothing_and_runs_nothing() {
    let sink = Arc::new(Collect::default());
    let gate = Gate::answering([Act::Hang]);
    let governed = GovernedLayer::new()
        .event_sink(sink.clone())
        .approval_rules(ApprovalRules::default().with_approve_destructive(true))
        .approval_gate(gate.clone())
        .layer(Fake::new());
    let mut waiting = Box::pin(governed.dispatch(call("files__rm", json!({}))));
    assert!(futures::poll!(&mut waiting).is_pending());
    assert_eq!(gate.asked().len(), 1, "the gate is being asked");
    drop(waiting);
    assert_eq!(sink.kinds(), [], "no call started, so none ends");
    assert!(governed.inner().ran().is_empty());
}

#[tokio::test]
async fn runs_layered_from_one_builder_learn_their_secrets_apart() {
    let layer = GovernedLayer::new();
    let first = layer.clone().layer(Fake::new());
    let second = layer.layer(Fake::new());
    first
        .redactor()
        .learn(&crate::Secret::new("first-run-token-1234"));
    assert_eq!(
        first.redactor().scrub("first-run-token-1234"),
        crate::REDACTED
    );
    assert_eq!(
        second.redactor().scrub("first-run-token-1234"),
        "first-run-token-1234"
    );
}

mod metered;
