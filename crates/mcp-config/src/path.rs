//! JSON paths for problems and the problem collector.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::{Problem, ProblemKind};

/// A location in a document: `servers[2].command`, `mcpServers.git.url`,
/// `MCP_AGENT__SERVERS[0].name`.
///
/// ```
/// use mcp_config::read::JsonPath;
///
/// let path = JsonPath::root().key("serve").key("allowed_hosts").index(0);
/// assert_eq!(path.as_str(), "serve.allowed_hosts[0]");
/// assert_eq!(JsonPath::raw("MCP_AGENT__SERVE").key("http").to_string(), "MCP_AGENT__SERVE.http");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonPath(String);

impl JsonPath {
    /// The root of a document.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// A path starting with a label taken as is (an environment variable's name).
    pub fn raw(label: impl Into<String>) -> Self {
        Self(label.into())
    }

    /// The path of a field of this object. Keys that are not plain identifiers are quoted:
    /// `headers["X-Api.Key"]`.
    pub fn key(&self, key: &str) -> Self {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let mut s = self.0.clone();
        if plain {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(key);
        } else {
            s.push('[');
            s.push_str(&serde_json::Value::from(key).to_string());
            s.push(']');
        }
        Self(s)
    }

    /// The path of an element of this array.
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// The path as written in problems.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Collects problems; every check pushes here and goes on, so all problems surface at once.
///
/// It also remembers, per string value, the `${VAR}` references that expanded to nothing, so a
/// check that finds the value empty (a bearer token, a header) can name the variables.
///
/// ```
/// use mcp_config::ProblemKind;
/// use mcp_config::read::{JsonPath, Problems};
///
/// let mut p = Problems::new();
/// p.push(&JsonPath::root().key("serve").key("http"), ProblemKind::InvalidValue, "not an address");
/// assert_eq!(p.len(), 1);
/// let err = p.finish(()).unwrap_err();
/// assert_eq!(err.problems()[0].path, "serve.http");
/// ```
#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<Problem>,
    file: Option<PathBuf>,
    empty_vars: BTreeMap<String, Vec<String>>,
    expanded: BTreeMap<String, Vec<String>>,
}

impl Problems {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// A collector whose problems are in `file`.
    pub(crate) fn in_file(file: PathBuf) -> Self {
        Self {
            file: Some(file),
            ..Self::default()
        }
    }

    /// Adds a problem at `path`.
    pub fn push(&mut self, path: &JsonPath, kind: ProblemKind, message: impl Into<String>) {
        self.push_problem(Problem::new(path.as_str(), kind, message));
    }

    /// [`push`](Self::push) with the error that found the problem, kept typed.
    pub fn push_caused(
        &mut self,
        path: &JsonPath,
        kind: ProblemKind,
        message: impl Into<String>,
        cause: impl Into<crate::BoxError>,
    ) {
        self.push_problem(Problem::new(path.as_str(), kind, message).with_cause(cause));
    }

    /// Runs `read` with the problems it pushes attributed to `file` (`None`: to no file).
    pub(crate) fn within_file<T>(
        &mut self,
        file: Option<&Path>,
        read: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let outer = std::mem::replace(&mut self.file, file.map(Path::to_path_buf));
        let value = read(self);
        self.file = outer;
        value
    }

    /// Adds `p`, in this collector's file unless it names its own.
    pub(crate) fn push_problem(&mut self, mut p: Problem) {
        if p.file.is_none() {
            p.file = self.file.clone();
        }
        self.list.push(p);
    }

    /// How many problems were found.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Adds every problem `other` found.
    pub fn extend(&mut self, other: Problems) {
        self.list.extend(other.list);
        self.empty_vars.extend(other.empty_vars);
        self.expanded.extend(other.expanded);
    }

    /// Notes that `${…}` references put the variables' `values` into the string at `path`.
    pub(crate) fn note_expanded(&mut self, path: &JsonPath, values: Vec<String>) {
        if !values.is_empty() {
            self.expanded.insert(path.as_str().to_owned(), values);
        }
    }

    /// The variables' values that `${…}` references put into the strings at `path` and
    /// beneath it (`args` covers `args[0]`, `headers` covers `headers.X-Key`).
    pub(crate) fn expanded_under(&self, path: &JsonPath) -> Vec<String> {
        let prefix = path.as_str();
        self.expanded
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| {
                k.len() == prefix.len() || matches!(k.as_bytes()[prefix.len()], b'.' | b'[')
            })
            .flat_map(|(_, values)| values.iter().cloned())
            .collect()
    }

    /// Notes that the string at `path` had `${…}` references to `names` that gave nothing
    /// (variables set to the empty string, or unset with an empty default).
    pub(crate) fn note_empty_vars(&mut self, path: &JsonPath, names: Vec<String>) {
        if !names.is_empty() {
            self.empty_vars.insert(path.as_str().to_owned(), names);
        }
    }

    /// `` (variable `A` is empty or unset)`` for the string at `path`, or nothing.
    pub(crate) fn empty_vars_note(&self, path: &JsonPath) -> String {
        match self.empty_vars.get(path.as_str()).map(Vec::as_slice) {
            None | Some([]) => String::new(),
            Some([one]) => format!(" (variable `{one}` is empty or unset)"),
            Some(names) => format!(
                " (variables {} are empty or unset)",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// True when the string at `path` had `${…}` references that gave nothing.
    pub(crate) fn has_empty_vars(&self, path: &JsonPath) -> bool {
        self.empty_vars.contains_key(path.as_str())
    }

    /// The problems found, in order.
    pub fn into_vec(self) -> Vec<Problem> {
        self.list
    }

    /// `Ok(value)` when nothing was found, else every problem.
    pub fn finish<T>(self, value: T) -> Result<T, crate::ConfigError> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(crate::ConfigError::invalid(self.list))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_json_paths() {
        let p = JsonPath::root().key("servers").index(2).key("command");
        assert_eq!(p.as_str(), "servers[2].command");
        let p = JsonPath::root()
            .key("mcpServers")
            .key("my server")
            .key("url");
        assert_eq!(p.as_str(), r#"mcpServers["my server"].url"#);
        let p = JsonPath::raw("MCP_AGENT__SERVERS").index(0).key("name");
        assert_eq!(p.as_str(), "MCP_AGENT__SERVERS[0].name");
    }
}
