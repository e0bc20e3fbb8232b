//! The embedding side of hybrid search: the [`Embedder`] trait, the text of a tool that is
//! embedded, and what can go wrong with an embedder's answer.

use std::fmt;

use async_trait::async_trait;

use super::ToolText;

/// The longest text handed to an embedder for one tool, in characters; the rest is cut.
///
/// Sentence-embedding models read a few hundred tokens at most, so a longer text costs time and
/// changes nothing.
pub const MAX_DOCUMENT_CHARS: usize = 2048;

/// A sentence-embedding model: texts in, one vector of [`dimension`](Self::dimension) numbers
/// per text out, in the same order.
///
/// Implementations are back ends (a local model, an OpenAI-compatible `/v1/embeddings`
/// endpoint); the catalog only ranks with what they return and never trusts it: a vector of the
/// wrong length or with a NaN is refused, an error or a stall falls back to lexical ranking.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug {
    /// What identifies the model's vectors, e.g. `all-MiniLM-L6-v2`; cached vectors are keyed
    /// by it, so two models never share a cache entry.
    fn model_id(&self) -> &str;

    /// The length of every vector the model returns.
    fn dimension(&self) -> usize;

    /// The most texts sent in one [`embed`](Self::embed) call.
    fn max_batch(&self) -> usize {
        32
    }

    /// Embeds `texts`, one vector per text in their order. `kind` tells queries from tool
    /// documents, for models that embed them differently (e5's `query:` / `passage:`).
    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// What the texts of one [`Embedder::embed`] call are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbedKind {
    /// A user's search query.
    Query,
    /// A tool's text ([`embedding_text`]).
    Document,
}

/// Why an embedder gave no usable vectors.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The back end failed (HTTP, model, configuration); the text says why.
    #[error("{0}")]
    Backend(String),
    /// No answer within the bound.
    #[error("no answer within {0} ms")]
    Timeout(u128),
    /// An answer of the wrong shape.
    #[error("{0}")]
    Invalid(String),
}

impl EmbedError {
    /// A back-end failure described by `message`.
    pub fn backend(message: impl Into<String>) -> Self {
        Self::Backend(message.into())
    }
}

/// Checks an embedder's answer for `expected` texts: as many vectors, each of `dimension`
/// finite numbers and not all zero. Returns them scaled to unit length.
pub(crate) fn check_vectors(
    vectors: Vec<Vec<f32>>,
    expected: usize,
    dimension: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if dimension > MAX_EMBEDDING_DIMENSION {
        return Err(EmbedError::Invalid(format!(
            "the model's dimension {dimension} is above the {MAX_EMBEDDING_DIMENSION} a search \
             index takes"
        )));
    }
    if vectors.len() != expected {
        return Err(EmbedError::Invalid(format!(
            "{} vectors for {expected} texts",
            vectors.len()
        )));
    }
    vectors
        .into_iter()
        .enumerate()
        .map(|(i, mut v)| {
            if v.len() != dimension {
                return Err(EmbedError::Invalid(format!(
                    "vector {i} has {} numbers, the model's dimension is {dimension}",
                    v.len()
                )));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(EmbedError::Invalid(format!(
                    "vector {i} holds a NaN or an infinity"
                )));
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm == 0.0 || !norm.is_finite() {
                return Err(EmbedError::Invalid(format!("vector {i} has no length")));
            }
            v.iter_mut().for_each(|x| *x /= norm);
            Ok(v)
        })
        .collect()
}

/// The largest vector dimension hybrid search takes: 16 times that of the largest models in
/// use (OpenAI's 3,072), and small enough that the 16-bit cosine sums of the ranking cannot
/// overflow. An embedder of a larger dimension gets lexical ranking with a warning.
pub const MAX_EMBEDDING_DIMENSION: usize = 65_536;

/// The longest description of one parameter put in a tool's embedded text, in characters.
pub const MAX_PARAMETER_DOC_CHARS: usize = 200;

/// The text of a tool that is embedded: its name as words, its title and description, and its
/// parameters' names as words, each required parameter with its description
/// (`name: description`, the description's first [`MAX_PARAMETER_DOC_CHARS`] characters without
/// control characters), cut to [`MAX_DOCUMENT_CHARS`].
///
/// The required parameters' descriptions say what a request is about in words the tool's own
/// description often lacks ("the city and state", "the stock's ticker"); optional ones mostly
/// describe formats and defaults. On the bfcl queries with all-MiniLM-L6-v2 (z-scores over the
/// top 100, weight 0.5; chosen on the even queries, confirmed on the odd ones), hybrid hit@5 /
/// MRR went from .909 / .814 and .910 / .815 (names only) to .923 / .822 and .918 / .811
/// (even / odd); every parameter's description gave .919 / .815 and .914 / .809.
///
/// ```
/// use mcp_catalog::search::{ToolText, embedding_text};
///
/// let schema = serde_json::json!({
///     "properties": {
///         "repo_name": {"type": "string", "description": "The repository"},
///         "title": {"type": "string", "description": "Plain text, at most 256 characters"},
///     },
///     "required": ["repo_name"],
/// });
/// let text = ToolText::new("gh__create_issue", "gh", "create_issue")
///     .with_description(Some("Open a new issue"))
///     .with_input_schema(schema.as_object());
/// assert_eq!(
///     embedding_text(&text),
///     "create issue. Open a new issue. Parameters: repo name: The repository; title"
/// );
/// ```
pub fn embedding_text(tool: &ToolText<'_>) -> String {
    let mut out = super::split_words_lower(tool.name).join(" ");
    for extra in [tool.title, tool.description].into_iter().flatten() {
        let extra = extra.trim();
        if !extra.is_empty() {
            out.push_str(". ");
            out.push_str(extra);
        }
    }
    let required = |name: &str| {
        tool.input_schema
            .and_then(|s| s.get("required"))
            .and_then(|r| r.as_array())
            .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(name)))
    };
    if let Some(props) = tool
        .input_schema
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.as_object())
        && !props.is_empty()
    {
        out.push_str(". Parameters: ");
        for (i, (name, schema)) in props.iter().enumerate() {
            if out.len() >= MAX_DOCUMENT_CHARS * 4 {
                break;
            }
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str(&super::split_words_lower(name).join(" "));
            let doc = Some(schema)
                .filter(|_| required(name))
                .and_then(|s| s.get("description"))
                .and_then(|d| d.as_str())
                .map(parameter_doc)
                .unwrap_or_default();
            if !doc.is_empty() {
                out.push_str(": ");
                out.push_str(&doc);
            }
        }
    }
    cut_chars(&out, MAX_DOCUMENT_CHARS).to_owned()
}

/// A parameter's description for the embedded text: its first [`MAX_PARAMETER_DOC_CHARS`]
/// characters, control characters and runs of white space turned into one space.
fn parameter_doc(text: &str) -> String {
    let mut out = String::new();
    for word in text
        .chars()
        .take(MAX_PARAMETER_DOC_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The first `max` characters of `text`.
pub(crate) fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}
