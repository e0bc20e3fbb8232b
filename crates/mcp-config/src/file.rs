//! Loading from config files (SPEC A4): TOML or JSON, this crate's schema or the ecosystem's
//! `mcpServers` object, with `${VAR}` / `${VAR:-default}` expansion.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::{Layer, merge};
use crate::env::{collect_vars, env_layer, process_env};
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
        let (vars, p) = process_env();
        load_layers(&vars, file, p)
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
        load_layers(&collect_vars(vars), file, Problems::new())
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
        let vars = collect_vars(vars);
        let mut p = Problems::new();
        let layer = text_layer(text, format, None, &vars, &mut p);
        merge(vec![layer], p)
    }
}

/// File first, environment second (its settings win).
fn load_layers(
    vars: &BTreeMap<String, String>,
    file: Option<&Path>,
    mut p: Problems,
) -> Result<Config, ConfigError> {
    let mut layers = Vec::new();
    if let Some(path) = file {
        let mut fp = Problems::in_file(path.to_owned());
        layers.push(file_layer(path, vars, &mut fp)?);
        p.extend(fp);
    }
    layers.push(env_layer(vars, &mut p));
    merge(layers, p)
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
    String::from_utf8(bytes).map_err(|_| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is not valid UTF-8",
        ))
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
                p.push(&root, ProblemKind::Syntax, format!("not valid JSON: {e}"));
                return Layer::default();
            }
        },
        FileFormat::Toml => match toml::from_str::<toml::Table>(text) {
            Ok(table) => toml_to_json(toml::Value::Table(table), &root, p),
            Err(e) => {
                // The toml crate's Display quotes the offending line, which may hold a secret:
                // report only the message and the position.
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

/// Expands `${…}` in every string value of `value`.
fn expand_value(
    value: &mut Value,
    path: &JsonPath,
    vars: &BTreeMap<String, String>,
    p: &mut Problems,
) {
    match value {
        Value::String(s) if s.contains('$') => match expand(s, vars) {
            Ok(expanded) => {
                *s = expanded.text;
                p.note_empty_vars(path, expanded.empty);
            }
            Err((kind, message)) => p.push(path, kind, message),
        },
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                expand_value(v, &path.index(i), vars, p);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                expand_value(v, &path.key(k), vars, p);
            }
        }
        _ => {}
    }
}

/// How deep `${…}` references may nest in defaults (`${A:-${B:-x}}` nests two).
const MAX_NESTING: usize = 8;

/// One string after `${…}` expansion.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Expanded {
    /// The text.
    pub(crate) text: String,
    /// The variables whose reference gave nothing: set to the empty string, or unset (or
    /// empty) with an empty default.
    pub(crate) empty: Vec<String>,
}

/// Expands `${VAR}`, `${VAR:-default}` (the default may itself hold references, up to
/// [`MAX_NESTING`] deep, and is only evaluated when used) and the escape `$${` in one string.
///
/// Every reference is checked, used or not: a malformed one is an `InvalidValue`; unset
/// variables without a default are one `UndefinedVariable` naming them all.
pub(crate) fn expand(
    s: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Expanded, (ProblemKind, String)> {
    let mut expander = Expander {
        vars,
        text: s,
        pos: 0,
        undefined: Vec::new(),
        empty: Vec::new(),
    };
    let mut out = String::with_capacity(s.len());
    expander
        .sequence(0, Some(&mut out))
        .map_err(|message| (ProblemKind::InvalidValue, message))?;
    match expander.undefined.as_slice() {
        [] => Ok(Expanded {
            text: out,
            empty: expander.empty,
        }),
        [name] => Err((
            ProblemKind::UndefinedVariable,
            format!(
                "environment variable `{name}` is not set (use `${{{name}:-default}}` for a default)"
            ),
        )),
        names => Err((
            ProblemKind::UndefinedVariable,
            format!(
                "environment variables {} are not set (use `${{NAME:-default}}` for a default)",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// A recursive-descent reader of one string's references.
struct Expander<'a> {
    vars: &'a BTreeMap<String, String>,
    text: &'a str,
    pos: usize,
    undefined: Vec<String>,
    empty: Vec<String>,
}

impl Expander<'_> {
    /// Reads text up to its end (`depth` 0) or, inside the default of a reference at `depth`,
    /// up to and past the `}` that closes it; writes the expansion to `out` unless it is `None`
    /// (a default that is not used: checked, not evaluated).
    fn sequence(&mut self, depth: usize, mut out: Option<&mut String>) -> Result<(), String> {
        loop {
            let rest = &self.text[self.pos..];
            let stop = if depth == 0 {
                rest.find('$')
            } else {
                rest.find(['$', '}'])
            };
            let Some(i) = stop else {
                if depth > 0 {
                    return Err(Self::unterminated());
                }
                push(&mut out, rest);
                self.pos = self.text.len();
                return Ok(());
            };
            push(&mut out, &rest[..i]);
            let tail = &rest[i..];
            self.pos += i;
            if tail.starts_with('}') {
                self.pos += 1;
                return Ok(());
            } else if tail.starts_with("$${") {
                push(&mut out, "${");
                self.pos += 3;
            } else if tail.starts_with("${") {
                self.pos += 2;
                self.reference(depth + 1, out.as_deref_mut())?;
            } else {
                push(&mut out, "$");
                self.pos += 1;
            }
        }
    }

    /// Reads one reference after its `${`.
    fn reference(&mut self, depth: usize, out: Option<&mut String>) -> Result<(), String> {
        if depth > MAX_NESTING {
            return Err(format!(
                "`${{…}}` references are nested more than {MAX_NESTING} deep"
            ));
        }
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(len);
        if after.is_empty() {
            return Err(Self::unterminated());
        }
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let value = self.vars.get(name).map(String::as_str);
        if valid && after.starts_with('}') {
            self.pos += len + 1;
            if let Some(out) = out {
                match value {
                    Some(v) => {
                        out.push_str(v);
                        if v.is_empty() {
                            self.note_empty(name);
                        }
                    }
                    None if !self.undefined.iter().any(|n| n == name) => {
                        self.undefined.push(name.to_owned());
                    }
                    None => {}
                }
            }
            Ok(())
        } else if valid && after.starts_with(":-") {
            self.pos += len + 2;
            match (out, value) {
                (Some(out), Some(v)) if !v.is_empty() => {
                    out.push_str(v);
                    self.sequence(depth, None)
                }
                (Some(out), _) => {
                    let before = out.len();
                    self.sequence(depth, Some(out))?;
                    if out.len() == before {
                        self.note_empty(name);
                    }
                    Ok(())
                }
                (None, _) => self.sequence(depth, None),
            }
        } else {
            Err(
                "bad variable reference: use `${NAME}` or `${NAME:-default}` (and `$${` for a literal `${`)"
                    .to_owned(),
            )
        }
    }

    fn note_empty(&mut self, name: &str) {
        if !self.empty.iter().any(|n| n == name) {
            self.empty.push(name.to_owned());
        }
    }

    fn unterminated() -> String {
        "unterminated `${` (close it with `}`, or write `$${` for a literal `${`)".to_owned()
    }
}

fn push(out: &mut Option<&mut String>, s: &str) {
    if let Some(out) = out {
        out.push_str(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        collect_vars([("HOME", "/home/me"), ("EMPTY", ""), ("TOKEN", "t0k")])
    }

    #[test]
    fn expansion() {
        for (input, expected) in [
            ("plain", "plain"),
            ("${HOME}/x", "/home/me/x"),
            ("Bearer ${TOKEN}", "Bearer t0k"),
            ("${UNSET:-fallback}", "fallback"),
            ("${EMPTY:-fallback}", "fallback"),
            ("${EMPTY}", ""),
            ("${HOME:-}", "/home/me"),
            ("${UNSET:-}", ""),
            ("$${HOME}", "${HOME}"),
            ("cost: $5", "cost: $5"),
            ("$", "$"),
            ("${A:-x}${TOKEN}$", "xt0k$"),
            ("${UNSET:-${HOME}}", "/home/me"),
            ("${UNSET:-${EMPTY:-${TOKEN}}}/x", "t0k/x"),
            ("${HOME:-${UNSET}}", "/home/me"),
            ("${UNSET:-a${TOKEN}b$c}", "at0kb$c"),
            ("${UNSET:-$${x}}", "${x}"),
            ("${UNSET:-{x}}", "{x}"),
            ("}{$}", "}{$}"),
        ] {
            assert_eq!(expand(input, &vars()).unwrap().text, expected, "{input}");
        }
        for (input, kind) in [
            ("${UNSET}", ProblemKind::UndefinedVariable),
            ("${HOME", ProblemKind::InvalidValue),
            ("${}", ProblemKind::InvalidValue),
            ("${1X}", ProblemKind::InvalidValue),
            ("${A-b}", ProblemKind::InvalidValue),
            ("${A:=b}", ProblemKind::InvalidValue),
            ("${", ProblemKind::InvalidValue),
            ("${UNSET:-${HOME}", ProblemKind::InvalidValue),
            ("${UNSET:-x", ProblemKind::InvalidValue),
            ("${HOME:-${}}", ProblemKind::InvalidValue),
            ("${HOME:-${1BAD:-x}}", ProblemKind::InvalidValue),
            ("${UNSET:-${ALSO_UNSET}}", ProblemKind::UndefinedVariable),
            ("${HOME:-${UNSET}} ${X", ProblemKind::InvalidValue),
        ] {
            assert_eq!(expand(input, &vars()).unwrap_err().0, kind, "{input}");
        }
        let nine = format!("{}x{}", "${A:-".repeat(9), "}".repeat(9));
        assert_eq!(
            expand(&nine, &vars()).unwrap_err().0,
            ProblemKind::InvalidValue
        );
        let eight = format!("{}x{}", "${A:-".repeat(8), "}".repeat(8));
        assert_eq!(expand(&eight, &vars()).unwrap().text, "x");
    }

    #[test]
    fn every_unset_variable_is_named_once() {
        let (kind, message) = expand("${A}/${B:-${C}}/${A}/${HOME:-${D}}", &vars()).unwrap_err();
        assert_eq!(kind, ProblemKind::UndefinedVariable);
        assert!(message.contains("`A`, `C` are not set"), "{message}");
        assert!(
            !message.contains("`D`"),
            "an unused default is not evaluated: {message}"
        );
    }

    #[test]
    fn references_that_give_nothing_are_noted() {
        let empty = |s: &str| expand(s, &vars()).unwrap().empty;
        assert_eq!(empty("Bearer ${EMPTY}"), ["EMPTY"]);
        assert_eq!(empty("${UNSET:-${EMPTY}}"), ["EMPTY", "UNSET"]);
        assert_eq!(empty("${UNSET:-}${EMPTY}${EMPTY}"), ["UNSET", "EMPTY"]);
        assert!(empty("${EMPTY:-x}${HOME}${UNSET:-${HOME}}").is_empty());
    }

    proptest::proptest! {
        /// `$${` escapes every `${`: any text, escaped, expands back to itself.
        #[test]
        fn escaped_text_expands_to_itself(text in "[$}{a:_-]{0,40}") {
            let escaped = text.replace("${", "$${");
            proptest::prop_assert_eq!(expand(&escaped, &vars()).unwrap().text, text);
        }

        /// A chain of defaults `${V1:-${V2:-…:-last}}` gives the first variable set to a
        /// non-empty value, else the last default.
        #[test]
        fn nested_defaults_give_the_first_non_empty_variable(
            chain in proptest::collection::vec(
                proptest::option::of(proptest::option::of("[a-z/]{1,4}")), 1..=MAX_NESTING),
            last in "[a-z]{0,3}",
        ) {
            let mut vars = BTreeMap::new();
            let mut template = String::new();
            for (i, value) in chain.iter().enumerate() {
                template.push_str(&format!("${{V{i}:-"));
                match value {
                    Some(Some(v)) => { vars.insert(format!("V{i}"), v.clone()); }
                    Some(None) => { vars.insert(format!("V{i}"), String::new()); }
                    None => {}
                }
            }
            template.push_str(&last);
            template.push_str(&"}".repeat(chain.len()));
            let expected = chain.iter().flatten().flatten().next().cloned().unwrap_or(last);
            proptest::prop_assert_eq!(expand(&template, &vars).unwrap().text, expected);
        }
    }

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
