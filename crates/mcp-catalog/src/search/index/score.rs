//! Ranking a query: its terms, abbreviations and phrases, then BM25F with the coverage,
//! phrase and exact-name signals.

use std::sync::Arc;

use super::analysis::{analyse, contains_word, pair};
use super::{Doc, Hit, SearchIndex, SearchResults, term_key};

impl SearchIndex {
    fn idf(&self, df: usize) -> f32 {
        let n = self.live as f32;
        let df = df as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Ranks the tools for `query`, best first, keeping at most `limit` hits.
    ///
    /// `server` keeps only that server's tools. An empty query (or one made only of stopwords)
    /// matches every tool, listed by id. Ties are broken by id. Only the first
    /// [`MAX_QUERY_CHARS`](crate::search::MAX_QUERY_CHARS) characters and the first
    /// [`MAX_QUERY_TERMS`](crate::search::MAX_QUERY_TERMS) distinct words of the query are read.
    pub fn search(&self, query: &str, server: Option<&str>, limit: usize) -> SearchResults {
        let Some(mut scored) = self.score_matches(query, server) else {
            return self.list_all(server, limit);
        };
        let total = scored.len();
        let id = |slot: u32| &self.docs[slot as usize].as_ref().expect("live document").id;
        let order =
            |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then_with(|| id(a.1).cmp(id(b.1)));
        if limit < scored.len() {
            scored.select_nth_unstable_by(limit, order);
            scored.truncate(limit);
        }
        scored.sort_unstable_by(order);
        let hits = scored
            .into_iter()
            .map(|(score, slot)| {
                let doc = self.docs[slot as usize].as_ref().expect("live document");
                Hit {
                    id: Arc::clone(&doc.id),
                    server: Arc::clone(&doc.server),
                    score,
                }
            })
            .collect();
        SearchResults { hits, total }
    }

    /// The score and document slot of every tool `query` matches (of `server` when given),
    /// unordered: what [`search`](Self::search) ranks. `None` when the query has no word to
    /// match (every tool matches, unscored).
    pub(super) fn score_matches(
        &self,
        query: &str,
        server: Option<&str>,
    ) -> Option<Vec<(f32, u32)>> {
        let cfg = &self.config;
        let query = match query.char_indices().nth(crate::search::MAX_QUERY_CHARS) {
            Some((cut, _)) => &query[..cut],
            None => query,
        };
        // The query's words in order (`None` for a word no document has, or one past the
        // distinct-word bound), and its distinct terms: (term, weight × IDF, IDF). Abbreviation
        // matches carry a reduced weight.
        let mut sequence: Vec<Option<u32>> = Vec::new();
        let mut terms: Vec<(u32, f32, f32)> = Vec::new();
        let mut distinct: Vec<u64> = Vec::new();
        let mut words = 0usize;
        let mut stem_buf = String::new();
        analyse(query, &mut stem_buf, |s| {
            words += 1;
            let key = term_key(s);
            if !distinct.contains(&key) {
                if distinct.len() == crate::search::MAX_QUERY_TERMS {
                    sequence.push(None);
                    return;
                }
                distinct.push(key);
            }
            let known = |t: &u32| !self.postings(*t).is_empty();
            let exact = self.vocabulary.get(&key).copied().filter(known);
            sequence.push(exact);
            if let Some(t) = exact
                && !terms.iter().any(|&(id, _, _)| id == t)
            {
                let idf = self.idf(self.postings(t).len());
                terms.push((t, idf, idf));
            }
            if cfg.prefix_weight > 0.0 && s.is_ascii() {
                for len in cfg.prefix_min_len..s.len().saturating_sub(1) {
                    let prefix = self.vocabulary.get(&term_key(&s[..len])).copied();
                    let Some(t) = prefix.filter(known) else {
                        continue;
                    };
                    if terms.iter().any(|&(id, _, _)| id == t) {
                        continue;
                    }
                    let idf = self.idf(self.postings(t).len());
                    terms.push((t, cfg.prefix_weight * idf, idf));
                }
            }
        });
        if words == 0 {
            return None;
        }
        let is_exact = |t: u32| terms.iter().any(|&(id, w, idf)| id == t && w == idf);
        let query_idf: f32 = terms
            .iter()
            .filter(|&&(_, w, idf)| w == idf)
            .map(|&(_, _, idf)| idf)
            .sum();
        let mut bigrams: Vec<(u64, f32)> = Vec::new();
        for w in sequence.windows(2) {
            if let [Some(a), Some(b)] = *w {
                let idf = |t: u32| {
                    terms
                        .iter()
                        .find(|&&(id, _, _)| id == t)
                        .map_or(0.0, |&(_, _, idf)| idf)
                };
                let bigram = pair(a, b);
                if !bigrams.iter().any(|&(bg, _)| bg == bigram) {
                    bigrams.push((bigram, (idf(a) + idf(b)) / 2.0));
                }
            }
        }
        let query_lower = query.to_lowercase();

        // Query terms beyond the 32nd still score; they just take no part in the bitmask tests.
        let bit = |i: usize| if i < 32 { 1u32 << i } else { 0 };
        let exact_mask: u32 = terms
            .iter()
            .enumerate()
            .filter(|&(_, &(_, w, idf))| w == idf)
            .fold(0, |m, (i, _)| m | bit(i));
        let bigrams: Vec<(u64, u32, f32)> = bigrams
            .into_iter()
            .map(|(bg, idf)| {
                let a = (bg >> 32) as u32;
                let b = bg as u32;
                let pos = |t: u32| terms.iter().position(|&(id, _, _)| id == t).map_or(0, bit);
                (bg, pos(a) | pos(b), idf)
            })
            .collect();

        let mut bm25 = vec![0f32; self.docs.len()];
        let mut matched_idf = vec![0f32; self.docs.len()];
        let mut mask = vec![0u32; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for (i, &(term, weight, _)) in terms.iter().enumerate() {
            for p in self.postings(term) {
                let d = p.doc as usize;
                if matched_idf[d] == 0.0 {
                    touched.push(p.doc);
                }
                bm25[d] += weight * p.sat;
                matched_idf[d] += weight;
                mask[d] |= bit(i);
            }
        }

        let mut scored: Vec<(f32, u32)> = Vec::with_capacity(touched.len());
        for &slot in &touched {
            let d = slot as usize;
            if let Some(server) = server {
                let doc = self.docs[d].as_ref().expect("live document");
                if *doc.server != *server {
                    continue;
                }
            }
            let mut score = bm25[d];
            if query_idf > 0.0 && cfg.coverage_weight != 0.0 {
                let share = (matched_idf[d] / query_idf).min(1.0);
                let share = if cfg.coverage_power == 1.0 {
                    share
                } else {
                    share.powf(cfg.coverage_power)
                };
                score *= 1.0 + cfg.coverage_weight * share;
            }
            if cfg.phrase_weight != 0.0 {
                for &(bg, need, idf) in &bigrams {
                    if mask[d] & need == need
                        && self.docs[d]
                            .as_ref()
                            .is_some_and(|doc| doc.bigrams.binary_search(&bg).is_ok())
                    {
                        score += cfg.phrase_weight * idf;
                    }
                }
            }
            // The whole name in the query: cheap tests on counts and terms first, then the text.
            let name_len = u32::from(self.name_len[d]);
            if cfg.exact_name_boost != 0.0
                && name_len > 0
                && (mask[d] & exact_mask).count_ones() >= name_len.min(32)
            {
                let doc = self.docs[d].as_ref().expect("live document");
                if doc.name_terms.iter().all(|&t| is_exact(t))
                    && (name_len > 1 || query_lower.trim() == doc.name_lower)
                    && contains_word(&query_lower, &doc.name_lower)
                {
                    score += cfg.exact_name_boost;
                }
            }
            scored.push((score, slot));
        }
        Some(scored)
    }

    fn list_all(&self, server: Option<&str>, limit: usize) -> SearchResults {
        let mut docs: Vec<&Doc> = self
            .docs
            .iter()
            .flatten()
            .filter(|d| server.is_none_or(|s| *d.server == *s))
            .collect();
        let total = docs.len();
        docs.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        docs.truncate(limit);
        let hits = docs
            .into_iter()
            .map(|d| Hit {
                id: Arc::clone(&d.id),
                server: Arc::clone(&d.server),
                score: 0.0,
            })
            .collect();
        SearchResults { hits, total }
    }
}
