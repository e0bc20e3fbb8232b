//! Elicitation: a server asking the user something in the middle of a call. On a terminal the
//! question is asked there (form mode: each requested field, the answer checked against its
//! schema; URL mode: the URL on a line of its own, then whether to go on); without one every
//! request is declined.
//!
//! Everything shown is the server's choice, already scrubbed by the run's engine: it passes
//! [`escaped`] (control characters escaped, bounded), and a URL is shown only when it is `http`
//! or `https`.

use std::io::{self, BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use mcp_agent::{
    DeclineElicitation, ElicitationHandler,
    rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction},
};
use serde_json::{Map, Value};

use super::approve::{Lines, TerminalInput, stdin_input};
use super::term::{MAX_LINE, MAX_NAME, escaped};

/// Wrong answers to one field before the whole request is cancelled.
const ATTEMPTS: usize = 3;
/// Longest answer line read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// The handler for this command: the terminal when stdin and stderr are one (the same input
/// the approval gate asks on, so neither reads the other's answers), else
/// [`DeclineElicitation`].
pub(crate) fn handler() -> Arc<dyn ElicitationHandler> {
    if io::stdin().is_terminal() && io::stderr().is_terminal() {
        Arc::new(Terminal::new(stdin_input(), io::stderr()))
    } else {
        Arc::new(DeclineElicitation)
    }
}

/// Asks on a terminal (any shared input and writer, for tests): one question at a time,
/// approvals included; lines typed before a request was shown never answer it.
pub(crate) struct Terminal<W> {
    input: TerminalInput,
    output: Arc<Mutex<W>>,
}

impl<W> Terminal<W> {
    pub(crate) fn new(input: TerminalInput, output: W) -> Self {
        Self {
            input,
            output: Arc::new(Mutex::new(output)),
        }
    }
}

#[async_trait]
impl<W> ElicitationHandler for Terminal<W>
where
    W: Write + Send + 'static,
{
    async fn elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        let input = Arc::clone(&self.input);
        let output = Arc::clone(&self.output);
        let server = server.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut lines = input.blocking_lock();
            let mut output = output.lock().unwrap_or_else(PoisonError::into_inner);
            let cancel = || ElicitResult::new(ElicitationAction::Cancel);
            let Ok(Some(shown)) = lines.begin_blocking() else {
                return cancel();
            };
            let mut answers = Answers {
                lines: &mut lines,
                shown,
                line: Vec::new(),
                at: 0,
            };
            ask(&mut answers, &mut *output, &server, &request).unwrap_or_else(|_| cancel())
        })
        .await
        .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel))
    }
}

/// The terminal's lines read after a request was shown, as a blocking reader.
struct Answers<'a> {
    lines: &'a mut Lines,
    shown: std::time::Instant,
    /// The line being read, and how much of it was consumed.
    line: Vec<u8>,
    at: usize,
}

impl io::Read for Answers<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Answers<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at >= self.line.len() {
            self.line = self
                .lines
                .next_blocking(self.shown)?
                .map(String::into_bytes)
                .unwrap_or_default();
            self.at = 0;
        }
        Ok(&self.line[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.line.len());
    }
}

/// One line, trimmed; `None` at the end of the input.
fn read_line(input: &mut dyn BufRead) -> io::Result<Option<String>> {
    let mut line = String::new();
    let read = io::Read::take(input, MAX_ANSWER_BYTES).read_line(&mut line)?;
    Ok((read > 0).then(|| line.trim().to_owned()))
}

/// Asks `question` until the answer is one of y, n, c (empty: `default`).
fn choose(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    question: &str,
    default: ElicitationAction,
) -> io::Result<ElicitationAction> {
    for _ in 0..ATTEMPTS {
        write!(output, "{question} ")?;
        output.flush()?;
        let Some(answer) = read_line(input)? else {
            return Ok(ElicitationAction::Cancel);
        };
        match answer.to_ascii_lowercase().as_str() {
            "" => return Ok(default),
            "y" | "yes" => return Ok(ElicitationAction::Accept),
            "n" | "no" => return Ok(ElicitationAction::Decline),
            "c" | "cancel" => return Ok(ElicitationAction::Cancel),
            _ => writeln!(output, "  answer y, n or c")?,
        }
    }
    Ok(ElicitationAction::Cancel)
}

/// The whole exchange for one request.
fn ask(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    server: &str,
    request: &ElicitRequestParams,
) -> io::Result<ElicitResult> {
    let server = escaped(server, MAX_NAME);
    match request {
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            let lower = url.to_ascii_lowercase();
            let web = (lower.starts_with("https://") || lower.starts_with("http://"))
                && url.len() > "https://".len()
                && !url.chars().any(|c| c.is_control() || c.is_whitespace());
            if !web {
                writeln!(
                    output,
                    "server `{server}` asked to open a URL that is not http(s); declined"
                )?;
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            };
            writeln!(
                output,
                "server `{server}` asks: {}",
                escaped(message, MAX_LINE)
            )?;
            writeln!(output, "open this URL:")?;
            writeln!(output, "{}", escaped(url, 4096))?;
            let action = choose(
                input,
                output,
                "continue once done? [y = done, n = decline, c = cancel]",
                ElicitationAction::Decline,
            )?;
            Ok(ElicitResult::new(action))
        }
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(requested_schema).unwrap_or_default();
            writeln!(
                output,
                "server `{server}` asks: {}",
                escaped(message, MAX_LINE)
            )?;
            let action = choose(
                input,
                output,
                "answer? [y = answer, n = decline, c = cancel]",
                ElicitationAction::Decline,
            )?;
            if action != ElicitationAction::Accept {
                return Ok(ElicitResult::new(action));
            }
            match fill(input, output, &schema)? {
                Some(content) => Ok(ElicitResult::new(ElicitationAction::Accept)
                    .with_content(Value::Object(content))),
                None => Ok(ElicitResult::new(ElicitationAction::Cancel)),
            }
        }
        // A mode this client does not know.
        _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
    }
}

/// Asks each property of `schema`; `None` when the input ended or a field got
/// [`ATTEMPTS`] wrong answers.
fn fill(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    schema: &Value,
) -> io::Result<Option<Map<String, Value>>> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, property) in properties {
        let is_required = required.contains(&name.as_str());
        let mut answered = false;
        for _ in 0..ATTEMPTS {
            write!(output, "{}", prompt(name, property, is_required))?;
            output.flush()?;
            let Some(line) = read_line(input)? else {
                return Ok(None);
            };
            match parse(&line, property, is_required) {
                Ok(Some(value)) => {
                    content.insert(name.clone(), value);
                    answered = true;
                    break;
                }
                Ok(None) => {
                    answered = true;
                    break;
                }
                Err(why) => writeln!(output, "  {why}")?,
            }
        }
        if !answered {
            return Ok(None);
        }
    }
    Ok(Some(content))
}

/// `  name (integer, 1..10, required) Title — description [default 3]: `
fn prompt(name: &str, property: &Value, required: bool) -> String {
    let text = |key: &str| property.get(key).and_then(Value::as_str);
    let mut kind = text("type").unwrap_or("string").to_owned();
    if let Some(choices) = choices(property) {
        kind = format!("one of {}", choices.join(", "));
    }
    let (min, max) = (bound(property, "minimum"), bound(property, "maximum"));
    if min.is_some() || max.is_some() {
        kind.push_str(&format!(
            ", {}..{}",
            min.map(|m| m.to_string()).unwrap_or_default(),
            max.map(|m| m.to_string()).unwrap_or_default()
        ));
    }
    if required {
        kind.push_str(", required");
    }
    let mut line = format!(
        "  {} ({})",
        escaped(name, MAX_NAME),
        escaped(&kind, MAX_LINE)
    );
    for key in ["title", "description"] {
        if let Some(t) = text(key) {
            line.push(' ');
            line.push_str(&escaped(t, MAX_LINE));
        }
    }
    if let Some(default) = property.get("default") {
        line.push_str(&format!(
            " [default {}]",
            escaped(&default.to_string(), MAX_LINE)
        ));
    }
    line.push_str(": ");
    line
}

fn bound(property: &Value, key: &str) -> Option<f64> {
    property.get(key).and_then(Value::as_f64)
}

/// The allowed values of an enum property (`enum`, or `oneOf` / `anyOf` of `const`s).
fn choices(property: &Value) -> Option<Vec<String>> {
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        return Some(
            values
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        );
    }
    let options = property
        .get("oneOf")
        .or_else(|| property.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        options
            .iter()
            .filter_map(|o| o.get("const").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
    )
}

/// The value of `line` for `property`: `Ok(None)` to leave it out (empty, not required: the
/// client fills in a default), `Err` with what is wrong.
fn parse(line: &str, property: &Value, required: bool) -> Result<Option<Value>, String> {
    if line.is_empty() {
        if let Some(default) = property.get("default") {
            return Ok(Some(default.clone()));
        }
        return if required {
            Err("an answer is required".into())
        } else {
            Ok(None)
        };
    }
    let kind = property
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    let value = match kind {
        "boolean" => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err("answer yes or no".into()),
        },
        "integer" | "number" => {
            let number: f64 = line.parse().map_err(|_| "not a number".to_owned())?;
            if kind == "integer" && number.fract() != 0.0 {
                return Err("not a whole number".into());
            }
            if bound(property, "minimum").is_some_and(|m| number < m)
                || bound(property, "maximum").is_some_and(|m| number > m)
            {
                return Err("out of range".into());
            }
            if kind == "integer" {
                Value::from(number as i64)
            } else {
                Value::from(number)
            }
        }
        "array" => {
            let allowed = property.get("items").and_then(choices).unwrap_or_default();
            let picked: Vec<&str> = line.split(',').map(str::trim).collect();
            if let Some(bad) = picked.iter().find(|p| !allowed.iter().any(|a| a == *p)) {
                return Err(format!(
                    "`{}` is not one of the choices",
                    escaped(bad, MAX_NAME)
                ));
            }
            Value::from(picked)
        }
        _ => {
            if let Some(allowed) = choices(property)
                && !allowed.iter().any(|a| a == line)
            {
                return Err("not one of the choices".into());
            }
            let length = line.chars().count() as u64;
            let limit = |key| property.get(key).and_then(Value::as_u64);
            if limit("minLength").is_some_and(|m| length < m)
                || limit("maxLength").is_some_and(|m| length > m)
            {
                return Err("wrong length".into());
            }
            Value::from(line)
        }
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form",
            "message": "Who\u{1b}[31m are you?",
            "requestedSchema": schema,
        }))
        .unwrap()
    }

    fn run(request: &ElicitRequestParams, typed: &str) -> (ElicitResult, String) {
        let mut input = io::Cursor::new(typed.as_bytes().to_vec());
        let mut output = Vec::new();
        let result = ask(&mut input, &mut output, "srv", request).unwrap();
        (result, String::from_utf8(output).unwrap())
    }

    #[test]
    fn a_form_is_asked_field_by_field_and_checked_against_the_schema() {
        let request = form(json!({
            "type": "object",
            "properties": {
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "name": {"type": "string", "title": "Your name", "minLength": 2},
                "newsletter": {"type": "boolean", "default": false},
                "size": {"type": "string", "enum": ["s", "m", "l"]},
            },
            "required": ["name", "age"],
        }));
        // age: "x" (not a number), 200 (out of range), 42; name: "a" (too short), "Ada";
        // newsletter: empty (its default); size: "xl" (not a choice), "m".
        let (result, shown) = run(&request, "y\nx\n200\n42\na\nAda\n\nxl\nm\n");
        assert_eq!(result.action, ElicitationAction::Accept);
        assert_eq!(
            result.content,
            Some(json!({"age": 42, "name": "Ada", "newsletter": false, "size": "m"}))
        );
        assert!(
            shown.contains("server `srv` asks: Who\\u{1b}[31m are you?"),
            "{shown}"
        );
        assert!(
            shown.contains("not a number") && shown.contains("out of range"),
            "{shown}"
        );
        assert!(shown.contains("wrong length") && shown.contains("not one of the choices"));
        assert!(shown.contains("age (integer, 0..150, required)"), "{shown}");
        assert!(shown.contains("size (one of s, m, l)"), "{shown}");
        assert!(
            !shown.contains('\u{1b}'),
            "no raw escape reaches the terminal"
        );
    }

    #[test]
    fn declining_cancelling_and_running_out_of_input() {
        let request = form(json!({"type": "object", "properties": {
            "name": {"type": "string"}}, "required": ["name"]}));
        assert_eq!(run(&request, "n\n").0.action, ElicitationAction::Decline);
        assert_eq!(run(&request, "\n").0.action, ElicitationAction::Decline);
        assert_eq!(run(&request, "c\n").0.action, ElicitationAction::Cancel);
        assert_eq!(run(&request, "").0.action, ElicitationAction::Cancel);
        // A required field left empty three times: cancelled, nothing sent.
        let (result, _) = run(&request, "y\n\n\n\n");
        assert_eq!(result.action, ElicitationAction::Cancel);
        assert_eq!(result.content, None);
    }

    #[test]
    fn a_url_is_shown_on_its_own_line_and_only_when_http() {
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "Sign in", "url": "https://example.com/auth?x=1",
            "elicitationId": "e1",
        }))
        .unwrap();
        let (result, shown) = run(&request, "y\n");
        assert_eq!(result.action, ElicitationAction::Accept);
        assert!(
            shown.lines().any(|l| l == "https://example.com/auth?x=1"),
            "{shown}"
        );
        assert_eq!(run(&request, "n\n").0.action, ElicitationAction::Decline);

        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "Run", "url": "javascript:alert(1)", "elicitationId": "e2",
        }))
        .unwrap();
        let (result, shown) = run(&request, "y\n");
        assert_eq!(result.action, ElicitationAction::Decline);
        assert!(!shown.contains("javascript"), "{shown}");
    }

    /// The test kit's `ask` tool sends a form request over a real session; the terminal's
    /// answers come back to it as the elicitation result.
    #[tokio::test]
    async fn a_server_asking_through_the_test_kit_gets_the_terminal_s_answers() {
        use mcp_agent::{SessionHandler, rmcp::model::CallToolRequestParams};
        use mcp_test_kit::{TestServer, TestServerOptions, bounded, serve_in_memory};

        let (keyboard, mut typing) = io::pipe().unwrap();
        let input = crate::approve::terminal_input(io::BufReader::new(keyboard));
        let shown = SharedBuffer::default();
        let terminal = Arc::new(Terminal::new(input, shown.clone()));
        let person = {
            let shown = shown.clone();
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !shown.text().contains("Your details") {
                    assert!(std::time::Instant::now() < deadline, "no question shown");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                typing.write_all(b"y\nAda\n7\n").unwrap();
            })
        };
        let (handler, _) = SessionHandler::new("kit", Some(terminal));
        let server = TestServer::new(TestServerOptions::default().with_ask(true));
        let client = bounded(mcp_agent::rmcp::serve_client(
            handler,
            serve_in_memory(server),
        ))
        .await
        .unwrap();
        let request = json!({"request": {
            "mode": "form",
            "message": "Your details",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string"},
                "tickets": {"type": "integer", "minimum": 1, "maximum": 9},
            }, "required": ["name", "tickets"]},
        }});
        let result = bounded(client.call_tool(
            CallToolRequestParams::new("ask").with_arguments(request.as_object().unwrap().clone()),
        ))
        .await
        .unwrap();
        assert_eq!(
            result.structured_content,
            Some(json!({"action": "accept", "content": {"name": "Ada", "tickets": 7}}))
        );
        person.join().unwrap();
        let shown = shown.text();
        assert!(shown.contains("server `kit` asks: Your details"), "{shown}");
        assert!(
            shown.contains("tickets (integer, 1..9, required)"),
            "{shown}"
        );
        bounded(client.cancel()).await.unwrap();
    }

    /// A writer the test reads afterwards.
    #[derive(Clone, Default)]
    struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

    impl SharedBuffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for SharedBuffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
