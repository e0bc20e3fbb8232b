//! How tool vectors are embedded and kept when the embedder is slow, failing or shared: the
//! cache file grows as batches finish, the first failed batch ends an update, indexes and
//! catalogs sharing a cache embed each text once, and a catalog retries what is missing with a
//! backoff, splitting failed batches, and survives an update task dropped with its runtime.
//! Fake embedders, gates and paused time; no sleep synchronises anything.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcp_catalog::search::{
    CacheLoad, EmbedError, EmbedKind, Embedder, EmbeddingCache, HybridConfig, HybridIndex, ToolText,
};
use tokio::sync::{Notify, Semaphore};

/// What the fake does with a document batch.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Then {
    Answer,
    Fail,
    Hang,
}

/// Two dimensions; each document call takes a permit of `gate` first (when gated), tells
/// `started`, fails if a text holds "many" exactly `poison` times, then does what `script` says
/// for that call (the last entry after that).
#[derive(Debug)]
struct Gated {
    gate: Option<Semaphore>,
    poison: Mutex<Option<usize>>,
    started: Notify,
    script: Mutex<Vec<Then>>,
    calls: AtomicUsize,
    texts: AtomicUsize,
    queries: AtomicUsize,
}

impl Gated {
    fn new(script: &[Then]) -> Arc<Self> {
        Self::build(script, None)
    }

    fn behind_gate(script: &[Then]) -> Arc<Self> {
        Self::build(script, Some(Semaphore::new(0)))
    }

    fn build(script: &[Then], gate: Option<Semaphore>) -> Arc<Self> {
        Arc::new(Self {
            gate,
            poison: Mutex::new(None),
            started: Notify::new(),
            script: Mutex::new(script.iter().rev().copied().collect()),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            queries: AtomicUsize::new(0),
        })
    }

    fn open(&self, permits: usize) {
        self.gate.as_ref().expect("gated").add_permits(permits);
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

fn vector_of(text: &str) -> Vec<f32> {
    let angle = text.len() as f32 * 0.1;
    vec![angle.cos(), angle.sin()]
}

#[async_trait]
impl Embedder for Gated {
    fn model_id(&self) -> &str {
        "gated"
    }
    fn dimension(&self) -> usize {
        2
    }
    fn max_batch(&self) -> usize {
        2
    }
    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        if kind == EmbedKind::Query {
            self.queries.fetch_add(1, Ordering::SeqCst);
            return Ok(texts.iter().map(|t| vector_of(t)).collect());
        }
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("open").forget();
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.started.notify_one();
        let poison = *self.poison.lock().unwrap();
        if let Some(n) = poison
            && texts.iter().any(|t| t.matches("many").count() == n)
        {
            return Err(EmbedError::backend("the endpoint refused one text"));
        }
        let then = {
            let mut script = self.script.lock().unwrap();
            if script.len() > 1 {
                script.pop().unwrap()
            } else {
                script.last().copied().unwrap_or(Then::Answer)
            }
        };
        match then {
            Then::Answer => {
                self.texts.fetch_add(texts.len(), Ordering::SeqCst);
                Ok(texts.iter().map(|t| vector_of(t)).collect())
            }
            Then::Fail => Err(EmbedError::backend("the endpoint said 503")),
            Then::Hang => std::future::pending().await,
        }
    }
}

/// `n` tools of distinct text lengths.
fn tools(n: usize) -> Vec<ToolText<'static>> {
    (0..n)
        .map(|i| {
            let id: &'static str = Box::leak(format!("s__tool{i}").into_boxed_str());
            let description: &'static str = Box::leak("word ".repeat(i + 1).into_boxed_str());
            ToolText::new(id, "s", &id[3..]).with_description(Some(description))
        })
        .collect()
}

fn config() -> HybridConfig {
    let mut config = HybridConfig::default();
    config.batch_timeout = Duration::from_secs(3600);
    config
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-vec-u-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    dir
}

#[tokio::test]
async fn the_cache_file_is_written_as_batches_finish() {
    let dir = temp_dir("early");
    let fake = Gated::behind_gate(&[Then::Answer]);
    let cache = Arc::new(EmbeddingCache::on_disk(&dir));
    let mut index = HybridIndex::new(fake.clone(), Arc::clone(&cache), config());
    let update = tokio::spawn(async move {
        let warnings = index.set_tools(tools(6)).await;
        (index.len(), warnings)
    });
    // The first batch answers; the second is held at the gate.
    fake.open(1);
    fake.started.notified().await;
    fake.open(1);
    fake.started.notified().await;
    // A process starting now (or this one killed now) finds the first batch on disk.
    let other = EmbeddingCache::on_disk(&dir);
    assert_eq!(other.load("gated", 2), CacheLoad::Loaded(2));
    fake.open(10);
    let (len, warnings) = update.await.unwrap();
    assert_eq!(len, 6);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        EmbeddingCache::on_disk(&dir).load("gated", 2),
        CacheLoad::Loaded(6)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(start_paused = true)]
async fn the_first_failed_batch_ends_the_update() {
    for then in [Then::Fail, Then::Hang] {
        let fake = Gated::new(&[then]);
        let mut config = config();
        config.batch_timeout = Duration::from_secs(60);
        let mut index = HybridIndex::new(fake.clone(), Arc::default(), config);
        let started = tokio::time::Instant::now();
        let warnings = index.set_tools(tools(10)).await;
        assert_eq!(fake.calls(), 1, "{then:?}: one batch tried, not five");
        assert!(started.elapsed() <= Duration::from_secs(60), "{then:?}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].message.contains("8 more not tried"),
            "{warnings:?}"
        );
        assert!(index.is_empty());
    }
    // A batch that failed after others answered keeps what they gave.
    let fake = Gated::new(&[Then::Answer, Then::Fail]);
    let mut index = HybridIndex::new(fake.clone(), Arc::default(), config());
    let _ = index.set_tools(tools(10)).await;
    assert_eq!((fake.calls(), index.len()), (2, 2));
}

#[tokio::test(flavor = "current_thread")]
async fn indexes_sharing_a_cache_embed_each_text_once() {
    let fake = Gated::behind_gate(&[Then::Answer]);
    let cache = Arc::new(EmbeddingCache::in_memory());
    let mut indexes: Vec<HybridIndex> = (0..5)
        .map(|_| HybridIndex::new(fake.clone(), Arc::clone(&cache), config()))
        .collect();
    let mut it = indexes.iter_mut();
    let mut next = || it.next().unwrap().set_tools(tools(11));
    // Every index starts (and claims what nobody embeds yet) before any batch answers.
    let (a, b, c, d, e, ()) = tokio::join!(next(), next(), next(), next(), next(), async {
        fake.open(1000)
    });
    for warnings in [a, b, c, d, e] {
        assert!(warnings.is_empty(), "{warnings:?}");
    }
    assert_eq!(fake.texts(), 11, "11 texts embedded once, not 55");
    assert!(indexes.iter().all(|i| i.len() == 11));
}

#[tokio::test(flavor = "current_thread")]
async fn a_text_another_index_failed_to_embed_is_tried_again() {
    let fake = Gated::behind_gate(&[Then::Fail, Then::Answer]);
    let cache = Arc::new(EmbeddingCache::in_memory());
    let mut first = HybridIndex::new(fake.clone(), Arc::clone(&cache), config());
    let mut second = HybridIndex::new(fake.clone(), Arc::clone(&cache), config());
    let (a, b, ()) = tokio::join!(
        first.set_tools(tools(2)),
        second.set_tools(tools(2)),
        async { fake.open(1000) }
    );
    assert_eq!(a.len(), 1, "{a:?}");
    assert!(b.is_empty(), "{b:?}");
    assert_eq!((first.len(), second.len()), (0, 2));
    assert_eq!(fake.calls(), 2);
}

mod catalog {
    //! The same inside a `Catalog`: retries with a backoff, a weight of 0, one waiting update,
    //! and an update that stops with its catalog.

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use agent_core::{Event, EventKind, EventSink};
    use mcp_catalog::search::{EmbeddingCache, HybridConfig};
    use mcp_catalog::testing::{Behavior, FakeServer, tool};
    use mcp_catalog::{Catalog, CatalogConfig, SearchRequest};
    use serde_json::json;
    use tokio::time::Instant;

    use super::{Gated, Then};

    fn server(n: usize) -> Arc<FakeServer> {
        let mut server = FakeServer::new();
        for i in 0..n {
            let description = format!("Handles {} things.", "many ".repeat(i + 1));
            server = server.with_tool(
                tool(&format!("tool{i}"), &description, json!({"type": "object"})),
                Behavior::Echo,
            );
        }
        Arc::new(server)
    }

    fn catalog(fake: &Arc<Gated>, config: HybridConfig) -> Catalog {
        let catalog = Catalog::new(CatalogConfig::default());
        assert!(catalog.set_embedder(fake.clone(), Arc::new(EmbeddingCache::in_memory()), config));
        catalog
    }

    /// Lets every other task run until all wait (paused time moves on only then).
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    async fn warning_of(catalog: &Catalog) -> Option<String> {
        let request = SearchRequest::new("handles things");
        catalog.search_ranked(&request).await.unwrap().warning
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn tools_left_without_a_vector_are_retried_with_a_growing_backoff() {
        // Three tools in batches of two: the second batch fails, then its retry, then it
        // answers.
        let fake = Gated::new(&[Then::Answer, Then::Fail, Then::Fail, Then::Answer]);
        let catalog = catalog(&fake, HybridConfig::default());
        catalog.add_server(server(3).into_server("s")).unwrap();
        let asked = Instant::now();
        assert!(!catalog.embeddings_ready(Duration::from_secs(1)).await);
        assert_eq!(
            asked.elapsed(),
            Duration::ZERO,
            "the failed update ended the wait"
        );
        assert_eq!(fake.calls(), 2);
        // The failed update is installed: searches are lexical at once, without waiting.
        let asked = Instant::now();
        let warning = warning_of(&catalog).await.expect("lexical");
        assert!(warning.contains("2 of 3 tools"), "{warning}");
        assert_eq!(asked.elapsed(), Duration::ZERO);
        settle().await;
        assert_eq!(fake.calls(), 2, "no retry before 30 s");

        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(
            warning_of(&catalog).await.is_some(),
            "a retry is never waited for"
        );
        settle().await;
        assert_eq!(fake.calls(), 3, "retried once, and failed again");
        for _ in 0..5 {
            assert!(warning_of(&catalog).await.is_some());
        }
        settle().await;
        assert_eq!(fake.calls(), 3, "one retry at a time");

        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(warning_of(&catalog).await.is_some());
        settle().await;
        assert_eq!(fake.calls(), 3, "the second wait is longer");

        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(warning_of(&catalog).await.is_some());
        settle().await;
        assert_eq!(fake.calls(), 4);
        assert_eq!(warning_of(&catalog).await, None, "hybrid again");
        assert_eq!(fake.texts(), 3, "only the missing text was embedded again");
    }

    #[tokio::test]
    async fn a_weight_of_zero_never_embeds() {
        let fake = Gated::new(&[Then::Answer]);
        let mut config = HybridConfig::default();
        config.semantic_weight = 0.0;
        let catalog = catalog(&fake, config);
        catalog.add_server(server(3).into_server("s")).unwrap();
        let request = SearchRequest::new("handles many things");
        let found = catalog.search_ranked(&request).await.unwrap();
        let lexical = catalog.search(&request).unwrap();
        let names = |r: &mcp_catalog::SearchResponse| {
            r.tools
                .iter()
                .map(|t| t.model_name().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&found), names(&lexical));
        assert!(!found.tools.is_empty());
        assert_eq!(found.warning, None);
        assert_eq!(
            (
                fake.calls(),
                fake.queries.load(std::sync::atomic::Ordering::SeqCst)
            ),
            (0, 0)
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn at_most_one_update_waits_behind_a_running_one() {
        let fake = Gated::behind_gate(&[Then::Answer]);
        let mut config = HybridConfig::default();
        config.batch_timeout = Duration::from_secs(3600);
        let catalog = catalog(&fake, config);
        let source = server(3);
        catalog.add_server(source.clone().into_server("s")).unwrap();
        settle().await;
        let tasks = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        // The first update waits at the gate; the list changes and searches come meanwhile.
        let mut tools = source.tools();
        for i in 0..20 {
            tools.push(tool(
                &format!("extra{i}"),
                "More.",
                json!({"type": "object"}),
            ));
            catalog.replace_tools("s", &tools).unwrap();
            assert!(warning_of(&catalog).await.is_some());
        }
        assert!(tasks() <= 2, "{} update tasks alive", tasks());
        fake.open(1000);
        assert!(catalog.embeddings_ready(Duration::from_secs(10)).await);
        assert_eq!(warning_of(&catalog).await, None);
        assert_eq!(
            fake.texts(),
            23,
            "the first list, then the newest one's new texts"
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_update_stops_with_its_catalog() {
        let fake = Gated::behind_gate(&[Then::Answer]);
        let catalog = catalog(&fake, HybridConfig::default());
        // Eight tools: four batches.
        catalog.add_server(server(8).into_server("s")).unwrap();
        fake.open(1);
        fake.started.notified().await;
        drop(catalog);
        fake.open(1000);
        settle().await;
        // The first batch, and the second, already waiting at the gate when the catalog went;
        // none after.
        assert_eq!(fake.calls(), 2, "no batch after the catalog is gone");
    }

    /// The search warnings a catalog sent.
    #[derive(Default)]
    struct Warnings(Mutex<Vec<String>>);

    impl EventSink for Warnings {
        fn emit(&self, event: Event) {
            if event.kind == EventKind::SearchWarning {
                self.0.lock().unwrap().extend(event.message);
            }
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_retry_halves_a_failed_batch_and_progress_restarts_the_backoff() {
        // Four tools in batches of two; the embedder refuses tool2's text (three "many") only.
        let fake = Gated::new(&[Then::Answer]);
        *fake.poison.lock().unwrap() = Some(3);
        let catalog = catalog(&fake, HybridConfig::default());
        let warnings = Arc::new(Warnings::default());
        catalog.set_search_events(warnings.clone());
        catalog.add_server(server(4).into_server("s")).unwrap();
        assert!(!catalog.embeddings_ready(Duration::from_secs(1)).await);
        // The first update stops at the failed batch [tool2, tool3].
        assert_eq!(fake.calls(), 2);
        let warning = warning_of(&catalog).await.expect("lexical");
        assert!(warning.contains("2 of 4 tools"), "{warning}");

        tokio::time::advance(Duration::from_secs(30)).await;
        let _ = warning_of(&catalog).await;
        settle().await;
        // The retry: [tool2, tool3] fails, then [tool2] fails and [tool3] answers.
        assert_eq!(fake.calls(), 5);
        let warning = warning_of(&catalog).await.expect("still lexical");
        assert!(warning.contains("3 of 4 tools"), "{warning}");
        let still: Vec<String> = warnings
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.contains("still without a vector"))
            .cloned()
            .collect();
        assert_eq!(still.len(), 1, "one warning for the retry: {still:?}");
        assert!(still[0].starts_with("1 tool is still"), "{still:?}");

        // It added a vector: the next retry comes after 30 s again, not 60.
        tokio::time::advance(Duration::from_secs(30)).await;
        let _ = warning_of(&catalog).await;
        settle().await;
        assert_eq!(fake.calls(), 6, "retried after 30 s");
        // That one added nothing: now the wait doubles.
        tokio::time::advance(Duration::from_secs(30)).await;
        let _ = warning_of(&catalog).await;
        settle().await;
        assert_eq!(
            fake.calls(),
            6,
            "no retry 30 s after one that added nothing"
        );
        tokio::time::advance(Duration::from_secs(30)).await;
        let _ = warning_of(&catalog).await;
        settle().await;
        assert_eq!(fake.calls(), 7);
    }

    #[test]
    fn an_update_dropped_with_its_runtime_never_blocks_later_ones() {
        let paused = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap()
        };
        let fake = Gated::behind_gate(&[Then::Answer]);
        let catalog = catalog(&fake, HybridConfig::default());
        let source = server(2);
        let first = paused();
        first.block_on(async {
            // An update holds the gate; a second one waits behind it for the new list.
            catalog.add_server(source.clone().into_server("s")).unwrap();
            settle().await;
            let mut tools = source.tools();
            tools.push(tool("extra", "More.", json!({"type": "object"})));
            catalog.replace_tools("s", &tools).unwrap();
            settle().await;
        });
        // The runtime goes, and both tasks with it; the catalog stays.
        drop(first);
        fake.open(1000);
        let second = paused();
        second.block_on(async {
            assert!(
                catalog.embeddings_ready(Duration::from_secs(10)).await,
                "the newest list is embedded by a new update"
            );
            assert_eq!(warning_of(&catalog).await, None);
        });
    }
}
