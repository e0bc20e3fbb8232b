//! How [`HybridIndex::set_tools`] fills an index: what the cache lacks embedded in batches
//! (texts other indexes sharing the cache embed now are waited for), the cache saved as
//! batches finish, and on a retry failed batches halved down to the text that fails.

use std::sync::Arc;
use std::time::Duration;

use super::rows::Rows;
use super::{HybridIndex, SearchWarning};
use crate::search::cache::{CacheLoad, EmbeddingCache, document_hash};
use crate::search::embed::EmbedKind;

/// The longest a batch's vectors stay in memory only while an update runs: the cache file is
/// written at most this often, and once at the end.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// When an update last wrote the cache file, and how many vectors it added since.
#[derive(Debug, Default)]
struct Saver {
    last: Option<tokio::time::Instant>,
    unsaved: usize,
}

impl Saver {
    fn due(&self) -> bool {
        self.unsaved > 0 && self.last.is_none_or(|t| t.elapsed() >= SAVE_EVERY)
    }

    /// Writes the cache file on the blocking pool.
    async fn save(
        &mut self,
        cache: &Arc<EmbeddingCache>,
        model: &str,
        dim: usize,
        warnings: &mut Vec<SearchWarning>,
    ) {
        self.last = Some(tokio::time::Instant::now());
        self.unsaved = 0;
        if let Err(e) = cache.save_blocking(model, dim).await {
            warnings.push(SearchWarning::new(format!(
                "the embedding cache could not be saved: {e}"
            )));
        }
    }
}

/// How many calls in a row may fail in an update that splits failed batches: enough to halve
/// a batch of `max_batch` texts down to the one text that fails, and try its neighbour.
fn split_limit(max_batch: usize) -> u32 {
    let halvings = usize::BITS - max_batch.max(1).saturating_sub(1).leading_zeros();
    halvings + 2
}

impl HybridIndex {
    /// [`set_tools`](Self::set_tools) with each tool's embedded text already made; no batch is
    /// started once `alive` says false (whoever wanted the vectors is gone).
    ///
    /// With `split` (a retry of texts left without a vector), a failed batch does not end the
    /// update: it is halved and each half tried, so that one text the embedder refuses leaves
    /// only itself without a vector; the update ends once [`split_limit`] calls in a row have
    /// failed (an embedder that is down costs a few calls, not one per text), and one warning
    /// says how many tools are still without a vector.
    pub(crate) async fn set_texts(
        &mut self,
        texts: Vec<(Arc<str>, Arc<str>, String)>,
        alive: &(dyn Fn() -> bool + Sync),
        split: bool,
    ) -> Vec<SearchWarning> {
        let model = self.embedder.model_id().to_owned();
        let dim = self.embedder.dimension();
        let mut warnings = Vec::new();
        if let Some(CacheLoad::Rebuilt(why)) = self.cache.load_once(&model, dim).await {
            warnings.push(SearchWarning::new(format!(
                "the embedding cache was unreadable and is rebuilt: {why}"
            )));
        }
        let hashes: Vec<u64> = texts.iter().map(|(_, _, t)| document_hash(t)).collect();
        let mut missing: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, h) in hashes.iter().enumerate() {
            if self.cache.get(&model, *h).is_none_or(|v| v.len() != dim) && seen.insert(*h) {
                missing.push(i);
            }
        }
        // Texts of like length share a batch, so little of a batch is padding.
        missing.sort_by_key(|&i| (texts[i].2.len(), i));
        let mut saver = Saver::default();
        let mut queue: std::collections::VecDeque<usize> = missing.into();
        // Halves of failed batches (with `split`), tried before the queue.
        let mut halves: std::collections::VecDeque<Vec<usize>> = std::collections::VecDeque::new();
        let limit = split_limit(self.embedder.max_batch());
        let mut failed_in_a_row = 0;
        let mut last_error = None;
        let mut requeued = false;
        'run: loop {
            // Texts another index is embedding now: waited for once the queue is done.
            let mut waiting = Vec::new();
            while !queue.is_empty() || !halves.is_empty() {
                if !alive() {
                    break 'run;
                }
                let batch: Vec<usize> = match halves.pop_front() {
                    Some(half) => half,
                    None => {
                        let take = queue.len().min(self.embedder.max_batch().max(1));
                        queue.drain(..take).collect()
                    }
                };
                let batch_hashes: Vec<u64> = batch.iter().map(|&i| hashes[i]).collect();
                let (claim, theirs) = self.cache.claim(&model, &batch_hashes);
                for (h, rx) in theirs {
                    waiting.push((h, rx));
                }
                let mine: Vec<usize> = batch
                    .into_iter()
                    .filter(|&i| claim.hashes().contains(&hashes[i]))
                    .filter(|&i| {
                        self.cache
                            .get(&model, hashes[i])
                            .is_none_or(|v| v.len() != dim)
                    })
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let batch_texts: Vec<String> = mine.iter().map(|&i| texts[i].2.clone()).collect();
                match self
                    .call(&batch_texts, EmbedKind::Document, self.config.batch_timeout)
                    .await
                {
                    Ok(vectors) => {
                        for (&i, v) in mine.iter().zip(vectors) {
                            self.cache.insert(&model, hashes[i], v);
                        }
                        drop(claim);
                        failed_in_a_row = 0;
                        saver.unsaved += mine.len();
                        if saver.due() {
                            saver.save(&self.cache, &model, dim, &mut warnings).await;
                        }
                    }
                    Err(e) if split => {
                        drop(claim);
                        last_error = Some(e);
                        failed_in_a_row += 1;
                        if failed_in_a_row >= limit {
                            break 'run;
                        }
                        if mine.len() > 1 {
                            let (first, second) = mine.split_at(mine.len() / 2);
                            halves.push_front(second.to_vec());
                            halves.push_front(first.to_vec());
                        }
                    }
                    Err(e) => {
                        drop(claim);
                        let untried = queue.len() + waiting.len();
                        let mut message =
                            format!("embedding {} tools with `{model}` failed: {e}", mine.len());
                        if untried > 0 {
                            message.push_str(&format!(
                                "; {untried} more not tried until a later update"
                            ));
                        }
                        warnings.push(SearchWarning::new(message));
                        break 'run;
                    }
                }
            }
            if waiting.is_empty() {
                break;
            }
            for (_, rx) in &mut waiting {
                let _ = tokio::time::timeout(self.config.batch_timeout, rx.changed()).await;
            }
            if requeued {
                break;
            }
            // What the other index failed to embed is this one's to try, once.
            requeued = true;
            for (h, _) in waiting {
                if self.cache.get(&model, h).is_none_or(|v| v.len() != dim)
                    && let Some(i) = hashes.iter().position(|&x| x == h)
                {
                    queue.push_back(i);
                }
            }
        }
        if saver.unsaved > 0 {
            saver.save(&self.cache, &model, dim, &mut warnings).await;
        }
        self.ids.clear();
        self.rows.clear();
        self.vectors = Rows::new(dim, texts.len());
        let all = texts.len();
        for ((id, server, _), h) in texts.into_iter().zip(hashes) {
            if let Some(v) = self.cache.get(&model, h).filter(|v| v.len() == dim) {
                self.rows.insert(Arc::clone(&id), self.ids.len());
                self.ids.push((id, server));
                self.vectors.push(&v);
            }
        }
        let left = all - self.ids.len();
        if let Some(e) = last_error.filter(|_| left > 0) {
            let noun = if left == 1 { "tool is" } else { "tools are" };
            warnings.push(SearchWarning::new(format!(
                "{left} {noun} still without a vector from `{model}` after a retry (the last \
                 error: {e})"
            )));
        }
        warnings
    }
}
