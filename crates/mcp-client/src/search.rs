//! Hybrid tool search from the configuration's `[search]` table: the embedder it names is
//! built once per client (a local model loaded, an endpoint probed for its dimension) and set
//! on every run's catalog, whose `mcp_search_tools` then blends words and meaning
//! ([`mcp_catalog::Catalog::search_ranked`]).
//!
//! Feature `embed` adds the OpenAI-compatible endpoint back end, `embed-local` the local
//! sentence-transformers model (candle); without them a configured `[search]` fails the run's
//! opening with [`SearchSetupError::NotBuilt`], naming the feature. An embedder that cannot
//! be reached is not an error: the run's searches are lexical, each with a warning (a
//! `search_warning` event).

use std::sync::Arc;

use agent_core::EventSink;
use mcp_catalog::Catalog;
use mcp_config::SearchConfig;

use crate::ClientError;

/// Why a run with a `[search]` table could not open (carried by [`ClientError::Config`]).
#[derive(Debug, thiserror::Error)]
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
    pub(crate) fn new(config: Option<SearchConfig>) -> Option<Self> {
        config.map(|config| Self {
            #[cfg(feature = "embed")]
            built: on::Built::new(&config),
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

#[cfg_attr(feature = "embed-local", allow(dead_code))]
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

    use super::{SearchSetup, SearchSetupError};
    use crate::ClientError;

    /// The embedder (built by the first run that gets one) and the vectors, shared by every
    /// run of the client.
    #[derive(Debug)]
    pub(super) struct Built {
        embedder: tokio::sync::OnceCell<Arc<dyn Embedder>>,
        cache: Arc<EmbeddingCache>,
        hybrid: HybridConfig,
    }

    impl Built {
        pub(super) fn new(config: &SearchConfig) -> Self {
            let mut hybrid = HybridConfig::default();
            if let Some(w) = config.weight {
                hybrid.semantic_weight = w;
            }
            if let Some(t) = config.timeout {
                hybrid.query_timeout = t;
            }
            Self {
                embedder: tokio::sync::OnceCell::new(),
                cache: Arc::new(match &config.cache_dir {
                    Some(dir) => EmbeddingCache::on_disk(dir),
                    None => EmbeddingCache::in_memory(),
                }),
                hybrid,
            }
        }
    }

    /// Why no embedder: fatal for the run, or only for its hybrid ranking.
    enum NoEmbedder {
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
            .get_or_try_init(|| build(&setup.config, built.hybrid.query_timeout))
            .await;
        match embedder {
            Ok(embedder) => {
                catalog.set_embedder(
                    Arc::clone(embedder),
                    Arc::clone(&built.cache),
                    built.hybrid.clone(),
                );
                Ok(())
            }
            Err(NoEmbedder::Unavailable(reason)) => {
                catalog.set_embedder_unavailable(format!("lexical ranking only: {reason}"));
                Ok(())
            }
            Err(NoEmbedder::Fatal(e)) => Err(ClientError::Config(Box::new(e))),
        }
    }

    async fn build(config: &SearchConfig, wait: Duration) -> Result<Arc<dyn Embedder>, NoEmbedder> {
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
            EmbedderConfig::Local { path } => local(path).await,
            _ => Err(NoEmbedder::Fatal(super::not_built(config))),
        }
    }

    #[cfg(feature = "embed-local")]
    async fn local(path: &std::path::Path) -> Result<Arc<dyn Embedder>, NoEmbedder> {
        let path = path.to_owned();
        let loaded = tokio::task::spawn_blocking(move || mcp_embed::LocalEmbedder::load(path))
            .await
            .map_err(|e| {
                NoEmbedder::Fatal(SearchSetupError::Load {
                    reason: e.to_string(),
                })
            })?;
        match loaded {
            Ok(model) => Ok(Arc::new(model)),
            Err(e) => Err(NoEmbedder::Fatal(SearchSetupError::Load {
                reason: e.to_string(),
            })),
        }
    }

    #[cfg(not(feature = "embed-local"))]
    async fn local(_: &std::path::Path) -> Result<Arc<dyn Embedder>, NoEmbedder> {
        Err(NoEmbedder::Fatal(SearchSetupError::NotBuilt {
            what: "a local embedding model",
            feature: "embed-local",
        }))
    }
}
