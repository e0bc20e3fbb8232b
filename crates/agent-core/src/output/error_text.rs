//! The parts of a [`ToolError`] that a tool, a server, a model or a client chose, taken apart
//! so that the output limit can cut them: the names it carries, and its one free text.

use crate::ToolError;

/// The most bytes of one name (tool, server, suggested tool) an over-limit error keeps.
pub(super) const MAX_NAME_BYTES: usize = 128;

/// The largest character boundary of `text` at or before `at`.
pub(super) fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `name` cut to [`MAX_NAME_BYTES`] (at a character boundary) and marked `…` when longer.
fn short(name: String) -> String {
    if name.len() <= MAX_NAME_BYTES {
        return name;
    }
    let end = floor_char_boundary(&name, MAX_NAME_BYTES);
    format!("{}…", &name[..end])
}

/// `error` with each name it carries cut to [`MAX_NAME_BYTES`]: a tool name comes from the
/// model or a client (an unknown tool), or from a server's tool list.
pub(super) fn short_names(error: ToolError) -> ToolError {
    let server = |s: Option<String>| s.map(short);
    match error {
        ToolError::UnknownTool { tool, suggestions } => ToolError::UnknownTool {
            tool: short(tool),
            suggestions: suggestions.into_iter().take(3).map(short).collect(),
        },
        ToolError::InvalidArguments {
            server: s,
            tool,
            message,
        } => ToolError::InvalidArguments {
            server: server(s),
            tool: short(tool),
            message,
        },
        ToolError::Denied {
            server: s,
            tool,
            reason,
        } => ToolError::Denied {
            server: server(s),
            tool: short(tool),
            reason,
        },
        ToolError::Invocation {
            server: s,
            tool,
            message,
        } => ToolError::Invocation {
            server: server(s),
            tool: short(tool),
            message,
        },
        ToolError::Timeout {
            server: s,
            tool,
            after,
        } => ToolError::Timeout {
            server: server(s),
            tool: short(tool),
            after,
        },
        ToolError::Transport {
            server: s,
            tool,
            source,
        } => ToolError::Transport {
            server: server(s),
            tool: short(tool),
            source,
        },
        ToolError::Configuration {
            server: s,
            tool,
            message,
        } => ToolError::Configuration {
            server: server(s),
            tool: short(tool),
            message,
        },
    }
}

/// Which variant a free text belongs to.
#[derive(Clone, Copy)]
enum Kind {
    InvalidArguments,
    Denied,
    Invocation,
    Transport,
    Configuration,
}

/// An error without its free text, to be rebuilt with a cut one.
pub(super) struct Frame {
    kind: Kind,
    server: Option<String>,
    tool: String,
}

impl Frame {
    /// The error with `text` as its free text (for a transport error: its cause).
    pub(super) fn with_text(&self, text: String) -> ToolError {
        let server = self.server.clone();
        let tool = self.tool.clone();
        match self.kind {
            Kind::InvalidArguments => ToolError::InvalidArguments {
                server,
                tool,
                message: text,
            },
            Kind::Denied => ToolError::Denied {
                server,
                tool,
                reason: text,
            },
            Kind::Invocation => ToolError::Invocation {
                server,
                tool,
                message: text,
            },
            Kind::Transport => ToolError::Transport {
                server,
                tool,
                source: text.into(),
            },
            Kind::Configuration => ToolError::Configuration {
                server,
                tool,
                message: text,
            },
        }
    }
}

/// `error` taken apart into its frame and its free text — the message of `Invocation`,
/// `InvalidArguments` and `Configuration`, the reason of `Denied`, the cause chain of
/// `Transport` — or given back when it has none (`UnknownTool`, `Timeout`: names only).
pub(super) fn split(error: ToolError) -> Result<(Frame, String), ToolError> {
    let frame = |kind, server, tool| Frame { kind, server, tool };
    Ok(match error {
        ToolError::InvalidArguments {
            server,
            tool,
            message,
        } => (frame(Kind::InvalidArguments, server, tool), message),
        ToolError::Denied {
            server,
            tool,
            reason,
        } => (frame(Kind::Denied, server, tool), reason),
        ToolError::Invocation {
            server,
            tool,
            message,
        } => (frame(Kind::Invocation, server, tool), message),
        ToolError::Transport {
            server,
            tool,
            source,
        } => (
            frame(Kind::Transport, server, tool),
            crate::error_chain(source.as_ref()),
        ),
        ToolError::Configuration {
            server,
            tool,
            message,
        } => (frame(Kind::Configuration, server, tool), message),
        other => return Err(other),
    })
}
