//! Hybrid ranking: the BM25F ranking blended with the cosine similarity of sentence
//! embeddings.
//!
//! Both scores are brought to `[0, 1]` per query — the lexical one divided by the best lexical
//! score, the cosine min-max scaled over the tools searched — and blended as
//! `(1 − w) × lexical + w × semantic` with `w` = [`HybridConfig::semantic_weight`]. A tool no
//! query word matches can still rank by meaning alone. The weight was measured with
//! `cargo xtask search-eval --embedder …` (see `docs/ARCHITECTURE.md`).
//!
//! The embedder is never trusted to answer: every call is bounded in time, every answer
//! checked (count, dimension, NaN), and whatever goes wrong gives the lexical ranking with a
//! [`SearchWarning`] (also logged as a `tracing` warning), never a failed search.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::cache::{CacheLoad, EmbeddingCache, document_hash};
use super::embed::{EmbedError, EmbedKind, Embedder, check_vectors, cut_chars, embedding_text};
use super::{Hit, MAX_QUERY_CHARS, SearchIndex, SearchResults, ToolText};

/// The constants of hybrid ranking.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HybridConfig {
    /// The share of the semantic score in the blend, in `[0, 1]`; 0 is lexical ranking.
    pub semantic_weight: f32,
    /// The longest wait for a query's vector; past it the search is lexical.
    pub query_timeout: Duration,
    /// The longest wait for one batch of tool vectors.
    pub batch_timeout: Duration,
}

impl Default for HybridConfig {
    fn default() -> Self {
        Self {
            semantic_weight: 0.4,
            query_timeout: Duration::from_secs(2),
            batch_timeout: Duration::from_secs(60),
        }
    }
}

/// Why a search or an update fell back, or what it noticed: shown to the operator, never
/// failing the search.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchWarning {
    /// What happened, in words.
    pub message: String,
}

impl SearchWarning {
    fn new(message: String) -> Self {
        tracing::warn!(target: "mcp_catalog::search", "{message}");
        Self { message }
    }
}

impl std::fmt::Display for SearchWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The answer of a hybrid search: the ranking, and a warning when it is lexical only because
/// the embedder failed.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct HybridResults {
    /// The ranked tools.
    pub results: SearchResults,
    /// Set when the ranking fell back to lexical.
    pub warning: Option<SearchWarning>,
}

/// The vectors of a catalog's tools, beside its [`SearchIndex`], and the embedder for queries.
///
/// ```
/// # use std::sync::Arc;
/// use async_trait::async_trait;
/// use mcp_catalog::search::{EmbedError, EmbedKind, Embedder, EmbeddingCache, HybridConfig,
///     HybridIndex, SearchIndex, ToolText};
///
/// /// Two made-up dimensions: "money" and "weather".
/// #[derive(Debug)]
/// struct Toy;
/// #[async_trait]
/// impl Embedder for Toy {
///     fn model_id(&self) -> &str { "toy" }
///     fn dimension(&self) -> usize { 2 }
///     async fn embed(&self, texts: &[String], _: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
///         Ok(texts.iter().map(|t| {
///             let money = ["pay", "invoice", "bill"].iter().any(|w| t.contains(w));
///             if money { vec![1.0, 0.1] } else { vec![0.1, 1.0] }
///         }).collect())
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let tools = [
///     ToolText::new("s__create_invoice", "s", "create_invoice"),
///     ToolText::new("s__forecast", "s", "forecast"),
/// ];
/// let mut index = SearchIndex::default();
/// index.replace_server("s", tools);
/// let mut hybrid = HybridIndex::new(Arc::new(Toy), Arc::new(EmbeddingCache::in_memory()),
///     HybridConfig::default());
/// assert!(hybrid.set_tools(tools).await.is_empty());
/// let found = hybrid.search(&index, "pay the bill", None, 5).await;
/// assert_eq!(&*found.results.hits[0].id, "s__create_invoice");
/// assert!(found.warning.is_none());
/// # });
/// ```
#[derive(Debug)]
pub struct HybridIndex {
    embedder: Arc<dyn Embedder>,
    cache: Arc<EmbeddingCache>,
    config: HybridConfig,
    /// Tool ids and servers, in the order of their rows in `vectors`.
    ids: Vec<(Arc<str>, Arc<str>)>,
    /// One unit-length row of `dimension` numbers per tool.
    vectors: Vec<f32>,
}

impl HybridIndex {
    /// An index with no tool vectors yet.
    pub fn new(
        embedder: Arc<dyn Embedder>,
        cache: Arc<EmbeddingCache>,
        config: HybridConfig,
    ) -> Self {
        Self {
            embedder,
            cache,
            config,
            ids: Vec::new(),
            vectors: Vec::new(),
        }
    }

    /// The embedder.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The constants.
    pub fn config(&self) -> &HybridConfig {
        &self.config
    }

    /// How many tools have a vector.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when no tool has a vector.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Makes `tools` the indexed set: their vectors come from the cache when their text was
    /// embedded before by the same model, from the embedder in batches otherwise (then cached,
    /// and saved when the cache has a directory). Tools whose batch failed get no vector; the
    /// warnings say why, and searches are lexical until a later update covers every tool.
    pub async fn set_tools<'a>(
        &mut self,
        tools: impl IntoIterator<Item = ToolText<'a>>,
    ) -> Vec<SearchWarning> {
        let texts: Vec<(Arc<str>, Arc<str>, String)> = tools
            .into_iter()
            .map(|t| (Arc::from(t.id), Arc::from(t.server), embedding_text(&t)))
            .collect();
        self.set_texts(texts).await
    }

    /// [`set_tools`](Self::set_tools) with each tool's embedded text already made.
    pub(crate) async fn set_texts(
        &mut self,
        texts: Vec<(Arc<str>, Arc<str>, String)>,
    ) -> Vec<SearchWarning> {
        let model = self.embedder.model_id().to_owned();
        let dim = self.embedder.dimension();
        let mut warnings = Vec::new();
        if self.cache.dir().is_some()
            && let CacheLoad::Rebuilt(why) = self.cache.load(&model, dim)
        {
            warnings.push(SearchWarning::new(format!(
                "the embedding cache was unreadable and is rebuilt: {why}"
            )));
        }
        let hashes: Vec<u64> = texts.iter().map(|(_, _, t)| document_hash(t)).collect();
        let mut missing: Vec<usize> = Vec::new();
        for (i, h) in hashes.iter().enumerate() {
            if self.cache.get(&model, *h).is_none_or(|v| v.len() != dim)
                && !missing.iter().any(|&j| hashes[j] == *h)
            {
                missing.push(i);
            }
        }
        let mut added = 0usize;
        for batch in missing.chunks(self.embedder.max_batch().max(1)) {
            let batch_texts: Vec<String> = batch.iter().map(|&i| texts[i].2.clone()).collect();
            match self
                .call(&batch_texts, EmbedKind::Document, self.config.batch_timeout)
                .await
            {
                Ok(vectors) => {
                    for (&i, v) in batch.iter().zip(vectors) {
                        self.cache.insert(&model, hashes[i], v);
                        added += 1;
                    }
                }
                Err(e) => {
                    warnings.push(SearchWarning::new(format!(
                        "embedding {} tools with `{model}` failed: {e}",
                        batch.len()
                    )));
                }
            }
        }
        if added > 0
            && let Err(e) = self.cache.save(&model, dim)
        {
            warnings.push(SearchWarning::new(format!(
                "the embedding cache could not be saved: {e}"
            )));
        }
        self.ids.clear();
        self.vectors.clear();
        self.vectors.reserve(texts.len() * dim);
        for ((id, server, _), h) in texts.into_iter().zip(hashes) {
            if let Some(v) = self.cache.get(&model, h).filter(|v| v.len() == dim) {
                self.ids.push((id, server));
                self.vectors.extend_from_slice(&v);
            }
        }
        warnings
    }

    /// One bounded, checked call of the embedder.
    async fn call(
        &self,
        texts: &[String],
        kind: EmbedKind,
        wait: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let answer = tokio::time::timeout(wait, self.embedder.embed(texts, kind))
            .await
            .map_err(|_| EmbedError::Timeout(wait.as_millis()))??;
        check_vectors(answer, texts.len(), self.embedder.dimension())
    }

    /// The query's vector: its first [`MAX_QUERY_CHARS`] characters embedded, within
    /// [`HybridConfig::query_timeout`].
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let query = cut_chars(query.trim(), MAX_QUERY_CHARS).to_owned();
        let mut v = self
            .call(&[query], EmbedKind::Query, self.config.query_timeout)
            .await?;
        Ok(v.pop().unwrap_or_default())
    }

    /// Ranks the tools of `index` for `query`: hybrid when the query's vector comes in time and
    /// every tool has one, lexical with a warning otherwise. An empty query or catalog never
    /// calls the embedder.
    pub async fn search(
        &self,
        index: &SearchIndex,
        query: &str,
        server: Option<&str>,
        limit: usize,
    ) -> HybridResults {
        if index.is_empty() || query.trim().is_empty() || self.config.semantic_weight <= 0.0 {
            return HybridResults {
                results: index.search(query, server, limit),
                warning: None,
            };
        }
        if self.ids.len() != index.len() {
            return HybridResults {
                results: index.search(query, server, limit),
                warning: Some(SearchWarning::new(format!(
                    "lexical ranking only: {} of {} tools have an embedding",
                    self.ids.len(),
                    index.len()
                ))),
            };
        }
        match self.embed_query(query).await {
            Ok(v) => HybridResults {
                results: self.rank(index, query, &v, server, limit),
                warning: None,
            },
            Err(e) => HybridResults {
                results: index.search(query, server, limit),
                warning: Some(SearchWarning::new(format!(
                    "lexical ranking only: embedding the query with `{}` failed: {e}",
                    self.embedder.model_id()
                ))),
            },
        }
    }

    /// The blend of `index`'s lexical ranking with the cosine of `query_vector` (unit length,
    /// as [`embed_query`](Self::embed_query) returns it) against every tool's vector.
    pub fn rank(
        &self,
        index: &SearchIndex,
        query: &str,
        query_vector: &[f32],
        server: Option<&str>,
        limit: usize,
    ) -> SearchResults {
        let dim = query_vector.len();
        let lexical = index.search(query, server, usize::MAX);
        if dim == 0 || self.vectors.len() != self.ids.len() * dim {
            let mut lexical = lexical;
            lexical.hits.truncate(limit);
            return lexical;
        }
        let w = self.config.semantic_weight.clamp(0.0, 1.0);
        let best = lexical.hits.first().map_or(0.0, |h| h.score);
        let lex: HashMap<&str, f32> = lexical
            .hits
            .iter()
            .map(|h| (&*h.id, if best > 0.0 { h.score / best } else { 0.0 }))
            .collect();
        let mut cos: Vec<(usize, f32)> = Vec::with_capacity(self.ids.len());
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (row, (_, s)) in self.ids.iter().enumerate() {
            if server.is_some_and(|want| want != &**s) {
                continue;
            }
            let v = &self.vectors[row * dim..(row + 1) * dim];
            let c: f32 = v.iter().zip(query_vector).map(|(a, b)| a * b).sum();
            lo = lo.min(c);
            hi = hi.max(c);
            cos.push((row, c));
        }
        let span = hi - lo;
        let mut hits: Vec<Hit> = cos
            .into_iter()
            .map(|(row, c)| {
                let (id, server) = &self.ids[row];
                let sem = if span > 0.0 { (c - lo) / span } else { 0.0 };
                let l = lex.get(&**id).copied().unwrap_or(0.0);
                Hit {
                    id: Arc::clone(id),
                    server: Arc::clone(server),
                    score: (1.0 - w) * l + w * sem,
                }
            })
            .collect();
        let total = hits.iter().filter(|h| h.score > 0.0).count();
        let by_score = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id));
        if limit < hits.len() {
            hits.select_nth_unstable_by(limit, by_score);
            hits.truncate(limit);
        }
        hits.sort_unstable_by(by_score);
        SearchResults { hits, total }
    }
}

#[cfg(test)]
mod tests;
