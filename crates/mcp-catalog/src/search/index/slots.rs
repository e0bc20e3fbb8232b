//! What the hybrid ranking reads of the index: the documents by slot, the lexical matches by
//! slot, and a generation that tells when the slots may have moved.

use std::sync::Arc;

use super::SearchIndex;

impl SearchIndex {
    /// Calls `f` with the slot and score of every tool [`search`](Self::search) would rank
    /// for `query`, in no order and without a limit; nothing for a query without words.
    pub(crate) fn for_each_match(
        &self,
        query: &str,
        server: Option<&str>,
        mut f: impl FnMut(u32, f32),
    ) {
        for (score, slot) in self.score_matches(query, server).unwrap_or_default() {
            f(slot, score);
        }
    }

    /// Calls `f` with the slot and id of every indexed tool; slots are below
    /// [`slots`](Self::slots).
    pub(crate) fn for_each_doc(&self, mut f: impl FnMut(u32, &Arc<str>)) {
        for (slot, doc) in self.docs.iter().enumerate() {
            if let Some(doc) = doc {
                f(slot as u32, &doc.id);
            }
        }
    }

    /// One more than the largest slot a tool may have.
    pub(crate) fn slots(&self) -> usize {
        self.docs.len()
    }

    /// Changes with every update of the index and differs between indexes that were ever
    /// updated: while it stays the same, every tool keeps its slot.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}
