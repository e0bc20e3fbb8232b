//! `mcp-agent history …`: read a session's history (`messages.jsonl` and `events.jsonl`).
//!
//! The two files are merged into one timeline by their `ts_ms` timestamps. Within one
//! millisecond the order the writer gave them is kept: a call's message comes before its
//! events, and its result after them. A torn last line (a write that did not finish), whole
//! lines that are not JSON and lines over the reader's limit (16 MiB) are noted on stderr and
//! left out; they are not a failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::{
    CALL_TOOL, History,
    events::{EVENTS_FILE, JsonlLines, MESSAGES_FILE},
};
use serde_json::{Map, Value};

use mcp_agent::Redactor;

use super::exit::Exit;
use super::open::fail;
use super::term::{MAX_LINE, MAX_NAME, escaped, out, say};

/// Longest path printed.
const MAX_PATH: usize = 1024;

/// The `history` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum HistoryCommand {
    /// Show a session's history: its messages and events in order (tool calls as
    /// `server__tool`, outcomes, durations, sizes). The directory is what `tools call
    /// --history DIR` wrote.
    Show {
        /// The session directory (holding `messages.jsonl` and `events.jsonl`).
        dir: PathBuf,
        /// Print each line as a JSON line, in order, with a `file` field naming its file.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `history` command. The history was redacted when it was written; the secrets of
/// the configuration (`file` and the environment), when it loads, are replaced once more, in
/// each record as it is read (what is printed from it is only escaped and cut).
pub(crate) fn run(cmd: HistoryCommand, file: Option<&Path>) -> ExitCode {
    let secrets = super::settings::load(file)
        .map(|(config, settings)| super::term::secrets_of(&config, &settings))
        .unwrap_or_default();
    match cmd {
        HistoryCommand::Show { dir, json } => match show(&secrets, &dir, json) {
            Ok(()) => Exit::Success.into(),
            Err(code) => code,
        },
    }
}

/// A path as it may be printed (the user's own, not scrubbed).
pub(crate) fn shown_path(path: &Path) -> String {
    escaped(&path.display().to_string(), MAX_PATH)
}

fn show(secrets: &Redactor, dir: &Path, json: bool) -> Result<(), ExitCode> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            say(format_args!(
                "error: `{}` is not a history directory: it is a file",
                shown_path(dir)
            ));
            return Err(Exit::Failed.into());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            say(format_args!(
                "error: no history at `{}`: the directory does not exist",
                shown_path(dir)
            ));
            return Err(Exit::Failed.into());
        }
        Err(e) => {
            say(format_args!(
                "error: cannot read history `{}`: {e}",
                shown_path(dir)
            ));
            return Err(Exit::Failed.into());
        }
    }
    let mut session = History::read(dir).map_err(|e| fail(secrets, &e))?;
    note_damage(secrets, dir, MESSAGES_FILE, &session.messages);
    note_damage(secrets, dir, EVENTS_FILE, &session.events);
    for record in session
        .messages
        .records
        .iter_mut()
        .chain(session.events.records.iter_mut())
    {
        secrets.scrub_json(record);
    }
    let timeline = merge(&session.messages.records, &session.events.records);
    if json {
        for entry in &timeline {
            out(entry.json())?;
        }
        return Ok(());
    }
    let first = timeline.iter().find_map(|e| e.ts_ms());
    say(format_args!(
        "history `{}`: {} messages, {} events{}",
        shown_path(dir),
        session.messages.records.len(),
        session.events.records.len(),
        first
            .map(|ms| format!(", from {} UTC", date_time(ms)))
            .unwrap_or_default()
    ));
    for entry in &timeline {
        out(entry.human_line())?;
    }
    Ok(())
}

/// Tells on stderr what of `file` was left out.
fn note_damage(secrets: &Redactor, dir: &Path, file: &str, lines: &JsonlLines) {
    let path = shown_path(&dir.join(file));
    for invalid in &lines.invalid {
        say(format_args!(
            "note: `{path}` line {} is not JSON and is left out: {}",
            invalid.line,
            escaped(&secrets.scrub(&invalid.message), MAX_LINE)
        ));
    }
    for oversized in &lines.oversized {
        say(format_args!(
            "note: `{path}` line {} has {} bytes, over the line limit of {} bytes, and is left out",
            oversized.line, oversized.bytes, oversized.limit
        ));
    }
    if let Some(torn) = &lines.torn {
        say(format_args!(
            "note: `{path}` line {} is torn ({} bytes with no end of line: a write that did not \
             finish) and is left out",
            torn.line, torn.bytes
        ));
    }
}

/// One line of either file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Entry<'a> {
    Message(&'a Value),
    Event(&'a Value),
}

impl<'a> Entry<'a> {
    fn record(self) -> &'a Value {
        match self {
            Entry::Message(v) | Entry::Event(v) => v,
        }
    }

    fn ts_ms(self) -> Option<u64> {
        self.record()["ts_ms"].as_u64()
    }

    fn file(self) -> &'static str {
        match self {
            Entry::Message(_) => MESSAGES_FILE,
            Entry::Event(_) => EVENTS_FILE,
        }
    }

    /// The record with `file` first.
    fn json(self) -> Value {
        let mut line = Map::new();
        line.insert("file".into(), self.file().into());
        match self.record() {
            Value::Object(fields) => {
                line.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            other => {
                line.insert("value".into(), other.clone());
            }
        }
        Value::Object(line)
    }

    fn human_line(self) -> String {
        let time = self
            .ts_ms()
            .map_or_else(|| String::from("--:--:--.---"), time_of_day);
        let (label, text) = match self {
            Entry::Message(m) => describe_message(m),
            Entry::Event(e) => describe_event(e),
        };
        format!("{time}  {label:<18}  {text}")
    }
}

/// The call ids an assistant message announces.
fn announced(message: &Value) -> impl Iterator<Item = &str> {
    message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|call| call["id"].as_str())
}

/// Both files as one timeline, by timestamp. Each file keeps its own order. At equal
/// timestamps the writer's order is restored: a call's events come after the message asking
/// for it and before the message with its result. So an event about a call that is not open
/// (asked for, no result yet) waits for the message that opens it; any other event goes
/// first. Call ids may repeat (two runs appended to one session): a call is open from one
/// message asking for it to the next result for it.
fn merge<'a>(messages: &'a [Value], events: &'a [Value]) -> Vec<Entry<'a>> {
    // For each call id, the indices of the messages that ask for it, in order.
    let mut asked: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        for id in announced(message) {
            asked.entry(id).or_default().push(i);
        }
    }
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut timeline = Vec::with_capacity(messages.len() + events.len());
    let (mut m, mut e) = (0, 0);
    // A line with no timestamp sorts with the one before it in its file.
    let (mut m_ts, mut e_ts) = (0u64, 0u64);
    while m < messages.len() || e < events.len() {
        let message_ts = messages.get(m).map(|v| v["ts_ms"].as_u64().unwrap_or(m_ts));
        let event_ts = events.get(e).map(|v| v["ts_ms"].as_u64().unwrap_or(e_ts));
        let take_message = match (message_ts, event_ts) {
            (Some(_), None) => true,
            (None, _) => false,
            (Some(mt), Some(et)) if mt != et => mt < et,
            (Some(_), Some(_)) => match events[e]["call_id"].as_str() {
                Some(id) => {
                    open.get(id).copied().unwrap_or(0) == 0
                        && asked.get(id).is_some_and(|at| at.iter().any(|&i| i >= m))
                }
                // The agent loop's events: a model's answer comes after the results it read
                // (and the instruction) and before what it said; the run's end after it all.
                None => match text(&events[e], "kind") {
                    Some("run_finished" | "run_failed") => true,
                    Some("model_responded") => text(&messages[m], "role") != Some("assistant"),
                    _ => false,
                },
            },
        };
        if take_message {
            let message = &messages[m];
            for id in announced(message) {
                *open.entry(id).or_default() += 1;
            }
            if let Some(id) = message["tool_call_id"].as_str()
                && let Some(n) = open.get_mut(id)
            {
                *n = n.saturating_sub(1);
            }
            m_ts = message_ts.unwrap_or(m_ts);
            timeline.push(Entry::Message(message));
            m += 1;
        } else {
            e_ts = event_ts.unwrap_or(e_ts);
            timeline.push(Entry::Event(&events[e]));
            e += 1;
        }
    }
    timeline
}

fn text<'a>(record: &'a Value, key: &str) -> Option<&'a str> {
    record[key].as_str()
}

fn describe_message(message: &Value) -> (String, String) {
    let role = text(message, "role").unwrap_or("message");
    let content = text(message, "content").unwrap_or("");
    if let Some(calls) = message["tool_calls"].as_array().filter(|c| !c.is_empty()) {
        let shown: Vec<String> = calls.iter().map(describe_call).collect();
        let mut line = shown.join("; ");
        if !content.is_empty() {
            line = format!("{}; {line}", first_line(content));
        }
        return (escaped(role, MAX_NAME), line);
    }
    if let Some(id) = text(message, "tool_call_id") {
        return (
            escaped(role, MAX_NAME),
            format!(
                "result of {}, {}: {}",
                escaped(id, MAX_NAME),
                bytes(content.len() as u64),
                first_line(content)
            ),
        );
    }
    (escaped(role, MAX_NAME), first_line(content))
}

/// `call <id>: server__tool {arguments}`, naming the real tool behind `mcp_call_tool`.
fn describe_call(call: &Value) -> String {
    let id = escaped(text(call, "id").unwrap_or("?"), MAX_NAME);
    let name = text(call, "name").unwrap_or("?");
    let arguments = &call["arguments"];
    let (tool, arguments, through) = match (name, arguments["tool_name"].as_str()) {
        (CALL_TOOL, Some(real)) => (real, &arguments["arguments"], true),
        _ => (name, arguments, false),
    };
    let arguments = match arguments {
        Value::Null => String::from("{}"),
        other => other.to_string(),
    };
    format!(
        "call {id}: {} {}{}",
        escaped(tool, MAX_NAME),
        escaped(&arguments, MAX_LINE),
        if through {
            format!(" (through {CALL_TOOL})")
        } else {
            String::new()
        }
    )
}

fn describe_event(event: &Value) -> (String, String) {
    let kind = escaped(text(event, "kind").unwrap_or("event"), MAX_NAME);
    let server = text(event, "server");
    let identity = text(event, "server_identity");
    let on_server = match (server, identity) {
        (Some(s), Some(i)) if i != s => {
            format!(" on {} ({})", escaped(s, MAX_NAME), escaped(i, MAX_NAME))
        }
        (Some(s), _) => format!(" on {}", escaped(s, MAX_NAME)),
        (None, Some(i)) => format!(" on ({})", escaped(i, MAX_NAME)),
        (None, None) => String::new(),
    };
    let mut line = String::new();
    if let Some(id) = text(event, "call_id") {
        line.push_str(&format!("call {}: ", escaped(id, MAX_NAME)));
    }
    match text(event, "tool") {
        Some(tool) => {
            line.push_str(&escaped(tool, MAX_NAME));
            line.push_str(&on_server);
        }
        None => line.push_str(on_server.trim_start_matches(" on ")),
    }
    // The agent loop's events: its step (the steps taken, for the run's end).
    if let Some(step) = event["step"].as_u64() {
        if kind == "run_finished" {
            line.push_str(&format!("{step} step{}", if step == 1 { "" } else { "s" }));
        } else {
            line.push_str(&format!("step {step}"));
        }
    }
    let mut details = Vec::new();
    if let Some(outcome) = text(event, "outcome") {
        let mut what = escaped(outcome, MAX_NAME);
        if let Some(ms) = event["duration"].as_f64() {
            what.push_str(&format!(" in {}", millis(ms)));
        }
        details.push(what);
    } else if let Some(ms) = event["duration"].as_f64() {
        details.push(format!("in {}", millis(ms)));
    }
    if let Some(n) = event["input_bytes"].as_u64() {
        details.push(format!("arguments {}", bytes(n)));
    }
    match (
        event["output_bytes"].as_u64(),
        event["result_bytes"].as_u64(),
    ) {
        (Some(shown), Some(whole)) if whole > shown => {
            details.push(format!("output {} of {}", bytes(shown), bytes(whole)));
        }
        (Some(shown), _) => details.push(format!("output {}", bytes(shown))),
        (None, Some(whole)) => details.push(format!("result {}", bytes(whole))),
        (None, None) => {}
    }
    if let Some(handle) = text(event, "output_handle") {
        details.push(format!("handle {}", escaped(handle, MAX_NAME)));
    }
    if let Some(n) = event["tool_call_count"].as_u64() {
        details.push(format!("{n} tool call{}", if n == 1 { "" } else { "s" }));
    }
    let tokens = |key: &str| event["usage"][key].as_u64().unwrap_or(0);
    if tokens("input_tokens") + tokens("output_tokens") > 0 {
        details.push(format!(
            "tokens {} in, {} out",
            tokens("input_tokens"),
            tokens("output_tokens")
        ));
    }
    if !details.is_empty() {
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&details.join(", "));
    }
    if let Some(message) = text(event, "message") {
        line.push_str(" — ");
        line.push_str(&first_line(message));
    }
    (kind, line)
}

fn first_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or("");
    let mut shown = escaped(first, MAX_LINE);
    if first.len() < text.trim_end().len() && !shown.ends_with(')') {
        shown.push_str(" …");
    }
    shown
}

/// A size: exact below 1 KiB, else in KiB or MiB with one decimal.
fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / KIB),
        _ => format!("{:.1} MiB", n as f64 / (KIB * KIB)),
    }
}

fn millis(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

/// `HH:MM:SS.mmm` (UTC) of a Unix time in milliseconds.
fn time_of_day(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60,
        ms % 1000
    )
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of a Unix time in milliseconds.
fn date_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_agent_loop_s_events_sit_between_what_the_model_read_and_what_it_said() {
        let messages = [
            json!({"ts_ms": 1, "role": "user", "content": "hi"}),
            json!({"ts_ms": 1, "role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "a", "arguments": {}}]}),
            json!({"ts_ms": 2, "role": "tool", "content": "x", "tool_call_id": "1"}),
            json!({"ts_ms": 2, "role": "assistant", "content": "done"}),
        ];
        let events = [
            json!({"ts_ms": 1, "kind": "model_responded", "step": 1}),
            json!({"ts_ms": 1, "kind": "tool_call_started", "call_id": "1"}),
            json!({"ts_ms": 2, "kind": "tool_call_finished", "call_id": "1"}),
            json!({"ts_ms": 2, "kind": "model_responded", "step": 2}),
            json!({"ts_ms": 2, "kind": "run_finished", "step": 2}),
        ];
        let order: Vec<String> = merge(&messages, &events)
            .into_iter()
            .map(|entry| match entry {
                Entry::Message(m) => m["role"].as_str().unwrap().to_owned(),
                Entry::Event(e) => e["kind"].as_str().unwrap().to_owned(),
            })
            .collect();
        assert_eq!(
            order,
            [
                "user",
                "model_responded",
                "assistant",
                "tool_call_started",
                "tool_call_finished",
                "tool",
                "model_responded",
                "assistant",
                "run_finished"
            ]
        );
    }

    #[test]
    fn the_agent_loop_s_events_show_their_step_calls_and_tokens() {
        let (_, line) = describe_event(&json!({
            "kind": "model_responded", "step": 1, "duration": 6.6, "tool_call_count": 2,
            "usage": {"input_tokens": 120, "output_tokens": 30}
        }));
        assert_eq!(
            line,
            "step 1: in 6.6 ms, 2 tool calls, tokens 120 in, 30 out"
        );
        let (_, line) = describe_event(&json!({
            "kind": "run_finished", "step": 2, "duration": 74.0,
            "usage": {"input_tokens": 0, "output_tokens": 0}
        }));
        assert_eq!(line, "2 steps: in 74.0 ms");
        let (_, line) = describe_event(&json!({
            "kind": "run_failed", "duration": 9.0, "message": "no final answer within 3 steps"
        }));
        assert_eq!(line, "in 9.0 ms — no final answer within 3 steps");
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(date_time(0), "1970-01-01 00:00:00");
        assert_eq!(date_time(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(date_time(1_796_065_431_123), "2026-11-30 19:03:51");
        assert_eq!(time_of_day(1_796_065_431_123), "19:03:51.123");
    }

    #[test]
    fn a_call_comes_before_its_events_and_its_result_after_them_within_one_millisecond() {
        let messages = [
            json!({"ts_ms": 5, "role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "a", "arguments": {}}]}),
            json!({"ts_ms": 5, "role": "tool", "content": "x", "tool_call_id": "1"}),
            json!({"ts_ms": 5, "role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "a", "arguments": {}}]}),
            json!({"ts_ms": 5, "role": "tool", "content": "y", "tool_call_id": "2"}),
        ];
        let events = [
            json!({"ts_ms": 4, "kind": "server_connected"}),
            json!({"ts_ms": 5, "kind": "tool_call_started", "call_id": "1"}),
            json!({"ts_ms": 5, "kind": "tool_call_finished", "call_id": "1"}),
            json!({"ts_ms": 5, "kind": "tool_call_started", "call_id": "2"}),
            json!({"ts_ms": 5, "kind": "tool_call_finished", "call_id": "2"}),
        ];
        let order: Vec<String> = merge(&messages, &events)
            .into_iter()
            .map(|entry| match entry {
                Entry::Message(m) => format!(
                    "{}{}",
                    m["role"].as_str().unwrap(),
                    m["tool_call_id"]
                        .as_str()
                        .or(m["tool_calls"][0]["id"].as_str())
                        .unwrap()
                ),
                Entry::Event(e) => format!(
                    "{}{}",
                    e["kind"].as_str().unwrap(),
                    e["call_id"].as_str().unwrap_or("")
                ),
            })
            .collect();
        assert_eq!(
            order,
            [
                "server_connected",
                "assistant1",
                "tool_call_started1",
                "tool_call_finished1",
                "tool1",
                "assistant2",
                "tool_call_started2",
                "tool_call_finished2",
                "tool2",
            ]
        );
    }

    #[test]
    fn a_call_id_used_again_by_a_later_run_in_the_same_session_keeps_each_call_whole() {
        let ask = |ts: u64| json!({"ts_ms": ts, "role": "assistant", "content": "", "tool_calls": [{"id": "cli-1", "name": "a", "arguments": {}}]});
        let result =
            |ts: u64| json!({"ts_ms": ts, "role": "tool", "content": "x", "tool_call_id": "cli-1"});
        let event = |ts: u64, kind: &str| json!({"ts_ms": ts, "kind": kind, "call_id": "cli-1"});
        let messages = [ask(1), result(2), ask(7), result(7)];
        let events = [
            event(1, "tool_call_started"),
            event(2, "tool_call_finished"),
            event(7, "tool_call_started"),
            event(7, "tool_call_failed"),
        ];
        let timeline = merge(&messages, &events);
        assert_eq!(
            timeline,
            [
                Entry::Message(&messages[0]),
                Entry::Event(&events[0]),
                Entry::Event(&events[1]),
                Entry::Message(&messages[1]),
                Entry::Message(&messages[2]),
                Entry::Event(&events[2]),
                Entry::Event(&events[3]),
                Entry::Message(&messages[3]),
            ]
        );
    }

    #[test]
    fn later_lines_come_later_whichever_file_they_are_in() {
        let messages = [json!({"ts_ms": 9, "role": "user", "content": "late"})];
        let events = [
            json!({"ts_ms": 3, "kind": "server_connected"}),
            json!({"ts_ms": 10, "kind": "tools_changed"}),
        ];
        let timeline = merge(&messages, &events);
        assert_eq!(
            timeline,
            [
                Entry::Event(&events[0]),
                Entry::Message(&messages[0]),
                Entry::Event(&events[1])
            ]
        );
    }

    #[test]
    fn a_call_through_the_generic_caller_is_shown_as_the_real_tool() {
        let message = json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "cli-1", "name": CALL_TOOL, "arguments": {"tool_name": "demo__echo", "arguments": {"text": "hi"}}}
        ]});
        let (label, line) = describe_message(&message);
        assert_eq!(label, "assistant");
        assert_eq!(
            line,
            format!("call cli-1: demo__echo {{\"text\":\"hi\"}} (through {CALL_TOOL})")
        );
    }

    #[test]
    fn an_event_tells_tool_server_outcome_duration_and_sizes() {
        let event = json!({
            "kind": "tool_call_finished", "server": "kit", "server_identity": "mcp-test-kit",
            "tool": "kit__huge", "call_id": "cli-1", "duration": 12.25, "input_bytes": 14,
            "output_bytes": 65_536, "result_bytes": 3_145_728, "output_handle": "out_1",
            "outcome": "truncated"
        });
        let (label, line) = describe_event(&event);
        assert_eq!(label, "tool_call_finished");
        assert_eq!(
            line,
            "call cli-1: kit__huge on kit (mcp-test-kit): truncated in 12.2 ms, arguments 14 B, \
             output 64.0 KiB of 3.0 MiB, handle out_1"
        );
        let denied = json!({
            "kind": "tool_call_denied", "server": "kit", "tool": "kit__echo", "call_id": "1",
            "outcome": "denied", "message": "call denied: by rule\u{1b}[2J\nsecond line"
        });
        let (_, line) = describe_event(&denied);
        assert_eq!(
            line,
            "call 1: kit__echo on kit: denied — call denied: by rule\\u{1b}[2J …"
        );
        let connected =
            json!({"kind": "server_connected", "server": "demo", "server_identity": "mcp-demo"});
        assert_eq!(describe_event(&connected).1, "demo (mcp-demo)");
    }
}
