//! A BERT encoder whose linear layers (query/key/value, attention output, feed-forward) run in
//! int8 ([`QLinear`]); embeddings, LayerNorm, attention, GELU and pooling stay in `f32`. One
//! text at a time, unpadded, so no attention mask is needed.
//!
//! The layers reading a LayerNorm's output (query/key/value and the feed-forward's up
//! projection) and the down projection keep the [`OUTLIERS`] input channels largest over each
//! call's tokens in `f32`: a LayerNorm's output has a few channels (channel 99 of
//! all-MiniLM-L6-v2, 6 to 11 times the median channel) that otherwise set each token's scale
//! and take the others' precision away. On 200 bfcl queries the vectors are within cosine
//! 0.9985 of the `f32` model's (mean 0.9995); before, with the query/key/value projection in
//! `f32` and no channel kept out, 0.9954 (mean 0.9991), and with it in plain int8 0.9908.

use std::collections::HashMap;

use candle_core::{DType, Tensor};

use super::attention;
use super::dense::Simd;
use super::int8::{Activations, Kernel, MAX_K, QLinear};

/// The shape of a BERT-family encoder, read from its `config.json`.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Shape {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default = "default_act")]
    hidden_act: String,
    #[serde(default = "default_position")]
    position_embedding_type: String,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_act() -> String {
    "gelu".into()
}

fn default_position() -> String {
    "absolute".into()
}

struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl LayerNorm {
    #[inline(always)]
    fn apply(&self, x: &mut [f32], eps: f32) {
        let h = self.gamma.len();
        for row in x.chunks_exact_mut(h) {
            let mean = row.iter().sum::<f32>() / h as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

struct Layer {
    /// Query, key and value projections as one layer of `3 × hidden` outputs.
    qkv: QLinear,
    out: QLinear,
    ln1: LayerNorm,
    up: QLinear,
    down: QLinear,
    ln2: LayerNorm,
}

/// The input channels that the query/key/value projection and the feed-forward's int8 layers
/// keep out of their product at each call, the largest over the call's tokens, and compute in
/// `f32` (see [`QLinear::with_outliers`]): the query/key/value and up projections read a
/// LayerNorm's output, whose few large channels would otherwise set each token's int8 scale.
const OUTLIERS: usize = 4;

/// The int8 encoder.
pub(crate) struct Encoder {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    ln: LayerNorm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    eps: f32,
    kernel: Kernel,
    simd: Simd,
}

/// The encoder's pass compiled for AVX-512. `unsafe` only to call a function compiled for
/// features the caller was not: the entry takes the [`Simd`] that `Simd::detect` made after
/// detecting AVX-512 F, and checks it. The pass is the same plain Rust, whose floating-point
/// operations the compiler keeps in order (no fused multiply-adds are formed); the tests compare
/// the two passes per token.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use super::{Encoder, Simd};

    pub(super) fn forward_avx512(
        simd: Simd,
        encoder: &Encoder,
        ids: &[u32],
        types: &[u32],
    ) -> Result<Vec<f32>, String> {
        assert!(simd.is_avx512());
        // SAFETY: `is_avx512` holds only for a `Simd` made after detecting AVX-512 F; the
        // function is safe Rust otherwise.
        unsafe { avx512(encoder, ids, types) }
    }

    #[target_feature(enable = "avx512f")]
    fn avx512(encoder: &Encoder, ids: &[u32], types: &[u32]) -> Result<Vec<f32>, String> {
        encoder.forward_plain(ids, types)
    }
}

/// Buffers reused across layers of one forward pass.
#[derive(Default)]
struct Scratch {
    q: Activations,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    proj: Vec<f32>,
    up: Vec<f32>,
    attention: attention::Buffers,
}

/// The largest hidden size [`Shape::validate`] accepts.
const MAX_HIDDEN: usize = 16_384;

/// The most layers [`Shape::validate`] accepts.
const MAX_LAYERS: usize = 256;

impl Shape {
    /// Refuses a shape whose sizes are zero, absurd or inconsistent before any tensor is read,
    /// so that nothing is sized from an unchecked value; the error names the field.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let h = self.hidden_size;
        if !(1..=MAX_HIDDEN).contains(&h) {
            return Err(format!("hidden_size {h} is not in 1..={MAX_HIDDEN}"));
        }
        let heads = self.num_attention_heads;
        if heads == 0 || !h.is_multiple_of(heads) {
            return Err(format!(
                "num_attention_heads {heads} does not divide hidden_size {h}"
            ));
        }
        if !(1..=MAX_LAYERS).contains(&self.num_hidden_layers) {
            return Err(format!(
                "num_hidden_layers {} is not in 1..={MAX_LAYERS}",
                self.num_hidden_layers
            ));
        }
        if !(1..=MAX_K).contains(&self.intermediate_size) {
            return Err(format!(
                "intermediate_size {} is not in 1..={MAX_K} (int8 sums in i32)",
                self.intermediate_size
            ));
        }
        let eps = self.layer_norm_eps;
        if !(eps.is_finite() && eps > 0.0 && eps < 1.0) {
            return Err(format!("layer_norm_eps {eps} is not in (0, 1)"));
        }
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {} is not supported (gelu)",
                self.hidden_act
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {} is not supported (absolute)",
                self.position_embedding_type
            ));
        }
        Ok(())
    }
}

/// Tensors by name, with or without a `bert.` prefix.
struct Weights(HashMap<String, Tensor>);

impl Weights {
    fn tensor(&self, name: &str) -> Result<&Tensor, String> {
        self.0
            .get(name)
            .or_else(|| self.0.get(&format!("bert.{name}")))
            .ok_or_else(|| format!("no tensor {name}"))
    }

    /// The tensor `name`, which must have exactly the dimensions `dims` and finite values.
    fn get(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>, String> {
        let t = self.tensor(name)?;
        if t.dims() != dims {
            return Err(format!("{name} has shape {:?}, not {dims:?}", t.dims()));
        }
        let v = t
            .to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| format!("{name}: {e}"))?;
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(format!("{name} holds a non-finite value ({}) at {i}", v[i]));
        }
        Ok(v)
    }

    /// A table of one or more rows of `row` values.
    fn table(&self, name: &str, row: usize) -> Result<Vec<f32>, String> {
        let dims = self.tensor(name)?.dims().to_vec();
        match dims[..] {
            [rows, r] if rows > 0 && r == row => self.get(name, &dims),
            _ => Err(format!("{name} has shape {dims:?}, not [rows, {row}]")),
        }
    }

    fn ln(&self, prefix: &str, h: usize) -> Result<LayerNorm, String> {
        Ok(LayerNorm {
            gamma: self.get(&format!("{prefix}.weight"), &[h])?,
            beta: self.get(&format!("{prefix}.bias"), &[h])?,
        })
    }

    /// An int8 layer keeping `outliers` input channels in `f32` (see
    /// [`QLinear::with_outliers`]).
    fn linear(&self, prefix: &str, n: usize, k: usize, outliers: usize) -> Result<QLinear, String> {
        let w = self.get(&format!("{prefix}.weight"), &[n, k])?;
        let b = self.get(&format!("{prefix}.bias"), &[n])?;
        Ok(QLinear::with_outliers(&w, b, n, k, outliers))
    }
}

impl Encoder {
    /// Builds the encoder from the tensors of a `model.safetensors`, quantizing its linear
    /// layers. `shape` must have passed [`Shape::validate`] (checked again here).
    pub(crate) fn load(shape: &Shape, tensors: HashMap<String, Tensor>) -> Result<Self, String> {
        shape.validate()?;
        let h = shape.hidden_size;
        let heads = shape.num_attention_heads;
        let w = Weights(tensors);
        let i = shape.intermediate_size;
        // Nothing is reserved from the config's sizes: every buffer grows from tensors that
        // exist and have the expected shape.
        let mut layers = Vec::new();
        for l in 0..shape.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let mut qkv_w = Vec::new();
            let mut qkv_b = Vec::new();
            for part in ["query", "key", "value"] {
                qkv_w.extend(w.get(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                qkv_b.extend(w.get(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: QLinear::with_outliers(&qkv_w, qkv_b, 3 * h, h, OUTLIERS),
                out: w.linear(&format!("{p}.attention.output.dense"), h, h, 0)?,
                ln1: w.ln(&format!("{p}.attention.output.LayerNorm"), h)?,
                up: w.linear(&format!("{p}.intermediate.dense"), i, h, OUTLIERS)?,
                down: w.linear(&format!("{p}.output.dense"), h, i, OUTLIERS)?,
                ln2: w.ln(&format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Self {
            word: w.table("embeddings.word_embeddings.weight", h)?,
            position: w.table("embeddings.position_embeddings.weight", h)?,
            token_type: w.table("embeddings.token_type_embeddings.weight", h)?,
            ln: w.ln("embeddings.LayerNorm", h)?,
            layers,
            hidden: h,
            heads,
            eps: shape.layer_norm_eps as f32,
            kernel: Kernel::detect(),
            simd: Simd::detect(),
        })
    }

    /// The size of each token's vector.
    pub(crate) fn hidden(&self) -> usize {
        self.hidden
    }

    /// The last hidden states (`ids.len()` rows of `hidden`) of one unpadded text, computed by
    /// the widest vector instructions this CPU has (see the `x86` module). Its fused
    /// multiply-adds round differently from plain Rust, and a last-place difference can move a
    /// value to the next int8 code in a later layer, so the two passes agree per token to a
    /// cosine of 0.9999, not bit for bit: a vector cached on one CPU is that close to another's.
    pub(crate) fn forward(&self, ids: &[u32], types: &[u32]) -> Result<Vec<f32>, String> {
        self.forward_with(self.simd, ids, types)
    }

    fn forward_with(&self, simd: Simd, ids: &[u32], types: &[u32]) -> Result<Vec<f32>, String> {
        #[cfg(target_arch = "x86_64")]
        if simd.is_avx512() {
            return x86::forward_avx512(simd, self, ids, types);
        }
        self.forward_plain(ids, types)
    }

    /// [`forward`](Self::forward) as plain Rust, inlined into each instruction set's copy.
    #[inline(always)]
    fn forward_plain(&self, ids: &[u32], types: &[u32]) -> Result<Vec<f32>, String> {
        let h = self.hidden;
        let n = ids.len();
        if n == 0 {
            return Err("the text produced no tokens".into());
        }
        if n > self.position.len() / h {
            return Err(format!("{n} tokens exceed the model's positions"));
        }
        let mut x = vec![0f32; n * h];
        for (t, row) in x.chunks_exact_mut(h).enumerate() {
            let id = ids[t] as usize;
            let ty = types.get(t).copied().unwrap_or(0) as usize;
            let word = self
                .word
                .get(id * h..(id + 1) * h)
                .ok_or_else(|| format!("token id {id} is outside the vocabulary"))?;
            let ty = self
                .token_type
                .get(ty * h..(ty + 1) * h)
                .ok_or_else(|| format!("token type {ty} is outside the model's types"))?;
            let pos = &self.position[t * h..(t + 1) * h];
            for (((v, a), b), c) in row.iter_mut().zip(word).zip(pos).zip(ty) {
                *v = a + b + c;
            }
        }
        self.ln.apply(&mut x, self.eps);
        let mut s = Scratch::default();
        for layer in &self.layers {
            self.layer(layer, &mut x, &mut s);
        }
        Ok(x)
    }

    #[inline(always)]
    fn layer(&self, layer: &Layer, x: &mut [f32], s: &mut Scratch) {
        let h = self.hidden;
        let n = x.len() / h;
        layer.qkv.forward(self.kernel, x, &mut s.q, &mut s.qkv);
        attention::attention(&s.qkv, n, h, self.heads, &mut s.ctx, &mut s.attention);
        layer
            .out
            .forward(self.kernel, &s.ctx, &mut s.q, &mut s.proj);
        for (v, p) in x.iter_mut().zip(&s.proj) {
            *v += p;
        }
        layer.ln1.apply(x, self.eps);
        layer.up.forward(self.kernel, x, &mut s.q, &mut s.up);
        gelu(&mut s.up);
        layer
            .down
            .forward(self.kernel, &s.up, &mut s.q, &mut s.proj);
        for (v, p) in x.iter_mut().zip(&s.proj) {
            *v += p;
        }
        layer.ln2.apply(x, self.eps);
    }
}

/// GELU with the exact error function (BERT's `gelu`), in place.
#[inline(always)]
fn gelu(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// The error function to `f32` precision: a rational approximation on [-4, 4] (beyond which
/// `erf` is ±1 in `f32`), without branches or `exp`, so loops over it vectorise. Coefficients
/// are those of Eigen's `generic_fast_erf_float`.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p - 2.101_024e-6;
    p = x2 * p - 5.692_506_4e-5;
    p = x2 * p - 7.349_906_3e-4;
    p = x2 * p - 2.954_6e-3;
    p = x2 * p - 1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 - 2.133_740_6e-4;
    q = x2 * q - 1.682_827e-3;
    q = x2 * q - 7.373_329_2e-3;
    q = x2 * q - 1.426_473_9e-2;
    p / q
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use candle_core::{DType, Device, Tensor};
    use candle_nn::VarBuilder;
    use candle_transformers::models::bert::{BertModel, Config};

    use super::{Encoder, Shape, Simd, erf};

    /// A tiny random BERT: hidden 20, 4 heads, intermediate 37, 2 layers, 30 words, 16
    /// positions.
    fn tiny() -> (serde_json::Value, HashMap<String, Tensor>) {
        let (h, i, layers) = (20usize, 37usize, 2usize);
        let mut seed = 5u64;
        let mut t = HashMap::new();
        let mut put = |name: String, dims: &[usize], spread: f32, offset: f32| {
            let n: usize = dims.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    offset + ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * spread
                })
                .collect();
            t.insert(name, Tensor::from_vec(v, dims, &Device::Cpu).unwrap());
        };
        put(
            "embeddings.word_embeddings.weight".into(),
            &[30, h],
            1.0,
            0.0,
        );
        put(
            "embeddings.position_embeddings.weight".into(),
            &[16, h],
            0.5,
            0.0,
        );
        put(
            "embeddings.token_type_embeddings.weight".into(),
            &[2, h],
            0.5,
            0.0,
        );
        let mut norms = vec!["embeddings.LayerNorm".to_owned()];
        for l in 0..layers {
            let p = format!("encoder.layer.{l}");
            for (name, n, k) in [
                (format!("{p}.attention.self.query"), h, h),
                (format!("{p}.attention.self.key"), h, h),
                (format!("{p}.attention.self.value"), h, h),
                (format!("{p}.attention.output.dense"), h, h),
                (format!("{p}.intermediate.dense"), i, h),
                (format!("{p}.output.dense"), h, i),
            ] {
                put(format!("{name}.weight"), &[n, k], 0.6, 0.0);
                put(format!("{name}.bias"), &[n], 0.2, 0.0);
            }
            norms.push(format!("{p}.attention.output.LayerNorm"));
            norms.push(format!("{p}.output.LayerNorm"));
        }
        for name in norms {
            put(format!("{name}.weight"), &[h], 0.2, 1.0);
            put(format!("{name}.bias"), &[h], 0.2, 0.0);
        }
        let config = serde_json::json!({
            "vocab_size": 30, "hidden_size": h, "num_hidden_layers": layers,
            "num_attention_heads": 4, "intermediate_size": i, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0, "max_position_embeddings": 16,
            "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
            "pad_token_id": 0
        });
        (config, t)
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let n = |x: &[f32]| x.iter().map(|y| y * y).sum::<f32>().sqrt();
        dot / (n(a) * n(b))
    }

    #[test]
    fn the_int8_encoder_follows_candles_bert_on_a_tiny_model() {
        let (config, tensors) = tiny();
        let shape: Shape = serde_json::from_value(config.clone()).unwrap();
        let encoder = Encoder::load(&shape, tensors.clone()).unwrap();
        let bert_config: Config = serde_json::from_value(config).unwrap();
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        let bert = BertModel::load(vb, &bert_config).unwrap();
        for ids in [&[3u32][..], &[1, 17, 29], &[2, 5, 8, 13, 21]] {
            let types = vec![0u32; ids.len()];
            let ours = encoder.forward(ids, &types).unwrap();
            let t = Tensor::new(ids, &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let ty = t.zeros_like().unwrap();
            let theirs = bert
                .forward(&t, &ty, None)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            assert_eq!(ours.len(), theirs.len());
            for (a, b) in ours.chunks_exact(20).zip(theirs.chunks_exact(20)) {
                let c = cosine(a, b);
                assert!(c >= 0.99, "{} tokens: cosine {c}", ids.len());
            }
        }
        // No tokens, too many, or an unknown word are errors, not panics.
        assert!(encoder.forward(&[], &[]).unwrap_err().contains("no tokens"));
        assert!(encoder.forward(&[1; 17], &[0; 17]).is_err());
        assert!(encoder.forward(&[30], &[0]).is_err());
    }

    #[test]
    fn every_instruction_set_gives_the_plain_pass() {
        let (config, tensors) = tiny();
        let shape: Shape = serde_json::from_value(config).unwrap();
        let encoder = Encoder::load(&shape, tensors).unwrap();
        let ids = [2u32, 5, 8, 13, 21, 1, 4];
        let types = [0u32; 7];
        let plain = encoder
            .forward_with(Simd::available()[0], &ids, &types)
            .unwrap();
        for simd in Simd::available() {
            let got = encoder.forward_with(simd, &ids, &types).unwrap();
            assert_eq!(got.len(), plain.len());
            // The same operations in the same order, compiled twice; compared per token rather
            // than bit for bit, since a last-place difference anywhere (a library function built
            // for each instruction set) can flip an int8 code downstream.
            for (a, b) in got.chunks_exact(20).zip(plain.chunks_exact(20)) {
                let c = cosine(a, b);
                assert!(c >= 0.9999, "{simd:?}: cosine {c}");
            }
        }
    }

    #[test]
    fn erf_matches_its_table() {
        for (x, want) in [
            (0.0f32, 0.0f32),
            (0.1, 0.112_462_92),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-1.5, -0.966_105_15),
            (2.0, 0.995_322_3),
            (3.0, 0.999_977_9),
            (9.0, 1.0),
            (-9.0, -1.0),
        ] {
            assert!(
                (erf(x) - want).abs() < 2e-6,
                "erf({x}) = {} not {want}",
                erf(x)
            );
        }
    }
}
