//! A sentence-transformers model folder run in-process with candle (pure Rust, CPU).
//!
//! The folder holds `config.json` (a BERT-family encoder), `model.safetensors`, `tokenizer.json`
//! and, optionally, `1_Pooling/config.json` (mean pooling when absent); all-MiniLM-L6-v2 is the
//! model this was built for. Nothing is fetched: a missing or incomplete folder is an error
//! naming the folder and the file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
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
    model: BertModel,
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
        let config: Config = serde_json::from_str(&text)
            .map_err(|e| invalid(&config_path, format!("not a BERT config: {e}")))?;
        let dimension: usize = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("hidden_size")?.as_u64())
            .map_or(0, |n| n as usize);
        if dimension == 0 {
            return Err(invalid(&config_path, "no hidden_size"));
        }
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
        let model = BertModel::load(vb, &config).map_err(|e| invalid(&weights_path, e))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| invalid(&tokenizer_path, e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
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
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true)?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(n * len);
        let mut types = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&x| x as i64));
            types.extend(e.get_type_ids().iter().map(|&x| x as i64));
            mask.extend(e.get_attention_mask().iter().map(|&x| x as i64));
        }
        let device = &self.model.device;
        let ids = Tensor::from_vec(ids, (n, len), device)?;
        let types = Tensor::from_vec(types, (n, len), device)?;
        let mask = Tensor::from_vec(mask, (n, len), device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        let pooled = match self.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let sum = hidden.broadcast_mul(&m)?.sum(1)?;
                let count = m.sum(1)?.clamp(1e-9, f64::MAX)?;
                sum.broadcast_div(&count)?
            }
        };
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
