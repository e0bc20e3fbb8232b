//! Text analysis for the search index: splitting identifiers and prose into words, dropping
//! stopwords and reducing words to a light stem.
//!
//! The same analysis runs on tool documents and on queries, so a query word and a document word
//! match when their stems are equal.

use std::collections::HashSet;
use std::sync::OnceLock;

use foldhash::fast::FixedState;

/// Splits `text` into lower-case words.
///
/// Identifiers are split at every boundary a naming convention uses: `snake_case`, `kebab-case`,
/// `dotted.names`, `camelCase`, `HTTPServer` (an acronym followed by a word), and letter/digit
/// changes (`log2` → `log`, `2`). Non-ASCII letters and digits are kept as word characters.
///
/// `emit` is called once per word, in order.
///
/// When a run of letters and digits was split (`GitHub` → `git`, `hub`), the whole run is
/// emitted too, after its parts (`github`), so a query that writes the word whole still matches.
pub(crate) fn split_words(text: &str, mut emit: impl FnMut(&str)) {
    // The ASCII splitter is the only place that calls `emit` directly; the rarer paths call it
    // through a trait object, so that the compiler does not copy them for every caller.
    if text.is_ascii() {
        split_ascii(text, &mut emit);
    } else {
        split_unicode(text, &mut emit);
    }
}

/// [`split_words`] for text with non-ASCII characters, char by char.
fn split_unicode(text: &str, emit: &mut dyn FnMut(&str)) {
    let mut word = String::new();
    let mut run = String::new();
    let mut parts = 0usize;
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_alphanumeric() {
            end_run(&mut word, &mut run, &mut parts, emit);
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let next = chars.peek().copied();
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
                || (p.is_numeric() != c.is_numeric());
            if boundary && !word.is_empty() {
                emit(&word);
                word.clear();
                parts += 1;
            }
        }
        for l in c.to_lowercase() {
            word.push(l);
            run.push(l);
        }
        prev = Some(c);
    }
    end_run(&mut word, &mut run, &mut parts, emit);
}

// Classes of ASCII bytes, as bit flags, so that OR-ing them over a run tells which classes it
// holds.
const OTHER: u8 = 0;
const LOWER: u8 = 1;
const UPPER: u8 = 2;
const DIGIT: u8 = 4;
const ASCII_CLASS: [u8; 256] = {
    let mut table = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'a'..=b'z' => LOWER,
            b'A'..=b'Z' => UPPER,
            b'0'..=b'9' => DIGIT,
            _ => OTHER,
        };
        b += 1;
    }
    table
};

/// [`split_words`] for ASCII text, on bytes: the same rules, several times faster.
///
/// Each run of letters and digits is scanned once to find its end and which classes of bytes
/// it holds, lower-case letters eight at a time ([`lowercase_prefix`]). A run of one class only
/// (`weather`, `2024`: most words of prose) has no boundary inside and is emitted as it
/// stands; a mixed run goes to [`split_mixed`].
fn split_ascii(text: &str, emit: &mut impl FnMut(&str)) {
    let class = |b: u8| ASCII_CLASS[usize::from(b)];
    let bytes = text.as_bytes();
    let mut lowered = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if class(bytes[i]) == OTHER {
            i += 1;
            continue;
        }
        let start = i;
        // Lower-case letters eight at a time first: most runs are lower-case words.
        while let Some(chunk) = bytes.get(i..i + 8) {
            let lower = lowercase_prefix(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            i += lower;
            if lower < 8 {
                break;
            }
        }
        let mut classes = if i > start { LOWER } else { OTHER };
        while i < bytes.len() {
            let c = class(bytes[i]);
            if c == OTHER {
                break;
            }
            classes |= c;
            i += 1;
        }
        let run = &text[start..i];
        if classes == LOWER || classes == DIGIT {
            emit(run);
            continue;
        }
        // Through a trait object: see `split_words`.
        split_mixed(run, classes & UPPER != 0, &mut lowered, emit);
    }
}

/// Splits a run of ASCII letters and digits that holds more than one class of them (the slow
/// path of [`split_ascii`]). Only a run with capitals is copied, into `lowered`, a lower-case
/// buffer reused for the whole text.
fn split_mixed(run: &str, upper: bool, lowered: &mut String, emit: &mut dyn FnMut(&str)) {
    let class = |b: u8| ASCII_CLASS[usize::from(b)];
    let lower: &str = if upper {
        lowered.clear();
        lowered.push_str(run);
        lowered.make_ascii_lowercase();
        lowered
    } else {
        run
    };
    let run = run.as_bytes();
    let mut part_start = 0;
    for j in 1..run.len() {
        let p = class(run[j - 1]);
        let c = class(run[j]);
        let boundary = (p == LOWER && c == UPPER)
            || (p == UPPER && c == UPPER && run.get(j + 1).is_some_and(|&n| class(n) == LOWER))
            || ((p == DIGIT) != (c == DIGIT));
        if boundary {
            emit(&lower[part_start..j]);
            part_start = j;
        }
    }
    emit(&lower[part_start..]);
    if part_start > 0 {
        emit(lower);
    }
}

/// How many of the eight ASCII bytes of `chunk` (first byte lowest) are lower-case letters
/// before the first that is not, with no loop over the bytes.
///
/// Adding `0x1f` to a byte sets its top bit exactly when the byte is at least `a` (0x61), and
/// adding `0x05` exactly when it is past `z` (0x7a); ASCII bytes are below 0x80, so no sum
/// carries into the next byte.
fn lowercase_prefix(chunk: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOP: u64 = 0x80 * ONES;
    let at_least_a = chunk + 0x1f * ONES;
    let past_z = chunk + 0x05 * ONES;
    let not_lower = !(at_least_a & !past_z) & TOP;
    // No such byte: `trailing_zeros` is 64, so eight.
    (not_lower.trailing_zeros() / 8) as usize
}

fn end_run(word: &mut String, run: &mut String, parts: &mut usize, emit: &mut dyn FnMut(&str)) {
    if !word.is_empty() {
        emit(word);
        word.clear();
        *parts += 1;
    }
    if *parts > 1 {
        emit(run);
    }
    run.clear();
    *parts = 0;
}

/// English function words and request filler that carry no meaning for tool search.
///
/// Kept short on purpose: words that name an action (`get`, `find`, `list`, `search`) are *not*
/// stopwords; inverse document frequency already discounts them where they are common.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "after",
    "again",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "before",
    "being",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "during",
    "each",
    "either",
    "etc",
    "e",
    "eg",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "him",
    "his",
    "how",
    "i",
    "ie",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "kindly",
    "let",
    "me",
    "might",
    "mine",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "need",
    "needs",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "very",
    "want",
    "wants",
    "was",
    "we",
    "were",
    "what",
    "whats",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
];

/// True for a word that is dropped from documents and queries.
pub(crate) fn is_stopword(word: &str) -> bool {
    static SHORT: OnceLock<HashSet<u64, FixedState>> = OnceLock::new();
    static FIRST: OnceLock<[u16; 128]> = OnceLock::new();
    // Most words are no stopword: rule them out by length and first letter before hashing.
    let len = word.len();
    if len == 0 || len > MAX_STOPWORD_LEN {
        return false;
    }
    let first = FIRST.get_or_init(|| {
        let mut table = [0u16; 128];
        for w in STOPWORDS {
            table[usize::from(w.as_bytes()[0] & 0x7f)] |= 1 << w.len();
        }
        table
    });
    if first[usize::from(word.as_bytes()[0] & 0x7f)] & (1 << len) == 0 {
        return false;
    }
    match pack(word) {
        Some(key) => SHORT
            .get_or_init(|| STOPWORDS.iter().filter_map(|w| pack(w)).collect())
            .contains(&key),
        None => STOPWORDS
            .iter()
            .any(|w| w.len() == word.len() && *w == word),
    }
}

/// A word of at most seven bytes as one integer (its length in the top byte), so stopword lookups compare integers.
fn pack(word: &str) -> Option<u64> {
    let bytes = word.as_bytes();
    (bytes.len() <= 7).then(|| {
        bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)) | ((bytes.len() as u64) << 56)
    })
}

const MAX_STOPWORD_LEN: usize = 10;

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

fn has_vowel(s: &[u8]) -> bool {
    s.iter().any(|&b| is_vowel(b) || b == b'y')
}

/// Reduces an English word to a light stem, so that `issues`, `issue` and `issued`, or
/// `creating`, `creates` and `created`, share one.
///
/// A small, conservative suffix stripper rather than a full Porter stemmer: plural `-s`/`-es`/
/// `-ies`, `-ing`, `-ed`, `-ation`, `-ator`, a final silent `-e`, and doubled final consonants.
/// Words of three letters or fewer, words with non-ASCII letters and numbers are left as they
/// are. The stem is a prefix of the word (returned without copying) except for `-ies` → `-y`,
/// which is written into `buf`.
pub(crate) fn stem<'a>(word: &'a str, buf: &'a mut String) -> &'a str {
    let b = word.as_bytes();
    if b.len() <= 3 || !word.is_ascii() || !b[0].is_ascii_alphabetic() {
        return word;
    }
    // Byte by byte: suffixes are a few bytes, too short to be worth a call to `memcmp`.
    let ends = |n: usize, suffix: &str| {
        let suffix = suffix.as_bytes();
        n >= suffix.len()
            && b[n - suffix.len()..n]
                .iter()
                .zip(suffix)
                .all(|(x, y)| x == y)
    };
    let mut n = b.len();
    // Plurals; `-ies` becomes `-y` (`categories` → `category`).
    let y = ends(n, "ies") && n > 4;
    if y {
        n -= 3;
    } else if ends(n, "sses")
        || ends(n, "xes")
        || ends(n, "ches")
        || ends(n, "shes")
        || ends(n, "zes")
    {
        n -= 2;
    } else if ends(n, "s") && !ends(n, "ss") && !ends(n, "us") && !ends(n, "is") {
        n -= 1;
    }
    if y {
        buf.clear();
        buf.push_str(&word[..n]);
        buf.push('y');
        return buf;
    }
    // Verb and noun endings; `-ation` and `-ator` keep their `at` (`calculat`).
    let mut stripped = false;
    for (suffix, keep) in [
        ("ations", 2usize),
        ("ation", 2),
        ("ators", 2),
        ("ator", 2),
        ("ing", 0),
        ("ed", 0),
    ] {
        if ends(n, suffix) && n - suffix.len() >= 3 && has_vowel(&b[..n - suffix.len()]) {
            n -= suffix.len() - keep;
            stripped = true;
            break;
        }
    }
    // `stopped` → `stopp` → `stop`; but keep `ll`, `ss`, `zz` (`installed` → `install`).
    if stripped
        && n >= 3
        && b[n - 1] == b[n - 2]
        && !is_vowel(b[n - 1])
        && !matches!(b[n - 1], b'l' | b's' | b'z')
    {
        n -= 1;
    }
    // A final silent `e`: `create` and `creat(ing)` meet at `creat`.
    if n > 4 && b[n - 1] == b'e' && b[n - 2] != b'e' {
        n -= 1;
    }
    &word[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stem_of(word: &str) -> String {
        let mut buf = String::new();
        stem(word, &mut buf).to_owned()
    }

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        split_words(text, |w| out.push(w.to_owned()));
        out
    }

    #[test]
    fn stopwords_are_distinct_and_short() {
        assert!(STOPWORDS.iter().all(|w| w.len() <= MAX_STOPWORD_LEN));
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), STOPWORDS.len());
        assert!(is_stopword("the") && !is_stopword("weather"));
    }

    #[test]
    fn splits_every_naming_convention() {
        for (input, expected) in [
            ("create_issue", &["create", "issue"][..]),
            ("createIssue", &["create", "issue", "createissue"]),
            ("CreateIssue", &["create", "issue", "createissue"]),
            ("create-issue", &["create", "issue"]),
            ("math.factorial", &["math", "factorial"]),
            ("HTTPServer", &["http", "server", "httpserver"]),
            (
                "getHTTPResponseCode",
                &["get", "http", "response", "code", "gethttpresponsecode"],
            ),
            ("log2", &["log", "2", "log2"]),
            ("sha256sum", &["sha", "256", "sum", "sha256sum"]),
            (
                "Find a GitHub issue!",
                &["find", "a", "git", "hub", "github", "issue"],
            ),
            ("données_météo", &["données", "météo"]),
        ] {
            assert_eq!(words(input), expected, "{input}");
        }
    }

    #[test]
    fn lowercase_prefix_counts_letters() {
        let prefix = |s: &[u8; 8]| lowercase_prefix(u64::from_le_bytes(*s));
        assert_eq!(prefix(b"abcdefgh"), 8);
        assert_eq!(prefix(b"weather "), 7);
        assert_eq!(prefix(b"az{`AZ09"), 2);
        assert_eq!(prefix(b"Abcdefgh"), 0);
        assert_eq!(prefix(b"abc1defg"), 3);
        // Every ASCII byte, at every position.
        for b in 0u8..128 {
            for at in 0..8 {
                let mut chunk = *b"zzzzzzzz";
                chunk[at] = b;
                let expected = if b.is_ascii_lowercase() { 8 } else { at };
                assert_eq!(prefix(&chunk), expected, "{b:#x} at {at}");
            }
        }
    }

    #[test]
    fn ascii_and_unicode_paths_agree() {
        for input in [
            "getHTTPResponseCode v2",
            "math.factorial",
            "ABC",
            "a1b2",
            "x_Y-z.W",
        ] {
            let mut slow = Vec::new();
            // A non-ASCII character that is not alphanumeric forces the general path.
            split_words(&format!("{input}\u{2014}"), |w| slow.push(w.to_owned()));
            assert_eq!(words(input), slow, "{input}");
        }
        // Pseudo-random identifiers and prose, long enough to cross eight-byte chunks.
        const ALPHABET: &[u8] = b"abcxyzABCXYZ0189 _-.";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5_000 {
            let mut input = String::new();
            for _ in 0..state % 40 {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                input.push(char::from(
                    ALPHABET[(state >> 33) as usize % ALPHABET.len()],
                ));
            }
            let mut slow = Vec::new();
            split_words(&format!("{input}\u{2014}"), |w| slow.push(w.to_owned()));
            assert_eq!(words(&input), slow, "{input}");
        }
    }

    #[test]
    fn stems_meet() {
        for group in [
            &["issue", "issues", "issued"][..],
            &["create", "creates", "created", "creating", "creation"],
            &[
                "calculate",
                "calculates",
                "calculated",
                "calculating",
                "calculation",
                "calculator",
            ],
            &["stop", "stopped", "stopping", "stops"],
            &["category", "categories"],
            &["install", "installed", "installing"],
            &["search", "searches", "searching"],
            &["file", "files"],
        ] {
            let stems: Vec<_> = group.iter().map(|w| stem_of(w)).collect();
            assert!(
                stems.iter().all(|s| *s == stems[0]),
                "{group:?} -> {stems:?}"
            );
        }
        assert_eq!(stem_of("status"), "status");
        assert_eq!(stem_of("bus"), "bus");
        assert_eq!(stem_of("analysis"), "analysis");
        assert_eq!(stem_of("2024"), "2024");
    }
}
