//! The BM25F index.

use std::collections::HashMap;
use std::sync::Arc;

use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use foldhash::fast::{FixedState, RandomState};

use agent_core::JsonObject;
use serde_json::Value;

use super::text::{is_stopword, split_words, stem};

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
}

/// The capacity of a chunk of [`SearchIndex::pending`], in postings: 768 KiB.
const PENDING_CHUNK: usize = 1 << 16;

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

/// The term each distinct word of a batch analysed to, so that a word seen before skips the
/// stopword test, the stemmer and the vocabulary lookup of its stem.
///
/// Words repeat a lot across the tools of a catalog (`the`, `repository`, `string`), so most
/// words of a batch are hits. The cache is keyed by the words themselves, so it never changes a
/// result. It lives for one batch only and adds nothing to the index's memory.
///
/// Words of up to 15 bytes (nearly all of them) are packed into two integers by [`pack_short`]
/// and kept in an open-addressing table of their own: linear probing over one array kept at
/// most half full, so a lookup usually reads one slot, in one cache line. (A general-purpose
/// map reads a control byte and then the slot: two cache misses where the table has outgrown
/// the cache, as it does for a large catalog.) Longer words go to an ordinary map.
struct WordCache {
    /// A power-of-two number of slots; an empty slot has the key `[0, 0]`, which no packed
    /// word has (its length is in the key).
    slots: Vec<CacheSlot>,
    /// How many slots are taken.
    used: usize,
    long: FastMap<Box<str>, u32>,
}

#[derive(Debug, Clone, Copy, Default)]
struct CacheSlot {
    key: [u64; 2],
    /// The word's term, or [`STOPWORD`].
    term: u32,
}

/// The cached term of a word that is a stopword and has none. No term has this id:
/// [`SearchIndex::term_id`] panics before handing it out.
const STOPWORD: u32 = u32::MAX;

impl Default for WordCache {
    fn default() -> Self {
        Self {
            slots: vec![CacheSlot::default(); 1 << 12],
            used: 0,
            long: FastMap::default(),
        }
    }
}

impl WordCache {
    /// The term of `word`, from the cache or else from `analyse` (which returns `None` for a
    /// stopword), remembering the answer.
    #[inline]
    fn term(&mut self, word: &str, analyse: impl FnOnce(&str) -> Option<u32>) -> Option<u32> {
        let term = match pack_short(word.as_bytes()) {
            Some(key) => {
                let at = self.find(key);
                if self.slots[at].key == key {
                    self.slots[at].term
                } else {
                    let term = analyse(word).unwrap_or(STOPWORD);
                    self.insert(at, key, term);
                    term
                }
            }
            None => match self.long.get(word) {
                Some(&term) => term,
                None => {
                    let term = analyse(word).unwrap_or(STOPWORD);
                    self.long.insert(word.into(), term);
                    term
                }
            },
        };
        (term != STOPWORD).then_some(term)
    }

    /// The slot that holds `key`, or else the empty slot where it belongs.
    #[inline]
    fn find(&self, key: [u64; 2]) -> usize {
        // A folded multiply (the halves of a 64×64→128-bit product, XOR-ed), as in `foldhash`.
        let product =
            u128::from(key[0] ^ 0x243f_6a88_85a3_08d3) * u128::from(key[1] ^ 0x1319_8a2e_0370_7344);
        let hash = product as u64 ^ (product >> 64) as u64;
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            let slot = self.slots[at].key;
            if slot == key || slot == [0, 0] {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// Puts `key` in the empty slot `at` that [`find`](Self::find) returned for it.
    fn insert(&mut self, at: usize, key: [u64; 2], term: u32) {
        self.used += 1;
        if self.used * 2 <= self.slots.len() {
            self.slots[at] = CacheSlot { key, term };
            return;
        }
        let grown = vec![CacheSlot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, grown);
        for slot in old.into_iter().chain([CacheSlot { key, term }]) {
            if slot.key != [0, 0] {
                let at = self.find(slot.key);
                self.slots[at] = slot;
            }
        }
    }
}

/// A word of 1 to 15 bytes as two integers, or `None` for another length. Distinct words give
/// distinct keys: the length is in the top byte of the second integer, and the bytes below are
/// read so that together with the length they determine every byte of the word.
///
/// Two to four loads of up to eight bytes instead of a loop over the bytes: a word of 8 to 15
/// bytes is its first eight bytes and its bytes from the ninth on, the latter taken from an
/// overlapping load of the last eight; a word of 4 to 7 bytes is its first four and its last
/// four (overlapping); a shorter one is its first, middle and last byte.
fn pack_short(word: &[u8]) -> Option<[u64; 2]> {
    let len = word.len();
    let load8 = |at: usize| u64::from_le_bytes(word[at..at + 8].try_into().expect("8 bytes"));
    let load4 = |at: usize| {
        u64::from(u32::from_le_bytes(
            word[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    let (lo, hi) = match len {
        1..=3 => (
            u64::from(word[0]) | u64::from(word[len / 2]) << 8 | u64::from(word[len - 1]) << 16,
            0,
        ),
        4..=7 => (load4(0) | load4(len - 4) << 32, 0),
        // The last eight bytes, shifted to drop the ones the first load has (all of them for
        // eight bytes): the top byte of `hi` stays clear for the length.
        8..=15 => (
            load8(0),
            load8(len - 8)
                .checked_shr(8 * (16 - len as u32))
                .unwrap_or(0),
        ),
        _ => return None,
    };
    Some([lo, hi | (len as u64) << 56])
}

/// True when `needle` occurs in `haystack` with no letter or digit right before or after it.
fn contains_word(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(at) = haystack[from..].find(needle) {
        let start = from + at;
        let end = start + needle.len();
        let before = haystack[..start].chars().next_back();
        let after = haystack[end..].chars().next();
        if !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric) {
            return true;
        }
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn pair(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// Analyses `text` into stems, without stopwords, calling `emit` with each stem.
fn analyse(text: &str, stem_buf: &mut String, mut emit: impl FnMut(&str)) {
    split_words(text, |w| {
        if !is_stopword(w) {
            emit(stem(w, stem_buf));
        }
    });
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
        // Room for a few new words per tool, so the vocabulary rarely rehashes mid-batch.
        self.vocabulary.reserve(self.live.max(1024));
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
    /// [`analyse`], through the batch's [`WordCache`].
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
            let chunk = Vec::with_capacity(PENDING_CHUNK.max(b.doc_terms.len()));
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

    fn idf(&self, df: usize) -> f32 {
        let n = self.live as f32;
        let df = df as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Ranks the tools for `query`, best first, keeping at most `limit` hits.
    ///
    /// `server` keeps only that server's tools. An empty query (or one made only of stopwords)
    /// matches every tool, listed by id. Ties are broken by id. Only the first
    /// [`MAX_QUERY_CHARS`](super::MAX_QUERY_CHARS) characters and the first
    /// [`MAX_QUERY_TERMS`](super::MAX_QUERY_TERMS) distinct words of the query are read.
    pub fn search(&self, query: &str, server: Option<&str>, limit: usize) -> SearchResults {
        let cfg = &self.config;
        let query = match query.char_indices().nth(super::MAX_QUERY_CHARS) {
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
                if distinct.len() == super::MAX_QUERY_TERMS {
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
            return self.list_all(server, limit);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{DatasetTool, synthetic_queries, synthetic_tools};

    fn texts<'a>(tools: &'a [DatasetTool], ids: &'a [String]) -> Vec<ToolText<'a>> {
        tools
            .iter()
            .zip(ids)
            .map(|(t, id)| {
                ToolText::new(id, &t.server, &t.name)
                    .with_description(t.description.as_deref())
                    .with_input_schema(t.input_schema.as_ref())
            })
            .collect()
    }

    fn ranking(index: &SearchIndex, query: &str) -> Vec<(String, u32)> {
        index
            .search(query, None, usize::MAX)
            .hits
            .iter()
            .map(|h| (h.id.to_string(), h.score.to_bits()))
            .collect()
    }

    /// Replacing one server's tools gives exactly the index built from scratch with the new
    /// tools: same hits, same scores to the bit.
    #[test]
    fn incremental_updates_equal_a_fresh_build() {
        let all = synthetic_tools(300, 3);
        let ids: Vec<String> = all.iter().map(DatasetTool::id).collect();
        let (first, rest) = all.split_at(100);
        let (first_ids, rest_ids) = ids.split_at(100);
        let replacement = synthetic_tools(40, 99);
        let replacement_ids: Vec<String> = replacement
            .iter()
            .map(|t| format!("a__{}", t.name))
            .collect();

        let mut incremental = SearchIndex::default();
        incremental.replace_server("a", texts(first, first_ids));
        incremental.replace_server("b", texts(rest, rest_ids));
        incremental.replace_server("a", texts(&replacement, &replacement_ids));
        incremental.replace_server("c", texts(first, first_ids));
        incremental.remove_server("c");

        let mut fresh = SearchIndex::default();
        fresh.replace_servers([
            ("b", texts(rest, rest_ids)),
            ("a", texts(&replacement, &replacement_ids)),
        ]);

        assert_eq!(incremental.len(), fresh.len());
        assert_eq!(incremental.servers(), fresh.servers());
        for query in synthetic_queries(&all, 50, 5)
            .iter()
            .chain(synthetic_queries(&replacement, 20, 6).iter())
        {
            assert_eq!(
                ranking(&incremental, query),
                ranking(&fresh, query),
                "{query}"
            );
        }
        // The replaced tools are gone.
        let gone = &first_ids[0];
        assert!(
            incremental
                .search(&first[0].name, None, usize::MAX)
                .hits
                .iter()
                .all(|h| &*h.id != gone)
        );
    }

    #[test]
    fn packed_words_are_distinct() {
        // Every word of 1 to 15 bytes over a two-letter alphabet: words that share prefixes,
        // suffixes and overlapping middles, and differ only in length.
        for (zero, one) in [(b'a', b'b'), (0x00, 0xff)] {
            let mut keys: HashMap<[u64; 2], Vec<u8>> = HashMap::new();
            for len in 1..=15u32 {
                for bits in 0..1u32 << len {
                    let word: Vec<u8> = (0..len)
                        .map(|i| if bits >> i & 1 == 1 { one } else { zero })
                        .collect();
                    let key = pack_short(&word).expect("short word");
                    assert_ne!(key, [0, 0], "the empty slot's key");
                    if let Some(other) = keys.insert(key, word.clone()) {
                        panic!("{other:?} and {word:?} share a key");
                    }
                }
            }
        }
        assert_eq!(pack_short(b""), None);
        assert_eq!(pack_short(&[b'a'; 16]), None);
    }

    #[test]
    fn word_cache_remembers_through_growth() {
        let mut cache = WordCache::default();
        let words: Vec<String> = (0..20_000).map(|i| format!("w{i}")).collect();
        for (i, w) in words.iter().enumerate() {
            let analysed = (i % 7 != 0).then_some(i as u32);
            assert_eq!(cache.term(w, |_| analysed), analysed);
        }
        let long = "a".repeat(40);
        assert_eq!(cache.term(&long, |_| Some(3)), Some(3));
        for (i, w) in words.iter().enumerate() {
            let expected = (i % 7 != 0).then_some(i as u32);
            assert_eq!(cache.term(w, |_| panic!("{w} is cached")), expected);
        }
        assert_eq!(cache.term(&long, |_| panic!("cached")), Some(3));
    }

    #[test]
    fn exact_names_and_abbreviations() {
        let mut index = SearchIndex::default();
        index.replace_server(
            "m",
            [
                ToolText::new("m__math.hypot", "m", "math.hypot")
                    .with_description(Some("Euclidean norm of a vector")),
                ToolText::new("m__triangle_area", "m", "triangle_area")
                    .with_description(Some("Area of a right triangle from its sides")),
                ToolText::new("m__calc_tax", "m", "calc_tax")
                    .with_description(Some("Income tax owed")),
            ],
        );
        // `hypot` abbreviates `hypotenuse`; `calc` abbreviates `calculate`.
        assert_eq!(
            &*index.search("hypotenuse", None, 1).hits[0].id,
            "m__math.hypot"
        );
        assert_eq!(
            &*index.search("calculate my taxes", None, 1).hits[0].id,
            "m__calc_tax"
        );
        // The whole name in the query wins over description words.
        let found = index.search("use math.hypot for the right triangle area", None, 3);
        assert_eq!(&*found.hits[0].id, "m__math.hypot");
    }
}
