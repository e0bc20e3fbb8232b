//! The exit codes of `mcp-agent`, in one place: every command ends with one of [`Exit`].
//!
//! | Code    | Meaning                                                                   |
//! |---------|---------------------------------------------------------------------------|
//! | 0       | done as asked (`serve`: drained and shut down on SIGTERM or SIGINT)       |
//! | 1       | servers could not be opened, a call or the run failed, a write failed     |
//! | 2       | invalid configuration or arguments (clap's too), an unbindable address,   |
//! |         | a `[serve] state` Redis unreachable or refusing the credentials at start  |
//! | 128 + n | ended by signal n (SIGHUP 1, SIGINT 2, SIGQUIT 3, SIGTERM 15), run closed |
//! | 141     | stdout closed by its reader (128 + SIGPIPE)                               |

use std::process::ExitCode;

/// How a command ended, as its process exit code (see the [module table](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: the command did what it was asked.
    Success,
    /// 1: servers could not be opened, a call or the run failed, output could not be written.
    Failed,
    /// 2: the configuration or a command's arguments are invalid or cannot be read (a `serve`
    /// address that cannot be bound, or a `[serve] state` Redis that cannot be used at start,
    /// included).
    InvalidConfig,
    /// 128 + the signal's number: the command was ended by a signal, after closing its run.
    Signal(u8),
    /// 141 (128 + SIGPIPE): stdout was closed by its reader, as if killed by SIGPIPE.
    BrokenPipe,
}

impl Exit {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Failed => 1,
            Self::InvalidConfig => 2,
            Self::Signal(number) => 128u8.saturating_add(number),
            Self::BrokenPipe => 141,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn codes_are_the_documented_ones() {
        let codes = [
            Exit::Success,
            Exit::Failed,
            Exit::InvalidConfig,
            Exit::Signal(15),
            Exit::BrokenPipe,
        ]
        .map(Exit::code);
        assert_eq!(codes, [0, 1, 2, 143, 141]);
    }
}
