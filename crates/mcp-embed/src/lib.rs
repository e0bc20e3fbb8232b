//! The catalog's hybrid search ([`mcp_catalog::search::HybridIndex`]) over an embeddings
//! endpoint.
//!
//! [`OpenAiEmbedder`]: an OpenAI-compatible `/v1/embeddings` endpoint over hyper + rustls (base
//! URL, model, key from the environment, batching, bounded retries on 408, 429, 5xx and failed
//! connections; the key never appears in an error or `Debug`). It implements
//! [`mcp_catalog::search::Embedder`]; the catalog checks and bounds whatever it returns. A
//! local model run in-process is the `mcp-embed-local` crate.

mod openai;

pub use openai::{ApiKey, OpenAiEmbedConfig, OpenAiEmbedder};
