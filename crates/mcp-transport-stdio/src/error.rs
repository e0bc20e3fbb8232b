//! Errors of the stdio transport.

use std::path::PathBuf;

use mcp_config::TransportKind;
use mcp_connector::ConnectError;

/// Why a stdio server could not be started or written to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// The spec is not a stdio spec.
    #[error("server `{server}` does not use the stdio transport")]
    NotStdio {
        /// The server.
        server: String,
    },
    /// The working directory does not exist or is not a directory.
    #[error("server `{server}`: working directory `{}` is not usable", cwd.display())]
    Cwd {
        /// The server.
        server: String,
        /// The directory.
        cwd: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The program could not be started (not found, not executable, …).
    #[error("server `{server}`: could not start `{command}`")]
    Spawn {
        /// The server.
        server: String,
        /// The program, as configured.
        command: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing a message to the process failed (usually: it exited).
    #[error(
        "server `{server}`: could not write to its process{}",
        summary(diagnostics)
    )]
    Write {
        /// The server.
        server: String,
        /// The process's exit status and stderr tail, when known.
        diagnostics: Option<String>,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server wrote a message larger than the connector's `max_message_bytes`: the
    /// transport stopped reading at the limit and ended the session.
    #[error(
        "server `{server}` sent a message larger than the limit of {}; the session was closed",
        crate::limits::bytes(*limit)
    )]
    MessageTooLarge {
        /// The server.
        server: String,
        /// The limit, in bytes (the message's line break not counted).
        limit: usize,
    },
    /// The server wrote a message nested deeper than the connector's `max_nesting_depth`: the
    /// transport stopped reading there and ended the session.
    #[error(
        "server `{server}` sent a message nested deeper than the limit of {limit} levels; the \
         session was closed"
    )]
    MessageTooDeep {
        /// The server.
        server: String,
        /// The limit: how many arrays and objects may be open at once.
        limit: usize,
    },
}

impl StdioError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            Self::NotStdio { server }
            | Self::Cwd { server, .. }
            | Self::Spawn { server, .. }
            | Self::Write { server, .. }
            | Self::MessageTooLarge { server, .. }
            | Self::MessageTooDeep { server, .. } => server,
        }
    }
}

/// At most this much diagnostic text goes into an error message; the whole tail stays
/// available from the connection handle.
const SUMMARY_CHARS: usize = 1024;

fn summary(diagnostics: &Option<String>) -> String {
    let Some(text) = diagnostics.as_deref().map(str::trim_end) else {
        return String::new();
    };
    if text.is_empty() {
        return String::new();
    }
    let start = text
        .char_indices()
        .rev()
        .nth(SUMMARY_CHARS - 1)
        .map_or(0, |(i, _)| i);
    let ellipsis = if start > 0 { "…" } else { "" };
    format!(" ({ellipsis}{})", &text[start..])
}

impl From<StdioError> for ConnectError {
    fn from(error: StdioError) -> Self {
        match error {
            StdioError::NotStdio { server } => ConnectError::Config {
                message: "not a stdio server spec".into(),
                server,
            },
            other => ConnectError::Io {
                server: other.server().to_owned(),
                kind: TransportKind::Stdio,
                source: Box::new(other),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_errors_carry_the_end_of_the_diagnostics() {
        let long = format!("{}\nlast line", "x".repeat(5_000));
        let error = StdioError::Write {
            server: "s".into(),
            diagnostics: Some(long),
            source: std::io::ErrorKind::BrokenPipe.into(),
        };
        let message = error.to_string();
        assert!(message.starts_with("server `s`: could not write to its process (…"));
        assert!(message.ends_with("last line)"));
        assert!(message.chars().count() < SUMMARY_CHARS + 60);
    }

    #[test]
    fn a_missing_program_names_server_and_command() {
        let error: ConnectError = StdioError::Spawn {
            server: "files".into(),
            command: "no-such-program".into(),
            source: std::io::ErrorKind::NotFound.into(),
        }
        .into();
        let chain = agent_core::error_chain(&error);
        assert!(chain.contains("server `files`"), "{chain}");
        assert!(
            chain.contains("could not start `no-such-program`"),
            "{chain}"
        );
    }

    #[test]
    fn limit_errors_name_server_and_limit() {
        let large = StdioError::MessageTooLarge {
            server: "big".into(),
            limit: 16 << 20,
        };
        assert_eq!(
            large.to_string(),
            "server `big` sent a message larger than the limit of 16 MiB (16777216 bytes); the \
             session was closed"
        );
        let deep = StdioError::MessageTooDeep {
            server: "deep".into(),
            limit: 127,
        };
        assert_eq!(
            deep.to_string(),
            "server `deep` sent a message nested deeper than the limit of 127 levels; the session \
             was closed"
        );
    }
}
