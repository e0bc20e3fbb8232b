//! Hybrid tool search from the configuration's `[search]` table: the embedder it names is
//! built once per client (a local model loaded, an endpoint probed for its dimension) and set
//! on every run's catalog, whose `mcp_search_tools` then blends words and meaning
//! ([`mcp_catalog::Catalog::search_ranked`]).
//!
//! Feature `embed` adds the OpenAI-compatible endpoint back end; a local sentence-transformers
//! model opens through a [`LocalModelLoader`] (`mcp-embed-local`'s, which feature `embed-local`
//! sets). Without them a configured `[search]` fails the run's opening with
//! [`SearchSetupError::NotBuilt`], naming the feature. An embedder that cannot
//! be reached is not an error: the run's searches are lexical, each with a warning (a
//! `search_warning` event). Runs opening together share one attempt at building the embedder
//! (one probe of the endpoint, not one each in turn), and a failed attempt is remembered for
//! 30 seconds before the next run tries again.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_core::EventSink;
use mcp_catalog::Catalog;
use mcp_config::SearchConfig;

use crate::ClientError;

/// How long a failed attempt at building the embedder is remembered: runs opening meanwhile
/// get its outcome at once instead of waiting for another probe.
#[cfg_attr(not(feature = "embed"), allow(dead_code))]
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(30);

/// Opens a local embedding model folder (`[search] embedder = { local = … }`), off the
/// runtime's workers: by the client's first run that needs it, and after a failure by the
/// first one 30 seconds later. See
/// [`McpClientBuilder::local_model`](crate::McpClientBuilder::local_model).
#[cfg(feature = "embed")]
pub type LocalModelLoader =
    fn(
        &std::path::Path,
    )
        -> Result<Arc<dyn mcp_catalog::search::Embedder>, Box<dyn std::error::Error + Send + Sync>>;

/// The loader a client starts with: `mcp-embed-local`'s with the `embed-local` feature, else
/// none.
#[cfg(feature = "embed")]
pub(crate) fn default_local_model() -> Option<LocalModelLoader> {
    #[cfg(feature = "embed-local")]
    {
        Some(mcp_embed_local::load_embedder)
    }
    #[cfg(not(feature = "embed-local"))]
    {
        None
    }
}

/// Why a run with a `[search]` table could not open (carried by [`ClientError::Config`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SearchSetupError {
    /// The configured embedder's back end is not compiled in.
    #[error("[search] names {what}, which this build lacks: build with the `{feature}` feature")]
    NotBuilt {
        /// The back end, in words.
        what: &'static str,
        /// The cargo feature (of `mcp-agent`, `mcp-client` and the command line) adding it.
        feature: &'static str,
    },
    /// The variable `api_key_env` names is unset or blank.
    #[error("[search] the API key variable `{variable}` is not set or empty")]
    MissingKey {
        /// The variable's name.
        variable: String,
    },
    /// The local model folder could not be loaded.
    #[error("[search] the local embedding model could not be loaded: {reason}")]
    Load {
        /// Why, naming the folder and the file.
        reason: String,
    },
}

/// The client's `[search]`: its configuration and, once built, its embedder and vector cache.
#[derive(Debug)]
pub(crate) struct SearchSetup {
    config: SearchConfig,
    #[cfg(feature = "embed")]
    built: on::Built,
}

impl SearchSetup {
    pub(crate) fn new(
        config: Option<SearchConfig>,
        #[cfg(feature = "embed")] local_model: Option<LocalModelLoader>,
    ) -> Option<Self> {
        config.map(|config| Self {
            #[cfg(feature = "embed")]
            built: on::Built::new(&config, local_model),
            config,
        })
    }
}

/// Sets the run's hybrid search up on `catalog`, when the client has a `[search]`.
pub(crate) async fn attach(
    setup: Option<&SearchSetup>,
    catalog: &Catalog,
    events: Arc<dyn EventSink>,
) -> Result<(), ClientError> {
    let Some(setup) = setup else {
        return Ok(());
    };
    #[cfg(feature = "embed")]
    {
        on::attach(setup, catalog, events).await
    }
    #[cfg(not(feature = "embed"))]
    {
        let _ = (catalog, events);
        Err(ClientError::Config(Box::new(not_built(&setup.config))))
    }
}

/// One attempt at a time at making a `T`, shared by every caller that comes while it runs;
/// a success is kept, a failure remembered for a while.
#[cfg_attr(not(feature = "embed"), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct SharedAttempt<T, E> {
    state: Mutex<Attempt<T, E>>,
    remember: Duration,
}

/// What a caller of [`SharedAttempt::get`] does next.
enum Next<T, E> {
    Lead(tokio::sync::watch::Sender<Option<Result<T, E>>>),
    Wait(tokio::sync::watch::Receiver<Option<Result<T, E>>>),
}

#[derive(Debug)]
enum Attempt<T, E> {
    Idle,
    /// Running: its outcome comes on this channel (closed without one if it was dropped).
    Running(tokio::sync::watch::Receiver<Option<Result<T, E>>>),
    Done(T),
    Failed(E, Instant),
}

#[cfg_attr(not(feature = "embed"), allow(dead_code))]
impl<T: Clone, E: Clone> SharedAttempt<T, E> {
    /// Nothing attempted yet; failures remembered for `remember`.
    pub(crate) fn new(remember: Duration) -> Self {
        Self {
            state: Mutex::new(Attempt::Idle),
            remember,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Attempt<T, E>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept value; else the remembered failure while it is recent; else the outcome of
    /// the attempt running now; else runs `attempt` (once) and shares its outcome.
    pub(crate) async fn get<F, Fut>(&self, attempt: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut attempt = Some(attempt);
        loop {
            let next = {
                let mut state = self.lock();
                match &*state {
                    Attempt::Done(value) => return Ok(value.clone()),
                    Attempt::Failed(e, at) if at.elapsed() < self.remember => {
                        return Err(e.clone());
                    }
                    Attempt::Running(rx) => Next::Wait(rx.clone()),
                    Attempt::Idle | Attempt::Failed(..) => {
                        let (tx, rx) = tokio::sync::watch::channel(None);
                        *state = Attempt::Running(rx);
                        Next::Lead(tx)
                    }
                }
            };
            match next {
                Next::Lead(tx) => match attempt.take() {
                    Some(attempt) => return self.lead(tx, attempt).await,
                    // Never: a caller that led has returned.
                    None => *self.lock() = Attempt::Idle,
                },
                Next::Wait(mut rx) => {
                    if let Ok(outcome) = rx.wait_for(Option::is_some).await
                        && let Some(outcome) = outcome.clone()
                    {
                        return outcome;
                    }
                    // The attempt was dropped before it ended: the next caller leads.
                }
            }
        }
    }

    /// Runs the attempt and publishes its outcome; dropped midway, it leaves the state idle.
    async fn lead<F, Fut>(
        &self,
        tx: tokio::sync::watch::Sender<Option<Result<T, E>>>,
        attempt: F,
    ) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        struct Reset<'a, T, E>(&'a SharedAttempt<T, E>, bool);
        impl<T, E> Drop for Reset<'_, T, E> {
            fn drop(&mut self) {
                if !self.1 {
                    let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
                    if matches!(*state, Attempt::Running(_)) {
                        *state = Attempt::Idle;
                    }
                }
            }
        }
        let mut reset = Reset(self, false);
        let outcome = attempt().await;
        *self.lock() = match &outcome {
            Ok(value) => Attempt::Done(value.clone()),
            Err(e) => Attempt::Failed(e.clone(), Instant::now()),
        };
        reset.1 = true;
        tx.send_replace(Some(outcome.clone()));
        outcome
    }
}

fn not_built(config: &SearchConfig) -> SearchSetupError {
    match config.embedder {
        mcp_config::EmbedderConfig::Local { .. } => SearchSetupError::NotBuilt {
            what: "a local embedding model",
            feature: "embed-local",
        },
        _ => SearchSetupError::NotBuilt {
            what: "an embeddings endpoint",
            feature: "embed",
        },
    }
}

#[cfg(feature = "embed")]
mod on {
    use std::sync::Arc;
    use std::time::Duration;

    use agent_core::EventSink;
    use mcp_catalog::Catalog;
    use mcp_catalog::search::{Embedder, EmbeddingCache, HybridConfig};
    use mcp_config::{EmbedderConfig, SearchConfig};
    use mcp_embed::{ApiKey, OpenAiEmbedConfig, OpenAiEmbedder};

    use super::{LocalModelLoader, RETRY_AFTER, SearchSetup, SearchSetupError, SharedAttempt};
    use crate::ClientError;

    /// The embedder (built by the first run that gets one) and the vectors, shared by every
    /// run of the client.
    #[derive(Debug)]
    pub(super) struct Built {
        embedder: SharedAttempt<Arc<dyn Embedder>, NoEmbedder>,
        cache: Arc<EmbeddingCache>,
        hybrid: HybridConfig,
        local_model: Option<LocalModelLoader>,
    }

    impl Built {
        pub(super) fn new(config: &SearchConfig, local_model: Option<LocalModelLoader>) -> Self {
            let mut hybrid = HybridConfig::default();
            if let Some(w) = config.weight {
                hybrid.semantic_weight = w;
            }
            if let Some(t) = config.timeout {
                hybrid.query_timeout = t;
            }
            Self {
                embedder: SharedAttempt::new(RETRY_AFTER),
                cache: Arc::new(match &config.cache_dir {
                    Some(dir) => EmbeddingCache::on_disk(dir),
                    None => EmbeddingCache::in_memory(),
                }),
                hybrid,
                local_model,
            }
        }
    }

    /// Why no embedder: fatal for the run, or only for its hybrid ranking.
    #[derive(Debug, Clone)]
    pub(super) enum NoEmbedder {
        Fatal(SearchSetupError),
        Unavailable(String),
    }

    pub(super) async fn attach(
        setup: &SearchSetup,
        catalog: &Catalog,
        events: Arc<dyn EventSink>,
    ) -> Result<(), ClientError> {
        catalog.set_search_events(events);
        let built = &setup.built;
        let embedder = built
            .embedder
            .get(|| build(&setup.config, built.hybrid.query_timeout, built.local_model))
            .await;
        match embedder {
            Ok(embedder) => {
                catalog.set_embedder(embedder, Arc::clone(&built.cache), built.hybrid.clone());
                Ok(())
            }
            Err(NoEmbedder::Unavailable(reason)) => {
                catalog.set_embedder_unavailable(format!("lexical ranking only: {reason}"));
                Ok(())
            }
            Err(NoEmbedder::Fatal(e)) => Err(ClientError::Config(Box::new(e))),
        }
    }

    async fn build(
        config: &SearchConfig,
        wait: Duration,
        local_model: Option<LocalModelLoader>,
    ) -> Result<Arc<dyn Embedder>, NoEmbedder> {
        match &config.embedder {
            EmbedderConfig::OpenAi {
                base_url,
                model,
                api_key_env,
            } => {
                let key = match api_key_env {
                    Some(variable) => Some(
                        std::env::var(variable)
                            .ok()
                            .map(|k| k.trim().to_owned())
                            .filter(|k| !k.is_empty())
                            .map(ApiKey::new)
                            .ok_or_else(|| {
                                NoEmbedder::Fatal(SearchSetupError::MissingKey {
                                    variable: variable.clone(),
                                })
                            })?,
                    ),
                    None => None,
                };
                let endpoint =
                    OpenAiEmbedConfig::new(base_url.clone(), model.clone()).with_api_key(key);
                // The dimension probe is one request: bounded like a search's wait.
                match tokio::time::timeout(wait, OpenAiEmbedder::connect(endpoint)).await {
                    Ok(Ok(embedder)) => Ok(Arc::new(embedder)),
                    Ok(Err(e)) => Err(NoEmbedder::Unavailable(format!(
                        "the embeddings endpoint for `{model}` could not be used: {e}"
                    ))),
                    Err(_) => Err(NoEmbedder::Unavailable(format!(
                        "the embeddings endpoint for `{model}` did not answer within {} ms",
                        wait.as_millis()
                    ))),
                }
            }
            EmbedderConfig::Local { path } => match local_model {
                Some(load) => local(path, load).await,
                None => Err(NoEmbedder::Fatal(super::not_built(config))),
            },
            _ => Err(NoEmbedder::Fatal(super::not_built(config))),
        }
    }

    async fn local(
        path: &std::path::Path,
        load: LocalModelLoader,
    ) -> Result<Arc<dyn Embedder>, NoEmbedder> {
        let path = path.to_owned();
        let loaded = tokio::task::spawn_blocking(move || load(&path))
            .await
            .map_err(|e| {
                NoEmbedder::Fatal(SearchSetupError::Load {
                    reason: e.to_string(),
                })
            })?;
        loaded.map_err(|e| {
            NoEmbedder::Fatal(SearchSetupError::Load {
                reason: e.to_string(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::SharedAttempt;

    #[tokio::test(flavor = "current_thread")]
    async fn concurrent_callers_share_one_failing_attempt_and_it_is_remembered() {
        let shared: SharedAttempt<u32, String> = SharedAttempt::new(Duration::from_secs(3600));
        let attempts = AtomicUsize::new(0);
        let gate = Semaphore::new(0);
        let attempt = || async {
            attempts.fetch_add(1, Ordering::SeqCst);
            let _ = gate.acquire().await;
            Err::<u32, _>("unreachable".to_owned())
        };
        // Twenty runs open while the endpoint does not answer; then it fails once.
        let callers = futures::future::join_all((0..20).map(|_| shared.get(attempt)));
        let (outcomes, ()) = tokio::join!(callers, async { gate.add_permits(1) });
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            1,
            "one attempt, not twenty in turn"
        );
        assert!(outcomes.iter().all(|o| o == &Err("unreachable".to_owned())));
        // Remembered: the next opening does not try again.
        assert_eq!(shared.get(attempt).await, Err("unreachable".to_owned()));
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_forgotten_failure_is_tried_again_and_a_success_is_kept() {
        let shared: SharedAttempt<u32, String> = SharedAttempt::new(Duration::ZERO);
        let attempts = Arc::new(AtomicUsize::new(0));
        let attempt = || async {
            let n = attempts.fetch_add(1, Ordering::SeqCst);
            if n == 0 {
                Err("down".to_owned())
            } else {
                Ok(7)
            }
        };
        assert_eq!(shared.get(attempt).await, Err("down".to_owned()));
        assert_eq!(shared.get(attempt).await, Ok(7));
        assert_eq!(shared.get(attempt).await, Ok(7));
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_attempt_lets_the_next_caller_lead() {
        let shared: SharedAttempt<u32, String> = SharedAttempt::new(Duration::from_secs(3600));
        let first = shared.get(std::future::pending::<Result<u32, String>>);
        // Polled once (it leads), then dropped.
        assert!(futures::poll!(Box::pin(first)).is_pending());
        assert_eq!(shared.get(|| async { Ok(3) }).await, Ok(3));
    }
}
