//! The BM25F index.

use std::collections::HashMap;
use std::sync::Arc;

use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use foldhash::fast::{FixedState, RandomState};

use agent_core::JsonObject;
use serde_json::Value;

use super::text::{is_stopword, split_words, stem};

mod analysis;
mod score;
#[cfg(feature = "embed")]
mod slots;
#[cfg(test)]
mod tests;

use analysis::{WordCache, pair};
/// The fields of a document, in the order of [`RankingConfig::field_weights`].
const NAME: usize = 0;
const SERVER: usize = 1;
const DESCRIPTION: usize = 2;
const PARAM_NAME: usize = 3;
const PARAM_TEXT: usize = 4;
const FIELDS: usize = 5;

/// How deep the index looks into nested parameter schemas.
const MAX_SCHEMA_DEPTH: usize = 4;

/// Tunable constants of the ranking. The defaults are what the catalog uses; they were chosen to
/// be sane for any catalog (see the crate docs for how they are measured), not fitted to one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RankingConfig {
    /// BM25 term-frequency saturation.
    pub k1: f32,
    /// Weight of each field: name, server, description, parameter names, parameter texts.
    pub field_weights: [f32; FIELDS],
    /// Length normalisation of each field (BM25 `b`), same order.
    pub field_b: [f32; FIELDS],
    /// Multiplier for the share of the query's IDF mass a document matches.
    pub coverage_weight: f32,
    /// Exponent applied to that share before weighting.
    pub coverage_power: f32,
    /// Bonus per matched query bigram, times the bigram's mean IDF.
    pub phrase_weight: f32,
    /// Bonus when the query contains the tool's whole name.
    pub exact_name_boost: f32,
    /// Weight of a document word that abbreviates a query word (`calc` for `calculate`,
    /// `hypot` for `hypotenuse`), relative to an exact match. Zero turns prefix matching off.
    pub prefix_weight: f32,
    /// The shortest document word taken as an abbreviation.
    pub prefix_min_len: usize,
}

impl Default for RankingConfig {
    fn default() -> Self {
        Self {
            k1: 0.8,
            field_weights: [3.0, 1.0, 1.5, 1.5, 0.5],
            field_b: [0.3, 0.0, 0.75, 0.5, 0.4],
            coverage_weight: 1.0,
            coverage_power: 1.0,
            phrase_weight: 0.1,
            exact_name_boost: 10.0,
            prefix_weight: 0.5,
            prefix_min_len: 4,
        }
    }
}

/// The searchable text of one tool, borrowed from wherever the tool lives.
///
/// ```
/// use mcp_catalog::search::ToolText;
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {"repo": {"type": "string"}}});
/// let text = ToolText::new("github__create_issue", "github", "create_issue")
///     .with_description(Some("Create a new issue in a repository"))
///     .with_input_schema(schema.as_object());
/// assert_eq!(text.id, "github__create_issue");
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ToolText<'a> {
    /// The tool's unique id in the catalog (`server__tool`); ties are broken by it.
    pub id: &'a str,
    /// The server key.
    pub server: &'a str,
    /// The tool's name on its server.
    pub name: &'a str,
    /// A human-readable title, if any.
    pub title: Option<&'a str>,
    /// What the tool does.
    pub description: Option<&'a str>,
    /// The tool's input JSON Schema: parameter names, descriptions and enum values are indexed.
    pub input_schema: Option<&'a JsonObject>,
}

impl<'a> ToolText<'a> {
    /// Text with an id, a server and a name, and nothing else.
    pub fn new(id: &'a str, server: &'a str, name: &'a str) -> Self {
        Self {
            id,
            server,
            name,
            title: None,
            description: None,
            input_schema: None,
        }
    }

    /// Sets the title.
    #[must_use]
    pub fn with_title(mut self, title: Option<&'a str>) -> Self {
        self.title = title;
        self
    }

    /// Sets the description.
    #[must_use]
    pub fn with_description(mut self, description: Option<&'a str>) -> Self {
        self.description = description;
        self
    }

    /// Sets the input schema.
    #[must_use]
    pub fn with_input_schema(mut self, schema: Option<&'a JsonObject>) -> Self {
        self.input_schema = schema;
        self
    }
}

/// One ranked tool.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Hit {
    /// The tool's id (`server__tool`).
    pub id: Arc<str>,
    /// Its server key.
    pub server: Arc<str>,
    /// Its relevance; higher is better. Only comparable within one query.
    pub score: f32,
}

/// The answer to one search.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SearchResults {
    /// The best hits, best first, at most `limit` of them.
    pub hits: Vec<Hit>,
    /// How many tools matched before the limit was applied.
    pub total: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Posting {
    doc: u32,
    /// The saturated BM25F term frequency `t / (k1 + t)`, where `t` sums the field frequencies
    /// times their weight over their length norm. Refreshed whenever the average lengths move.
    sat: f32,
    /// The term's frequency in each field, six bits per field (saturating at 63).
    tf: u32,
}

const TF_BITS: u32 = 6;
const TF_MAX: u32 = (1 << TF_BITS) - 1;

fn field_tf(packed: u32, field: usize) -> u32 {
    (packed >> (TF_BITS * field as u32)) & TF_MAX
}

#[derive(Debug)]
struct Doc {
    id: Arc<str>,
    server: Arc<str>,
    /// The tool's name in lower case, for the exact-name boost.
    name_lower: String,
    lens: [u16; FIELDS],
    /// Distinct terms of the name.
    name_terms: Box<[u32]>,
    /// Sorted adjacent term pairs of the name and description.
    bigrams: Box<[u64]>,
}

type FastMap<K, V> = HashMap<K, V, RandomState>;

/// The vocabulary's key for a stem: a fixed-seed 64-bit hash of its bytes.
///
/// Keying by hash keeps the vocabulary table compact and free of pointers to chase, which is
/// what makes a 10k-tool build fast. Two stems share a key only by a 64-bit collision (odds
/// around 10^-8 for a million distinct stems), whose effect would be that of a stemming
/// conflation: two words treated as one.
fn term_key(stem: &str) -> u64 {
    FixedState::with_seed(0x6d63_705f_6361_7461).hash_one(stem)
}

/// A hasher for keys that already are hashes.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A fielded BM25 index of tools, updated one server at a time.
///
/// ```
/// use mcp_catalog::search::{SearchIndex, ToolText};
///
/// let mut index = SearchIndex::default();
/// index.replace_server(
///     "github",
///     [
///         ToolText::new("github__create_issue", "github", "create_issue")
///             .with_description(Some("Create a new issue in a repository")),
///         ToolText::new("github__list_pull_requests", "github", "list_pull_requests")
///             .with_description(Some("List the pull requests of a repository")),
///     ],
/// );
/// let found = index.search("issue github", None, 10);
/// assert_eq!(&*found.hits[0].id, "github__create_issue");
/// assert_eq!(found.total, 2); // both mention github, through the server name
/// ```
#[derive(Debug, Default)]
pub struct SearchIndex {
    config: RankingConfig,
    /// Term ids by the 64-bit hash of their stem (see [`term_key`]).
    vocabulary: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// How many term ids the vocabulary has handed out.
    terms: u32,
    /// Every term's postings, contiguous (compressed sparse rows): the postings of term `t`
    /// are `entries[offsets[t]..offsets[t + 1]]`. Rebuilt once per update batch.
    offsets: Vec<u32>,
    entries: Vec<Posting>,
    /// Postings of documents added in the current batch, `(term, document, packed tf)`: a
    /// [`Posting`] without its `sat`, which is computed later. Kept in chunks that never grow
    /// (a new one is started when a document does not fit), so that a large batch never copies
    /// what it has gathered, as one growing vector would each time it doubles.
    pending: Vec<Vec<(u32, u32, u32)>>,
    /// Slots emptied in the current batch: their old postings are dropped at the rebuild,
    /// even if a new document took the slot.
    stale: Vec<u32>,
    docs: Vec<Option<Doc>>,
    /// Per document slot: how many distinct words its name has (0 for a free slot).
    name_len: Vec<u8>,
    free: Vec<u32>,
    by_server: FastMap<Arc<str>, Vec<u32>>,
    live: usize,
    len_sum: [u64; FIELDS],
    /// Changes with every update, unique among all indexes (0: never updated, so empty).
    generation: u64,
}

/// A generation no index has had: the documents' slots may have moved.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The largest capacity of a chunk of [`SearchIndex::pending`], in postings: 768 KiB.
const PENDING_CHUNK: usize = 1 << 16;

/// The capacity of a batch's first chunk of [`SearchIndex::pending`], in postings (12 KiB):
/// each next chunk doubles it up to [`PENDING_CHUNK`], so a five-tool catalog does not make
/// room for sixty thousand postings while a large one soon fills chunks of the largest size.
const FIRST_PENDING_CHUNK: usize = 1 << 10;

/// Scratch while indexing a batch, reused across its documents.
#[derive(Default)]
struct Builder {
    /// The current document's distinct terms with their packed field frequencies (as in
    /// [`Posting::tf`]), in the order they first occur.
    doc_terms: Vec<(u32, u32)>,
    /// Per term id: one more than the term's index in `doc_terms`, or 0 when the current
    /// document does not have it yet. Counting in place is linear in the document's words,
    /// where sorting them was not; entries are set back to 0 after each document.
    slot_of: Vec<u32>,
    /// The current document's length in words, per field.
    lens: [u16; FIELDS],
    name_terms: Vec<u32>,
    bigrams: Vec<u64>,
    stem: String,
    words: WordCache,
}

impl Builder {
    fn clear(&mut self) {
        self.doc_terms.clear();
        self.lens = [0; FIELDS];
        self.name_terms.clear();
        self.bigrams.clear();
    }

    /// Counts one occurrence of `term` in `field` of the current document.
    #[inline]
    fn count(&mut self, term: u32, field: usize, terms: u32) {
        let t = term as usize;
        if t >= self.slot_of.len() {
            // `terms` is the vocabulary's size: every id handed out so far gets its entry.
            self.slot_of.resize(terms as usize, 0);
        }
        let shift = TF_BITS * field as u32;
        match self.slot_of[t] {
            0 => {
                self.doc_terms.push((term, 1 << shift));
                self.slot_of[t] = self.doc_terms.len() as u32;
            }
            slot => {
                let tf = &mut self.doc_terms[slot as usize - 1].1;
                if field_tf(*tf, field) < TF_MAX {
                    *tf += 1 << shift;
                }
            }
        }
        self.lens[field] = self.lens[field].saturating_add(1);
    }
}

impl SearchIndex {
    /// An empty index with the given ranking constants.
    pub fn new(config: RankingConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The ranking constants.
    pub fn config(&self) -> &RankingConfig {
        &self.config
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The servers that have tools in the index, sorted.
    pub fn servers(&self) -> Vec<Arc<str>> {
        let mut out: Vec<_> = self.by_server.keys().cloned().collect();
        out.sort_unstable();
        out
    }

    /// Replaces every document of `server` with `tools`, leaving other servers untouched.
    ///
    /// Each tool is indexed under `server`, whatever its own `server` field says.
    pub fn replace_server<'a>(
        &mut self,
        server: &str,
        tools: impl IntoIterator<Item = ToolText<'a>>,
    ) {
        self.replace_servers([(server, tools)]);
    }

    /// [`replace_server`](Self::replace_server) for several servers at once, refreshing the
    /// length statistics once at the end.
    pub fn replace_servers<'s, 'a, T>(&mut self, servers: impl IntoIterator<Item = (&'s str, T)>)
    where
        T: IntoIterator<Item = ToolText<'a>>,
    {
        let mut builder = Builder::default();
        // Room for a few new words per tool already indexed, so a large catalog's refresh
        // rarely rehashes mid-batch; a new, small one grows as it needs (no fixed floor: a
        // run's five-tool catalog must not hold a vocabulary sized for thousands).
        self.vocabulary.reserve(self.live);
        self.pending.clear();
        self.stale.clear();
        for (server, tools) in servers {
            self.remove_docs(server);
            let server: Arc<str> = Arc::from(server);
            let mut slots = Vec::new();
            for tool in tools {
                slots.push(self.add(&server, tool, &mut builder));
            }
            if !slots.is_empty() {
                self.by_server.insert(server, slots);
            }
        }
        self.rebuild_postings();
    }

    /// Removes every document of `server`.
    pub fn remove_server(&mut self, server: &str) {
        self.pending.clear();
        self.stale.clear();
        self.remove_docs(server);
        self.rebuild_postings();
    }

    /// The postings of `term`.
    fn postings(&self, term: u32) -> &[Posting] {
        let t = term as usize;
        match (self.offsets.get(t), self.offsets.get(t + 1)) {
            (Some(&start), Some(&end)) => &self.entries[start as usize..end as usize],
            _ => &[],
        }
    }

    /// Merges the surviving postings with the batch's new ones into fresh contiguous arrays:
    /// two sequential passes over the old postings and one over the new, instead of growing
    /// one vector per term.
    ///
    /// Every posting's saturated frequency is (re)computed as it is written, since the average
    /// lengths moved with the batch: one pass over the postings instead of a second one.
    fn rebuild_postings(&mut self) {
        self.generation = next_generation();
        let factors = self.field_factors();
        let k1 = self.config.k1;
        let sat = |doc: u32, tf: u32| {
            let factors = &factors[doc as usize];
            let mut t = 0f32;
            for (f, factor) in factors.iter().enumerate() {
                t += factor * field_tf(tf, f) as f32;
            }
            Posting {
                doc,
                sat: t / (k1 + t),
                tf,
            }
        };
        let mut stale = vec![false; self.docs.len()];
        for &slot in &self.stale {
            stale[slot as usize] = true;
        }
        let terms = self.terms as usize;
        let mut counts = vec![0u32; terms + 1];
        for (t, count) in counts.iter_mut().take(terms).enumerate() {
            *count = self
                .postings(t as u32)
                .iter()
                .filter(|p| !stale[p.doc as usize])
                .count() as u32;
        }
        for &(t, _, _) in self.pending.iter().flatten() {
            counts[t as usize] += 1;
        }
        let mut offsets = Vec::with_capacity(terms + 1);
        let mut total = 0u32;
        for &c in &counts[..terms] {
            offsets.push(total);
            total += c;
        }
        offsets.push(total);
        let mut entries = vec![Posting::default(); total as usize];
        let mut cursor = offsets.clone();
        for t in 0..terms {
            for p in self.postings(t as u32) {
                if !stale[p.doc as usize] {
                    entries[cursor[t] as usize] = sat(p.doc, p.tf);
                    cursor[t] += 1;
                }
            }
        }
        for &(t, doc, tf) in self.pending.iter().flatten() {
            entries[cursor[t as usize] as usize] = sat(doc, tf);
            cursor[t as usize] += 1;
        }
        self.offsets = offsets;
        self.entries = entries;
        self.pending = Vec::new();
        self.stale.clear();
        self.name_len.clear();
        self.name_len.extend(self.docs.iter().map(|d| {
            d.as_ref()
                .map_or(0, |d| u8::try_from(d.name_terms.len()).unwrap_or(u8::MAX))
        }));
    }

    fn remove_docs(&mut self, server: &str) {
        let Some(slots) = self.by_server.remove(server) else {
            return;
        };
        for &slot in &slots {
            let Some(doc) = self.docs[slot as usize].take() else {
                continue;
            };
            for (sum, &len) in self.len_sum.iter_mut().zip(&doc.lens) {
                *sum -= u64::from(len);
            }
            self.live -= 1;
            self.free.push(slot);
            self.stale.push(slot);
        }
        // Reuse low slots first, so the layout does not depend on removal order.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// Per document slot, the weight of one occurrence in each field: the field's weight over
    /// its BM25 length norm, from the current average lengths (zeros for a free slot).
    fn field_factors(&self) -> Vec<[f32; FIELDS]> {
        let cfg = &self.config;
        let mut avg = [1f32; FIELDS];
        if self.live > 0 {
            for (a, &sum) in avg.iter_mut().zip(&self.len_sum) {
                *a = (sum as f32 / self.live as f32).max(1.0);
            }
        }
        self.docs
            .iter()
            .map(|doc| {
                let mut factors = [0f32; FIELDS];
                if let Some(doc) = doc {
                    for f in 0..FIELDS {
                        let norm =
                            1.0 - cfg.field_b[f] + cfg.field_b[f] * f32::from(doc.lens[f]) / avg[f];
                        factors[f] = cfg.field_weights[f] / norm;
                    }
                }
                factors
            })
            .collect()
    }

    fn term_id(&mut self, stem: &str) -> u32 {
        let key = term_key(stem);
        if let Some(&id) = self.vocabulary.get(&key) {
            return id;
        }
        let id = self.terms;
        self.terms = self.terms.checked_add(1).expect("fewer than 2^32 terms");
        self.vocabulary.insert(key, id);
        id
    }

    /// Indexes `text` as part of `field` of the current document: the same analysis as
    /// [`analyse`](analysis::analyse), through the batch's [`WordCache`].
    fn add_text(&mut self, b: &mut Builder, field: usize, text: &str, bigrams: bool) {
        let mut prev: Option<u32> = None;
        split_words(text, |w| {
            let Builder {
                words,
                stem: stem_buf,
                ..
            } = b;
            let Some(id) = words.term(w, |w| {
                (!is_stopword(w)).then(|| self.term_id(stem(w, stem_buf)))
            }) else {
                return;
            };
            b.count(id, field, self.terms);
            if field == NAME && !b.name_terms.contains(&id) {
                b.name_terms.push(id);
            }
            if bigrams {
                if let Some(p) = prev {
                    b.bigrams.push(pair(p, id));
                }
                prev = Some(id);
            }
        });
    }

    fn add_schema(&mut self, b: &mut Builder, schema: &JsonObject, depth: usize) {
        if depth > MAX_SCHEMA_DEPTH {
            return;
        }
        // One pass over the keys: lookups in a schema object hash every key they ask for.
        for (key, value) in schema {
            match (key.as_str(), value) {
                ("properties", Value::Object(props)) => {
                    for (name, prop) in props {
                        self.add_text(b, PARAM_NAME, name, false);
                        if let Value::Object(prop) = prop {
                            self.add_schema(b, prop, depth + 1);
                        }
                    }
                }
                ("items", Value::Object(items)) => self.add_schema(b, items, depth + 1),
                ("anyOf" | "oneOf" | "allOf", Value::Array(variants)) => {
                    for v in variants {
                        if let Value::Object(v) = v {
                            self.add_schema(b, v, depth + 1);
                        }
                    }
                }
                // Texts of the parameters, not of the tool itself (depth 0).
                ("description" | "title", Value::String(text)) if depth > 0 => {
                    self.add_text(b, PARAM_TEXT, text, false);
                }
                ("enum", Value::Array(values)) => {
                    for v in values {
                        if let Value::String(text) = v {
                            self.add_text(b, PARAM_TEXT, text, false);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn add(&mut self, server: &Arc<str>, tool: ToolText<'_>, b: &mut Builder) -> u32 {
        b.clear();
        self.add_text(b, NAME, tool.name, true);
        self.add_text(b, SERVER, server, false);
        if let Some(title) = tool.title {
            self.add_text(b, DESCRIPTION, title, true);
        }
        if let Some(description) = tool.description {
            self.add_text(b, DESCRIPTION, description, true);
        }
        if let Some(schema) = tool.input_schema {
            self.add_schema(b, schema, 0);
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.docs.push(None);
                u32::try_from(self.docs.len() - 1).expect("fewer than 2^32 tools")
            }
        };
        let lens = b.lens;
        let room = |chunk: &Vec<_>| chunk.capacity() - chunk.len();
        if self
            .pending
            .last()
            .is_none_or(|chunk| room(chunk) < b.doc_terms.len())
        {
            let size = self.pending.last().map_or(FIRST_PENDING_CHUNK, |chunk| {
                (chunk.capacity() * 2).min(PENDING_CHUNK)
            });
            let chunk = Vec::with_capacity(size.max(b.doc_terms.len()));
            self.pending.push(chunk);
        }
        let chunk = self.pending.last_mut().expect("a chunk with room");
        chunk.extend(b.doc_terms.iter().map(|&(term, tf)| (term, slot, tf)));
        for &(term, _) in &b.doc_terms {
            b.slot_of[term as usize] = 0;
        }
        b.bigrams.sort_unstable();
        b.bigrams.dedup();
        for (sum, &len) in self.len_sum.iter_mut().zip(&lens) {
            *sum += u64::from(len);
        }
        self.live += 1;
        self.docs[slot as usize] = Some(Doc {
            id: Arc::from(tool.id),
            server: Arc::clone(server),
            // `to_lowercase` goes char by char; ASCII names, the usual ones, need not.
            name_lower: if tool.name.is_ascii() {
                tool.name.to_ascii_lowercase()
            } else {
                tool.name.to_lowercase()
            },
            lens,
            name_terms: b.name_terms.as_slice().into(),
            bigrams: b.bigrams.as_slice().into(),
        });
        slot
    }

    /// An estimate of the heap memory the index holds, in bytes.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        // A hash table slot per entry plus its control byte, at the table's capacity.
        let vocab = self.vocabulary.capacity() * (size_of::<(u64, u32)>() + 1);
        let postings = self.entries.capacity() * size_of::<Posting>() + self.offsets.capacity() * 4;
        let docs: usize = self
            .docs
            .iter()
            .map(|d| {
                size_of::<Option<Doc>>()
                    + d.as_ref().map_or(0, |d| {
                        d.id.len()
                            + d.name_lower.capacity()
                            + d.name_terms.len() * 4
                            + d.bigrams.len() * 8
                    })
            })
            .sum();
        let servers: usize = self
            .by_server
            .iter()
            .map(|(k, v)| k.len() + v.capacity() * 4 + 48)
            .sum();
        vocab + postings + docs + servers + self.name_len.capacity() + self.free.capacity() * 4
    }
}
