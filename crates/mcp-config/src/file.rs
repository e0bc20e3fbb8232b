//! Loading from config files: TOML or JSON, this crate's schema or the ecosystem's
//! `mcpServers` object, with `${VAR}` / `${VAR:-default}` expansion.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::{Layer, merge, merge_reading};
use crate::env::{collect_vars, env_layer, process_env};
use crate::expand::expand_value;
use crate::path::{JsonPath, Problems};
use crate::{Config, ConfigError, ProblemKind};

/// The syntax of a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileFormat {
    /// TOML (`.toml`).
    Toml,
    /// JSON (`.json`).
    Json,
}

impl FileFormat {
    /// The format a path's extension names (`.toml`, `.json`; any case).
    ///
    /// ```
    /// use mcp_config::FileFormat;
    /// use std::path::Path;
    ///
    /// assert_eq!(FileFormat::from_path(Path::new("mcp.TOML")), Some(FileFormat::Toml));
    /// assert_eq!(FileFormat::from_path(Path::new("claude_desktop_config.json")), Some(FileFormat::Json));
    /// assert_eq!(FileFormat::from_path(Path::new("mcp.yaml")), None);
    /// ```
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "toml" => Some(Self::Toml),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

impl Config {
    /// The largest config file the loaders read: 4 MiB. A larger one is refused with
    /// [`ConfigError::TooLarge`] (naming the file and the limit) before more than the limit is
    /// read, and a path that is not a regular file (after following symlinks: a directory, a
    /// device such as `/dev/zero`, a FIFO, a socket) with [`ConfigError::NotAFile`], without
    /// being opened.
    pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

    /// Loads the environment and, if given, a config file; `${VAR}` in the file expands from
    /// the process environment. See [`Config`] for the schema and the precedence.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with(file, |_, _| ()).map(|(config, ())| config)
    }

    /// [`Config::load`], then `read`, the application's reader of the tables this crate keeps
    /// raw ([`Config::serve`], [`Config::model`]), with the functions of
    /// [`read`](crate::read). Its problems join the loader's: the error lists all of them.
    /// `read` runs even when the rest has problems, on what could be read.
    pub fn load_with<T>(
        file: Option<&Path>,
        read: impl FnOnce(&Config, &mut Problems) -> T,
    ) -> Result<(Self, T), ConfigError> {
        let (vars, p) = process_env();
        load_layers(&vars, file, p, read)
    }

    /// [`Config::load_with`] with the environment given as `(name, value)` pairs.
    ///
    /// ```
    /// use mcp_config::read::{Problems, as_str};
    /// use mcp_config::{Config, ProblemKind};
    ///
    /// let vars = [
    ///     ("MCP_AGENT__SERVE", r#"{"http": 8080}"#),
    ///     ("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "-1"),
    /// ];
    /// let err = Config::load_with_vars_and(vars, None, |config: &Config, p: &mut Problems| {
    ///     config.serve.read("http", p, |v, at, p| as_str(v, at, p).map(str::to_owned))
    /// })
    /// .unwrap_err();
    /// let found: Vec<_> = err.problems().iter().map(|p| (p.kind, p.path.as_str())).collect();
    /// assert!(found.contains(&(ProblemKind::WrongType, "MCP_AGENT__SERVE.http")));
    /// assert!(found.contains(&(ProblemKind::InvalidTimeout, "MCP_AGENT__CONNECT_TIMEOUT_SECONDS")));
    /// ```
    pub fn load_with_vars_and<I, K, V, T>(
        vars: I,
        file: Option<&Path>,
        read: impl FnOnce(&Config, &mut Problems) -> T,
    ) -> Result<(Self, T), ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        load_layers(&collect_vars(vars), file, Problems::new(), read)
    }

    /// [`Config::load`] with the environment given as `(name, value)` pairs (used both for
    /// `MCP_AGENT__…` and for `${VAR}` expansion).
    ///
    /// ```
    /// use mcp_config::Config;
    ///
    /// let dir = std::env::temp_dir().join(format!("mcp-config-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let file = dir.join("mcp.toml");
    /// std::fs::write(&file, r#"
    ///     connect_timeout_seconds = 10
    ///     [[servers]]
    ///     name = "git"
    ///     command = "${GIT_MCP:-git-mcp-server}"
    /// "#).unwrap();
    ///
    /// let config = Config::load_with_vars(
    ///     [("MCP_AGENT__CONNECT_TIMEOUT_SECONDS", "3")],
    ///     Some(&file),
    /// )?;
    /// assert_eq!(config.servers[0].name, "git");
    /// assert_eq!(config.connect_timeout.as_secs(), 3, "the environment wins over the file");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mcp_config::ConfigError>(())
    /// ```
    pub fn load_with_vars<I, K, V>(vars: I, file: Option<&Path>) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::load_with_vars_and(vars, file, |_, _| ()).map(|(config, ())| config)
    }

    /// Loads a config file alone (no `MCP_AGENT__…` variables); `${VAR}` expands from the
    /// process environment.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let (vars, p) = process_env();
        let path = path.as_ref();
        let mut problems = Problems::in_file(path.to_owned());
        problems.extend(p);
        let layer = file_layer(path, &vars, &mut problems)?;
        merge(vec![layer], problems)
    }

    /// Parses config text in `format`; `${VAR}` expands from `vars`.
    ///
    /// Besides this crate's schema (`servers = [...]`, …) a document may hold the ecosystem's
    /// `mcpServers` object, as written by desktop and IDE MCP hosts: each key is a server's
    /// name, each value has `command`/`args`/`env`/`cwd` (stdio) or `url`/`headers` (HTTP),
    /// optionally `type` (`stdio`, `http`) and `disabled`, and any other field of a server
    /// object. Entries with `"disabled": true` are skipped.
    ///
    /// `${VAR}` is replaced by the variable's value and `${VAR:-default}` by the default when
    /// the variable is unset or empty, in every string value (not in keys); `$${` writes a
    /// literal `${`. A default may hold references itself (`${A:-${B:-x}}`, at most 8 deep;
    /// it is evaluated only when used) and ends at the first `}` not closing one of them. An
    /// unset `${VAR}` without a default is an error naming the variable; a malformed or
    /// unterminated reference is an error, used or not. A bearer token, client secret or
    /// credential header that ends up empty (`${TOKEN}` with `TOKEN=""`, `Bearer ${TOKEN}`) is
    /// an error naming the server and the variable.
    ///
    /// In JSON, a key given twice in one object is an error at its path
    /// ([`ProblemKind::DuplicateKey`]), as TOML already requires.
    ///
    /// ```
    /// use mcp_config::{Config, FileFormat, ProblemKind, TransportKind};
    ///
    /// let text = r#"{"mcpServers": {
    ///     "github": {"command": "github-mcp-server", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
    ///     "linear": {"url": "https://mcp.linear.app/mcp", "headers": {"X-Team": "${TEAM:-core}"}}
    /// }}"#;
    /// let config = Config::parse(text, FileFormat::Json, [("GITHUB_TOKEN", "ghp_x")])?;
    /// assert_eq!(config.servers[0].kind(), TransportKind::Stdio);
    /// assert_eq!(config.servers[1].kind(), TransportKind::StreamableHttp);
    ///
    /// let err = Config::parse(text, FileFormat::Json, [("HOME", "/root")]).unwrap_err();
    /// assert_eq!(err.problems()[0].kind, ProblemKind::UndefinedVariable);
    /// assert_eq!(err.problems()[0].path, "mcpServers.github.env.GITHUB_TOKEN");
    /// # Ok::<(), mcp_config::ConfigError>(())
    /// ```
    pub fn parse<I, K, V>(text: &str, format: FileFormat, vars: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::parse_with(text, format, vars, |_, _| ()).map(|(config, ())| config)
    }

    /// [`Config::parse`], then `read` as in [`Config::load_with`].
    pub fn parse_with<I, K, V, T>(
        text: &str,
        format: FileFormat,
        vars: I,
        read: impl FnOnce(&Config, &mut Problems) -> T,
    ) -> Result<(Self, T), ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let vars = collect_vars(vars);
        let mut p = Problems::new();
        let layer = text_layer(text, format, None, &vars, &mut p);
        merge_reading(vec![layer], p, read)
    }
}

/// File first, environment second (its settings win).
fn load_layers<T>(
    vars: &BTreeMap<String, String>,
    file: Option<&Path>,
    mut p: Problems,
    read: impl FnOnce(&Config, &mut Problems) -> T,
) -> Result<(Config, T), ConfigError> {
    let mut layers = Vec::new();
    if let Some(path) = file {
        let mut fp = Problems::in_file(path.to_owned());
        layers.push(file_layer(path, vars, &mut fp)?);
        p.extend(fp);
    }
    layers.push(env_layer(vars, &mut p));
    merge_reading(layers, p, read)
}

fn file_layer(
    path: &Path,
    vars: &BTreeMap<String, String>,
    p: &mut Problems,
) -> Result<Layer, ConfigError> {
    let format = FileFormat::from_path(path).ok_or_else(|| ConfigError::UnsupportedFormat {
        path: path.to_owned(),
    })?;
    let text = read_bounded(path)?;
    Ok(text_layer(&text, format, Some(path.to_owned()), vars, p))
}

/// Reads a config file as UTF-8, refusing what is not a regular file and anything larger than
/// [`Config::MAX_FILE_BYTES`] without reading more than one byte past the limit.
fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    let io = |source| ConfigError::Io {
        path: path.to_owned(),
        source,
    };
    let not_a_file = || ConfigError::NotAFile {
        path: path.to_owned(),
    };
    let too_large = || ConfigError::TooLarge {
        path: path.to_owned(),
        limit: Config::MAX_FILE_BYTES,
    };
    // Checked before opening: opening a FIFO blocks until someone writes to it.
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_a_file());
    }
    if meta.len() > Config::MAX_FILE_BYTES {
        return Err(too_large());
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // The path may name something else by now, or the file may have grown: check what was
    // opened, and never read past the limit.
    if !file.metadata().map_err(io)?.is_file() {
        return Err(not_a_file());
    }
    let mut bytes = Vec::new();
    file.take(Config::MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > Config::MAX_FILE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| ConfigError::NotUtf8 {
        path: path.to_owned(),
        source: e.utf8_error(),
    })
}

fn text_layer(
    text: &str,
    format: FileFormat,
    file: Option<PathBuf>,
    vars: &BTreeMap<String, String>,
    p: &mut Problems,
) -> Layer {
    let root = JsonPath::root();
    let doc = match format {
        FileFormat::Json => match crate::json::parse(text, &root, p) {
            Ok(v) => v,
            Err(e) => {
                p.push_caused(&root, ProblemKind::Syntax, "not valid JSON", e);
                return Layer::default();
            }
        },
        FileFormat::Toml => match toml::from_str::<toml::Table>(text) {
            Ok(table) => toml_to_json(toml::Value::Table(table), &root, p),
            Err(e) => {
                // The toml crate's Display quotes the offending line, which may hold a secret:
                // report only the message and the position, and do not keep the error as the
                // problem's cause (whoever printed the cause would print that line).
                let at = e
                    .span()
                    .map(|s| {
                        let (line, col) = line_col(text, s.start);
                        format!(" at line {line} column {col}")
                    })
                    .unwrap_or_default();
                p.push(
                    &root,
                    ProblemKind::Syntax,
                    format!("not valid TOML: {}{at}", e.message().trim_end()),
                );
                return Layer::default();
            }
        },
    };
    let mut doc = doc;
    expand_value(&mut doc, &root, vars, p);
    Layer::from_document(&doc, file, p)
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// TOML to JSON. Non-finite floats and dates have no JSON form: problems (and `null`).
fn toml_to_json(value: toml::Value, path: &JsonPath, p: &mut Problems) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => {
                p.push(
                    path,
                    ProblemKind::InvalidValue,
                    "infinite and NaN numbers are not allowed",
                );
                Value::Null
            }
        },
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(_) => {
            p.push(
                path,
                ProblemKind::WrongType,
                "a date is not expected here (quote it if it is a string)",
            );
            Value::Null
        }
        toml::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| toml_to_json(v, &path.index(i), p))
                .collect(),
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(k, v)| {
                    let v = toml_to_json(v, &path.key(&k), p);
                    (k, v)
                })
                .collect::<Map<_, _>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_errors_do_not_quote_the_file() {
        let err = Config::parse(
            "[[servers]]\nname = \"x\"\nbearer = \"sk-live-secret",
            FileFormat::Toml,
            [("A", "b")],
        )
        .unwrap_err();
        let problem = &err.problems()[0];
        assert_eq!(problem.kind, ProblemKind::Syntax);
        assert!(problem.message.contains("line 3"), "{}", problem.message);
        assert!(!err.to_string().contains("sk-live-secret"), "{err}");
    }

    #[test]
    fn toml_non_finite_numbers_are_problems() {
        let err = Config::parse(
            "[[servers]]\nname = \"x\"\ncommand = \"y\"\ncall_timeout_seconds = inf",
            FileFormat::Toml,
            [("A", "b")],
        )
        .unwrap_err();
        assert_eq!(err.problems()[0].kind, ProblemKind::InvalidValue);
        assert_eq!(err.problems()[0].path, "servers[0].call_timeout_seconds");
    }
}
