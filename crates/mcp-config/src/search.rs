//! The `[search]` table: hybrid tool search, the lexical ranking blended with sentence
//! embeddings from a local model or an OpenAI-compatible `/v1/embeddings` endpoint.
//!
//! Pure data and validation: the only I/O is looking whether a local model folder holds the
//! files a model needs (nothing is read from them), so a wrong path is a configuration error
//! naming the path and the missing file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::ProblemKind;
use crate::parse::read::non_blank;
use crate::parse::{expect_object, field, reject_unknown, shown, type_name};
use crate::path::{JsonPath, Problems};

/// The keys of the `[search]` table.
const SEARCH_FIELDS: &[&str] = &["embedder", "weight", "cache_dir", "timeout_ms"];
/// The keys of `embedder.openai`.
const OPENAI_FIELDS: &[&str] = &["base_url", "model", "api_key_env"];

/// The files a sentence-transformers folder must hold (`1_Pooling/config.json` is optional:
/// mean pooling without it).
pub const LOCAL_MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// The longest `timeout_ms`: ten minutes.
const MAX_TIMEOUT_MS: u64 = 600_000;

/// The operator's `[search]`: which embedder ranks `mcp_search_tools` and `tools search`
/// beside the words, and how much it counts. Without the table, search is lexical.
///
/// ```
/// use mcp_config::{Config, EmbedderConfig, FileFormat};
///
/// let config = Config::parse(
///     r#"
/// [search]
/// embedder = { openai = { base_url = "http://localhost:8000/v1", model = "e5-small", api_key_env = "EMBED_KEY" } }
/// weight = 0.5
/// timeout_ms = 1500
/// "#,
///     FileFormat::Toml,
///     std::iter::empty::<(&str, &str)>(),
/// )?;
/// let search = config.search.expect("configured");
/// assert!(matches!(search.embedder, EmbedderConfig::OpenAi { ref model, .. } if model == "e5-small"));
/// assert_eq!(search.weight, Some(0.5));
/// assert_eq!(search.timeout, Some(std::time::Duration::from_millis(1500)));
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SearchConfig {
    /// Where the vectors come from.
    pub embedder: EmbedderConfig,
    /// The share of the semantic score in the blend, in `[0, 1]` (the catalog's default,
    /// 0.5, when unset); 0 ranks by words alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<f32>,
    /// A directory for the tools' vectors (one file per model), so a later run embeds only
    /// what changed; in memory only when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<PathBuf>,
    /// The longest wait of one search for the embedder (`timeout_ms`); past it the search is
    /// lexical, with a warning. The catalog's default (2 s) when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

impl SearchConfig {
    /// Hybrid search with `embedder` and the defaults.
    pub fn new(embedder: EmbedderConfig) -> Self {
        Self {
            embedder,
            weight: None,
            cache_dir: None,
            timeout: None,
        }
    }

    /// Sets the blend weight.
    #[must_use]
    pub fn with_weight(mut self, weight: f32) -> Self {
        self.weight = Some(weight);
        self
    }

    /// Sets the cache directory.
    #[must_use]
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Sets the wait bound.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// The embedder of `[search]`: `embedder = { local = "PATH" }` or
/// `embedder = { openai = { base_url = "…", model = "…", api_key_env = "VAR" } }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EmbedderConfig {
    /// A sentence-transformers folder run in-process (the `embed-local` feature of the
    /// library and the command line). A relative path is relative to the configuration file.
    Local {
        /// The folder.
        path: PathBuf,
    },
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    OpenAi {
        /// The endpoint's base URL, up to and including its version (`…/v1`).
        base_url: String,
        /// The model's name on it.
        model: String,
        /// The environment variable holding the API key (never the key); none sends no key.
        #[serde(skip_serializing_if = "Option::is_none")]
        api_key_env: Option<String>,
    },
}

/// Reads a `[search]` table at `path`; a relative local model path is taken from `base`.
pub(crate) fn parse_search(
    value: &Value,
    path: &JsonPath,
    base: Option<&Path>,
    p: &mut Problems,
) -> Option<SearchConfig> {
    let obj = expect_object(value, path, "`search`", p)?;
    reject_unknown(obj, SEARCH_FIELDS, path, p);
    let weight = field(obj, "weight").and_then(|v| {
        let at = path.key("weight");
        match v.as_f64() {
            Some(w) if (0.0..=1.0).contains(&w) => Some(w as f32),
            Some(w) => {
                p.push(
                    &at,
                    ProblemKind::InvalidValue,
                    format!("the weight must be between 0 and 1, not {w}"),
                );
                None
            }
            None => {
                p.push(
                    &at,
                    ProblemKind::WrongType,
                    format!("expected a number, found {}", type_name(v)),
                );
                None
            }
        }
    });
    let cache_dir = field(obj, "cache_dir")
        .and_then(|v| non_blank(v, &path.key("cache_dir"), "the cache directory", p))
        .map(|d| relative_to(base, &d));
    let timeout = field(obj, "timeout_ms").and_then(|v| {
        let at = path.key("timeout_ms");
        match v.as_u64() {
            Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Some(Duration::from_millis(ms)),
            _ => {
                p.push(
                    &at,
                    ProblemKind::InvalidTimeout,
                    format!("expected a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}"),
                );
                None
            }
        }
    });
    let embedder = match field(obj, "embedder") {
        Some(v) => embedder(v, &path.key("embedder"), base, p)?,
        None => {
            p.push(
                &path.key("embedder"),
                ProblemKind::MissingField,
                "`[search]` needs an `embedder`: `{ local = \"PATH\" }` or \
                 `{ openai = { base_url, model, api_key_env } }`",
            );
            return None;
        }
    };
    Some(SearchConfig {
        embedder,
        weight,
        cache_dir,
        timeout,
    })
}

fn embedder(
    value: &Value,
    path: &JsonPath,
    base: Option<&Path>,
    p: &mut Problems,
) -> Option<EmbedderConfig> {
    let obj = expect_object(value, path, "`embedder`", p)?;
    reject_unknown(obj, &["local", "openai"], path, p);
    match (field(obj, "local"), field(obj, "openai")) {
        (Some(_), Some(_)) => {
            p.push(
                path,
                ProblemKind::ConflictingFields,
                "give one embedder: `local` or `openai`, not both",
            );
            None
        }
        (Some(v), None) => {
            let at = path.key("local");
            let dir = relative_to(base, &non_blank(v, &at, "the model path", p)?);
            check_model_dir(&dir, &at, p).then_some(EmbedderConfig::Local { path: dir })
        }
        (None, Some(v)) => openai(v, &path.key("openai"), p),
        (None, None) => {
            if obj.is_empty() {
                p.push(
                    path,
                    ProblemKind::MissingField,
                    "the embedder is empty: `{ local = \"PATH\" }` or `{ openai = { … } }`",
                );
            }
            None
        }
    }
}

/// True when `dir` is a folder holding every file of [`LOCAL_MODEL_FILES`]; otherwise one
/// problem names the folder and the first missing file.
fn check_model_dir(dir: &Path, path: &JsonPath, p: &mut Problems) -> bool {
    let shown_dir = shown_path(dir);
    if !dir.is_dir() {
        p.push(
            path,
            ProblemKind::InvalidValue,
            format!("the model folder {shown_dir} does not exist or is not a folder"),
        );
        return false;
    }
    for file in LOCAL_MODEL_FILES {
        if !dir.join(file).is_file() {
            p.push(
                path,
                ProblemKind::InvalidValue,
                format!(
                    "the model folder {shown_dir} is incomplete: `{file}` is missing (a \
                     sentence-transformers folder holds {})",
                    LOCAL_MODEL_FILES.map(|f| format!("`{f}`")).join(", ")
                ),
            );
            return false;
        }
    }
    true
}

/// A folder path for messages: whole (the folder's own name is what tells it apart), control
/// characters replaced, and only a path longer than 512 characters cut — in the middle, so its
/// start and its last part stay.
fn shown_path(dir: &Path) -> String {
    const MAX: usize = 512;
    let text: Vec<char> = dir
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.len() <= MAX {
        return format!("`{}`", text.iter().collect::<String>());
    }
    let head: String = text[..MAX / 2].iter().collect();
    let tail: String = text[text.len() - MAX / 2..].iter().collect();
    format!("`{head}…{tail}`")
}

fn openai(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<EmbedderConfig> {
    let obj = expect_object(value, path, "`openai`", p)?;
    reject_unknown(obj, OPENAI_FIELDS, path, p);
    let base_url = match field(obj, "base_url") {
        Some(v) => crate::parse::read::parse_base_url(v, &path.key("base_url"), p).filter(|url| {
            // The embeddings path is appended to the base URL: a query or fragment would end
            // up before it.
            let plain = !url.contains(['?', '#']);
            if !plain {
                p.push(
                    &path.key("base_url"),
                    ProblemKind::InvalidUrl,
                    "the base URL must not have a query or fragment (`/embeddings` is appended to it)",
                );
            }
            plain
        }),
        None => {
            p.push(
                &path.key("base_url"),
                ProblemKind::MissingField,
                "the endpoint's `base_url` is missing (e.g. `http://localhost:8000/v1`)",
            );
            None
        }
    };
    let model = match field(obj, "model") {
        Some(v) => non_blank(v, &path.key("model"), "the model name", p),
        None => {
            p.push(
                &path.key("model"),
                ProblemKind::MissingField,
                "the embedding `model` is missing",
            );
            None
        }
    };
    let api_key_env = field(obj, "api_key_env").and_then(|v| {
        let at = path.key("api_key_env");
        let name = non_blank(v, &at, "the variable name", p)?;
        if name.contains(['=', '\0', ' ']) {
            p.push(
                &at,
                ProblemKind::InvalidValue,
                format!("{} is not a valid environment variable name", shown(&name)),
            );
            return None;
        }
        Some(name)
    });
    Some(EmbedderConfig::OpenAi {
        base_url: base_url?,
        model: model?,
        api_key_env,
    })
}

fn relative_to(base: Option<&Path>, path: &str) -> PathBuf {
    let path = PathBuf::from(path);
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    }
}

#[cfg(test)]
mod tests;
