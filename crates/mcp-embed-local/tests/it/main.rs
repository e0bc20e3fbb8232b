//! The local model: a folder that is missing or incomplete is an error naming it and the file;
//! the all-MiniLM-L6-v2 folder that `cargo xtask peers` installs embeds by meaning, in int8 within
//! cosine 0.995 of f32, and both agree with an independent float64 reference
//! (`peers/python/bert_reference.py`, numpy and Hugging Face `tokenizers`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_catalog::search::{EmbedKind, Embedder, EmbeddingCache, HybridConfig, HybridIndex};
use mcp_catalog::search::{SearchIndex, ToolText, embedding_text};
use mcp_embed_local::{LoadError, LocalEmbedder, Precision};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-embed-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_missing_folder_is_named_with_its_missing_file() {
    let dir = std::env::temp_dir().join("mcp-embed-no-such-model");
    let err = LocalEmbedder::load(&dir).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::Missing {
                file: "config.json",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("mcp-embed-no-such-model"), "{err}");
}

#[test]
fn an_incomplete_folder_names_the_missing_file() {
    let dir = scratch("incomplete");
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
    let err = LocalEmbedder::load(&dir).unwrap_err();
    assert!(
        err.to_string().contains("has no model.safetensors"),
        "{err}"
    );
    assert!(err.to_string().contains(&*dir.to_string_lossy()), "{err}");
    // A config that is not a BERT config is named too.
    std::fs::write(dir.join("model.safetensors"), b"\0").unwrap();
    let err = LocalEmbedder::load(&dir).unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cut_weights_are_an_error_naming_the_file() {
    let Some(model) = model() else { return };
    let dir = scratch("cut");
    for file in ["config.json", "tokenizer.json"] {
        std::fs::copy(model.join(file), dir.join(file)).unwrap();
    }
    let weights = std::fs::read(model.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("model.safetensors"), &weights[..weights.len() / 2]).unwrap();
    let err = LocalEmbedder::load(&dir).unwrap_err();
    assert!(err.to_string().contains("model.safetensors"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A tiny random BERT (hidden 20, 4 heads, intermediate 37, 2 layers, 30 words, 16 positions)
/// written into `dir` as `config.json` and `model.safetensors`, with `config` merged over the
/// valid config and, when `nan` is set, a NaN in one feed-forward weight. `tokenizer.json` is a
/// placeholder: the errors under test come before it is read.
fn tiny_model(dir: &std::path::Path, config: serde_json::Value, nan: bool) {
    use candle_core::{Device, Tensor};
    let (h, i, layers, vocab, positions) = (20usize, 37usize, 2usize, 30usize, 16usize);
    let mut seed = 11u64;
    let mut random = |dims: &[usize]| {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
            })
            .collect();
        Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
    };
    let mut t = std::collections::HashMap::new();
    let mut put = |name: String, dims: &[usize]| {
        t.insert(name, random(dims));
    };
    put("embeddings.word_embeddings.weight".into(), &[vocab, h]);
    put(
        "embeddings.position_embeddings.weight".into(),
        &[positions, h],
    );
    put("embeddings.token_type_embeddings.weight".into(), &[2, h]);
    // (prefix, rows, row length; 0 for a LayerNorm's vector)
    let mut layout = vec![("embeddings.LayerNorm".to_owned(), h, 0)];
    for l in 0..layers {
        let p = format!("encoder.layer.{l}");
        for part in ["query", "key", "value"] {
            layout.push((format!("{p}.attention.self.{part}"), h, h));
        }
        layout.extend([
            (format!("{p}.attention.output.dense"), h, h),
            (format!("{p}.attention.output.LayerNorm"), h, 0),
            (format!("{p}.intermediate.dense"), i, h),
            (format!("{p}.output.dense"), h, i),
            (format!("{p}.output.LayerNorm"), h, 0),
        ]);
    }
    for (name, n, k) in layout {
        if k == 0 {
            put(format!("{name}.weight"), &[n]);
        } else {
            put(format!("{name}.weight"), &[n, k]);
        }
        put(format!("{name}.bias"), &[n]);
    }
    if nan {
        let name = "encoder.layer.1.output.dense.weight".to_owned();
        let mut v = vec![0.01f32; h * i];
        v[7] = f32::NAN;
        t.insert(name, Tensor::from_vec(v, (h, i), &Device::Cpu).unwrap());
    }
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
    let mut c = serde_json::json!({
        "vocab_size": vocab, "hidden_size": h, "num_hidden_layers": layers,
        "num_attention_heads": 4, "intermediate_size": i, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "max_position_embeddings": positions,
        "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
        "pad_token_id": 0
    });
    for (k, v) in config.as_object().unwrap() {
        c[k] = v.clone();
    }
    std::fs::write(dir.join("config.json"), c.to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
}

#[test]
fn absurd_or_zero_sizes_in_config_json_are_refused_naming_the_field() {
    let dir = scratch("config-sizes");
    for (field, value) in [
        ("hidden_size", serde_json::json!(1_000_000)),
        ("num_hidden_layers", serde_json::json!(10_000_000_000u64)),
        ("num_hidden_layers", serde_json::json!(0)),
        ("num_attention_heads", serde_json::json!(3)),
        ("num_attention_heads", serde_json::json!(0)),
        ("intermediate_size", serde_json::json!(70_000)),
        ("intermediate_size", serde_json::json!(0)),
        ("layer_norm_eps", serde_json::json!(0.0)),
        ("layer_norm_eps", serde_json::json!(2.0)),
    ] {
        tiny_model(&dir, serde_json::json!({ field: value }), false);
        let err = LocalEmbedder::load(&dir).unwrap_err();
        let LoadError::Invalid { path, reason } = &err else {
            panic!("{field} {value}: {err}")
        };
        assert!(path.ends_with("config.json"), "{field} {value}: {err}");
        assert!(reason.contains(field), "{field} {value}: {err}");
    }
    // The same folder with its valid config loads as far as the placeholder tokenizer.
    tiny_model(&dir, serde_json::json!({}), false);
    let err = LocalEmbedder::load(&dir).unwrap_err();
    assert!(
        matches!(&err, LoadError::Invalid { path, .. } if path.ends_with("tokenizer.json")),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_nan_weight_is_refused_naming_the_tensor() {
    let dir = scratch("nan-weight");
    tiny_model(&dir, serde_json::json!({}), true);
    let err = LocalEmbedder::load(&dir).unwrap_err();
    let LoadError::Invalid { path, reason } = &err else {
        panic!("{err}")
    };
    assert!(path.ends_with("model.safetensors"), "{err}");
    assert!(
        reason.contains("encoder.layer.1.output.dense.weight") && reason.contains("non-finite"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_model_smaller_than_its_tokenizer_fails_each_batch_with_an_error_not_a_panic() {
    let Some(minilm) = model() else { return };
    let dir = scratch("small-vocab");
    // 30 words and 16 positions under MiniLM's 30,522-word tokenizer: every text (its [CLS] is
    // id 101) has an id outside the vocabulary, on every worker thread.
    tiny_model(&dir, serde_json::json!({}), false);
    std::fs::copy(minilm.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let embedder = LocalEmbedder::load(&dir).unwrap();
    assert_eq!(embedder.dimension(), 20);
    let texts: Vec<String> = (0..8).map(|i| format!("send message number {i}")).collect();
    let err = embedder.embed_blocking(&texts).unwrap_err().to_string();
    assert!(err.contains("outside the vocabulary"), "{err}");
    let long = vec!["word ".repeat(40)];
    let err = embedder.embed_blocking(&long).unwrap_err().to_string();
    assert!(err.contains("positions"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_model_id_follows_the_weights_pooling_and_tokenizer_not_the_file_size() {
    let Some(minilm) = model() else { return };
    let dir = scratch("fingerprint");
    tiny_model(&dir, serde_json::json!({}), false);
    std::fs::copy(minilm.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let id = || LocalEmbedder::load(&dir).unwrap().model_id().to_owned();
    let first = id();
    assert_eq!(
        id(),
        first,
        "the same folder keeps its id (and its cached vectors)"
    );
    // One weight's lowest mantissa bits changed: a fine-tune in miniature, the same file size.
    let weights = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let n = bytes.len();
    bytes[n - 4] ^= 1;
    std::fs::write(&weights, bytes).unwrap();
    let tuned = id();
    assert_ne!(tuned, first);
    std::fs::create_dir(dir.join("1_Pooling")).unwrap();
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        r#"{"pooling_mode_cls_token": true}"#,
    )
    .unwrap();
    let pooled = id();
    assert_ne!(pooled, tuned);
    let tokenizer = dir.join("tokenizer.json");
    let mut text = std::fs::read_to_string(&tokenizer).unwrap();
    text.push('\n');
    std::fs::write(&tokenizer, text).unwrap();
    assert_ne!(id(), pooled);
    std::fs::remove_dir_all(&dir).ok();
}

/// Whether a missing peer fails the test (`MCP_AGENT_REQUIRE_PEERS=1` or `CI=true`) instead of
/// skipping it.
fn peers_required() -> bool {
    ["CI", "MCP_AGENT_REQUIRE_PEERS"].iter().any(|v| {
        std::env::var(v).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    })
}

/// The path in the peer variable `var` when `installed` holds for it, or `None` (the test is
/// skipped) when the peers are not installed and not required.
fn peer(var: &str, installed: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if installed(&p) => Some(p),
        _ if peers_required() => panic!("{var} is not an installed peer (cargo xtask peers)"),
        _ => {
            eprintln!("skipped: {var} is not set (cargo xtask peers --env)");
            None
        }
    }
}

/// The installed all-MiniLM-L6-v2 folder.
fn model() -> Option<PathBuf> {
    peer("MCP_AGENT_PEER_MINILM", |p| {
        p.join("model.safetensors").is_file()
    })
}

#[tokio::test]
async fn minilm_embeds_by_meaning_and_ranks_a_paraphrase_first() {
    let Some(dir) = model() else { return };
    let embedder = LocalEmbedder::load(&dir).unwrap();
    assert_eq!(embedder.dimension(), 384);
    let texts: Vec<String> = [
        "send a message to the team",
        "post chat message. Post a message to a chat channel",
        "get weather forecast for a city",
    ]
    .map(String::from)
    .to_vec();
    let v = embedder.embed(&texts, EmbedKind::Document).await.unwrap();
    let cos = |a: &[f32], b: &[f32]| {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let n = |x: &[f32]| x.iter().map(|y| y * y).sum::<f32>().sqrt();
        dot / (n(a) * n(b))
    };
    assert!(cos(&v[0], &v[1]) > cos(&v[0], &v[2]) + 0.1);

    let tools = [
        ToolText::new("chat__post_chat_message", "chat", "post_chat_message")
            .with_description(Some("Post to a channel.")),
        ToolText::new("wx__get_forecast", "wx", "get_forecast")
            .with_description(Some("Tomorrow's weather for a city.")),
    ];
    let mut index = SearchIndex::default();
    index.replace_servers(
        [("chat", &tools[..1]), ("wx", &tools[1..])].map(|(s, t)| (s, t.iter().copied())),
    );
    let mut hybrid = HybridIndex::new(
        Arc::new(embedder),
        Arc::new(EmbeddingCache::in_memory()),
        HybridConfig::default(),
    );
    assert!(hybrid.set_tools(tools).await.is_empty());
    let found = hybrid
        .search(&index, "tell my team something", None, 2)
        .await;
    assert!(found.warning.is_none());
    assert_eq!(&*found.results.hits[0].id, "chat__post_chat_message");
}

/// Every `step`-th line's `field` of a bfcl file of the repository.
fn bfcl(file: &str, step: usize) -> Vec<serde_json::Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../datasets/bfcl")
        .join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .step_by(step)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The cosine of two vectors of one length, summed in `f64`.
fn cosine<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    assert_eq!(a.len(), b.len(), "vectors of one dimension");
    let (mut dot, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y): (f64, f64) = (x.into(), y.into());
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    dot / (aa.sqrt() * bb.sqrt())
}

#[test]
fn int8_vectors_stay_within_cosine_0_995_of_f32_on_bfcl_samples() {
    let Some(dir) = model() else { return };
    let int8 = LocalEmbedder::load(&dir).unwrap();
    let f32 = LocalEmbedder::builder(&dir)
        .precision(Precision::F32)
        .load()
        .unwrap();
    assert_eq!(int8.precision(), Precision::Int8);
    assert_eq!(f32.precision(), Precision::F32);
    assert_ne!(
        int8.model_id(),
        f32.model_id(),
        "their vectors must not share a cache"
    );

    // A sample small enough for a debug build (the 200 queries and 1,437 tools of the
    // documented figures are measured on a release build).
    let queries: Vec<String> = bfcl("queries.jsonl", 250)
        .iter()
        .map(|q| q["query"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(queries.len(), 11);
    let tools = bfcl("tools.jsonl", 480);
    let ids: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let documents: Vec<String> = tools
        .iter()
        .zip(&ids)
        .map(|(t, id)| {
            embedding_text(
                &ToolText::new(id, "bfcl", id)
                    .with_description(t["description"].as_str())
                    .with_input_schema(t.get("input_schema").and_then(|v| v.as_object())),
            )
        })
        .collect();
    for (what, texts) in [("query", &queries), ("tool", &documents)] {
        for chunk in texts.chunks(32) {
            let a = int8.embed_blocking(chunk).unwrap();
            let b = f32.embed_blocking(chunk).unwrap();
            for ((a, b), text) in a.iter().zip(&b).zip(chunk) {
                let c = cosine(a, b);
                assert!(c >= 0.995, "{what} {text:?}: cosine {c}");
            }
        }
    }
}

/// The reference venv's python (`peers/python/reference.txt`).
fn reference_python() -> Option<PathBuf> {
    peer("MCP_AGENT_PEER_REFERENCE_PYTHON", Path::is_file)
}

/// The vectors of `peers/python/bert_reference.py` for `texts`: the model folder run in float64
/// numpy by the textbook formulas, one text at a time, tokenized by Hugging Face `tokenizers`.
fn reference_vectors(python: &Path, dir: &Path, texts: &[String]) -> Vec<Vec<f64>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers/python/bert_reference.py");
    let mut child = Command::new(python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let request = serde_json::json!({ "model": dir, "texts": texts });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        out.status
    );
    #[derive(serde::Deserialize)]
    struct Answer {
        vectors: Vec<Vec<f64>>,
    }
    serde_json::from_slice::<Answer>(&out.stdout)
        .unwrap()
        .vectors
}

#[test]
fn both_precisions_agree_with_an_independent_float64_bert() {
    let (Some(dir), Some(python)) = (model(), reference_python()) else {
        return;
    };
    let mut texts: Vec<String> = bfcl("queries.jsonl", 250)
        .iter()
        .map(|q| q["query"].as_str().unwrap().to_owned())
        .collect();
    for t in bfcl("tools.jsonl", 480) {
        let name = t["name"].as_str().unwrap();
        texts.push(embedding_text(
            &ToolText::new(name, "bfcl", name)
                .with_description(t["description"].as_str())
                .with_input_schema(t.get("input_schema").and_then(|v| v.as_object())),
        ));
    }
    // Accents and a script without spaces (the tokenizer's normaliser), one word, and a text of
    // far more than 256 tokens (truncation at 256, as the folder's sentence-transformers
    // config says).
    texts.extend(
        [
            "Qual a temperatura atual em Divinópolis, MG? Fahrenheit, por favor.",
            "我想知道上海目前的天气状况，可以帮我查询吗？",
            "weather",
        ]
        .map(String::from),
    );
    texts.push("Book a table for two at an Italian restaurant tonight; ".repeat(40));
    let want = reference_vectors(&python, &dir, &texts);
    assert_eq!(want.len(), texts.len());
    let f32 = LocalEmbedder::builder(&dir)
        .precision(Precision::F32)
        .load()
        .unwrap();
    let int8 = LocalEmbedder::load(&dir).unwrap();
    // The f32 model pads a batch to its longest text, so its attention mask is checked too;
    // the long text goes alone (a batch padded to 256 tokens is slow in a debug build).
    let (short, long) = texts.split_at(texts.len() - 1);
    for (embedder, floor) in [(&f32, 0.999_99), (&int8, 0.998)] {
        let mut got = embedder.embed_blocking(short).unwrap();
        got.extend(embedder.embed_blocking(long).unwrap());
        assert_eq!(got.len(), texts.len());
        for ((got, want), text) in got.iter().zip(&want).zip(&texts) {
            let c = cosine(got, want);
            assert!(
                c >= floor,
                "{:?}: cosine {c} with the reference for {text:?}",
                embedder.precision()
            );
        }
    }
}
