//! Hybrid ranking with fake embedders: every fault gives the lexical ranking and a warning.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::super::cache::{EmbeddingCache, document_hash};
use super::super::embed::{EmbedError, EmbedKind, Embedder, check_vectors, embedding_text};
use super::{Fusion, HybridConfig, HybridIndex, blend, dot, head_stats, ranks_of};
use crate::search::{SearchIndex, ToolText};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Vectors by topic words: money, weather, files.
    Good,
    WrongDimension,
    Nan,
    Error,
    Hang,
    TooFew,
}

#[derive(Debug)]
struct Fake {
    mode: Mode,
    /// The mode of query calls (single texts), when it differs.
    query_mode: Option<Mode>,
    calls: AtomicUsize,
    texts: AtomicUsize,
    longest: AtomicUsize,
}

impl Fake {
    fn new(mode: Mode) -> Arc<Self> {
        Arc::new(Self {
            mode,
            query_mode: None,
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            longest: AtomicUsize::new(0),
        })
    }

    fn failing_queries(mode: Mode) -> Arc<Self> {
        Arc::new(Self {
            mode: Mode::Good,
            query_mode: Some(mode),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            longest: AtomicUsize::new(0),
        })
    }
}

fn topic(text: &str) -> Vec<f32> {
    let t = text.to_lowercase();
    let has = |words: &[&str]| f32::from(u8::from(words.iter().any(|w| t.contains(w))));
    vec![
        has(&["pay", "invoice", "bill", "money"]) + 0.05,
        has(&["weather", "rain", "forecast", "umbrella"]) + 0.05,
        has(&["file", "document", "disk"]) + 0.05,
    ]
}

#[async_trait]
impl Embedder for Fake {
    fn model_id(&self) -> &str {
        "fake-topics"
    }

    fn dimension(&self) -> usize {
        3
    }

    fn max_batch(&self) -> usize {
        2
    }

    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        for t in texts {
            self.longest.fetch_max(t.len(), Ordering::SeqCst);
        }
        let mode = match self.query_mode {
            Some(m) if kind == EmbedKind::Query => m,
            _ => self.mode,
        };
        let good = || texts.iter().map(|t| topic(t)).collect::<Vec<_>>();
        match mode {
            Mode::Good => Ok(good()),
            Mode::WrongDimension => Ok(texts.iter().map(|_| vec![1.0; 4]).collect()),
            Mode::Nan => Ok(texts.iter().map(|_| vec![f32::NAN, 1.0, 0.0]).collect()),
            Mode::Error => Err(EmbedError::backend("the model server said 503")),
            Mode::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(good())
            }
            Mode::TooFew => Ok(good().into_iter().skip(1).collect()),
        }
    }
}

const TOOLS: [(&str, &str); 4] = [
    ("create_invoice", "Create an invoice for a customer."),
    ("get_forecast", "Tomorrow's weather for a city."),
    ("read_file", "Read a file from disk."),
    ("list_items", "List the items of a store."),
];

fn texts() -> Vec<ToolText<'static>> {
    TOOLS
        .iter()
        .map(|(name, desc)| {
            let id: &'static str = Box::leak(format!("shop__{name}").into_boxed_str());
            ToolText::new(id, "shop", name).with_description(Some(desc))
        })
        .collect()
}

fn lexical() -> SearchIndex {
    let mut index = SearchIndex::default();
    index.replace_server("shop", texts());
    index
}

fn config() -> HybridConfig {
    HybridConfig {
        query_timeout: Duration::from_millis(100),
        batch_timeout: Duration::from_millis(100),
        ..HybridConfig::default()
    }
}

async fn hybrid(fake: Arc<Fake>, cache: Arc<EmbeddingCache>) -> (HybridIndex, usize) {
    let mut h = HybridIndex::new(fake, cache, config());
    let warnings = h.set_tools(texts()).await;
    (h, warnings.len())
}

#[tokio::test]
async fn a_query_in_other_words_finds_the_tool_by_meaning() {
    let index = lexical();
    let (h, warnings) = hybrid(Fake::new(Mode::Good), Arc::default()).await;
    assert_eq!(warnings, 0);
    assert_eq!(h.len(), 4);
    // No query word is in any tool's text.
    assert!(index.search("will it rain", None, 5).hits.is_empty());
    let found = h.search(&index, "will it rain", None, 5).await;
    assert!(found.warning.is_none());
    assert_eq!(&*found.results.hits[0].id, "shop__get_forecast");
    // A lexical match still counts: "invoice" wins for an invoice query.
    let found = h.search(&index, "invoice", None, 2).await;
    assert_eq!(&*found.results.hits[0].id, "shop__create_invoice");
    assert_eq!(found.results.hits.len(), 2);
    // The server filter holds.
    let found = h.search(&index, "will it rain", Some("other"), 5).await;
    assert!(found.results.hits.is_empty());
}

#[tokio::test]
async fn every_fusion_finds_by_meaning_keeps_word_matches_and_the_server_filter() {
    let index = lexical();
    for fusion in [
        Fusion::MinMax,
        Fusion::ZScore { top_k: 2 },
        Fusion::ZScore { top_k: 100 },
        Fusion::Rrf { k: 10.0 },
    ] {
        let config = HybridConfig { fusion, ..config() };
        let mut h = HybridIndex::new(Fake::new(Mode::Good), Arc::default(), config);
        assert!(h.set_tools(texts()).await.is_empty());
        let found = h.search(&index, "will it rain", None, 5).await;
        assert_eq!(
            &*found.results.hits[0].id, "shop__get_forecast",
            "{fusion:?}"
        );
        assert_eq!(found.results.hits.len(), 4, "{fusion:?}");
        let found = h.search(&index, "invoice", None, 2).await;
        assert_eq!(
            &*found.results.hits[0].id, "shop__create_invoice",
            "{fusion:?}"
        );
        assert_eq!(found.results.hits.len(), 2);
        let found = h.search(&index, "will it rain", Some("other"), 5).await;
        assert!(found.results.hits.is_empty(), "{fusion:?}");
    }
}

#[tokio::test]
async fn a_repeated_query_is_embedded_once_and_the_oldest_goes_first() {
    let fake = Fake::new(Mode::Good);
    let small = HybridConfig {
        query_cache: 2,
        ..config()
    };
    let h = HybridIndex::new(fake.clone(), Arc::default(), small);
    let calls = || fake.calls.load(Ordering::SeqCst);
    let first = h.embed_query("will it rain").await.unwrap();
    // Surrounding blanks do not make another query.
    assert_eq!(h.embed_query("  will it rain ").await.unwrap(), first);
    assert_eq!(calls(), 1);
    h.embed_query("pay the bill").await.unwrap();
    h.embed_query("will it rain").await.unwrap();
    assert_eq!(calls(), 2);
    // A third query evicts the least recently used, "pay the bill".
    h.embed_query("read a file").await.unwrap();
    h.embed_query("will it rain").await.unwrap();
    assert_eq!(calls(), 3);
    h.embed_query("pay the bill").await.unwrap();
    assert_eq!(calls(), 4);
    // Without a cache every query is embedded; a failure is never cached.
    let fake = Fake::failing_queries(Mode::Error);
    let h = HybridIndex::new(fake.clone(), Arc::default(), config());
    assert!(h.embed_query("will it rain").await.is_err());
    assert!(h.embed_query("will it rain").await.is_err());
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    let fake = Fake::new(Mode::Good);
    let uncached = HybridConfig {
        query_cache: 0,
        ..config()
    };
    let h = HybridIndex::new(fake.clone(), Arc::default(), uncached);
    h.embed_query("will it rain").await.unwrap();
    h.embed_query("will it rain").await.unwrap();
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn ranks_and_head_statistics() {
    assert_eq!(ranks_of(&[0.1, 0.9, 0.5, 0.9]), vec![4, 1, 3, 2]);
    assert!(ranks_of(&[]).is_empty());
    // The head is the two largest: 4 and 2, mean 3, deviation 1.
    assert_eq!(head_stats(&[1.0, 4.0, 2.0, 0.0], 2), (3.0, 1.0));
    // Equal scores: a floor on the deviation, never a division by zero.
    let (mean, dev) = head_stats(&[0.5, 0.5], 10);
    assert_eq!(mean, 0.5);
    assert!(dev > 0.0);
    assert_eq!(head_stats(&[], 5), (0.0, 1.0));
    // The laned dot product is the plain one, remainder included.
    let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.25).collect();
    let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    assert!((dot(&a, &b) - plain).abs() < 1e-3);
}

async fn assert_lexical_fallback(fake: Arc<Fake>, expect: &str) {
    let index = lexical();
    let mut h = HybridIndex::new(fake, Arc::default(), config());
    let _ = h.set_tools(texts()).await;
    let found = tokio::time::timeout(
        Duration::from_secs(5),
        h.search(&index, "read a file", None, 3),
    )
    .await
    .expect("a search never stalls");
    assert_eq!(found.results, index.search("read a file", None, 3));
    let warning = found
        .warning
        .expect("a warning says why the ranking is lexical");
    assert!(
        warning.message.contains(expect),
        "{expect:?} not in {:?}",
        warning.message
    );
}

#[tokio::test]
async fn tool_vectors_of_the_wrong_dimension_give_lexical_results_and_a_warning() {
    assert_lexical_fallback(Fake::new(Mode::WrongDimension), "0 of 4 tools").await;
}

#[tokio::test]
async fn a_query_vector_of_the_wrong_dimension_gives_lexical_results_and_a_warning() {
    assert_lexical_fallback(
        Fake::failing_queries(Mode::WrongDimension),
        "the model's dimension is 3",
    )
    .await;
}

#[tokio::test]
async fn a_nan_gives_lexical_results_and_a_warning() {
    assert_lexical_fallback(Fake::new(Mode::Nan), "0 of 4 tools").await;
    assert_lexical_fallback(Fake::failing_queries(Mode::Nan), "NaN").await;
}

#[tokio::test]
async fn an_embedder_error_gives_lexical_results_and_a_warning() {
    assert_lexical_fallback(Fake::new(Mode::Error), "0 of 4 tools").await;
    assert_lexical_fallback(Fake::failing_queries(Mode::Error), "503").await;
}

#[tokio::test]
async fn a_hanging_embedder_is_waited_for_boundedly() {
    assert_lexical_fallback(Fake::new(Mode::Hang), "0 of 4 tools").await;
    assert_lexical_fallback(Fake::failing_queries(Mode::Hang), "no answer within 100 ms").await;
}

#[tokio::test]
async fn too_few_vectors_give_lexical_results_and_a_warning() {
    assert_lexical_fallback(Fake::failing_queries(Mode::TooFew), "0 vectors for 1 texts").await;
}

#[tokio::test]
async fn the_warnings_of_a_failed_update_name_the_model_and_the_cause() {
    let mut h = HybridIndex::new(Fake::new(Mode::Error), Arc::default(), config());
    let warnings = h.set_tools(texts()).await;
    // The first batch of two tools failed: the other two are not tried.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("`fake-topics`"));
    assert!(warnings[0].message.contains("503"));
    assert!(warnings[0].message.contains("2 more not tried"));
    assert!(h.is_empty());
}

#[tokio::test]
async fn an_empty_catalog_never_calls_the_embedder() {
    let fake = Fake::new(Mode::Good);
    let mut h = HybridIndex::new(fake.clone(), Arc::default(), config());
    assert!(h.set_tools([]).await.is_empty());
    let found = h.search(&SearchIndex::default(), "anything", None, 5).await;
    assert!(found.results.hits.is_empty());
    assert!(found.warning.is_none());
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_query_of_100_kb_is_cut_before_it_is_embedded() {
    let index = lexical();
    let fake = Fake::new(Mode::Good);
    let (h, _) = hybrid(fake.clone(), Arc::default()).await;
    let query = "umbrella ".repeat(100 * 1024 / 9);
    let found = h.search(&index, &query, None, 3).await;
    assert!(found.warning.is_none());
    assert_eq!(&*found.results.hits[0].id, "shop__get_forecast");
    assert!(fake.longest.load(Ordering::SeqCst) <= crate::search::MAX_QUERY_CHARS);
}

#[tokio::test]
async fn vectors_are_embedded_once_per_model_and_document() {
    let fake = Fake::new(Mode::Good);
    let cache = Arc::new(EmbeddingCache::in_memory());
    let (_, _) = hybrid(fake.clone(), cache.clone()).await;
    assert_eq!(fake.texts.load(Ordering::SeqCst), 4);
    let (again, _) = hybrid(fake.clone(), cache.clone()).await;
    assert_eq!(fake.texts.load(Ordering::SeqCst), 4, "all from the cache");
    assert_eq!(again.len(), 4);
    // A changed description is embedded again, alone.
    let mut changed = texts();
    changed[0] = ToolText::new("shop__create_invoice", "shop", "create_invoice")
        .with_description(Some("Bill a customer."));
    let mut h = HybridIndex::new(fake.clone(), cache, config());
    assert!(h.set_tools(changed).await.is_empty());
    assert_eq!(fake.texts.load(Ordering::SeqCst), 5);
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-vec-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    dir
}

#[tokio::test]
async fn the_disk_cache_serves_a_new_process() {
    let dir = temp_dir("serve");
    let fake = Fake::new(Mode::Good);
    let _ = hybrid(fake.clone(), Arc::new(EmbeddingCache::on_disk(&dir))).await;
    assert_eq!(fake.texts.load(Ordering::SeqCst), 4);
    // A new cache on the same directory: nothing embedded again.
    let fresh = Fake::new(Mode::Good);
    let (h, warnings) = hybrid(fresh.clone(), Arc::new(EmbeddingCache::on_disk(&dir))).await;
    assert_eq!(warnings, 0);
    assert_eq!(h.len(), 4);
    assert_eq!(fresh.calls.load(Ordering::SeqCst), 0);
    std::fs::remove_dir_all(&dir).ok();
}

async fn assert_rebuilt(name: &str, spoil: impl Fn(&mut Vec<u8>)) {
    let dir = temp_dir(name);
    let cache = EmbeddingCache::on_disk(&dir);
    let _ = hybrid(Fake::new(Mode::Good), Arc::new(cache)).await;
    let file = EmbeddingCache::on_disk(&dir)
        .file_of("fake-topics")
        .expect("a directory");
    let mut bytes = std::fs::read(&file).unwrap();
    spoil(&mut bytes);
    std::fs::write(&file, &bytes).unwrap();

    let fake = Fake::new(Mode::Good);
    let mut h = HybridIndex::new(
        fake.clone(),
        Arc::new(EmbeddingCache::on_disk(&dir)),
        config(),
    );
    let warnings = h.set_tools(texts()).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("rebuilt"), "{warnings:?}");
    assert_eq!(h.len(), 4);
    assert_eq!(fake.texts.load(Ordering::SeqCst), 4, "embedded again");
    // The file was rewritten whole: a third process reads it without a warning.
    let third = Fake::new(Mode::Good);
    let (_, warnings) = hybrid(third.clone(), Arc::new(EmbeddingCache::on_disk(&dir))).await;
    assert_eq!(warnings, 0);
    assert_eq!(third.calls.load(Ordering::SeqCst), 0);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_corrupted_cache_file_is_detected_and_rebuilt() {
    assert_rebuilt("flip", |b| {
        let mid = b.len() / 2;
        b[mid] ^= 0x40;
    })
    .await;
    assert_rebuilt("garbage", |b| *b = b"not vectors at all".to_vec()).await;
}

#[tokio::test]
async fn a_half_written_cache_file_is_detected_and_rebuilt() {
    assert_rebuilt("half", |b| b.truncate(b.len() / 2)).await;
}

#[test]
fn concurrent_writers_leave_a_whole_file() {
    let dir = temp_dir("writers");
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let cache = EmbeddingCache::on_disk(&dir);
                for i in 0..20u64 {
                    let angle = (t * 1000 + i) as f32;
                    cache.insert("m", t * 1000 + i, vec![angle.cos(), angle.sin()]);
                    cache.save("m", 2).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let cache = EmbeddingCache::on_disk(&dir);
    let loaded = cache.load("m", 2);
    assert!(
        matches!(loaded, super::CacheLoad::Loaded(n) if n >= 20),
        "{loaded:?}"
    );
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(names.len(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_cache_file_of_another_dimension_is_not_used() {
    let dir = temp_dir("dim");
    let cache = EmbeddingCache::on_disk(&dir);
    cache.insert("m", 1, vec![0.6, 0.8]);
    cache.save("m", 2).unwrap();
    let other = EmbeddingCache::on_disk(&dir);
    assert!(matches!(other.load("m", 3), super::CacheLoad::Rebuilt(_)));
    assert!(other.get("m", 1).is_none());
    assert_ne!(document_hash("a"), document_hash("b"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn parameter_descriptions_are_embedded_bounded_and_without_control_characters() {
    let long = format!("The city\u{1b}[31m and\u{0}state.\n{}", "x".repeat(10_000));
    let schema = serde_json::json!({"properties": {
        "location": {"type": "string", "description": long},
        "unitSystem": {"type": "string", "description": 42},
        "days": {"type": "integer", "description": "  How many days  "},
        "format": {"type": "string", "description": "An optional parameter's text"},
    }, "required": ["location", "unitSystem", "days"]});
    let tool = ToolText::new("w__forecast", "w", "forecast")
        .with_description(Some("The weather ahead"))
        .with_input_schema(schema.as_object());
    let text = super::embedding_text(&tool);
    assert!(
        text.starts_with("forecast. The weather ahead. Parameters: "),
        "{text}"
    );
    assert!(
        text.contains("location: The city [31m and state. xxx"),
        "{text}"
    );
    assert!(!text.chars().any(char::is_control), "{text}");
    // Each description is cut; names without a text description stand alone.
    let xs = text.matches('x').count();
    assert!(
        xs < super::super::embed::MAX_PARAMETER_DOC_CHARS,
        "{xs} of 10000 kept"
    );
    assert!(text.contains("; unit system unitsystem; "), "{text}");
    assert!(text.contains("days: How many days"), "{text}");
    // An optional parameter is named without its description.
    assert!(text.contains("; format"), "{text}");
    assert!(!text.contains("optional parameter"), "{text}");

    // However many parameters, the text stays within its bound.
    let many: serde_json::Map<String, serde_json::Value> = (0..5_000)
        .map(|i| {
            (
                format!("p{i}"),
                serde_json::json!({"description": "y".repeat(300)}),
            )
        })
        .collect();
    let names: Vec<String> = many.keys().cloned().collect();
    let many = serde_json::json!({"properties": many, "required": names});
    let text = super::embedding_text(
        &ToolText::new("w__big", "w", "big").with_input_schema(many.as_object()),
    );
    assert_eq!(
        text.chars().count(),
        super::super::embed::MAX_DOCUMENT_CHARS
    );
}

/// Pseudo-random vectors of 24 dimensions, from a hash of the text.
#[derive(Debug)]
struct Hashed;

#[async_trait]
impl Embedder for Hashed {
    fn model_id(&self) -> &str {
        "hashed"
    }

    fn dimension(&self) -> usize {
        24
    }

    async fn embed(&self, texts: &[String], _: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut s = document_hash(t) | 1;
                (0..24)
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect()
            })
            .collect())
    }
}

/// The ranking as it was first written: every lexical hit sorted and looked up by id, every
/// cosine in `f32` from `vectors` (row order): the reference the faster, 16-bit
/// [`HybridIndex::rank`] must reproduce. Every tool, best first, and how far a score may move
/// when each cosine moves by [`COSINE_ERROR`].
fn reference_rank(
    h: &HybridIndex,
    vectors: &[Vec<f32>],
    index: &SearchIndex,
    query: &str,
    query_vector: &[f32],
    server: Option<&str>,
) -> (Vec<(String, f32)>, f32) {
    let lexical = index.search(query, server, usize::MAX);
    let w = h.config.semantic_weight.clamp(0.0, 1.0);
    let mut lex_of_row = vec![0.0f32; h.ids.len()];
    for hit in &lexical.hits {
        if let Some(&row) = h.rows.get(&hit.id) {
            lex_of_row[row] = hit.score.max(0.0);
        }
    }
    let (mut rows, mut cos, mut lx) = (Vec::new(), Vec::new(), Vec::new());
    for (row, (_, s)) in h.ids.iter().enumerate() {
        if server.is_some_and(|want| want != &**s) {
            continue;
        }
        rows.push(row);
        cos.push(dot(&vectors[row], query_vector));
        lx.push(lex_of_row[row]);
    }
    // How far the 16-bit cosines can move a blended score.
    let close = match h.config.fusion {
        Fusion::MinMax => {
            let lo = cos.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = cos.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            // The cosine, its minimum and its span each move.
            3.0 * w * COSINE_ERROR / (hi - lo)
        }
        Fusion::ZScore { top_k } => {
            let (mc, sc) = head_stats(&cos, top_k);
            // The cosine and the mean move by the error, the deviation by at most as much,
            // which moves a score in proportion to its distance from the mean.
            let z_max = cos.iter().map(|c| (c - mc).abs()).fold(0.0, f32::max) / sc;
            w * COSINE_ERROR * (2.0 + z_max) / sc
        }
        // Two cosines that close may trade ranks: at worst the first two.
        Fusion::Rrf { k } => w / (k + 1.0) - w / (k + 2.0),
    };
    let scores = blend(h.config.fusion, w, &lx, &cos);
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| {
        scores[b]
            .total_cmp(&scores[a])
            .then_with(|| h.ids[rows[a]].0.cmp(&h.ids[rows[b]].0))
    });
    let ranked = order
        .into_iter()
        .map(|i| (h.ids[rows[i]].0.to_string(), scores[i]))
        .collect();
    (ranked, close + 1e-5)
}

/// How far a 16-bit cosine may be from the `f32` one, generously for rows of 24 numbers (the
/// rows' own test checks each against its bound).
const COSINE_ERROR: f32 = 3e-4;

#[tokio::test]
async fn the_fast_ranking_is_the_reference_one_on_a_random_catalog() {
    let tools = crate::eval::synthetic_tools(700, 11);
    let ids: Vec<String> = tools.iter().map(crate::eval::DatasetTool::id).collect();
    let texts: Vec<ToolText<'_>> = tools
        .iter()
        .zip(&ids)
        .map(|(t, id)| {
            ToolText::new(id, &t.server, &t.name)
                .with_description(t.description.as_deref())
                .with_input_schema(t.input_schema.as_ref())
        })
        .collect();
    let mut index = SearchIndex::default();
    let mut servers: Vec<&str> = texts.iter().map(|t| t.server).collect();
    servers.sort_unstable();
    servers.dedup();
    index.replace_servers(
        servers
            .iter()
            .map(|&s| (s, texts.iter().copied().filter(move |t| t.server == s))),
    );
    // The tools' vectors in `f32`, as the embedder gave them (scaled to unit length).
    let documents: Vec<String> = texts.iter().map(embedding_text).collect();
    let raw = Hashed.embed(&documents, EmbedKind::Document).await.unwrap();
    let vectors = check_vectors(raw, documents.len(), 24).unwrap();
    // Queries from the tools' own words (many lexical matches), none, and unknown words.
    let mut queries: Vec<String> = tools
        .iter()
        .step_by(37)
        .map(|t| {
            let words: Vec<&str> = t.description.as_deref().unwrap_or("").split(' ').collect();
            words[..words.len().min(4)].join(" ")
        })
        .collect();
    queries.extend(["the of", "zzqx unknownword", "create", "list files"].map(String::from));
    let fusions = [
        Fusion::ZScore { top_k: 100 },
        Fusion::ZScore { top_k: 3 },
        Fusion::MinMax,
        Fusion::Rrf { k: 20.0 },
    ];
    // Scores may differ by what the 16-bit rounding of the vectors moves them, so a hit may
    // trade places with one whose score is that close, never with another.
    let mut compared = 0;
    for fusion in fusions {
        let config = HybridConfig { fusion, ..config() };
        let mut h = HybridIndex::new(Arc::new(Hashed), Arc::default(), config);
        assert!(h.set_tools(texts.iter().copied()).await.is_empty());
        assert_eq!(h.len(), 700);
        for q in &queries {
            let v = h.embed_query(q).await.unwrap();
            for server in [None, Some("server3")] {
                let (want, close) = reference_rank(&h, &vectors, &index, q, &v, server);
                let score_of: std::collections::HashMap<&str, f32> =
                    want.iter().map(|(id, s)| (id.as_str(), *s)).collect();
                for limit in [1, 5, 10, 10_000] {
                    let got = h.rank(&index, q, &v, server, limit);
                    let at = format!("{fusion:?} `{q}` {server:?} {limit}");
                    assert_eq!(got.hits.len(), limit.min(want.len()), "{at}");
                    // Min-max counts the tools that score above zero: all but the farthest.
                    let total = match fusion {
                        Fusion::MinMax => want.iter().filter(|(_, s)| *s > 0.0).count(),
                        _ => want.len(),
                    };
                    assert_eq!(got.total, total, "{at}");
                    for (i, hit) in got.hits.iter().enumerate() {
                        assert!((hit.score - want[i].1).abs() <= close, "{at}: #{i}");
                        let own = score_of[&*hit.id];
                        assert!((hit.score - own).abs() <= close, "{at}: {}", hit.id);
                        if i > 0 {
                            assert!(got.hits[i - 1].score >= hit.score, "{at}: order");
                        }
                    }
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 4 * queries.len() * 2 * 4);
}

/// Every query's ranking by `h` over `index` is the reference one (scores within `close`).
async fn assert_reference(
    h: &HybridIndex,
    vectors: &std::collections::HashMap<String, Vec<f32>>,
    index: &SearchIndex,
    queries: &[&str],
) {
    let by_row: Vec<Vec<f32>> = h.ids.iter().map(|(id, _)| vectors[&**id].clone()).collect();
    for q in queries {
        let v = h.embed_query(q).await.unwrap();
        for server in [None, Some("server3")] {
            let (want, close) = reference_rank(h, &by_row, index, q, &v, server);
            let got = h.rank(index, q, &v, server, usize::MAX);
            assert_eq!(got.hits.len(), want.len(), "`{q}` {server:?}");
            for (hit, (id, score)) in got.hits.iter().zip(&want) {
                let own = want.iter().find(|(w, _)| **w == *hit.id).unwrap().1;
                assert!((hit.score - score).abs() <= close, "`{q}` {server:?}: {id}");
                assert!(
                    (hit.score - own).abs() <= close,
                    "`{q}` {server:?}: {}",
                    hit.id
                );
            }
        }
    }
}

#[tokio::test]
async fn lexical_matches_find_their_rows_after_either_index_changes() {
    let tools = crate::eval::synthetic_tools(300, 5);
    let ids: Vec<String> = tools.iter().map(crate::eval::DatasetTool::id).collect();
    let texts: Vec<ToolText<'_>> = tools
        .iter()
        .zip(&ids)
        .map(|(t, id)| {
            ToolText::new(id, &t.server, &t.name).with_description(t.description.as_deref())
        })
        .collect();
    let documents: Vec<String> = texts.iter().map(embedding_text).collect();
    let raw = Hashed.embed(&documents, EmbedKind::Document).await.unwrap();
    let vectors: std::collections::HashMap<String, Vec<f32>> = ids
        .iter()
        .cloned()
        .zip(check_vectors(raw, documents.len(), 24).unwrap())
        .collect();
    let mut servers: Vec<&str> = texts.iter().map(|t| t.server).collect();
    servers.sort_unstable();
    servers.dedup();
    let of = |s: &str| {
        let mine = texts.iter().filter(|t| t.server == s);
        mine.copied().collect::<Vec<_>>()
    };
    let queries: Vec<&str> = tools
        .iter()
        .step_by(23)
        .filter_map(|t| t.description.as_deref()?.split(". ").next())
        .chain(["create", "list files"])
        .collect();
    let mut h = HybridIndex::new(Arc::new(Hashed), Arc::default(), config());
    assert!(h.set_tools(texts.iter().copied()).await.is_empty());
    let mut index = SearchIndex::default();
    index.replace_servers(servers.iter().map(|&s| (s, of(s))));
    assert_reference(&h, &vectors, &index, &queries).await;
    // A server gone, then back in other slots (freed ones reused, in another order).
    index.remove_server("server3");
    assert_reference(&h, &vectors, &index, &queries).await;
    index.remove_server("server1");
    let mut back = of("server3");
    back.reverse();
    index.replace_servers([("server3", back)]);
    assert_reference(&h, &vectors, &index, &queries).await;
    // Another index over the same tools, its slots filled in the opposite server order.
    let mut other = SearchIndex::default();
    other.replace_servers(servers.iter().rev().map(|&s| (s, of(s))));
    assert_reference(&h, &vectors, &other, &queries).await;
    assert_reference(&h, &vectors, &index, &queries).await;
    // The hybrid side's rows change: every other tool, in reverse.
    let fewer: Vec<ToolText<'_>> = texts.iter().rev().step_by(2).copied().collect();
    assert!(h.set_tools(fewer).await.is_empty());
    assert_eq!(h.len(), 150);
    assert_reference(&h, &vectors, &other, &queries).await;
}
