//! Tables of a config document that this crate keeps raw for the application to read.

use std::fmt;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::ProblemKind;
use crate::parse::read::{did_you_mean, shown};
use crate::path::{JsonPath, Problems};

/// A table this crate does not read itself (`[serve]`, `[model]`): the object each source
/// gave, in order of precedence (file first, then the environment), each with its path and
/// file, for the application to read with the functions of [`read`](crate::read).
///
/// A later source wins key by key: [`read`](Self::read) reads a key in every source that sets
/// it, so the problems of all of them surface, and keeps the last one's value. `Debug` shows
/// the keys and where they came from, never a value.
///
/// ```
/// use std::time::Duration;
/// use mcp_config::read::{Problems, parse_timeout};
/// use mcp_config::{Config, FileFormat};
///
/// let (config, timeout) = Config::parse_with(
///     "[model]\ntimeout_seconds = 5\n",
///     FileFormat::Toml,
///     std::iter::empty::<(&str, &str)>(),
///     |config: &Config, p: &mut Problems| {
///         config.model.reject_unknown(&["timeout_seconds"], p);
///         config.model.read("timeout_seconds", p, parse_timeout)
///     },
/// )?;
/// assert_eq!(timeout, Some(Duration::from_secs(5)));
/// assert!(format!("{:?}", config.model).contains("timeout_seconds"));
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct Table {
    layers: Vec<TableLayer>,
}

/// One source's object.
#[derive(Clone, PartialEq)]
pub(crate) struct TableLayer {
    /// Where the object is: `serve`, or `MCP_AGENT__SERVE`.
    pub(crate) path: JsonPath,
    /// The file it is in (none for the environment).
    pub(crate) file: Option<PathBuf>,
    pub(crate) object: Map<String, Value>,
}

impl TableLayer {
    /// Reads the table `name` at `path` of a source: an object, or a problem.
    pub(crate) fn read(
        value: &Value,
        path: JsonPath,
        file: Option<PathBuf>,
        name: &str,
        p: &mut Problems,
    ) -> Option<Self> {
        let object = crate::parse::read::expect_object(value, &path, &format!("`{name}`"), p)?;
        Some(Self {
            path,
            file,
            object: object.clone(),
        })
    }
}

impl Table {
    /// Adds a later source's object.
    pub(crate) fn push(&mut self, layer: TableLayer) {
        self.layers.push(layer);
    }

    /// True when no source sets the table.
    pub fn is_empty(&self) -> bool {
        self.layers.iter().all(|l| l.object.is_empty())
    }

    /// True when some source sets `key` (to anything, `null` included).
    pub fn contains(&self, key: &str) -> bool {
        self.layers.iter().any(|l| l.object.contains_key(key))
    }

    /// Reads `key` with `read` in every source that sets it (`null` counts as unset), each at
    /// its path and in its file, and returns what the last one gave.
    pub fn read<T>(
        &self,
        key: &str,
        p: &mut Problems,
        mut read: impl FnMut(&Value, &JsonPath, &mut Problems) -> Option<T>,
    ) -> Option<T> {
        let mut last = None;
        for layer in &self.layers {
            if let Some(value) = crate::parse::read::field(&layer.object, key) {
                let at = layer.path.key(key);
                last = p.within_file(layer.file.as_deref(), |p| read(value, &at, p));
            }
        }
        last
    }

    /// Pushes a problem at `key` in every source that sets it.
    pub fn push_at(&self, key: &str, p: &mut Problems, kind: ProblemKind, message: &str) {
        for layer in self.layers.iter().filter(|l| l.object.contains_key(key)) {
            p.within_file(layer.file.as_deref(), |p| {
                p.push(&layer.path.key(key), kind, message);
            });
        }
    }

    /// Reports every key of every source that is not in `allowed`, with the closest allowed
    /// name.
    pub fn reject_unknown(&self, allowed: &[&str], p: &mut Problems) {
        for layer in &self.layers {
            for key in layer.object.keys() {
                if !allowed.contains(&key.as_str()) {
                    p.within_file(layer.file.as_deref(), |p| {
                        p.push(
                            &layer.path.key(key),
                            ProblemKind::UnknownField,
                            format!(
                                "unknown field {}{}",
                                shown(key),
                                did_you_mean(key, allowed.iter().copied())
                            ),
                        );
                    });
                }
            }
        }
    }

    /// The table as the sources give it together: each key with the last value set (`null`
    /// counting as unset).
    pub fn merged(&self) -> Map<String, Value> {
        let mut merged = Map::new();
        for layer in &self.layers {
            for (key, value) in layer.object.iter().filter(|(_, v)| !v.is_null()) {
                merged.insert(key.clone(), value.clone());
            }
        }
        merged
    }
}

impl fmt::Debug for TableLayer {
    /// The path and keys, never a value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableLayer")
            .field("path", &self.path)
            .field("file", &self.file)
            .field("keys", &self.object.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for layer in &self.layers {
            for key in layer.object.keys() {
                list.entry(&format_args!("{}", layer.path.key(key)));
            }
        }
        list.finish()
    }
}
