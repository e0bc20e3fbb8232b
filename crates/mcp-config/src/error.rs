//! The crate's error type: every configuration problem at once, each with its JSON path.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// A boxed error for the cause chain of a custom resolver.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a configuration could not be loaded, selected or resolved.
///
/// Messages name the server, the field and (for the environment) the variable; they never
/// contain a secret value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// One or more problems in the configuration or in a run's selection, all reported at once.
    #[error("invalid MCP configuration: {}", ProblemList(problems))]
    Invalid {
        /// Every problem found, grouped by source (the file, then the environment).
        problems: Vec<Problem>,
    },
    /// A config file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A config file larger than [`Config::MAX_FILE_BYTES`](crate::Config::MAX_FILE_BYTES):
    /// refused before more than the limit is read.
    #[error("config file {} is larger than the {} limit for config files", path.display(), Bytes(*limit))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A config path that is not a regular file (after following symlinks): a directory, a
    /// device such as `/dev/zero`, a FIFO or a socket. Refused before it is opened, so neither
    /// an endless device nor a pipe without a writer can stall loading.
    #[error("config file {} is not a regular file (a directory, device, FIFO or socket)", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A config file whose extension is neither `.toml` nor `.json`.
    #[error("config file {} has an unsupported format: use a `.toml` or `.json` file", path.display())]
    UnsupportedFormat {
        /// The file.
        path: PathBuf,
    },
    /// A custom [`ServerResolver`](crate::ServerResolver) failed (its store was unreachable,
    /// a connection id was unknown, …).
    #[error("resolving the run's MCP servers failed: {source}")]
    Resolve {
        /// The cause.
        #[source]
        source: BoxError,
    },
}

impl ConfigError {
    /// An [`Invalid`](Self::Invalid) error holding `problems`.
    pub fn invalid(problems: Vec<Problem>) -> Self {
        Self::Invalid { problems }
    }

    /// A [`Resolve`](Self::Resolve) error from any error type.
    pub fn resolve(source: impl Into<BoxError>) -> Self {
        Self::Resolve {
            source: source.into(),
        }
    }

    /// The problems of an [`Invalid`](Self::Invalid) error; empty for the other variants.
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::Invalid { problems } => problems,
            _ => &[],
        }
    }
}

/// One problem in a configuration, with where it is.
///
/// ```
/// use mcp_config::{Config, ProblemKind};
///
/// let err = Config::from_env_vars([("MCP_AGENT__SERVERS", r#"[{"name": "a b", "command": "x"}]"#)])
///     .unwrap_err();
/// let problem = &err.problems()[0];
/// assert_eq!(problem.kind, ProblemKind::InvalidName);
/// assert_eq!(problem.path, "MCP_AGENT__SERVERS[0].name");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// Where: a JSON path such as `servers[2].command` or `mcpServers.git.url`; for the
    /// environment it starts with the variable (`MCP_AGENT__SERVERS[0].name`); for a run's
    /// selection with `metadata.mcp`. Empty for a problem with a whole document (a syntax
    /// error).
    pub path: String,
    /// What kind of problem (stable; match on this rather than on the message).
    pub kind: ProblemKind,
    /// What is wrong and, where possible, how to fix it. Never contains a secret.
    pub message: String,
    /// The config file the path is in, if the problem comes from a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

impl Problem {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, kind: ProblemKind, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind,
            message: message.into(),
            file: None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// A byte count for messages: `4 MiB`, `64 KiB`, `1000 bytes`.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n > 0 && n % (1 << 20) == 0 => write!(f, "{} MiB", n >> 20),
            n if n > 0 && n % (1 << 10) == 0 => write!(f, "{} KiB", n >> 10),
            n => write!(f, "{n} bytes"),
        }
    }
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// The kind of a [`Problem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// The text is not valid JSON or TOML.
    Syntax,
    /// A value has the wrong JSON type (a string where an array belongs, …).
    WrongType,
    /// A required field is missing.
    MissingField,
    /// A field this schema does not know (often a typo; the message suggests the closest name).
    UnknownField,
    /// Fields that exclude each other are both set (`command` and `url`, `bearer_token` and
    /// `bearer_token_env`, …).
    ConflictingFields,
    /// A field that does not apply to the server's transport (`url` on a stdio server, …).
    NotApplicable,
    /// A server name is empty.
    EmptyName,
    /// A server name has a character outside `[A-Za-z0-9_-]`.
    InvalidName,
    /// A server name contains `__`, the separator of namespaced tool names.
    DoubleUnderscore,
    /// Two servers have the same name (in one source, across sources, or in one run).
    DuplicateName,
    /// A JSON object has the same key twice (JSON parsers would silently keep one value).
    DuplicateKey,
    /// A run's inline spec has the name of a configured server.
    ShadowsConfigured,
    /// A run selects a server name that is not configured.
    UnknownServer,
    /// `transport` is neither `stdio` nor `streamable_http`.
    InvalidTransport,
    /// A URL does not parse, has no host, or carries credentials.
    InvalidUrl,
    /// A URL's scheme is not `http` or `https`.
    UnsupportedScheme,
    /// A timeout is zero, negative, not finite or too large.
    InvalidTimeout,
    /// Any other value out of its domain (an empty command, a bad header name, an unknown
    /// enum value, a bad `${…}` reference, …).
    InvalidValue,
    /// `${VAR}` names a variable that is not set and has no `:-default`.
    UndefinedVariable,
    /// A caller-supplied (inline) spec uses stdio and the operator did not allow it.
    InlineStdio,
    /// A caller-supplied (inline) spec reads a secret from the operator's environment
    /// (`*_env`) and the operator did not allow it.
    InlineEnvSecret,
    /// A caller-supplied (inline) spec's URL targets a loopback, private, link-local or
    /// otherwise internal address while the SSRF guard is on.
    BlockedAddress,
}
