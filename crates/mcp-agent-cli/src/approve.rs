//! Approval of the calls that `[policy]` says need it: asked on the terminal, given for every
//! call by `--yes`, or — with no terminal to ask on — refused with a message saying how to
//! allow them.

use std::future::Future;
use std::io::{self, BufRead, IsTerminal, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use mcp_agent::agent_core::{ApprovalDecision, ApprovalGate, ApprovalRequest, AutoApprove};

use super::term::{MAX_NAME, inline};

/// Why a call that needs approval is refused when nobody can be asked.
pub(crate) const NO_TERMINAL: &str =
    "no terminal to ask on (run with --yes to approve every call, or answer on a terminal)";

/// Longest approval prompt shown (the layer already bounds the arguments it shows).
const MAX_PROMPT: usize = 4096;

/// How many answers that are none of y, n, a are taken before the call is refused.
const ATTEMPTS: usize = 3;

/// The gate for this command: everything with `--yes`; else the terminal when stdin and stderr
/// are one; else none, which refuses with [`NO_TERMINAL`].
pub(crate) fn gate(yes: bool) -> Arc<dyn ApprovalGate> {
    if yes {
        Arc::new(AutoApprove)
    } else if io::stdin().is_terminal() && io::stderr().is_terminal() {
        Arc::new(TerminalGate::new(
            io::BufReader::new(io::stdin()),
            io::stderr(),
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

struct Terminal {
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
}

/// Asks a person: writes the request's prompt (naming server, tool and the redacted
/// arguments) to `output` and reads one answer a line from `input`: `y` allows the call once,
/// `a` allows the tool for the rest of the run, `n` or an empty line refuses. An input that
/// ends or fails refuses too. One request is asked at a time.
pub(crate) struct TerminalGate {
    terminal: Arc<Mutex<Terminal>>,
}

impl TerminalGate {
    /// A gate asking on `output` and reading answers from `input`.
    pub(crate) fn new(
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
    ) -> Self {
        Self {
            terminal: Arc::new(Mutex::new(Terminal {
                input: Box::new(input),
                output: Box::new(output),
            })),
        }
    }
}

impl Terminal {
    fn ask(&mut self, request: &ApprovalRequest) -> ApprovalDecision {
        match self.ask_io(request) {
            Ok(decision) => decision,
            Err(e) => ApprovalDecision::Failed {
                message: format!("cannot ask on the terminal: {e}"),
            },
        }
    }

    fn ask_io(&mut self, request: &ApprovalRequest) -> io::Result<ApprovalDecision> {
        let tool = inline(&request.action_ref, MAX_NAME);
        writeln!(
            self.output,
            "approval needed: {}",
            inline(&request.prompt, MAX_PROMPT)
        )?;
        for _ in 0..ATTEMPTS {
            write!(
                self.output,
                "run {tool}? [y] yes, once  [a] yes, for the rest of the run  [n] no (default): "
            )?;
            self.output.flush()?;
            let mut answer = String::new();
            if self.input.read_line(&mut answer)? == 0 {
                writeln!(self.output)?;
                return Ok(ApprovalDecision::Failed {
                    message: String::from("the terminal closed before an answer was given"),
                });
            }
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(ApprovalDecision::Approved),
                "a" | "all" | "always" => return Ok(ApprovalDecision::ApprovedForRun),
                "n" | "no" | "" => {
                    return Ok(ApprovalDecision::Rejected {
                        reason: String::from("refused on the terminal"),
                    });
                }
                _ => writeln!(self.output, "please answer y, a or n")?,
            }
        }
        Ok(ApprovalDecision::Rejected {
            reason: format!("no answer on the terminal was y, a or n ({ATTEMPTS} tries)"),
        })
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

impl TerminalGate {
    async fn ask(&self, request: ApprovalRequest) -> ApprovalDecision {
        // Reading a terminal blocks; a thread of its own keeps the runtime free, and one left
        // waiting when the command ends (a signal, the layer's approval timeout) does not hold
        // the process up.
        let (answer, answered) = tokio::sync::oneshot::channel();
        let terminal = Arc::clone(&self.terminal);
        let asking = std::thread::Builder::new()
            .name("approval".into())
            .spawn(move || {
                let decision = terminal
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .ask(&request);
                let _ = answer.send(decision);
            });
        if let Err(e) = asking {
            return ApprovalDecision::Failed {
                message: format!("cannot ask on the terminal: {e}"),
            };
        }
        answered.await.unwrap_or_else(|_| ApprovalDecision::Failed {
            message: String::from("asking on the terminal failed"),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest::new(
            "kit__echo",
            "Allow the tool `echo` of MCP server `kit` (`mcp-test-kit`) to run with arguments \
             {\"token\":\"[REDACTED]\",\"text\":\"hi\u{1b}[2J\"}? (approval required by rule)",
        )
    }

    fn answers(input: &str) -> (Vec<ApprovalDecision>, String) {
        let screen = Screen::default();
        let gate = TerminalGate::new(Cursor::new(input.to_owned()), screen.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut decisions = Vec::new();
        runtime.block_on(async {
            for _ in 0..input.lines().count().max(1) {
                decisions.push(gate.request(request()).await);
            }
        });
        (decisions, screen.text())
    }

    #[test]
    fn y_allows_once_a_for_the_run_n_and_an_empty_line_refuse() {
        let (decisions, screen) = answers("y\nA\nn\n\n");
        assert_eq!(decisions[0], ApprovalDecision::Approved);
        assert_eq!(decisions[1], ApprovalDecision::ApprovedForRun);
        assert!(matches!(decisions[2], ApprovalDecision::Rejected { .. }));
        assert!(matches!(decisions[3], ApprovalDecision::Rejected { .. }));
        assert_eq!(screen.matches("approval needed: ").count(), 4, "{screen}");
        assert!(screen.contains("run kit__echo? [y] yes, once"), "{screen}");
    }

    #[test]
    fn the_prompt_names_server_tool_and_redacted_arguments_and_is_terminal_safe() {
        let (_, screen) = answers("n\n");
        assert!(screen.contains("`echo` of MCP server `kit`"), "{screen}");
        assert!(screen.contains(r#""token":"[REDACTED]""#), "{screen}");
        assert!(!screen.contains('\u{1b}'), "{screen:?}");
        assert!(screen.contains("\\u{1b}[2J"), "{screen}");
    }

    #[test]
    fn another_answer_is_asked_again_and_three_wrong_ones_refuse() {
        let (decisions, screen) = answers("maybe\ny\n");
        assert_eq!(decisions[0], ApprovalDecision::Approved);
        assert_eq!(screen.matches("please answer y, a or n").count(), 1);

        let (decisions, _) = answers("x\nx\nx\ny\n");
        assert!(
            matches!(&decisions[0], ApprovalDecision::Rejected { reason } if reason.contains("3 tries")),
            "{decisions:?}"
        );
    }

    #[test]
    fn a_closed_terminal_refuses() {
        let (decisions, _) = answers("");
        assert!(
            matches!(&decisions[0], ApprovalDecision::Failed { message } if message.contains("closed")),
            "{decisions:?}"
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
}
