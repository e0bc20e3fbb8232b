//! Words to terms: splitting, stopwords and stems, the per-batch word cache, and the word
//! tests a query needs.

use crate::search::text::{is_stopword, split_words, stem};

use super::FastMap;

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
pub(super) struct WordCache {
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
/// [`SearchIndex::term_id`](super::SearchIndex::term_id) panics before handing it out.
const STOPWORD: u32 = u32::MAX;

impl Default for WordCache {
    fn default() -> Self {
        Self {
            // 6 KiB: a small catalog's words fit; a large one's grow it by doubling.
            slots: vec![CacheSlot::default(); 1 << 8],
            used: 0,
            long: FastMap::default(),
        }
    }
}

impl WordCache {
    /// The term of `word`, from the cache or else from `analyse` (which returns `None` for a
    /// stopword), remembering the answer.
    #[inline]
    pub(super) fn term(
        &mut self,
        word: &str,
        analyse: impl FnOnce(&str) -> Option<u32>,
    ) -> Option<u32> {
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
pub(super) fn pack_short(word: &[u8]) -> Option<[u64; 2]> {
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
pub(super) fn contains_word(haystack: &str, needle: &str) -> bool {
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

pub(super) fn pair(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// Analyses `text` into stems, without stopwords, calling `emit` with each stem.
pub(super) fn analyse(text: &str, stem_buf: &mut String, mut emit: impl FnMut(&str)) {
    split_words(text, |w| {
        if !is_stopword(w) {
            emit(stem(w, stem_buf));
        }
    });
}
