//! Hybrid ranking inside the catalog (feature `embed`): the tools' vectors kept beside the
//! lexical index, re-embedded in the background whenever the catalog's tools change, and the
//! bounded search `mcp_search_tools` runs ([`Catalog::search_ranked`](crate::Catalog::search_ranked)).
//!
//! One update runs at a time, at most one more waits behind it (the newest tool list), and an
//! update holds the catalog's vectors only weakly: once the catalog is gone it starts no
//! batch. An update whose batch failed installs what it has; searches are then lexical at once
//! (with the "n of m tools have an embedding" warning), and the first such search after a
//! backoff — 30 s, doubling after every retry that adds no vector, up to 30 minutes, and back
//! to 30 s after one that adds some — starts a retry of the missing texts only, in the
//! background. A retry halves a failed batch (down to single texts), so one text the embedder
//! refuses never keeps the others out; one warning says how many are still without a vector. A
//! `semantic_weight` of 0 embeds nothing. An update task dropped before it took its texts (its
//! runtime shut down) lets the next request start another.
//!
//! Without the feature, [`Catalog::search_ranked`](crate::Catalog::search_ranked) is [`Catalog::search`](crate::Catalog::search) and nothing here
//! costs anything.

#[cfg(not(feature = "embed"))]
use agent_core::ToolError;

#[cfg(not(feature = "embed"))]
use super::{Catalog, SearchRequest, SearchResponse, State};

#[cfg(feature = "embed")]
pub(crate) use on::Slot;

/// Nothing to hold without the feature.
#[cfg(not(feature = "embed"))]
#[derive(Debug, Default)]
pub(crate) struct Slot {}

#[cfg(not(feature = "embed"))]
impl Catalog {
    /// Runs a search as `mcp_search_tools` does: [`search`](Self::search) (this build has no
    /// hybrid ranking: feature `embed`).
    pub async fn search_ranked(
        &self,
        request: &SearchRequest,
    ) -> Result<SearchResponse, ToolError> {
        self.search(request)
    }

    /// Called after every change of the tools (nothing to do without the feature).
    pub(in crate::catalog) fn tools_changed(&self, _state: &State) {
        let Slot {} = self.semantic;
    }
}

#[cfg(feature = "embed")]
mod on {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};
    use std::time::Duration;

    use agent_core::{Event, EventKind, EventSink, ToolError};
    use tokio::time::Instant;

    use crate::SEARCH_TOOL;
    use crate::catalog::{Catalog, SearchRequest, SearchResponse, State};
    use crate::search::{
        EmbedError, Embedder, EmbeddingCache, HybridConfig, HybridIndex, ToolText, embedding_text,
    };

    /// The texts of one generation of the catalog's tools: (id, server, embedded text).
    type Texts = Vec<(Arc<str>, Arc<str>, String)>;

    /// The catalog's hybrid search state, set once per catalog.
    #[derive(Default)]
    pub(crate) struct Slot {
        semantic: OnceLock<Semantic>,
        events: OnceLock<Arc<dyn EventSink>>,
    }

    impl std::fmt::Debug for Slot {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Slot")
                .field("semantic", &self.semantic)
                .finish_non_exhaustive()
        }
    }

    /// What hybrid search runs on.
    #[derive(Debug)]
    enum Semantic {
        /// Hybrid ranking is configured but has no embedder: every search is lexical, with
        /// this warning.
        Unavailable(String),
        /// An embedder, and the vectors of the tools.
        Ready(Arc<Vectors>),
    }

    /// The first wait before tools left without a vector are embedded again; it doubles after
    /// every retry that adds no vector, up to [`RETRY_MAX`], and starts again from here after
    /// one that adds some.
    const RETRY_FIRST: Duration = Duration::from_secs(30);
    /// The longest wait between retries.
    const RETRY_MAX: Duration = Duration::from_secs(30 * 60);

    /// The tools' vectors and their background updates.
    struct Vectors {
        embedder: Arc<dyn Embedder>,
        cache: Arc<EmbeddingCache>,
        config: HybridConfig,
        /// The vectors of the last finished update.
        current: RwLock<Arc<HybridIndex>>,
        /// The texts of the generation `current` holds, for retries.
        current_texts: Mutex<Arc<Texts>>,
        /// The newest generation of tools asked for, and its texts until an update takes it.
        pending: Mutex<Option<(u64, Texts)>>,
        requested: AtomicU64,
        /// The generation `current` holds.
        installed: tokio::sync::watch::Sender<u64>,
        /// One update at a time.
        updating: Arc<tokio::sync::Mutex<()>>,
        /// An update task is spawned and has not taken the pending texts yet: at most one
        /// waits behind a running one. Cleared by [`Unschedule`] however the task ends.
        scheduled: Arc<AtomicBool>,
        /// When tools left without a vector may be embedded again.
        retry: Mutex<Retry>,
        events: OnceLock<Arc<dyn EventSink>>,
    }

    /// Clears [`Vectors::scheduled`] when dropped: when the update task takes the pending
    /// texts, or when the task is dropped before that (its runtime shut down while it waited
    /// for the running update), so that a later request is never ignored for good.
    struct Unschedule(Arc<AtomicBool>);

    impl Drop for Unschedule {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }

    /// The backoff of retries.
    #[derive(Debug, Default)]
    struct Retry {
        /// Updates in a row that left tools without a vector and added none.
        failures: u32,
        /// Not before this.
        next: Option<Instant>,
    }

    impl std::fmt::Debug for Vectors {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Vectors")
                .field("model", &self.embedder.model_id())
                .field("config", &self.config)
                .field("requested", &self.requested)
                .finish_non_exhaustive()
        }
    }

    impl Vectors {
        fn warn(&self, message: String) {
            warn_to(self.events.get(), message);
        }

        /// Asks for the vectors of `texts` (a newer generation than any asked before).
        fn request(self: &Arc<Self>, texts: Texts) {
            let generation = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
            *lock(&self.pending) = Some((generation, texts));
            self.kick();
        }

        /// Starts an update if one is pending, none is scheduled yet and a runtime is at hand
        /// (else the next search starts it). The task holds the vectors weakly: once the
        /// catalog is gone it starts no batch.
        fn kick(self: &Arc<Self>) {
            if lock(&self.pending).is_none() || self.scheduled.swap(true, Ordering::SeqCst) {
                return;
            }
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let unschedule = Unschedule(Arc::clone(&self.scheduled));
                    runtime.spawn(update(Arc::downgrade(self), unschedule));
                }
                Err(_) => self.scheduled.store(false, Ordering::SeqCst),
            }
        }

        /// Some tools of the installed generation have no vector: embeds them again (the
        /// cache has the others) once the backoff allows and nothing else is pending or
        /// running. Searches never wait for a retry.
        fn retry_missing(self: &Arc<Self>) {
            {
                let retry = lock(&self.retry);
                if retry.next.is_some_and(|at| Instant::now() < at) {
                    return;
                }
            }
            let Ok(_idle) = self.updating.try_lock() else {
                return;
            };
            let generation = *self.installed.borrow();
            if self.requested.load(Ordering::SeqCst) != generation {
                return;
            }
            {
                let mut pending = lock(&self.pending);
                if pending.is_some() {
                    return;
                }
                let texts = Texts::clone(&lock(&self.current_texts));
                *pending = Some((generation, texts));
            }
            self.kick();
        }

        /// The vectors of the newest generation, waiting for its update until `deadline`.
        async fn newest(&self, deadline: Instant) -> Result<Arc<HybridIndex>, String> {
            let target = self.requested.load(Ordering::SeqCst);
            let mut installed = self.installed.subscribe();
            let waited =
                tokio::time::timeout_at(deadline, installed.wait_for(|g| *g >= target)).await;
            if waited.is_err() {
                return Err(format!(
                    "the tools are still being embedded with `{}` (waited {} ms)",
                    self.embedder.model_id(),
                    self.config.query_timeout.as_millis()
                ));
            }
            Ok(Arc::clone(
                &self.current.read().unwrap_or_else(PoisonError::into_inner),
            ))
        }
    }

    /// A weight of 0 (or less, or NaN) is lexical ranking.
    fn lexical_only(config: &HybridConfig) -> bool {
        config.semantic_weight.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Embeds the newest pending generation (what the cache lacks) and installs it, unless the
    /// catalog is gone; holds the vectors only weakly while the embedder works.
    /// `unschedule` is dropped when the pending texts are taken, or with the task.
    async fn update(weak: Weak<Vectors>, unschedule: Unschedule) {
        let Some(updating) = weak.upgrade().map(|v| Arc::clone(&v.updating)) else {
            return;
        };
        let _one = updating.lock_owned().await;
        let Some(this) = weak.upgrade() else {
            return;
        };
        drop(unschedule);
        let Some((generation, texts)) = lock(&this.pending).take() else {
            return;
        };
        // A retry: the installed generation's missing texts again.
        let retrying = generation > 0 && generation == *this.installed.borrow();
        let before = if retrying {
            this.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
        } else {
            0
        };
        let mut index = HybridIndex::new(
            Arc::clone(&this.embedder),
            Arc::clone(&this.cache),
            this.config.clone(),
        );
        drop(this);
        let all = Arc::new(texts.clone());
        let warnings = index
            .set_texts(texts, &|| weak.strong_count() > 0, retrying)
            .await;
        let Some(this) = weak.upgrade() else {
            return;
        };
        for warning in warnings {
            this.warn(warning.message);
        }
        {
            let mut retry = lock(&this.retry);
            if index.len() < all.len() {
                if retrying && index.len() > before {
                    retry.failures = 0; // progress: the backoff starts again
                }
                retry.failures = retry.failures.saturating_add(1);
                let wait = RETRY_FIRST
                    .saturating_mul(1 << (retry.failures - 1).min(10))
                    .min(RETRY_MAX);
                retry.next = Some(Instant::now() + wait);
            } else {
                *retry = Retry::default();
            }
        }
        // A retry of an older generation never replaces a newer one.
        if generation >= *this.installed.borrow() {
            *this.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(index);
            *lock(&this.current_texts) = all;
            this.installed.send_replace(generation);
        }
        // What was asked for meanwhile.
        this.kick();
    }

    fn warn_to(events: Option<&Arc<dyn EventSink>>, message: String) {
        tracing::warn!(target: "mcp_catalog::search", "{message}");
        if let Some(events) = events {
            events.emit(
                Event::new(EventKind::SearchWarning)
                    .with_tool(None, SEARCH_TOOL)
                    .with_message(message),
            );
        }
    }

    impl Catalog {
        /// Ranks `mcp_search_tools` queries by words and meaning from now on: the lexical
        /// ranking blended with the cosine of `embedder`'s vectors (see
        /// [`HybridIndex`]). The tools are embedded in the background now and again after
        /// every change of the tool list (only texts `cache` lacks for this model); a search
        /// waits for that at most [`HybridConfig::query_timeout`], then ranks by words with a
        /// warning. Set once: a second call is ignored (returns false).
        ///
        /// ```
        /// # use std::sync::Arc;
        /// use async_trait::async_trait;
        /// use mcp_catalog::{Catalog, CatalogConfig, SearchRequest};
        /// use mcp_catalog::search::{EmbedError, EmbedKind, Embedder, EmbeddingCache, HybridConfig};
        /// use mcp_catalog::testing::FakeServer;
        ///
        /// /// One made-up dimension: "talk".
        /// #[derive(Debug)]
        /// struct Toy;
        /// #[async_trait]
        /// impl Embedder for Toy {
        ///     fn model_id(&self) -> &str { "toy" }
        ///     fn dimension(&self) -> usize { 2 }
        ///     async fn embed(&self, texts: &[String], _: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        ///         Ok(texts.iter().map(|t| {
        ///             let talk = ["echo", "say"].iter().any(|w| t.contains(w));
        ///             if talk { vec![1.0, 0.0] } else { vec![0.0, 1.0] }
        ///         }).collect())
        ///     }
        /// }
        ///
        /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
        /// let catalog = Catalog::new(CatalogConfig::default());
        /// catalog.set_embedder(Arc::new(Toy), Arc::new(EmbeddingCache::in_memory()),
        ///     HybridConfig::default());
        /// catalog.add_server(Arc::new(FakeServer::everything()).into_server("demo")).unwrap();
        /// // No tool description holds "say", but the vectors do the matching.
        /// let found = catalog.search_ranked(&SearchRequest::new("say")).await.unwrap();
        /// assert_eq!(found.tools[0].model_name(), "demo__echo");
        /// assert!(found.warning.is_none());
        /// # });
        /// ```
        pub fn set_embedder(
            &self,
            embedder: Arc<dyn Embedder>,
            cache: Arc<EmbeddingCache>,
            config: HybridConfig,
        ) -> bool {
            let empty = HybridIndex::new(Arc::clone(&embedder), Arc::clone(&cache), config.clone());
            let vectors = Arc::new(Vectors {
                embedder,
                cache,
                config,
                current: RwLock::new(Arc::new(empty)),
                current_texts: Mutex::default(),
                pending: Mutex::new(None),
                requested: AtomicU64::new(0),
                installed: tokio::sync::watch::Sender::new(0),
                updating: Arc::default(),
                scheduled: Arc::default(),
                retry: Mutex::default(),
                events: OnceLock::new(),
            });
            if let Some(events) = self.semantic.events.get() {
                let _ = vectors.events.set(Arc::clone(events));
            }
            if self
                .semantic
                .semantic
                .set(Semantic::Ready(vectors))
                .is_err()
            {
                return false;
            }
            let state = self.read();
            self.tools_changed(&state);
            true
        }

        /// Hybrid ranking was configured but no embedder could be had (`reason` says why):
        /// every search ranks by words and carries `reason` as its warning. Set once.
        pub fn set_embedder_unavailable(&self, reason: impl Into<String>) -> bool {
            let reason = reason.into();
            warn_to(self.semantic.events.get(), reason.clone());
            self.semantic
                .semantic
                .set(Semantic::Unavailable(reason))
                .is_ok()
        }

        /// Where the warnings of hybrid search go as
        /// [`EventKind::SearchWarning`](agent_core::EventKind::SearchWarning) events
        /// (besides `tracing`): the run's event bus. Set once.
        pub fn set_search_events(&self, events: Arc<dyn EventSink>) -> bool {
            if let Some(Semantic::Ready(v)) = self.semantic.semantic.get() {
                let _ = v.events.set(Arc::clone(&events));
            }
            self.semantic.events.set(events).is_ok()
        }

        /// Whether hybrid ranking is configured (an embedder or a reason why none).
        pub fn has_embedder(&self) -> bool {
            self.semantic.semantic.get().is_some()
        }

        /// Waits until the tools listed so far have their vectors, at most `wait`. True when
        /// they do; false without an embedder, when the wait ran out, or when the update ended
        /// with tools left without a vector (a failed batch; retried later by searches).
        pub async fn embeddings_ready(&self, wait: Duration) -> bool {
            match self.semantic.semantic.get() {
                Some(Semantic::Ready(v)) => {
                    v.kick();
                    let index = v.newest(Instant::now() + wait).await;
                    index.is_ok_and(|index| index.len() == lock(&v.current_texts).len())
                }
                _ => false,
            }
        }

        /// Runs a search as `mcp_search_tools` does: [`search`](Self::search), but a ranked
        /// query is hybrid when an embedder is set ([`set_embedder`](Self::set_embedder)).
        /// The query's vector and the tools' pending vectors are awaited together at most
        /// [`HybridConfig::query_timeout`]; on a timeout, an embedder error, a vector of the
        /// wrong dimension or holding a NaN, the ranking is lexical and
        /// [`SearchResponse::warning`] (and a `search_warning` event) says why: the search
        /// itself never fails because of the embedder. A query over
        /// [`MAX_QUERY_CHARS`](crate::search::MAX_QUERY_CHARS) is refused before anything is
        /// embedded.
        pub async fn search_ranked(
            &self,
            request: &SearchRequest,
        ) -> Result<SearchResponse, ToolError> {
            let query = request.query.trim();
            let semantic = match self.semantic.semantic.get() {
                Some(s) if !query.is_empty() && !query.starts_with("select:") => s,
                _ => return self.search(request),
            };
            Self::check_query(request)?;
            if let Some(server) = &request.server
                && !self.read().servers.contains_key(server)
            {
                return self.search(request); // the error naming the servers
            }
            let vectors = match semantic {
                Semantic::Unavailable(reason) => {
                    let mut response = self.search(request)?;
                    response.warning = Some(reason.clone());
                    return Ok(response);
                }
                // A weight of 0 is lexical ranking: nothing is embedded.
                Semantic::Ready(v) if lexical_only(&v.config) => {
                    return self.search(request);
                }
                Semantic::Ready(v) => v,
            };
            match ranked(vectors, query).await {
                Ok((index, vector)) => {
                    // Tools whose batch failed have no vector: then words alone rank them all.
                    let short = Cell::new(None);
                    let mut response = self.search_by(request, &|lexical, q, server, limit| {
                        if index.len() == lexical.len() {
                            index.rank(lexical, q, &vector, server, limit)
                        } else {
                            short.set(Some((index.len(), lexical.len())));
                            lexical.search(q, server, limit)
                        }
                    })?;
                    if let Some((have, all)) = short.get() {
                        vectors.retry_missing();
                        let message = format!(
                            "lexical ranking only: {have} of {all} tools have an embedding"
                        );
                        vectors.warn(message.clone());
                        response.warning = Some(message);
                    }
                    Ok(response)
                }
                Err(why) => {
                    let mut response = self.search(request)?;
                    let message = format!("lexical ranking only: {why}");
                    vectors.warn(message.clone());
                    response.warning = Some(message);
                    Ok(response)
                }
            }
        }

        /// Called after every change of the tools: the shown tools' texts, to embed.
        pub(in crate::catalog) fn tools_changed(&self, state: &State) {
            let Some(Semantic::Ready(vectors)) = self.semantic.semantic.get() else {
                return;
            };
            if lexical_only(&vectors.config) {
                return; // lexical ranking only: nothing to embed
            }
            let texts: Texts = state
                .shown()
                .map(|t| {
                    let schema = t.input_schema();
                    let text = ToolText::new(&t.id, &t.server, &t.remote_name)
                        .with_title(t.annotations.title.as_deref())
                        .with_description(t.description())
                        .with_input_schema(Some(&schema));
                    (
                        Arc::from(t.id.as_str()),
                        Arc::from(t.server.as_str()),
                        embedding_text(&text),
                    )
                })
                .collect();
            vectors.request(texts);
        }
    }

    /// The newest vectors (covering every tool) and the query's vector, within the query's
    /// bound.
    async fn ranked(
        vectors: &Arc<Vectors>,
        query: &str,
    ) -> Result<(Arc<HybridIndex>, Vec<f32>), String> {
        let deadline = Instant::now() + vectors.config.query_timeout;
        vectors.kick();
        let index = vectors.newest(deadline).await?;
        let embedded = tokio::time::timeout_at(deadline, index.embed_query(query))
            .await
            .map_err(|_| EmbedError::Timeout(vectors.config.query_timeout.as_millis()))
            .and_then(|r| r)
            .map_err(|e| {
                format!(
                    "embedding the query with `{}` failed: {e}",
                    vectors.embedder.model_id()
                )
            })?;
        Ok((index, embedded))
    }
}
