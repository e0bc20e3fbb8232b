//! Hybrid search inside the catalog (`Catalog::set_embedder`): tools embedded as servers join
//! and again when their list changes (only new texts), `mcp_search_tools` through a governed
//! layer ranking by meaning, and an embedder that stalls giving the lexical ranking with a
//! `search_warning` event.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::{Event, EventKind, EventSink, GovernedLayer, ToolCall, ToolDispatcher};
use async_trait::async_trait;
use mcp_catalog::search::{EmbedError, EmbedKind, Embedder, EmbeddingCache, HybridConfig};
use mcp_catalog::testing::{Behavior, FakeServer, tool};
use mcp_catalog::{Catalog, CatalogConfig, SearchRequest};
use serde_json::json;

/// Vectors by concept: sending a message, reading a file, anything else. Records every text
/// it embeds as a document; queries naming `stall` never get an answer.
#[derive(Debug, Default)]
struct Concepts {
    documents: Mutex<Vec<String>>,
}

#[async_trait]
impl Embedder for Concepts {
    fn model_id(&self) -> &str {
        "concepts"
    }
    fn dimension(&self) -> usize {
        3
    }
    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        if kind == EmbedKind::Document {
            self.documents.lock().unwrap().extend(texts.iter().cloned());
        } else if texts.iter().any(|t| t.contains("stall")) {
            std::future::pending::<()>().await;
        } else if texts.iter().any(|t| t.contains("nan")) {
            return Ok(vec![vec![f32::NAN, 0.0, 0.0]]);
        } else if texts.iter().any(|t| t.contains("short")) {
            return Ok(vec![vec![1.0, 0.0]]);
        } else if texts.iter().any(|t| t.contains("broken")) {
            return Err(EmbedError::backend("the model is broken"));
        }
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                if ["message", "chat", "team", "post"]
                    .iter()
                    .any(|w| t.contains(w))
                {
                    vec![1.0, 0.0, 0.0]
                } else if ["file", "read", "disk"].iter().any(|w| t.contains(w)) {
                    vec![0.0, 1.0, 0.0]
                } else {
                    vec![0.0, 0.0, 1.0]
                }
            })
            .collect())
    }
}

#[derive(Default)]
struct Collect(Mutex<Vec<Event>>);

impl EventSink for Collect {
    fn emit(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

fn server() -> Arc<FakeServer> {
    Arc::new(
        FakeServer::new()
            .with_tool(
                tool(
                    "post_chat_message",
                    "Posts to a channel.",
                    json!({"type": "object"}),
                ),
                Behavior::Echo,
            )
            .with_tool(
                tool(
                    "read_file",
                    "Returns a file's bytes.",
                    json!({"type": "object"}),
                ),
                Behavior::Echo,
            )
            .with_tool(
                tool("forecast", "Tomorrow's weather.", json!({"type": "object"})),
                Behavior::Echo,
            ),
    )
}

fn hybrid(timeout: Duration) -> HybridConfig {
    let mut config = HybridConfig::default();
    config.query_timeout = timeout;
    config
}

fn names(response: &mcp_catalog::SearchResponse) -> Vec<&str> {
    response.tools.iter().map(|t| t.model_name()).collect()
}

#[tokio::test]
async fn words_miss_what_meaning_finds_and_only_new_texts_are_embedded_again() {
    let embedder = Arc::new(Concepts::default());
    let catalog = Catalog::new(CatalogConfig::default());
    assert!(catalog.set_embedder(
        embedder.clone(),
        Arc::new(EmbeddingCache::in_memory()),
        hybrid(Duration::from_secs(10)),
    ));
    let fake = server();
    catalog.add_server(fake.clone().into_server("s")).unwrap();

    let query = SearchRequest::new("send a note to the team");
    assert!(
        catalog.search(&query).unwrap().tools.is_empty(),
        "no shared word"
    );
    let found = catalog.search_ranked(&query).await.unwrap();
    assert_eq!(names(&found)[0], "s__post_chat_message");
    assert_eq!(found.warning, None);
    assert_eq!(embedder.documents.lock().unwrap().len(), 3);

    // The list changes: one tool more; the three known texts come from the cache.
    let mut tools = fake.tools();
    tools.push(tool(
        "open_disk_image",
        "Mounts an image.",
        json!({"type": "object"}),
    ));
    catalog.replace_tools("s", &tools).unwrap();
    assert!(catalog.embeddings_ready(Duration::from_secs(10)).await);
    assert_eq!(embedder.documents.lock().unwrap().len(), 4);
    let found = catalog
        .search_ranked(&SearchRequest::new("get the bytes of a document on disk"))
        .await
        .unwrap();
    assert!(
        names(&found)[..2].contains(&"s__open_disk_image"),
        "{:?}",
        names(&found)
    );
}

#[tokio::test]
async fn mcp_search_tools_through_the_layer_ranks_by_meaning() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.set_embedder(
        Arc::new(Concepts::default()),
        Arc::new(EmbeddingCache::in_memory()),
        hybrid(Duration::from_secs(10)),
    );
    catalog.add_server(server().into_server("s")).unwrap();
    let governed = GovernedLayer::new().layer(catalog);
    let args = json!({"query": "tell the team"});
    let call = ToolCall::new("1", "mcp_search_tools", args.as_object().unwrap().clone());
    let out = governed.dispatch(call).await.unwrap();
    let result = out.structured.unwrap();
    assert_eq!(result["tools"][0]["name"], "s__post_chat_message");
    assert!(result.get("warning").is_none(), "not shown to the model");
}

#[tokio::test]
async fn a_stalled_query_gives_the_lexical_ranking_and_a_warning_event() {
    let catalog = Catalog::new(CatalogConfig::default());
    let events = Arc::new(Collect::default());
    catalog.set_search_events(events.clone());
    catalog.set_embedder(
        Arc::new(Concepts::default()),
        Arc::new(EmbeddingCache::in_memory()),
        hybrid(Duration::from_millis(300)),
    );
    catalog.add_server(server().into_server("s")).unwrap();
    assert!(catalog.embeddings_ready(Duration::from_secs(10)).await);

    let request = SearchRequest::new("read file stall");
    let started = std::time::Instant::now();
    let found = catalog.search_ranked(&request).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let lexical = catalog.search(&request).unwrap();
    assert_eq!(names(&found), names(&lexical));
    let warning = found.warning.expect("a warning");
    assert!(warning.contains("no answer within 300 ms"), "{warning}");
    let events = events.0.lock().unwrap();
    let event = events
        .iter()
        .find(|e| e.kind == EventKind::SearchWarning)
        .expect("a search_warning event");
    assert_eq!(event.tool.as_deref(), Some("mcp_search_tools"));
    assert_eq!(event.message.as_deref(), Some(warning.as_str()));
}

#[tokio::test]
async fn without_an_embedder_or_with_none_available_search_is_lexical() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.add_server(server().into_server("s")).unwrap();
    let request = SearchRequest::new("read file");
    let plain = catalog.search_ranked(&request).await.unwrap();
    assert_eq!(names(&plain), names(&catalog.search(&request).unwrap()));
    assert_eq!(plain.warning, None);
    assert!(!catalog.has_embedder());

    assert!(catalog.set_embedder_unavailable("the endpoint is down"));
    let found = catalog.search_ranked(&request).await.unwrap();
    assert_eq!(names(&found), names(&plain));
    assert_eq!(found.warning.as_deref(), Some("the endpoint is down"));
}

#[tokio::test]
async fn a_nan_a_wrong_dimension_or_an_error_gives_the_lexical_ranking() {
    let catalog = Catalog::new(CatalogConfig::default());
    let events = Arc::new(Collect::default());
    catalog.set_search_events(events.clone());
    catalog.set_embedder(
        Arc::new(Concepts::default()),
        Arc::new(EmbeddingCache::in_memory()),
        hybrid(Duration::from_secs(10)),
    );
    catalog.add_server(server().into_server("s")).unwrap();
    for (query, cause) in [
        ("read file nan", "NaN"),
        ("read file short", "the model's dimension is 3"),
        ("read file broken", "the model is broken"),
    ] {
        let request = SearchRequest::new(query);
        let found = catalog.search_ranked(&request).await.unwrap();
        assert_eq!(names(&found), names(&catalog.search(&request).unwrap()));
        let warning = found.warning.expect("a warning");
        assert!(warning.contains(cause), "{cause}: {warning}");
    }
    let warnings = events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventKind::SearchWarning)
        .count();
    assert_eq!(warnings, 3);
}

/// An embedder of more dimensions than a search index takes.
#[derive(Debug)]
struct Huge;

#[async_trait]
impl Embedder for Huge {
    fn model_id(&self) -> &str {
        "huge"
    }
    fn dimension(&self) -> usize {
        mcp_catalog::search::MAX_EMBEDDING_DIMENSION + 1
    }
    async fn embed(&self, texts: &[String], _: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|_| vec![1.0; self.dimension()]).collect())
    }
}

#[tokio::test]
async fn a_dimension_beyond_the_bound_gives_the_lexical_ranking() {
    let catalog = Catalog::new(CatalogConfig::default());
    catalog.set_embedder(
        Arc::new(Huge),
        Arc::new(EmbeddingCache::in_memory()),
        hybrid(Duration::from_secs(10)),
    );
    catalog.add_server(server().into_server("s")).unwrap();
    let request = SearchRequest::new("read file");
    let found = catalog.search_ranked(&request).await.unwrap();
    assert_eq!(names(&found), names(&catalog.search(&request).unwrap()));
    let warning = found.warning.expect("a warning");
    assert!(warning.contains("is above the 65536"), "{warning}");
}
