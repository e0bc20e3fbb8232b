//! An agent run on the command line, shared by `mcp-agent run` and the main job: the loop of
//! `agent-core` over a runner's governed tools, its text streamed to stdout as it arrives and
//! one line per tool call on stderr — or, with `--json`, the run's events as JSON lines.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use mcp_agent::{
    CALL_TOOL, CallOutcome, Event, EventKind, McpRunner, READ_TOOL, Redactor, ToolCall,
    ToolDescriptor, ToolError, ToolOutput,
    agent::{AgentError, AgentLoop, AgentOutcome, CancellationToken, TextSink},
    events::{EventBus, EventRecvError},
    prelude::{EventSink, Model, ToolCatalog, ToolDispatcher},
};
use serde_json::{Value, json};

use super::exit::Exit;
use super::term::chain;
use super::term::{MAX_NAME, escaped, inline, out_json_line, say, unbounded};

/// Longest argument text shown on a tool call's line.
const MAX_ARGS: usize = 200;
/// Longest error text shown on a tool call's line.
const MAX_ERROR: usize = 400;
/// Streamed text without whitespace held back at most this long before it is printed anyway.
const MAX_HELD: usize = 16 * 1024;

/// How one agent run goes.
#[derive(Debug, Clone)]
pub(crate) struct AgentOptions {
    /// The most model answers.
    pub(crate) max_steps: u32,
    /// Events as JSON lines on stdout instead of text and tool lines.
    pub(crate) json: bool,
    /// What `--max-steps` is called, for the step-limit message (`None`: not a flag here).
    pub(crate) steps_flag: Option<&'static str>,
}

/// Runs `instruction` with `model` over `runner`'s tools (every call through its governed
/// layer, its events on the layer's bus, its conversation in the layer's history) and prints
/// the run. Exit 0 with an answer, 1 when the run failed (the reason on stderr).
pub(crate) async fn run(
    runner: &McpRunner,
    model: Arc<dyn Model>,
    instruction: &str,
    options: &AgentOptions,
) -> ExitCode {
    let governed = runner.governed();
    let secrets = runner.redactor();
    let console = Arc::new(Console::default());
    console.lock().secrets = secrets.clone();
    let events = LoopEvents {
        bus: governed.events(),
        console: (!options.json).then(|| Arc::clone(&console)),
        secrets: secrets.clone(),
    };
    let stop = console.lock().stop.clone();
    // The run's history records the conversation; its bus, wrapped to print, the events.
    let mut agent = AgentLoop::new(model)
        .in_context(runner.context())
        .max_steps(options.max_steps)
        .event_sink(Arc::new(events))
        .cancel_on(stop);
    // The servers' instructions and skills, attributed, bounded and scrubbed by the library.
    if let Some(addendum) = runner.system_prompt_addendum() {
        agent = agent.system_prompt(addendum);
    }
    let result = if options.json {
        json_run(runner, &agent, instruction).await
    } else {
        let agent = agent.text_sink(Arc::clone(&console) as Arc<dyn TextSink>);
        let tools = Shown {
            runner,
            console: Arc::clone(&console),
            redactor: secrets.clone(),
        };
        let result = agent.run(&tools, instruction).await;
        console.end_text();
        Ok(result)
    };
    let result = match result {
        Ok(result) => result,
        Err(code) => return code,
    };
    if let Some(code) = console.failed() {
        return code;
    }
    match result {
        Ok(outcome) => {
            if options.json {
                if let Err(code) = out_json_line(secrets, &answer_line(&outcome)) {
                    return code;
                }
            } else {
                say(format_args!("done in {}", steps(&outcome)));
            }
            Exit::Success.into()
        }
        Err(error) => {
            let hint = match (&error, options.steps_flag) {
                (AgentError::StepLimit { .. }, Some(flag)) => {
                    format!(" (raise the limit with {flag})")
                }
                _ => String::new(),
            };
            say(format_args!("error: {}{hint}", chain(secrets, &error)));
            if options.json {
                super::open::json_error(
                    secrets,
                    Exit::Failed,
                    "run",
                    &format!("{}{hint}", chain(secrets, &error)),
                    json!({}),
                );
            }
            Exit::Failed.into()
        }
    }
}

fn steps(outcome: &AgentOutcome) -> String {
    let n = outcome.steps;
    let mut text = format!("{n} step{}", if n == 1 { "" } else { "s" });
    if outcome.usage.total() > 0 {
        text.push_str(&format!(
            ", {} tokens in, {} out",
            outcome.usage.input_tokens, outcome.usage.output_tokens
        ));
    }
    text
}

/// The last line of `--json`: the answer, the steps and the tokens.
fn answer_line(outcome: &AgentOutcome) -> Value {
    json!({
        "kind": "answer",
        "answer": outcome.answer,
        "step": outcome.steps,
        "usage": outcome.usage,
    })
}

/// The run with its events printed as JSON lines as they happen (the layer's bus: tool calls,
/// model answers, the run's end). `Err` is the exit code of a closed stdout.
async fn json_run(
    runner: &McpRunner,
    agent: &AgentLoop,
    instruction: &str,
) -> Result<Result<AgentOutcome, AgentError>, ExitCode> {
    let secrets = runner.redactor();
    let mut events = runner.governed().subscribe();
    let run = agent.run(runner, instruction);
    tokio::pin!(run);
    let result = loop {
        tokio::select! {
            biased;
            event = events.recv() => print_event(secrets, event)?,
            result = &mut run => break result,
        }
    };
    loop {
        match events.try_recv() {
            Ok(Some(event)) => print_event(secrets, Ok(event))?,
            Ok(None) | Err(EventRecvError::Closed) => break,
            Err(lagged) => print_event(secrets, Err(lagged))?,
        }
    }
    Ok(result)
}

fn print_event(secrets: &Redactor, event: Result<Event, EventRecvError>) -> Result<(), ExitCode> {
    match event {
        Ok(event) => out_json_line(secrets, &serde_json::to_value(&event).unwrap_or_default()),
        Err(EventRecvError::Lagged { missed }) => {
            say(format_args!(
                "warning: {missed} events were not printed (the output was too slow)"
            ));
            Ok(())
        }
        // The bus outlives the run; a closed one has nothing more to say.
        Err(_) => Ok(()),
    }
}

/// The loop's own events, on their way to the layer's bus. A tool call among them is one the
/// loop answered without running it (arguments the model wrote that could not be read): on
/// the terminal it gets its two lines like every other call.
struct LoopEvents {
    bus: Arc<EventBus>,
    console: Option<Arc<Console>>,
    secrets: Redactor,
}

impl EventSink for LoopEvents {
    fn emit(&self, event: Event) {
        if let (Some(console), EventKind::ToolCallFailed) = (&self.console, event.kind) {
            let id = event.call_id.as_deref().unwrap_or("");
            let secrets = &self.secrets;
            let name = inline(secrets, event.tool.as_deref().unwrap_or("?"), MAX_NAME);
            let outcome = event.outcome.map_or_else(|| "error".into(), outcome_words);
            let why = inline(secrets, event.message.as_deref().unwrap_or(""), MAX_ERROR);
            console.started(id, &format!("→ {name} (arguments not readable)"));
            console.finished(id, &name, &format!("← {outcome} 0 ms: {why}"));
        }
        self.bus.emit(event);
    }
}

/// An outcome in words: `invalid arguments`.
fn outcome_words(outcome: CallOutcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_else(|| "error".into())
}

/// What the run prints on the terminal: the model's text on stdout, tool lines on stderr,
/// kept apart so that a tool line never lands in the middle of a line of text.
#[derive(Default)]
struct Console {
    state: Mutex<ConsoleState>,
}

#[derive(Default)]
struct ConsoleState {
    /// Streamed text not printed yet: the end of a word, in which a secret may continue.
    held: String,
    /// The last character printed on stdout was not a newline.
    mid_line: bool,
    /// The call whose `→` line was printed last, with nothing printed after it.
    last_started: Option<String>,
    /// Why stdout could not be written (the exit code), once it failed.
    failed: Option<ExitCode>,
    /// Cancelled when stdout fails: no one reads the run any more, so no further tool call
    /// (with its side effects) is made for it.
    stop: CancellationToken,
    /// The run's secret engine.
    secrets: Redactor,
}

impl ConsoleState {
    /// Writes `text` to stdout; a failure ends the printing.
    fn write(&mut self, text: &str) {
        if text.is_empty() || self.failed.is_some() {
            return;
        }
        let mut stdout = io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => {
                self.mid_line = !text.ends_with('\n');
                self.last_started = None;
            }
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.failed = Some(Exit::BrokenPipe.into());
                self.stop.cancel();
            }
            Err(e) => {
                say(format_args!("error: cannot write the output: {e}"));
                self.failed = Some(Exit::Failed.into());
                self.stop.cancel();
            }
        }
    }

    /// Prints what is held and ends the line of text.
    fn end_text(&mut self) {
        let held = std::mem::take(&mut self.held);
        let shown = unbounded(&self.secrets, &held);
        self.write(&shown);
        if self.mid_line {
            self.write("\n");
        }
    }
}

impl Console {
    fn lock(&self) -> std::sync::MutexGuard<'_, ConsoleState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn end_text(&self) {
        self.lock().end_text();
    }

    fn failed(&self) -> Option<ExitCode> {
        self.lock().failed
    }

    /// The `→` line of a call.
    fn started(&self, call_id: &str, line: &str) {
        let mut state = self.lock();
        state.end_text();
        say(line);
        state.last_started = Some(call_id.to_owned());
    }

    /// A progress line of a call, naming the tool when other lines came between (after which
    /// the call's `←` line names it too).
    fn progress(&self, call_id: &str, tool: &str, line: &str) {
        let mut state = self.lock();
        state.end_text();
        if state.last_started.as_deref() == Some(call_id) {
            say(format_args!("  {line}"));
        } else {
            say(format_args!("  {line} ({tool})"));
            state.last_started = None;
        }
    }

    /// The `←` line of a call, naming the tool when other lines came between.
    fn finished(&self, call_id: &str, tool: &str, line: &str) {
        let mut state = self.lock();
        if state.last_started.as_deref() == Some(call_id) {
            say(line);
        } else {
            say(format_args!("{line} ({tool})"));
        }
        state.last_started = None;
    }
}

impl TextSink for Console {
    /// Prints the text up to its last whitespace, scrubbed and terminal-safe; the rest (a
    /// word, in which a known secret may go on) waits for more.
    fn text(&self, delta: &str) {
        let mut state = self.lock();
        state.held.push_str(delta);
        let cut = match state.held.rfind(char::is_whitespace) {
            Some(at) => at + state.held[at..].chars().next().map_or(1, char::len_utf8),
            None if state.held.len() > MAX_HELD => state.held.len(),
            None => return,
        };
        let ready: String = state.held.drain(..cut).collect();
        let ready = unbounded(&state.secrets, &ready);
        state.write(&ready);
    }
}

/// The runner's tools, with a line on stderr for each call: `→ server__tool {args}` when it
/// starts (for `mcp_call_tool`, the tool and arguments it names), `  progress: 50/100 …` for
/// each report of its server meanwhile, `← ok 12 ms 340 B` or `← denied: …` when it ends.
struct Shown<'a> {
    runner: &'a McpRunner,
    console: Arc<Console>,
    redactor: Redactor,
}

impl Shown<'_> {
    /// The tool a call is about and its arguments, redacted: `mcp_call_tool`'s target, what
    /// `mcp_read` reads (`mcp_read docs resource test://a`), or the call itself.
    fn subject(&self, call: &ToolCall) -> (String, String) {
        if call.name == READ_TOOL {
            return self.read_subject(call);
        }
        let (name, arguments) = match (
            call.name.as_str(),
            call.arguments.get("tool_name").and_then(Value::as_str),
        ) {
            (CALL_TOOL, Some(target)) => (
                target.to_owned(),
                call.arguments
                    .get("arguments")
                    .cloned()
                    .unwrap_or(json!({})),
            ),
            _ => (call.name.clone(), Value::Object(call.arguments.clone())),
        };
        let arguments = self.redactor.redact_json(&arguments).to_string();
        (
            inline(&self.redactor, &name, MAX_NAME),
            escaped(&arguments, MAX_ARGS),
        )
    }
}

impl Shown<'_> {
    /// `mcp_read`'s line: the server, the kind and the URI or name read, then the prompt's
    /// arguments (or the skill's file), each scrubbed and terminal-safe.
    fn read_subject(&self, call: &ToolCall) -> (String, String) {
        let text = |key: &str| call.arguments.get(key).and_then(Value::as_str);
        let server = inline(&self.redactor, text("server").unwrap_or("?"), MAX_NAME);
        let (kind, target, rest) = if let Some(uri) = text("uri") {
            ("resource", uri, json!({}))
        } else if let Some(prompt) = text("prompt") {
            let arguments = call.arguments.get("arguments").cloned();
            ("prompt", prompt, arguments.unwrap_or(json!({})))
        } else if let Some(skill) = text("skill") {
            (
                "skill",
                skill,
                json!({"file": text("file").unwrap_or("SKILL.md")}),
            )
        } else {
            ("?", "", Value::Object(call.arguments.clone()))
        };
        let target = inline(&self.redactor, target, MAX_ARGS);
        let rest = self.redactor.redact_json(&rest).to_string();
        (
            format!("{READ_TOOL} {server} {kind} {target}"),
            escaped(&rest, MAX_ARGS),
        )
    }
}

impl ToolCatalog for Shown<'_> {
    fn tools(&self) -> Vec<ToolDescriptor> {
        self.runner.tools()
    }
}

#[async_trait]
impl ToolDispatcher for Shown<'_> {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let (name, arguments) = self.subject(&call);
        let id = call.id.clone();
        self.console.started(&id, &format!("→ {name} {arguments}"));
        let began = Instant::now();
        let console = Arc::clone(&self.console);
        let (call_id, tool) = (id.clone(), name.clone());
        let print = move |line: &str| console.progress(&call_id, &tool, line);
        let result = super::progress::printed(self.runner.dispatch(call), print).await;
        let ms = began.elapsed().as_millis();
        let line = match &result {
            Ok(output) => format!("← ok {ms} ms {} B", output.to_model_text().len()),
            Err(error) => {
                let outcome = outcome_words(CallOutcome::of_error(error));
                format!(
                    "← {outcome} {ms} ms: {}",
                    escaped(
                        &self.redactor.redact_text(&mcp_agent::error_chain(error)),
                        MAX_ERROR
                    )
                )
            }
        };
        self.console.finished(&id, &name, &line);
        result
    }
}
