//! The signals that end a command: SIGINT, SIGTERM, SIGHUP (a closed terminal or SSH session)
//! and SIGQUIT. They are caught once, before any server is spawned, so a signal at any moment
//! — while connecting, between connecting and calling, mid-call, while closing — closes the
//! run instead of killing the CLI and orphaning its servers (which live in their own process
//! groups, out of reach of a terminal's signals). `serve` alone takes SIGHUP apart, as the
//! order to reload its configuration ([`Signals::install_reloading`]).

use std::process::ExitCode;

use super::exit::Exit;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The catching of the terminating signals, for the life of a command.
pub(crate) struct Signals {
    int: Option<Signal>,
    term: Option<Signal>,
    hup: Option<Signal>,
    quit: Option<Signal>,
}

impl Signals {
    /// Installs the handlers (inside the runtime). A handler that cannot be installed leaves
    /// that signal's default action in place.
    pub(crate) fn install() -> Self {
        Self {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
            quit: signal(SignalKind::quit()).ok(),
        }
    }

    /// [`install`](Self::install) for a command that reloads on SIGHUP (`serve`): SIGHUP is
    /// caught at the same moment, but handed back on its own instead of ending the command.
    pub(crate) fn install_reloading() -> (Self, Option<Signal>) {
        let mut signals = Self::install();
        let hangups = signals.hup.take();
        (signals, hangups)
    }

    /// The next signal, as its conventional exit code (128 + its number).
    pub(crate) async fn recv(&mut self) -> ExitCode {
        async fn next(signal: &mut Option<Signal>) {
            let received = match signal {
                Some(s) => s.recv().await.is_some(),
                None => false,
            };
            if !received {
                std::future::pending::<()>().await;
            }
        }
        let number: u8 = tokio::select! {
            () = next(&mut self.int) => 2,
            () = next(&mut self.term) => 15,
            () = next(&mut self.hup) => 1,
            () = next(&mut self.quit) => 3,
        };
        Exit::Signal(number).into()
    }
}
