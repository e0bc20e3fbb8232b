//! Approval of the calls that `[policy]` says need it: asked on the terminal, given for every
//! call by `--yes`, or — with no terminal to ask on — refused with a message saying how to
//! allow them.

use std::future::Future;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mcp_agent::{
    ApprovalDecision, ApprovalRequest, AutoApprove, DEFAULT_APPROVAL_TIMEOUT, prelude::ApprovalGate,
};
use tokio::sync::mpsc;

use super::term::{MAX_NAME, escaped};

/// Why a call that needs approval is refused when nobody can be asked.
pub(crate) const NO_TERMINAL: &str =
    "no terminal to ask on (run with --yes to approve every call, or answer on a terminal)";

/// Longest approval prompt shown (the layer already bounds the arguments it shows).
const MAX_PROMPT: usize = 4096;

/// How many answers that are none of y, n, a are taken before the call is refused.
const ATTEMPTS: usize = 3;

/// The gate for this command: everything with `--yes`; else the terminal when stdin and stderr
/// are one (each question open for the layer's approval timeout,
/// [`DEFAULT_APPROVAL_TIMEOUT`]); else none, which refuses with [`NO_TERMINAL`].
pub(crate) fn gate(yes: bool) -> Arc<dyn ApprovalGate> {
    if yes {
        Arc::new(AutoApprove)
    } else if io::stdin().is_terminal() && io::stderr().is_terminal() {
        Arc::new(TerminalGate::with_input(
            stdin_input(),
            io::stderr(),
            DEFAULT_APPROVAL_TIMEOUT,
        ))
    } else {
        Arc::new(NoTerminal)
    }
}

/// Refuses every request: there is nobody to ask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoTerminal;

/// What [`ApprovalGate::request`] returns: the trait is declared with `async_trait`, whose
/// expansion these implementations spell out.
type Deciding<'a> = Pin<Box<dyn Future<Output = ApprovalDecision> + Send + 'a>>;

impl ApprovalGate for NoTerminal {
    fn request<'life0, 'async_trait>(
        &'life0 self,
        _request: ApprovalRequest,
    ) -> Deciding<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async {
            ApprovalDecision::Failed {
                message: NO_TERMINAL.to_owned(),
            }
        })
    }
}

/// One line read from the terminal, or how reading ended.
enum Line {
    /// A line, and when it was read.
    Text(String, Instant),
    /// The input ended.
    End,
    /// Reading failed.
    Failed(String),
}

/// A terminal's input, read by one thread and shared by every question asked on it —
/// approvals and a server's elicitations — one question at a time (whoever holds the lock
/// asks). Lines read before a question was shown never answer it.
pub(crate) type TerminalInput = Arc<tokio::sync::Mutex<Lines>>;

/// The input of a terminal reading `input` (its reader thread starts at the first question).
pub(crate) fn terminal_input(input: impl BufRead + Send + 'static) -> TerminalInput {
    Arc::new(tokio::sync::Mutex::new(Lines {
        input: Some(Box::new(input)),
        read: Arc::new(tokio::sync::watch::Sender::new(0)),
        rx: None,
        ended: None,
    }))
}

/// Standard input as a [`TerminalInput`]: one per process, so the approval gate and the
/// elicitation handler never read past each other's answers.
pub(crate) fn stdin_input() -> TerminalInput {
    static STDIN: std::sync::OnceLock<TerminalInput> = std::sync::OnceLock::new();
    Arc::clone(STDIN.get_or_init(|| terminal_input(io::BufReader::new(io::stdin()))))
}

/// The reading side: lines from the reader thread, started at the first question.
pub(crate) struct Lines {
    input: Option<Box<dyn BufRead + Send>>,
    /// How many lines the reader thread has read so far.
    read: Arc<tokio::sync::watch::Sender<usize>>,
    rx: Option<mpsc::UnboundedReceiver<Line>>,
    /// The input ended (or failed): no answer will come any more.
    ended: Option<String>,
}

impl Lines {
    /// Starts the reader thread, once. It reads a line at a time for as long as the input
    /// lasts: a line typed while no question is open waits in the channel, and the next
    /// question drops it as stale.
    fn start(&mut self) -> io::Result<()> {
        let Some(mut input) = self.input.take() else {
            return Ok(());
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let counter = Arc::clone(&self.read);
        std::thread::Builder::new()
            .name("approval".into())
            .spawn(move || {
                loop {
                    let mut line = String::new();
                    let read = (&mut input)
                        .take(MAX_ANSWER_BYTES as u64)
                        .read_line(&mut line);
                    let sent = match read {
                        Ok(0) => {
                            let _ = tx.send(Line::End);
                            return;
                        }
                        Ok(_) => tx.send(Line::Text(line, Instant::now())),
                        Err(e) => {
                            let _ = tx.send(Line::Failed(e.to_string()));
                            return;
                        }
                    };
                    if sent.is_err() {
                        return;
                    }
                    counter.send_modify(|n| *n += 1);
                }
            })?;
        self.rx = Some(rx);
        Ok(())
    }

    /// For a question asked from blocking code (an elicitation, on a blocking thread): starts
    /// the reader, drops what was typed before, and gives the question's start; `None` when
    /// the input already ended.
    pub(crate) fn begin_blocking(&mut self) -> io::Result<Option<Instant>> {
        self.start()?;
        self.drop_stale();
        Ok(self.ended.is_none().then(Instant::now))
    }

    /// The next line read after `shown`, waiting for it (blocking code only); `None` once the
    /// input ended.
    pub(crate) fn next_blocking(&mut self, shown: Instant) -> io::Result<Option<String>> {
        if self.ended.is_some() {
            return Ok(None);
        }
        let Some(rx) = self.rx.as_mut() else {
            return Ok(None);
        };
        loop {
            match rx.blocking_recv() {
                Some(Line::Text(_, at)) if at < shown => {}
                Some(Line::Text(text, _)) => return Ok(Some(text)),
                Some(Line::End) | None => {
                    self.ended = Some(CLOSED.to_owned());
                    return Ok(None);
                }
                Some(Line::Failed(e)) => {
                    self.ended = Some(format!("cannot ask on the terminal: {e}"));
                    return Err(io::Error::other(e));
                }
            }
        }
    }

    /// Drops every line read before `shown` (typed ahead, or answering a question that timed
    /// out): how many. Notes an end of the input.
    fn drop_stale(&mut self) -> usize {
        let mut stale = 0;
        let Some(rx) = self.rx.as_mut() else {
            return 0;
        };
        while let Ok(line) = rx.try_recv() {
            match line {
                Line::Text(..) => stale += 1,
                Line::End => self.ended = Some(CLOSED.to_owned()),
                Line::Failed(e) => self.ended = Some(format!("cannot ask on the terminal: {e}")),
            }
        }
        stale
    }
}

/// Why a request is refused once the terminal's input ended.
const CLOSED: &str = "the terminal closed before an answer was given";

/// Longest answer line kept (longer ones are read in parts, each a wrong answer).
const MAX_ANSWER_BYTES: usize = 1024;

/// Asks a person: writes the request's prompt (naming server, tool and the redacted
/// arguments) to `output` and reads one answer a line from `input`: `y` allows the call once,
/// `a` allows the tool for the rest of the run, `n` or an empty line refuses. An input that
/// ends or fails refuses too. One request is asked at a time.
///
/// A question has a deadline (`timeout`, the layer's approval timeout): when it passes — or
/// when the layer gives up first and drops the request — the prompt ends on the terminal with
/// `no answer within Ns: denied`, and the call is refused. Only a line read after a question
/// was shown answers it: lines typed before (ahead of the question, or too late for one that
/// timed out) are dropped, never taken for the next question's answer.
pub(crate) struct TerminalGate {
    lines: TerminalInput,
    output: Arc<Mutex<Box<dyn Write + Send>>>,
    timeout: Duration,
}

impl TerminalGate {
    /// A gate asking on `output` and reading answers from `input`, each question open for at
    /// most `timeout`.
    #[cfg(test)]
    pub(crate) fn new(
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
        timeout: Duration,
    ) -> Self {
        Self::with_input(terminal_input(input), output, timeout)
    }

    /// A gate reading answers from a shared terminal input (the process's stdin, which the
    /// elicitation handler asks on too).
    pub(crate) fn with_input(
        lines: TerminalInput,
        output: impl Write + Send + 'static,
        timeout: Duration,
    ) -> Self {
        Self {
            lines,
            output: Arc::new(Mutex::new(Box::new(output))),
            timeout,
        }
    }

    /// Writes `text` to the terminal; a failed write is what the caller reports.
    fn write(&self, text: std::fmt::Arguments<'_>) -> io::Result<()> {
        let mut output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        output.write_fmt(text)?;
        output.flush()
    }

    async fn ask(&self, request: ApprovalRequest) -> ApprovalDecision {
        match self.ask_io(&request).await {
            Ok(decision) => decision,
            Err(e) => ApprovalDecision::Failed {
                message: format!("cannot ask on the terminal: {e}"),
            },
        }
    }

    async fn ask_io(&self, request: &ApprovalRequest) -> io::Result<ApprovalDecision> {
        // One question at a time; a request dropped while waiting here never asked anything.
        let mut lines = self.lines.lock().await;
        lines.start()?;
        let stale = lines.drop_stale();
        if let Some(message) = &lines.ended {
            return Ok(ApprovalDecision::Failed {
                message: message.clone(),
            });
        }
        let tool = escaped(&request.action_ref, MAX_NAME);
        if stale > 0 {
            self.write(format_args!(
                "(dropped {stale} line(s) typed before this question)\n"
            ))?;
        }
        self.write(format_args!(
            "approval needed: {}\n",
            escaped(&request.prompt, MAX_PROMPT)
        ))?;
        let shown = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        // Ends the prompt visibly if the layer gives up on this request before it is answered.
        let mut open = OpenPrompt {
            output: Arc::clone(&self.output),
            shown,
            armed: true,
        };
        let Some(rx) = lines.rx.as_mut() else {
            open.armed = false;
            return Ok(ApprovalDecision::Failed {
                message: CLOSED.to_owned(),
            });
        };
        let mut tries = 0;
        while tries < ATTEMPTS {
            self.write(format_args!(
                "run {tool}? [y] yes, once  [a] yes, for the rest of the run  [n] no (default): "
            ))?;
            let line = loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    // Read before the question was on the screen: not an answer to it.
                    Ok(Some(Line::Text(_, at))) if at < shown => continue,
                    Ok(line) => break line,
                    Err(_) => {
                        open.armed = false;
                        let waited = self.timeout.as_secs();
                        self.write(format_args!("\nno answer within {waited}s: denied\n"))?;
                        return Ok(ApprovalDecision::Rejected {
                            reason: format!("no answer on the terminal within {waited}s"),
                        });
                    }
                }
            };
            open.armed = false;
            let answer = match line {
                Some(Line::Text(answer, _)) => answer,
                Some(Line::Failed(e)) => {
                    lines.ended = Some(format!("cannot ask on the terminal: {e}"));
                    return Err(io::Error::other(e));
                }
                Some(Line::End) | None => {
                    lines.ended = Some(CLOSED.to_owned());
                    self.write(format_args!("\n"))?;
                    return Ok(ApprovalDecision::Failed {
                        message: CLOSED.to_owned(),
                    });
                }
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(ApprovalDecision::Approved),
                "a" | "all" | "always" => return Ok(ApprovalDecision::ApprovedForRun),
                "n" | "no" | "" => {
                    return Ok(ApprovalDecision::Rejected {
                        reason: String::from("refused on the terminal"),
                    });
                }
                _ => self.write(format_args!("please answer y, a or n\n"))?,
            }
            open.armed = true;
            tries += 1;
        }
        open.armed = false;
        Ok(ApprovalDecision::Rejected {
            reason: format!("no answer on the terminal was y, a or n ({ATTEMPTS} tries)"),
        })
    }
}

/// A question on the screen: dropped unanswered (the layer's approval timeout, or the run
/// ending), it ends the prompt with `no answer within Ns: denied`.
struct OpenPrompt {
    output: Arc<Mutex<Box<dyn Write + Send>>>,
    shown: Instant,
    armed: bool,
}

impl Drop for OpenPrompt {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let waited = self.shown.elapsed().as_secs_f64().round();
        let mut output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(output, "\nno answer within {waited}s: denied");
        let _ = output.flush();
    }
}

impl ApprovalGate for TerminalGate {
    fn request<'life0, 'async_trait>(
        &'life0 self,
        request: ApprovalRequest,
    ) -> Deciding<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.ask(request))
    }
}

#[cfg(test)]
mod tests {
    use std::io::PipeWriter;

    use super::*;

    /// A writer whose bytes the test reads back; each question it shows is signalled.
    #[derive(Clone)]
    struct Screen {
        bytes: Arc<Mutex<Vec<u8>>>,
        questions: mpsc::UnboundedSender<()>,
    }

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.bytes.lock().unwrap().extend_from_slice(buf);
            if buf.ends_with(b"(default): ") {
                let _ = self.questions.send(());
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A terminal: the gate on one end, the person typing on the other.
    struct Person {
        gate: Arc<TerminalGate>,
        screen: Arc<Mutex<Vec<u8>>>,
        questions: mpsc::UnboundedReceiver<()>,
        keyboard: PipeWriter,
    }

    impl Person {
        fn new(timeout: Duration) -> Self {
            let (reader, keyboard) = std::io::pipe().unwrap();
            let (tx, questions) = mpsc::unbounded_channel();
            let bytes = Arc::new(Mutex::new(Vec::new()));
            let screen = Screen {
                bytes: Arc::clone(&bytes),
                questions: tx,
            };
            let gate = TerminalGate::new(io::BufReader::new(reader), screen, timeout);
            Self {
                gate: Arc::new(gate),
                screen: bytes,
                questions,
                keyboard,
            }
        }

        fn text(&self) -> String {
            String::from_utf8(self.screen.lock().unwrap().clone()).unwrap()
        }

        fn typing(&mut self, line: &str) {
            writeln!(self.keyboard, "{line}").unwrap();
        }

        /// Asks, typing each of `lines` once a question is on the screen.
        async fn answers(&mut self, lines: &[&str]) -> ApprovalDecision {
            // Only a question shown from now on is answered.
            while self.questions.try_recv().is_ok() {}
            let gate = Arc::clone(&self.gate);
            let asking = tokio::spawn(async move { gate.request(request()).await });
            for line in lines {
                self.questions.recv().await.unwrap();
                self.typing(line);
            }
            asking.await.unwrap()
        }

        /// Waits until the reader has read `n` lines in all.
        async fn read(&self, n: usize) {
            let mut read = self.gate.lines.lock().await.read.subscribe();
            read.wait_for(|&r| r >= n).await.unwrap();
        }
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest::new(
            "kit__echo",
            "Allow the tool `echo` of MCP server `kit` (`mcp-test-kit`) to run with arguments \
             {\"token\":\"[REDACTED]\",\"text\":\"hi\u{1b}[2J\"}? (approval required by rule)",
        )
    }

    const LONG: Duration = Duration::from_secs(300);

    #[tokio::test]
    async fn y_allows_once_a_for_the_run_n_and_an_empty_line_refuse() {
        let mut person = Person::new(LONG);
        assert_eq!(person.answers(&["y"]).await, ApprovalDecision::Approved);
        assert_eq!(
            person.answers(&["A"]).await,
            ApprovalDecision::ApprovedForRun
        );
        assert!(matches!(
            person.answers(&["n"]).await,
            ApprovalDecision::Rejected { .. }
        ));
        assert!(matches!(
            person.answers(&[""]).await,
            ApprovalDecision::Rejected { .. }
        ));
        let screen = person.text();
        assert_eq!(screen.matches("approval needed: ").count(), 4, "{screen}");
        assert!(screen.contains("run kit__echo? [y] yes, once"), "{screen}");
    }

    #[tokio::test]
    async fn the_prompt_names_server_tool_and_redacted_arguments_and_is_terminal_safe() {
        let mut person = Person::new(LONG);
        person.answers(&["n"]).await;
        let screen = person.text();
        assert!(screen.contains("`echo` of MCP server `kit`"), "{screen}");
        assert!(screen.contains(r#""token":"[REDACTED]""#), "{screen}");
        assert!(!screen.contains('\u{1b}'), "{screen:?}");
        assert!(screen.contains("\\u{1b}[2J"), "{screen}");
    }

    #[tokio::test]
    async fn another_answer_is_asked_again_and_three_wrong_ones_refuse() {
        let mut person = Person::new(LONG);
        let decision = person.answers(&["maybe", "y"]).await;
        assert_eq!(decision, ApprovalDecision::Approved);
        assert_eq!(person.text().matches("please answer y, a or n").count(), 1);

        let decision = person.answers(&["x", "x", "x"]).await;
        assert!(
            matches!(&decision, ApprovalDecision::Rejected { reason } if reason.contains("3 tries")),
            "{decision:?}"
        );
    }

    #[tokio::test]
    async fn a_closed_terminal_refuses_this_and_every_later_request() {
        let mut person = Person::new(LONG);
        let gate = Arc::clone(&person.gate);
        let asking = tokio::spawn(async move { gate.request(request()).await });
        person.questions.recv().await.unwrap();
        drop(person.keyboard);
        let decision = asking.await.unwrap();
        assert!(
            matches!(&decision, ApprovalDecision::Failed { message } if message.contains("closed")),
            "{decision:?}"
        );
        let again = person.gate.request(request()).await;
        assert!(
            matches!(&again, ApprovalDecision::Failed { message } if message.contains("closed")),
            "{again:?}"
        );
    }

    #[tokio::test]
    async fn a_question_past_its_deadline_ends_visibly_and_a_late_answer_answers_nothing() {
        let mut person = Person::new(Duration::from_secs(1));
        // Nobody answers: the question ends on the screen, refused.
        let decision = person.answers(&[]).await;
        assert!(
            matches!(&decision, ApprovalDecision::Rejected { reason } if reason.contains("within 1s")),
            "{decision:?}"
        );
        assert!(
            person.text().contains("\nno answer within 1s: denied\n"),
            "{}",
            person.text()
        );
        // A `y` typed too late is read, and dropped by the next question, which only its own
        // answer decides.
        person.typing("y");
        person.read(1).await;
        let decision = person.answers(&["n"]).await;
        assert!(
            matches!(&decision, ApprovalDecision::Rejected { reason } if reason.contains("refused")),
            "{decision:?}"
        );
        assert!(
            person
                .text()
                .contains("(dropped 1 line(s) typed before this question)"),
            "{}",
            person.text()
        );
    }

    #[tokio::test]
    async fn a_request_the_layer_gives_up_on_ends_visibly_and_its_late_answer_is_dropped() {
        let mut person = Person::new(LONG);
        // What the layer does at its approval timeout: stop waiting, drop the request.
        let gate = Arc::clone(&person.gate);
        let asking = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(1), gate.request(request())).await
        });
        person.questions.recv().await.unwrap();
        assert!(asking.await.unwrap().is_err(), "the layer gave up");
        let screen = person.text();
        assert!(
            screen.ends_with("\nno answer within 1s: denied\n"),
            "{screen}"
        );
        person.typing("a");
        person.read(1).await;
        let decision = person.answers(&["n"]).await;
        assert!(
            matches!(decision, ApprovalDecision::Rejected { .. }),
            "the late `a` allowed nothing: {decision:?}"
        );
    }

    #[test]
    fn with_nobody_to_ask_the_refusal_says_how_to_allow() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let decision = runtime.block_on(NoTerminal.request(request()));
        let ApprovalDecision::Failed { message } = decision else {
            panic!("{decision:?}")
        };
        assert!(message.contains("--yes"), "{message}");
        assert!(message.contains("terminal"), "{message}");
    }

    /// The approval gate and a server's elicitation ask on one terminal input: the late answer
    /// to a timed-out approval never answers the elicitation asked next, whose own answers
    /// (typed once it is shown) go to it.
    #[tokio::test]
    async fn an_elicitation_after_a_timed_out_approval_never_takes_its_late_answer() {
        use mcp_agent::{ElicitationHandler, rmcp::model::ElicitRequestParams};

        let mut person = Person::new(Duration::from_secs(1));
        let decision = person.answers(&[]).await;
        assert!(matches!(decision, ApprovalDecision::Rejected { .. }));
        person.typing("y");
        person.read(1).await;

        let screen = Arc::new(Mutex::new(Vec::new()));
        let terminal =
            crate::elicit::Terminal::new(Arc::clone(&person.gate.lines), Shared(screen.clone()));
        let request: ElicitRequestParams = serde_json::from_value(serde_json::json!({
            "mode": "form",
            "message": "Your name",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                "required": ["name"]},
        }))
        .unwrap();
        let asking = tokio::spawn(async move { terminal.elicit("kit", request).await });
        let shown = |screen: &Mutex<Vec<u8>>| {
            String::from_utf8_lossy(&screen.lock().unwrap()).contains("Your name")
        };
        let deadline = Instant::now() + LONG;
        while !shown(&screen) {
            assert!(Instant::now() < deadline, "the elicitation was never shown");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        person.typing("y");
        person.typing("Ada");
        let result = asking.await.unwrap();
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            serde_json::json!({"action": "accept", "content": {"name": "Ada"}}),
        );
    }

    /// A writer the test reads afterwards.
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
