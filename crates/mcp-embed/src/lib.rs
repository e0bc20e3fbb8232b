//! Embedding back ends for the catalog's hybrid search ([`mcp_catalog::search::HybridIndex`]).
//!
//! - [`OpenAiEmbedder`]: an OpenAI-compatible `/v1/embeddings` endpoint over hyper + rustls
//!   (base URL, model, key from the environment, batching, bounded retries on 408, 429, 5xx and
//!   failed connections; the key never appears in an error or `Debug`).
//! - `LocalEmbedder` (feature `local`): a sentence-transformers folder (`config.json`,
//!   `model.safetensors`, `tokenizer.json`, `1_Pooling/config.json`) run in-process with candle
//!   on the CPU, its linear layers in int8 unless `Precision::F32` is asked for; a missing or
//!   incomplete folder is a `LoadError` naming the folder and the file.
//!
//! Both implement [`mcp_catalog::search::Embedder`]; the catalog checks and bounds whatever
//! they return.

#[cfg(feature = "local")]
mod local;
mod openai;

#[cfg(feature = "local")]
pub use local::{LoadError, LocalEmbedder, LocalEmbedderBuilder, MAX_TOKENS, Precision};
pub use openai::{ApiKey, OpenAiEmbedConfig, OpenAiEmbedder};
