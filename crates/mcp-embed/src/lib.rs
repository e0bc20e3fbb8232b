//! Embedding back ends for the catalog's hybrid search ([`mcp_catalog::search::HybridIndex`]).
//!
//! - [`OpenAiEmbedder`]: an OpenAI-compatible `/v1/embeddings` endpoint over hyper + rustls
//!   (base URL, model, key from the environment, batching, bounded retries on 408, 429, 5xx and
//!   failed connections; the key never appears in an error or `Debug`).
//!
//! Both implement [`mcp_catalog::search::Embedder`]; the catalog checks and bounds whatever
//! they return.

mod openai;

pub use openai::{ApiKey, OpenAiEmbedConfig, OpenAiEmbedder};
