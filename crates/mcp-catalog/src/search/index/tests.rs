//! Unit tests of the index: incremental updates, the word cache, exact names.

use super::analysis::{WordCache, pack_short};
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
            ToolText::new("m__calc_tax", "m", "calc_tax").with_description(Some("Income tax owed")),
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
