//! A sentence-transformers model folder run in-process with candle (pure Rust, CPU).
//!
//! The folder holds `config.json` (a BERT-family encoder), `model.safetensors`, `tokenizer.json`
//! and, optionally, `1_Pooling/config.json` (mean pooling when absent); all-MiniLM-L6-v2 is the
//! model this was built for. Nothing is fetched: a missing or incomplete folder is an error
//! naming the folder and the file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::encoder::{Batch, Encoder, Shape};
use async_trait::async_trait;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use mcp_catalog::search::{EmbedError, EmbedKind, Embedder};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The most tokens read of one text; sentence-transformers models are trained on 256 or less.
pub const MAX_TOKENS: usize = 256;

/// Why a model folder could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A file the folder must hold is not there.
    #[error("the model folder {dir} has no {file}")]
    Missing {
        /// The folder.
        dir: PathBuf,
        /// The missing file, relative to the folder.
        file: &'static str,
    },
    /// A file is there but unusable.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Pooling {
    Mean,
    Cls,
}

struct Inner {
    model: Encoder,
    tokenizer: Tokenizer,
    pooling: Pooling,
}

/// A local sentence-transformers model as an [`Embedder`].
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    id: String,
    dimension: usize,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.id)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

fn invalid(path: &Path, reason: impl fmt::Display) -> LoadError {
    LoadError::Invalid {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

impl LocalEmbedder {
    /// Loads the model folder at `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, LoadError> {
        let dir = dir.as_ref();
        for file in ["config.json", "model.safetensors", "tokenizer.json"] {
            if !dir.join(file).is_file() {
                return Err(LoadError::Missing {
                    dir: dir.to_owned(),
                    file,
                });
            }
        }
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|e| invalid(&config_path, e))?;
        let config: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| invalid(&config_path, format!("not a BERT config: {e}")))?;
        let shape = Shape::from_config(&config)
            .map_err(|e| invalid(&config_path, format!("not a BERT config: {e}")))?;
        let dimension = shape.hidden;
        let pooling_path = dir.join("1_Pooling/config.json");
        let pooling = match std::fs::read_to_string(&pooling_path) {
            Ok(text) => {
                let v: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| invalid(&pooling_path, e))?;
                let on = |key: &str| v.get(key).and_then(|b| b.as_bool()) == Some(true);
                if on("pooling_mode_mean_tokens") {
                    Pooling::Mean
                } else if on("pooling_mode_cls_token") {
                    Pooling::Cls
                } else {
                    return Err(invalid(
                        &pooling_path,
                        "only mean and CLS pooling are supported",
                    ));
                }
            }
            Err(_) => Pooling::Mean,
        };
        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| invalid(&weights_path, e))?;
        let size = weights.len();
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| invalid(&weights_path, e))?;
        let model = Encoder::load(vb, shape).map_err(|e| invalid(&weights_path, e))?;
        let max_tokens = MAX_TOKENS.min(model.max_positions());
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| invalid(&tokenizer_path, e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| invalid(&tokenizer_path, e))?;
        let name = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.to_owned())
            .file_name()
            .map_or_else(|| "model".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                pooling,
            }),
            id: format!("local:{name}:{size}"),
            dimension,
        })
    }

    /// Embeds `texts` on this thread (the [`Embedder`] impl runs this on tokio's blocking
    /// pool).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.inner
            .run(texts)
            .map_err(|e| EmbedError::backend(e.to_string()))
    }
}

impl Inner {
    fn run(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        // One text is encoded at its true length: no padding, so no mask.
        let encodings = if let [text] = texts {
            vec![self.tokenizer.encode(text.as_str(), true)?]
        } else {
            self.tokenizer.encode_batch(texts.to_vec(), true)?
        };
        let texts = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut batch = Batch {
            ids: Vec::with_capacity(texts * len),
            types: Vec::with_capacity(texts * len),
            mask: Vec::with_capacity(texts * len),
            texts,
            len,
        };
        for e in &encodings {
            batch.ids.extend_from_slice(e.get_ids());
            batch.types.extend_from_slice(e.get_type_ids());
            batch.mask.extend_from_slice(e.get_attention_mask());
        }
        if batch.mask.iter().all(|&m| m == 1) {
            batch.mask.clear();
        }
        let pooled = self.model.embed(&batch, self.pooling == Pooling::Cls)?;
        Ok(pooled.to_vec2::<f32>()?)
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn max_batch(&self) -> usize {
        32
    }

    async fn embed(&self, texts: &[String], _kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| EmbedError::backend(format!("the model's thread failed: {e}")))?
    }
}
