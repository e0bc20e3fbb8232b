//! The ranked search index behind `mcp_search_tools`.
//!
//! A fielded BM25 index (BM25F): every tool is one document with five fields — name words,
//! server name, description, parameter names and parameter texts (descriptions, titles, enum
//! values) — each with its own weight and length normalisation. On top of the BM25F score:
//!
//! - **query coverage**: a document's score is multiplied by `1 + coverage_weight × share`, where
//!   `share` is the part of the query's IDF mass it matches, so documents matching more of the
//!   query win over documents matching one word many times;
//! - **phrases**: adjacent query words that are adjacent in the name or description as well add
//!   a small IDF-weighted bonus;
//! - **abbreviations**: a document word of four letters or more that starts a query word
//!   (`calc` in `calculate`, `hypot` in `hypotenuse`) matches with half weight.
//!
//! A query that contains a tool's full name (`math.factorial`) gets an exact-name boost.
//! Ties are broken by the tool's id, never by insertion order, so results do not depend on the
//! order servers connected in.
//!
//! The index updates per server: [`SearchIndex::replace_server`] swaps one server's documents
//! without touching the others.
//!
//! The work of one search is bounded whatever the query: only its first [`MAX_QUERY_CHARS`]
//! characters and its first [`MAX_QUERY_TERMS`] distinct words are read (the catalog refuses a
//! longer query outright, so the model learns the limit).
//!
//! With the `embed` feature, [`HybridIndex`] blends this ranking with the cosine similarity of
//! sentence embeddings from any [`Embedder`] (back ends live outside this crate), caching tool
//! vectors by (model, document hash) in an [`EmbeddingCache`]; an embedder that fails, stalls
//! or answers nonsense gives the lexical ranking with a [`SearchWarning`].

#[cfg(feature = "embed")]
mod cache;
#[cfg(feature = "embed")]
mod embed;
#[cfg(feature = "embed")]
mod hybrid;
mod index;
mod text;

#[cfg(feature = "embed")]
pub use cache::{
    CacheLoad, EmbeddingCache, MAX_CACHE_FILE_BYTES, MAX_CACHED_VECTORS, STALE_TEMP_AGE,
};
#[cfg(feature = "embed")]
pub use embed::{
    EmbedError, EmbedKind, Embedder, MAX_DOCUMENT_CHARS, MAX_EMBEDDING_DIMENSION,
    MAX_PARAMETER_DOC_CHARS, embedding_text,
};
#[cfg(feature = "embed")]
pub use hybrid::{Fusion, HybridConfig, HybridIndex, HybridResults, SearchWarning};
pub use index::{Hit, RankingConfig, SearchIndex, SearchResults, ToolText};

/// The longest query read, in characters; the rest is ignored (and `mcp_search_tools` refuses a
/// longer query).
pub const MAX_QUERY_CHARS: usize = 1024;

/// The most distinct words of a query that take part in the ranking; later new words are
/// ignored.
pub const MAX_QUERY_TERMS: usize = 32;

/// The lower-cased words of `text`, split the way the index splits names.
pub(crate) fn split_words_lower(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    text::split_words(text, |w| out.push(w.to_owned()));
    out
}
