//! Hybrid ranking: the BM25F ranking blended with the cosine similarity of sentence
//! embeddings.
//!
//! Both scores are brought to one scale per query and blended as
//! `(1 − w) × lexical + w × semantic` with `w` = [`HybridConfig::semantic_weight`] (see
//! [`Fusion`]; by default each side is z-scored over its best 100 scores, `w` = 0.5). A tool no
//! query word matches can still rank by meaning alone. Fusion and weight were chosen with
//! `cargo xtask search-eval --embedder local --variants …` on the even queries of bfcl and
//! confirmed on the odd ones (all-MiniLM-L6-v2): z100 at 0.5 gives hit@5 .909 / .910 and MRR
//! .814 / .815 (even / odd), against .905 / .906 and .807 / .803 for the earlier min-max blend
//! at 0.4; reciprocal-rank fusion (k 5 to 60) keeps hit@5 but loses MRR (.761 to .785).
//!
//! A query reads the lexical scores unordered ([`SearchIndex`]'s matches, not its sorted hits)
//! and the cosines of 16-bit tool vectors (`rows.rs`: half the memory of `f32`, each cosine
//! within about 10⁻⁵); only the best `limit` of the blend are sorted. To reproduce the latency
//! at scale: `cargo xtask search-eval --embedder local --scale 10000 --cache DIR` prints the
//! ranking's p50 at 10,000 tools and the whole query's (embedding plus ranking), with the load
//! average beside them (the `mcp-embed` section of `docs/ARCHITECTURE.md` has the figures).
//!
//! The embedder is never trusted to answer: every call is bounded in time, every answer
//! checked (count, dimension, NaN), and whatever goes wrong gives the lexical ranking with a
//! [`SearchWarning`] (also logged as a `tracing` warning), never a failed search.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::fast::RandomState;

#[cfg(test)]
use super::cache::CacheLoad;
use super::cache::EmbeddingCache;
use super::embed::{EmbedError, EmbedKind, Embedder, check_vectors, cut_chars, embedding_text};
use super::{Hit, MAX_QUERY_CHARS, SearchIndex, SearchResults, ToolText};

mod rows;
mod update;

use rows::Rows;

/// The constants of hybrid ranking.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HybridConfig {
    /// The share of the semantic score in the blend, in `[0, 1]`; 0 is lexical ranking.
    pub semantic_weight: f32,
    /// How the lexical and the semantic scores are combined.
    pub fusion: Fusion,
    /// The longest wait for a query's vector; past it the search is lexical.
    pub query_timeout: Duration,
    /// The longest wait for one batch of tool vectors.
    pub batch_timeout: Duration,
    /// How many recent queries keep their vector, so a repeated query is not embedded again
    /// (least recently used first out); 0 embeds every query.
    pub query_cache: usize,
}

impl Default for HybridConfig {
    fn default() -> Self {
        Self {
            semantic_weight: 0.5,
            fusion: Fusion::ZScore { top_k: 100 },
            query_timeout: Duration::from_secs(2),
            batch_timeout: Duration::from_secs(60),
            query_cache: 256,
        }
    }
}

/// How [`HybridIndex::rank`] combines the lexical score `l` and the cosine `c` of each tool,
/// with `w` = [`HybridConfig::semantic_weight`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Fusion {
    /// `(1 − w) × l / max(l) + w × (c − min c) / (max c − min c)`.
    MinMax,
    /// `(1 − w) × z(l) + w × z(c)`, each side z-scored with the mean and standard deviation of
    /// its best `top_k` scores (the tail of thousands of unrelated tools does not flatten the
    /// head).
    ZScore {
        /// How many of each side's best scores set its mean and deviation.
        top_k: usize,
    },
    /// Reciprocal-rank fusion: `(1 − w) / (k + lexical rank) + w / (k + semantic rank)`, ranks
    /// from 1; a tool no query word matches has no lexical term.
    Rrf {
        /// The rank offset; larger flattens the head.
        k: f32,
    },
}

/// The dot product of two rows, in eight lanes so that it vectorises (the `f32` reference of
/// the tests).
#[cfg(test)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for l in 0..8 {
            lanes[l] += x[l] * y[l];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Each tool's blended score from its lexical score `lx[i]` and cosine `cos[i]`, by `fusion`
/// with the semantic weight `w` (see [`Fusion`]).
fn blend(fusion: Fusion, w: f32, lx: &[f32], cos: &[f32]) -> Vec<f32> {
    match fusion {
        Fusion::MinMax => {
            let best = lx.iter().copied().fold(0.0f32, f32::max);
            let lo = cos.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = cos.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let span = hi - lo;
            lx.iter()
                .zip(cos)
                .map(|(&l, &c)| {
                    let l = if best > 0.0 { l / best } else { 0.0 };
                    let sem = if span > 0.0 { (c - lo) / span } else { 0.0 };
                    (1.0 - w) * l + w * sem
                })
                .collect()
        }
        Fusion::ZScore { top_k } => {
            let (ml, sl) = head_stats(lx, top_k);
            let (mc, sc) = head_stats(cos, top_k);
            lx.iter()
                .zip(cos)
                .map(|(&l, &c)| (1.0 - w) * (l - ml) / sl + w * (c - mc) / sc)
                .collect()
        }
        Fusion::Rrf { k } => {
            let lr = ranks_of(lx);
            let cr = ranks_of(cos);
            lx.iter()
                .zip(lr.iter().zip(&cr))
                .map(|(&l, (&a, &b))| {
                    let lexical = if l > 0.0 {
                        (1.0 - w) / (k + a as f32)
                    } else {
                        0.0
                    };
                    lexical + w / (k + b as f32)
                })
                .collect()
        }
    }
}

/// The mean and standard deviation of the `top_k` largest of `values` (deviation at least a
/// small epsilon).
fn head_stats(values: &[f32], top_k: usize) -> (f32, f32) {
    let mut head: Vec<f32> = values.to_vec();
    let k = top_k.clamp(1, head.len().max(1));
    if k < head.len() {
        head.select_nth_unstable_by(k, |a, b| b.total_cmp(a));
        head.truncate(k);
    }
    if head.is_empty() {
        return (0.0, 1.0);
    }
    let n = head.len() as f32;
    let mean = head.iter().sum::<f32>() / n;
    let var = head.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    (mean, var.sqrt().max(1e-6))
}

/// The rank (from 1) of each of `values` when sorted descending, ties broken by position.
fn ranks_of(values: &[f32]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..values.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        values[b as usize]
            .total_cmp(&values[a as usize])
            .then(a.cmp(&b))
    });
    let mut rank = vec![0u32; values.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i as usize] = r as u32 + 1;
    }
    rank
}

/// The vectors of recent queries, least recently used out first.
#[derive(Debug, Default)]
struct QueryCache {
    tick: u64,
    entries: HashMap<String, (u64, Arc<[f32]>)>,
}

impl QueryCache {
    fn get(&mut self, query: &str) -> Option<Arc<[f32]>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(query).map(|(used, v)| {
            *used = tick;
            Arc::clone(v)
        })
    }

    fn insert(&mut self, query: String, vector: Arc<[f32]>, capacity: usize) {
        if capacity == 0 {
            return;
        }
        if self.entries.len() >= capacity && !self.entries.contains_key(&query) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(q, _)| q.clone());
            if let Some(q) = oldest {
                self.entries.remove(&q);
            }
        }
        self.tick += 1;
        self.entries.insert(query, (self.tick, vector));
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
    /// The row of each tool id.
    rows: HashMap<Arc<str>, usize, RandomState>,
    /// One unit-length row of `dimension` numbers per tool, in 16 bits.
    vectors: Rows,
    /// Recent queries' vectors.
    queries: Mutex<QueryCache>,
    /// The row of each document slot of the lexical index last ranked with.
    slot_rows: Mutex<SlotRows>,
}

/// The row of each document slot of a [`SearchIndex`] (`u32::MAX`: none), valid while the
/// index's and the rows' generations are those it was made for: a lexical match finds its
/// row by position, not by hashing its id.
#[derive(Debug, Default)]
struct SlotRows {
    index: u64,
    rows: u64,
    map: Arc<[u32]>,
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
            rows: HashMap::default(),
            vectors: Rows::default(),
            queries: Mutex::default(),
            slot_rows: Mutex::default(),
        }
    }

    /// The row of each of `index`'s document slots, made once per change of either side.
    fn slot_rows(&self, index: &SearchIndex) -> Arc<[u32]> {
        let mut cached = self.slot_rows.lock().unwrap_or_else(|e| e.into_inner());
        let (gi, gr) = (index.generation(), self.vectors.generation());
        if cached.index != gi || cached.rows != gr || cached.map.len() != index.slots() {
            let mut map = vec![u32::MAX; index.slots()];
            index.for_each_doc(|slot, id| {
                if let Some(&row) = self.rows.get(id) {
                    map[slot as usize] = row as u32;
                }
            });
            *cached = SlotRows {
                index: gi,
                rows: gr,
                map: map.into(),
            };
        }
        Arc::clone(&cached.map)
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

    /// The vector of the tool `id`, when it has one, as the index keeps it: each number within
    /// 1/8,190 of the row's largest of the unit-length vector embedded.
    pub fn vector(&self, id: &str) -> Option<Vec<f32>> {
        self.vectors.get(*self.rows.get(id)?)
    }

    /// Makes `tools` the indexed set: their vectors come from the cache when their text was
    /// embedded before by the same model, from the embedder in batches otherwise (then cached,
    /// and saved as batches finish — at most once a second, and at the end — when the
    /// cache has a directory, so a process cut short keeps what it embedded). Texts another
    /// index sharing the cache is embedding now are waited for, not embedded twice. The first
    /// batch that fails or times out ends the update: the tools without a vector stay without
    /// one, the warnings say why, and searches are lexical until a later update covers every
    /// tool.
    pub async fn set_tools<'a>(
        &mut self,
        tools: impl IntoIterator<Item = ToolText<'a>>,
    ) -> Vec<SearchWarning> {
        let texts: Vec<(Arc<str>, Arc<str>, String)> = tools
            .into_iter()
            .map(|t| (Arc::from(t.id), Arc::from(t.server), embedding_text(&t)))
            .collect();
        self.set_texts(texts, &|| true, false).await
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
    /// The last [`HybridConfig::query_cache`] distinct queries are answered from memory.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let query = cut_chars(query.trim(), MAX_QUERY_CHARS).to_owned();
        let capacity = self.config.query_cache;
        if capacity > 0
            && let Some(v) = self.recent().get(&query)
        {
            return Ok(v.to_vec());
        }
        let mut v = self
            .call(
                std::slice::from_ref(&query),
                EmbedKind::Query,
                self.config.query_timeout,
            )
            .await?;
        let v = v.pop().unwrap_or_default();
        if capacity > 0 {
            self.recent()
                .insert(query, Arc::from(v.as_slice()), capacity);
        }
        Ok(v)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, QueryCache> {
        self.queries.lock().unwrap_or_else(|e| e.into_inner())
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
        if dim == 0 || dim != self.vectors.dim() || self.vectors.len() != self.ids.len() {
            return index.search(query, server, limit);
        }
        let w = self.config.semantic_weight.clamp(0.0, 1.0);
        // The lexical scores, unordered: only the best `limit` of the blend are ever sorted.
        let mut lex_of_row = vec![0.0f32; self.ids.len()];
        let slot_rows = self.slot_rows(index);
        index.for_each_match(query, server, |slot, score| {
            if let Some(&row) = slot_rows.get(slot as usize)
                && let Some(lex) = lex_of_row.get_mut(row as usize)
            {
                *lex = score.max(0.0);
            }
        });
        let keep = |row: usize| server.is_none_or(|want| want == &*self.ids[row].1);
        let rows: Vec<usize> = (0..self.ids.len()).filter(|&row| keep(row)).collect();
        let lx: Vec<f32> = rows.iter().map(|&row| lex_of_row[row]).collect();
        let mut cos: Vec<f32> = Vec::with_capacity(rows.len());
        self.vectors.cosines(query_vector, keep, &mut cos);
        let scores = blend(self.config.fusion, w, &lx, &cos);
        let total = match self.config.fusion {
            Fusion::MinMax => scores.iter().filter(|&&x| x > 0.0).count(),
            _ => scores.len(),
        };
        // Only the best `limit` become hits; ties go by tool id.
        let by_score = |&a: &usize, &b: &usize| {
            scores[b]
                .total_cmp(&scores[a])
                .then_with(|| self.ids[rows[a]].0.cmp(&self.ids[rows[b]].0))
        };
        let mut order: Vec<usize> = (0..rows.len()).collect();
        if limit < order.len() {
            order.select_nth_unstable_by(limit, by_score);
            order.truncate(limit);
        }
        order.sort_unstable_by(by_score);
        let hits: Vec<Hit> = order
            .into_iter()
            .map(|i| {
                let (id, server) = &self.ids[rows[i]];
                Hit {
                    id: Arc::clone(id),
                    server: Arc::clone(server),
                    score: scores[i],
                }
            })
            .collect();
        SearchResults { hits, total }
    }
}

#[cfg(test)]
mod tests;
