//! A sentence-transformers model folder run in-process with candle (pure Rust, CPU).
//!
//! The folder holds `config.json` (a BERT-family encoder), `model.safetensors`, `tokenizer.json`
//! and, optionally, `1_Pooling/config.json` (mean pooling when absent); all-MiniLM-L6-v2 is the
//! model this was built for. Nothing is fetched: a missing or incomplete folder is an error
//! naming the folder and the file.
//!
//! Two precisions ([`Precision`]): by default the encoder's linear layers run in int8
//! (`encoder.rs` over `int8.rs`: weights quantized per output row at load, activations per
//! token, AVX-512 VNNI or AVX2 chosen at run time, plain Rust elsewhere), one text at a time
//! without padding; [`Precision::F32`] runs candle-transformers' `BertModel` as trained.
//!
//! [`LocalEmbedder`] implements [`mcp_catalog::search::Embedder`]. A client opens it for
//! `[search] embedder = { local = … }` once it is given [`load_embedder`]
//! (`mcp_client::McpClientBuilder::local_model`, which the `embed-local` features of
//! `mcp-client`, `mcp-agent` and the command line set).

mod attention;
mod dense;
mod encoder;
mod int8;

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

/// A 64-bit fingerprint of the bytes that decide a model's vectors (its config, pooling,
/// weights and tokenizer), so that its cached vectors are never taken for another model's —
/// a fine-tune or another model of the same shape and file size swapped into the folder. Not
/// cryptographic: it tells models apart, it does not authenticate them. Eight bytes a step,
/// a few milliseconds for a 90 MB model.
#[derive(Debug)]
struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Self(0x243f_6a88_85a3_08d3)
    }
}

impl Fingerprint {
    fn add(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(29);
        let mut h = mix(self.0, bytes.len() as u64);
        let words = bytes.chunks_exact(8);
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        for w in words {
            h = mix(h, u64::from_le_bytes(w.try_into().unwrap_or_default()));
        }
        self.0 = mix(h, u64::from_le_bytes(tail));
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Pooling {
    Mean,
    Cls,
}

/// The numbers the encoder computes with; see [`LocalEmbedderBuilder::precision`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Precision {
    /// The encoder's linear layers in int8 (embeddings, LayerNorm, attention scores, GELU and
    /// pooling in `f32`): on all-MiniLM-L6-v2, vectors within cosine 0.995 of `F32`'s, several
    /// times faster, and somewhat less memory (a resident size of about 85 MiB against 95 MiB,
    /// measured).
    #[default]
    Int8,
    /// Every layer in `f32`, through candle-transformers' `BertModel`: the model as trained.
    F32,
}

enum Model {
    F32(Box<BertModel>),
    Int8(Box<encoder::Encoder>),
}

struct Inner {
    model: Model,
    tokenizer: Tokenizer,
    pooling: Pooling,
}

/// Options of a [`LocalEmbedder`] before it loads; from [`LocalEmbedder::builder`].
///
/// ```no_run
/// use mcp_embed_local::{LocalEmbedder, Precision};
///
/// let exact = LocalEmbedder::builder("models/all-MiniLM-L6-v2")
///     .precision(Precision::F32)
///     .load()?;
/// # Ok::<(), mcp_embed_local::LoadError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LocalEmbedderBuilder {
    dir: PathBuf,
    precision: Precision,
}

impl LocalEmbedderBuilder {
    /// The encoder's precision: [`Precision::Int8`] (the default) or [`Precision::F32`].
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Loads the folder.
    pub fn load(self) -> Result<LocalEmbedder, LoadError> {
        LocalEmbedder::load_with(&self.dir, self.precision)
    }
}

/// A local sentence-transformers model as an [`Embedder`].
#[derive(Clone)]
///
/// ```no_run
/// use mcp_embed_local::LocalEmbedder;
///
/// let embedder = LocalEmbedder::load("models/all-MiniLM-L6-v2")?;
/// let vectors = embedder.embed_blocking(&["send a message to the team".to_owned()])?;
/// assert_eq!(vectors[0].len(), 384);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    id: String,
    dimension: usize,
    precision: Precision,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.id)
            .field("dimension", &self.dimension)
            .field("precision", &self.precision)
            .finish_non_exhaustive()
    }
}

fn invalid(path: &Path, reason: impl fmt::Display) -> LoadError {
    LoadError::Invalid {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// [`LocalEmbedder::load`] as a shared [`Embedder`]: the loader
/// `mcp_client::McpClientBuilder::local_model` takes.
pub fn load_embedder(dir: &Path) -> Result<Arc<dyn Embedder>, BoxError> {
    Ok(Arc::new(LocalEmbedder::load(dir)?))
}

impl LocalEmbedder {
    /// Loads the model folder at `dir` with its linear layers in int8 ([`Precision::Int8`]).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, LoadError> {
        Self::load_with(dir.as_ref(), Precision::default())
    }

    /// Options for loading the folder at `dir`, such as its [`Precision`].
    pub fn builder(dir: impl Into<PathBuf>) -> LocalEmbedderBuilder {
        LocalEmbedderBuilder {
            dir: dir.into(),
            precision: Precision::default(),
        }
    }

    /// The precision the encoder runs at.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    fn load_with(dir: &Path, precision: Precision) -> Result<Self, LoadError> {
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
        // The int8 encoder sizes its buffers from these values: refuse absurd ones before any
        // weight is read.
        let shape: Option<encoder::Shape> = match precision {
            Precision::F32 => None,
            Precision::Int8 => {
                let shape: encoder::Shape = serde_json::from_str(&text)
                    .map_err(|e| invalid(&config_path, format!("not a BERT config: {e}")))?;
                shape.validate().map_err(|e| invalid(&config_path, e))?;
                Some(shape)
            }
        };
        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| invalid(&weights_path, e))?;
        let mut print = Fingerprint::default();
        print.add(text.as_bytes());
        print.add(&[pooling as u8]);
        print.add(&weights);
        let model = match precision {
            Precision::F32 => {
                let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
                    .map_err(|e| invalid(&weights_path, e))?;
                let model = BertModel::load(vb, &config).map_err(|e| invalid(&weights_path, e))?;
                Model::F32(Box::new(model))
            }
            Precision::Int8 => {
                let shape = shape.ok_or_else(|| invalid(&config_path, "no shape"))?;
                let tensors = candle_core::safetensors::load_buffer(&weights, &Device::Cpu)
                    .map_err(|e| invalid(&weights_path, e))?;
                drop(weights);
                let model = encoder::Encoder::load(&shape, tensors)
                    .map_err(|e| invalid(&weights_path, e))?;
                Model::Int8(Box::new(model))
            }
        };
        let tokenizer_path = dir.join("tokenizer.json");
        print.add(&std::fs::read(&tokenizer_path).map_err(|e| invalid(&tokenizer_path, e))?);
        let print = print.0;
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
            id: match precision {
                Precision::F32 => format!("local:{name}:{print:016x}"),
                // `o4`: q/k/v and the feed-forward keep four input channels in `f32` (`encoder.rs`); a
                // cache must not mix their vectors with those of the earlier int8 encoder.
                Precision::Int8 => format!("local:{name}:{print:016x}:int8o4"),
            },
            dimension,
            precision,
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

/// The error of [`load_embedder`] and of the model's runs.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The text of a panic's payload, bounded.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message");
    text.chars().take(200).collect()
}

impl Inner {
    fn run(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, BoxError> {
        match &self.model {
            Model::F32(model) => self.run_f32(model, texts),
            Model::Int8(encoder) => self.run_int8(encoder, texts),
        }
    }

    /// Each text alone and unpadded; a batch is shared among the CPU's cores.
    fn run_int8(
        &self,
        encoder: &encoder::Encoder,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, BoxError> {
        let one = |text: &String| -> Result<Vec<f32>, BoxError> {
            let e = self.tokenizer.encode(text.as_str(), true)?;
            let hidden = encoder.forward(e.get_ids(), e.get_type_ids())?;
            Ok(self.pool(&hidden, encoder.hidden()))
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(texts.len());
        if threads <= 1 {
            return texts.iter().map(one).collect();
        }
        // One thread a core. Each thread runs the encoder's own kernels (candle only loaded
        // the weights), so no pool of threads is started beside them.
        let chunk = texts.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let parts: Vec<_> = texts
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter().map(one).collect::<Result<Vec<_>, _>>())
                })
                .collect();
            // Every thread is joined before returning, so that one's error does not leave the
            // scope to re-raise another's panic; the first failure is reported.
            let mut all = Vec::with_capacity(texts.len());
            let mut first: Option<BoxError> = None;
            for part in parts {
                let result = match part.join() {
                    Ok(result) => result,
                    Err(panic) => Err(format!(
                        "the model's thread panicked: {}",
                        panic_message(&*panic)
                    )
                    .into()),
                };
                match result {
                    Ok(vectors) if first.is_none() => all.extend(vectors),
                    Ok(_) => {}
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
            match first {
                Some(e) => Err(e),
                None => Ok(all),
            }
        })
    }

    /// Pools rows of `h` hidden states (at least one) into one vector.
    fn pool(&self, hidden: &[f32], h: usize) -> Vec<f32> {
        match self.pooling {
            Pooling::Cls => hidden[..h].to_vec(),
            Pooling::Mean => {
                let mut sum = vec![0f32; h];
                let mut n = 0usize;
                for row in hidden.chunks_exact(h) {
                    for (s, v) in sum.iter_mut().zip(row) {
                        *s += v;
                    }
                    n += 1;
                }
                let count = n.max(1) as f32;
                sum.iter_mut().for_each(|s| *s /= count);
                sum
            }
        }
    }

    fn run_f32(&self, model: &BertModel, texts: &[String]) -> Result<Vec<Vec<f32>>, BoxError> {
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
        let device = &model.device;
        let ids = Tensor::from_vec(ids, (n, len), device)?;
        let types = Tensor::from_vec(types, (n, len), device)?;
        let mask = Tensor::from_vec(mask, (n, len), device)?;
        let hidden = model.forward(&ids, &types, Some(&mask))?;
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
