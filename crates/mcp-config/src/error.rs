//! The crate's error type: every configuration problem at once, each with its JSON path.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

/// The workspace's one boxed error type, for cause chains (defined in `agent-core`).
pub use agent_core::BoxError;

/// Why a configuration could not be loaded, selected or resolved.
///
/// Messages name the file, the server, the field and (for the environment) the variable; they
/// never contain a secret value. A variant with a cause keeps it typed and reachable through
/// [`source()`](std::error::Error::source), and its own message does not repeat it: print the
/// whole chain to show the cause.
///
/// ```
/// use std::error::Error;
/// use mcp_config::{Config, ConfigError};
///
/// let err = Config::from_file("/nonexistent/mcp.toml").unwrap_err();
/// assert!(matches!(err, ConfigError::Io { .. }));
/// assert_eq!(err.to_string(), "cannot read config file /nonexistent/mcp.toml");
/// let cause = err.source().unwrap().downcast_ref::<std::io::Error>().unwrap();
/// assert_eq!(cause.kind(), std::io::ErrorKind::NotFound);
/// ```
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
    #[error("cannot read config file {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A config file that is not UTF-8 text.
    #[error("config file {} is not valid UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where the text stops being UTF-8.
        #[source]
        source: std::str::Utf8Error,
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
    /// a connection id was unknown, …); why is the resolver's error, the source.
    #[error("resolving the run's MCP servers failed")]
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
///
/// A problem found by a parser keeps the parser's error, typed, as its
/// [`cause`](Problem::cause); `Display` (and `Serialize`, as `cause`) add its text after the
/// message:
///
/// ```
/// use mcp_config::Config;
///
/// let err = Config::from_env_vars([("MCP_AGENT__SERVERS", "[{oops")]).unwrap_err();
/// let problem = &err.problems()[0];
/// assert_eq!(problem.message, "MCP_AGENT__SERVERS is not valid JSON");
/// let json = problem.cause().unwrap().downcast_ref::<serde_json::Error>().unwrap();
/// assert_eq!((json.line(), json.column()), (1, 3));
/// assert_eq!(
///     problem.to_string(),
///     "MCP_AGENT__SERVERS: MCP_AGENT__SERVERS is not valid JSON: key must be a string at line 1 column 3"
/// );
/// ```
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// Where: a JSON path such as `servers[2].command` or `mcpServers.git.url`; for the
    /// environment it starts with the variable (`MCP_AGENT__SERVERS[0].name`); for a run's
    /// selection with `metadata.mcp`. Empty for a problem with a whole document (a syntax
    /// error).
    pub path: String,
    /// What kind of problem (stable; match on this rather than on the message).
    pub kind: ProblemKind,
    /// What is wrong and, where possible, how to fix it, in this crate's words (the
    /// [`cause`](Problem::cause)'s text is not repeated here). Never contains a secret.
    pub message: String,
    /// The config file the path is in, if the problem comes from a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// The error of the parser that found it (JSON syntax, URL syntax), if any.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "cause_text")]
    cause: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Problem {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, kind: ProblemKind, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind,
            message: message.into(),
            file: None,
            cause: None,
        }
    }

    /// Sets the error that found the problem (kept typed; its text must never hold a secret).
    #[must_use]
    pub fn with_cause(mut self, cause: impl Into<BoxError>) -> Self {
        self.cause = Some(Arc::from(cause.into()));
        self
    }

    /// The error of the parser that found the problem, if any: a [`serde_json::Error`] for
    /// JSON syntax, a [`url::ParseError`] for a URL that does not parse.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// Problems are equal when they say the same thing at the same place (causes by their text).
impl PartialEq for Problem {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
            && self.kind == other.kind
            && self.message == other.message
            && self.file == other.file
            && self.cause.as_ref().map(ToString::to_string)
                == other.cause.as_ref().map(ToString::to_string)
    }
}

impl Eq for Problem {}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if let Some(cause) = &self.cause {
            write!(f, ": {cause}")?;
        }
        Ok(())
    }
}

fn cause_text<S: serde::Serializer>(
    cause: &Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match cause {
        Some(cause) => s.collect_str(cause),
        None => s.serialize_none(),
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
    /// `transport` is not a usable kind: a legacy transport (`sse`), a near miss of a built-in
    /// kind, or not a valid kind name.
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
    /// A caller-supplied (inline) spec uses a custom transport (only streamable HTTP is open
    /// to callers).
    InlineTransport,
    /// A caller-supplied (inline) spec reads a secret from the operator's environment
    /// (`*_env`) and the operator did not allow it.
    InlineEnvSecret,
    /// A caller-supplied (inline) spec's URL targets a loopback, private, link-local or
    /// otherwise internal address while the SSRF guard is on.
    BlockedAddress,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::error::Error;
    use std::path::Path;

    use super::*;
    use crate::{Config, FileFormat};

    /// The variant's name; a `match` without a wildcard, so a new variant must be named here
    /// (and then provoked in [`every_variant`]).
    fn variant(e: &ConfigError) -> &'static str {
        match e {
            ConfigError::Invalid { .. } => "Invalid",
            ConfigError::Io { .. } => "Io",
            ConfigError::NotUtf8 { .. } => "NotUtf8",
            ConfigError::TooLarge { .. } => "TooLarge",
            ConfigError::NotAFile { .. } => "NotAFile",
            ConfigError::UnsupportedFormat { .. } => "UnsupportedFormat",
            ConfigError::Resolve { .. } => "Resolve",
        }
    }

    /// A custom resolver's error with a cause of its own.
    #[derive(Debug)]
    struct StoreDown(std::io::Error);

    impl fmt::Display for StoreDown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the connection store is unreachable")
        }
    }

    impl Error for StoreDown {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Every variant, provoked as a user meets it, with the file it is about (if any).
    fn every_variant(dir: &Path) -> Vec<(ConfigError, Option<std::path::PathBuf>)> {
        let load = |path: &Path| Config::load_with_vars([("HOME", "/")], Some(path)).unwrap_err();
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let invalid = Config::parse(
            r#"{"servers": [{"name": "web", "url": "no url"}, {"name": "git"}]}"#,
            FileFormat::Json,
            [("HOME", "/")],
        )
        .unwrap_err();
        let syntax = Config::from_env_vars([("MCP_AGENT__SERVERS", "[{oops")]).unwrap_err();
        let missing = dir.join("missing.toml");
        let not_utf8 = file("latin1.json", b"{\"servers\": [\"caf\xe9\"]}");
        let too_large = file("huge.json", b"");
        std::fs::File::create(&too_large)
            .unwrap()
            .set_len(Config::MAX_FILE_BYTES + 1)
            .unwrap();
        let yaml = file("mcp.yaml", b"servers: []");
        let directory = dir.join("conf.d.json");
        std::fs::create_dir(&directory).unwrap();
        let resolve = ConfigError::resolve(StoreDown(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused by vault.internal:8200",
        )));
        vec![
            (invalid, None),
            (syntax, None),
            (load(&missing), Some(missing)),
            (load(&not_utf8), Some(not_utf8)),
            (load(&too_large), Some(too_large)),
            (load(&directory), Some(directory)),
            (load(&yaml), Some(yaml)),
            (resolve, None),
        ]
    }

    fn chain(e: &(dyn Error + 'static)) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut source = e.source();
        while let Some(cause) = source {
            out.push(cause.to_string());
            source = cause.source();
        }
        out
    }

    #[test]
    fn no_level_of_an_error_chain_repeats_another() {
        let dir = tempfile::tempdir().unwrap();
        let errors = every_variant(dir.path());
        let provoked: BTreeSet<_> = errors.iter().map(|(e, _)| variant(e)).collect();
        let all = [
            "Invalid",
            "Io",
            "NotUtf8",
            "TooLarge",
            "NotAFile",
            "UnsupportedFormat",
            "Resolve",
        ];
        assert_eq!(provoked, BTreeSet::from(all), "every variant is provoked");

        for (err, file) in &errors {
            let levels = chain(err);
            for (i, a) in levels.iter().enumerate() {
                assert!(!a.trim().is_empty(), "an empty level in {levels:?}");
                for b in &levels[i + 1..] {
                    assert!(
                        !a.contains(b.as_str()) && !b.contains(a.as_str()),
                        "{}: `{a}` and `{b}` repeat each other",
                        variant(err)
                    );
                }
                for rust in ["::", "Box<", "Error {", "Custom {", "Os {"] {
                    assert!(!a.contains(rust), "a Rust type in `{a}`");
                }
            }
            if let Some(file) = file {
                let shown = file.display().to_string();
                assert!(levels[0].contains(&shown), "`{}` names {shown}", levels[0]);
            }
            if let ConfigError::Invalid { problems } = err {
                assert!(err.source().is_none());
                // A problem's cause is printed once, after its message.
                for p in problems {
                    if let Some(cause) = p.cause() {
                        let cause = cause.to_string();
                        assert_eq!(levels[0].matches(&cause).count(), 1, "{}", levels[0]);
                        assert!(!p.message.contains(&cause), "{p:?}");
                    }
                }
            }
        }
        let causes = |name: &str| {
            let (err, _) = errors.iter().find(|(e, _)| variant(e) == name).unwrap();
            chain(err).len() - 1
        };
        assert_eq!(causes("Io"), 1, "the io error is the source");
        assert_eq!(causes("NotUtf8"), 1, "the UTF-8 error is the source");
        assert_eq!(causes("Resolve"), 2, "the resolver's error and its cause");
    }

    #[test]
    fn parser_errors_stay_typed_in_their_problems() {
        let err = Config::parse(
            r#"{"servers": [{"name": "web", "url": "no url"}]}"#,
            FileFormat::Json,
            [("HOME", "/")],
        )
        .unwrap_err();
        let p = &err.problems()[0];
        assert_eq!(p.kind, ProblemKind::InvalidUrl);
        assert_eq!(p.message, "not a valid URL");
        let cause = p.cause().and_then(|c| c.downcast_ref::<url::ParseError>());
        assert_eq!(cause, Some(&url::ParseError::RelativeUrlWithoutBase));
        assert_eq!(
            p.to_string(),
            "servers[0].url: not a valid URL: relative URL without a base"
        );
        let json = serde_json::to_value(p).unwrap();
        assert_eq!(json["cause"], "relative URL without a base");

        let err = Config::parse("{\"servers\": [", FileFormat::Json, [("HOME", "/")]).unwrap_err();
        let p = &err.problems()[0];
        assert_eq!(
            (p.kind, p.message.as_str()),
            (ProblemKind::Syntax, "not valid JSON")
        );
        let json = p
            .cause()
            .and_then(|c| c.downcast_ref::<serde_json::Error>());
        assert!(json.is_some_and(serde_json::Error::is_eof), "{p:?}");
    }
}
