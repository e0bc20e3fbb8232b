//! Lexical and hybrid ranking side by side on a tool-search dataset.
//!
//! ```text
//! cargo run --release -p mcp-embed-local --example hybrid_eval -- \
//!     --dataset datasets/bfcl --embedder local:PATH | openai:URL#MODEL \
//!     [--subset all|even|odd] [--weight W] [--fusion F] [--sweep W,W,…] [--input-type]
//!     [--scale N] [--cache DIR] [--variants F:W,F:W,…] [--doc-without-params] [--json]
//!     [--doc-text VARIANT] [--strip-literals] [--dump FILE]
//! ```
//!
//! Prints hit@1/5/10, recall@1/5/10 and MRR of both rankings, the query latency split into
//! embedding and ranking (with the machine's load average beside it), the cold embedding
//! throughput of the tools, the time to build the index from the vector cache, and the
//! process's added memory (RSS) for the model.
//!
//! Beside each wall-clock p50 stands a `cpu p50`: the process's CPU time
//! (`CLOCK_PROCESS_CPUTIME_ID`, every thread) read before and after each query's embedding and
//! each ranking, while the process does nothing else (the runtime's workers idle, the model
//! run one query at a time). On a loaded machine the wall clock also counts the time a query
//! waits for a core; the CPU time is what the query would take on a quiet core. The printed
//! `cpu/wall` (sums over all queries) checks it: above 1 would mean other threads computed
//! meanwhile (it is below 1 when the query waited for a core).
//! `--scale N` adds synthetic tools up to N for the latency figures (quality is measured on the
//! dataset's own tools): the ranking's p50 at N tools and the whole query's (each of the first
//! 500 queries' embedding plus its ranking). With `--cache DIR` the synthetic tools are
//! embedded once, not at every run. `--sweep` also prints the figures at each blend weight (the tools
//! embedded once). `--fusion` is `minmax`, `z<K>` (z-scores over the top K) or `rrf<K>`
//! (reciprocal-rank fusion with offset K). `--variants` prints hit@5 and MRR of each fusion and
//! weight on the even and the odd queries apart (the held-out check: choose on one half,
//! confirm on the other). `--cache DIR` keeps tool and query vectors on disk between runs (the
//! cold timing is then that of the cache; query vectors are cached only with `--variants`).
//! `--doc-text` embeds another text per tool than the catalog's `embedding_text` (see
//! `doc_variant`), `--strip-literals` embeds queries without their numbers, quoted strings,
//! URLs and addresses, and `--dump FILE` writes every tool's and query's vector, the expected
//! tools and the lexical scores as JSON lines, to study misses and fusions offline.
//! `cargo xtask search-eval --embedder …` runs this example.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use mcp_catalog::eval::{DatasetTool, EvalReport};
use mcp_catalog::search::{
    Embedder, EmbeddingCache, Fusion, HybridConfig, HybridIndex, RankingConfig, SearchIndex,
    ToolText,
};

#[path = "hybrid_eval/text.rs"]
mod text;

use text::{doc_variant, without_literals};

/// `minmax`, `z<K>` or `rrf<K>`.
fn parse_fusion(text: &str) -> Result<Fusion, String> {
    let bad = || format!("bad fusion `{text}` (minmax, z<K>, rrf<K>)");
    if text == "minmax" {
        Ok(Fusion::MinMax)
    } else if let Some(k) = text.strip_prefix("rrf") {
        Ok(Fusion::Rrf {
            k: k.parse().map_err(|_| bad())?,
        })
    } else if let Some(k) = text.strip_prefix('z') {
        Ok(Fusion::ZScore {
            top_k: k.parse().map_err(|_| bad())?,
        })
    } else {
        Err(bad())
    }
}

/// A stable key for a query's cached vector.
fn query_key(query: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    ("query", query).hash(&mut h);
    h.finish()
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hybrid_eval: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The resident memory of this process, in MiB (Linux; 0 elsewhere).
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The machine's load average over the last minute (Linux; 0 elsewhere): latencies mean little
/// without it on a shared machine.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The CPU time this process has used so far, in ms (every thread; 0 off Unix).
fn cpu_ms() -> f64 {
    #[cfg(unix)]
    {
        use nix::time::{ClockId, clock_gettime};
        clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)
            .map_or(0.0, |t| t.tv_sec() as f64 * 1e3 + t.tv_nsec() as f64 / 1e6)
    }
    #[cfg(not(unix))]
    0.0
}

fn pct(mut xs: Vec<f64>, p: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

async fn embedder(spec: &str, input_type: bool) -> Result<Arc<dyn Embedder>, String> {
    if let Some(rest) = spec.strip_prefix("openai:") {
        let (url, model) = rest
            .rsplit_once('#')
            .ok_or("--embedder openai:URL#MODEL needs a model after #")?;
        let key = std::env::var("OPENAI_API_KEY")
            .ok()
            .map(mcp_embed::ApiKey::new);
        let config = mcp_embed::OpenAiEmbedConfig::new(url, model)
            .with_api_key(key)
            .with_input_type(input_type)
            .with_max_batch(16);
        let e = mcp_embed::OpenAiEmbedder::connect(config)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Arc::new(e));
    }
    if let Some(path) = spec.strip_prefix("local:") {
        return local(path);
    }
    Err(format!(
        "unknown embedder `{spec}` (local:PATH or openai:URL#MODEL)"
    ))
}

fn local(path: &str) -> Result<Arc<dyn Embedder>, String> {
    mcp_embed_local::load_embedder(path.as_ref()).map_err(|e| e.to_string())
}

fn texts<'a>(tools: &'a [DatasetTool], ids: &'a [String]) -> Vec<ToolText<'a>> {
    tools
        .iter()
        .zip(ids)
        .map(|(t, id)| {
            ToolText::new(id, &t.server, &t.name)
                .with_description(t.description.as_deref())
                .with_input_schema(t.input_schema.as_ref())
        })
        .collect()
}

fn index_of(texts: &[ToolText<'_>]) -> SearchIndex {
    let mut by_server: BTreeMap<&str, Vec<ToolText<'_>>> = BTreeMap::new();
    for t in texts {
        by_server.entry(t.server).or_default().push(*t);
    }
    let mut index = SearchIndex::new(RankingConfig::default());
    index.replace_servers(by_server);
    index
}

async fn run() -> Result<(), String> {
    let mut dataset: Option<PathBuf> = None;
    let mut spec: Option<String> = None;
    let mut json = false;
    let mut subset = String::from("all");
    let mut weight: Option<f32> = None;
    let mut sweep: Vec<f32> = Vec::new();
    let mut input_type = false;
    let mut scale = 0usize;
    let mut fusion: Option<Fusion> = None;
    let mut cache_dir: Option<PathBuf> = None;
    let mut variants: Vec<(String, Fusion, f32)> = Vec::new();
    let mut doc_params = true;
    let mut dump: Option<PathBuf> = None;
    let mut doc_text = String::from("full");
    let mut strip_literals = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dataset" => dataset = args.next().map(PathBuf::from),
            "--embedder" => spec = args.next(),
            "--json" => json = true,
            "--input-type" => input_type = true,
            "--subset" => subset = args.next().ok_or("--subset needs a value")?,
            "--weight" => {
                let w = args.next().ok_or("--weight needs a number")?;
                weight = Some(w.parse().map_err(|_| format!("bad weight `{w}`"))?);
            }
            "--sweep" => {
                let list = args.next().ok_or("--sweep needs W,W,...")?;
                for w in list.split(',') {
                    sweep.push(w.parse().map_err(|_| format!("bad weight `{w}`"))?);
                }
            }
            "--fusion" => fusion = Some(parse_fusion(&args.next().ok_or("--fusion needs F")?)?),
            "--doc-without-params" => doc_params = false,
            "--strip-literals" => strip_literals = true,
            "--doc-text" => doc_text = args.next().ok_or("--doc-text needs a variant")?,
            "--dump" => dump = args.next().map(PathBuf::from),
            "--cache" => cache_dir = args.next().map(PathBuf::from),
            "--variants" => {
                let list = args.next().ok_or("--variants needs F:W,F:W,...")?;
                for v in list.split(',') {
                    let (f, w) = v.split_once(':').ok_or(format!("bad variant `{v}`"))?;
                    let w: f32 = w.parse().map_err(|_| format!("bad weight `{w}`"))?;
                    variants.push((v.to_owned(), parse_fusion(f)?, w));
                }
            }
            "--scale" => {
                let n = args.next().ok_or("--scale needs a number")?;
                scale = n.parse().map_err(|_| format!("bad number `{n}`"))?;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let dataset = dataset.ok_or("--dataset DIR is required")?;
    let spec = spec.ok_or("--embedder local:PATH | openai:URL#MODEL is required")?;
    let keep: fn(usize) -> bool = match subset.as_str() {
        "all" => |_| true,
        "even" => |i| i % 2 == 0,
        "odd" => |i| i % 2 == 1,
        other => return Err(format!("unknown subset `{other}`")),
    };
    let tools = mcp_catalog::eval::load_tools(&dataset.join("tools.jsonl"))?;
    let queries: Vec<_> = mcp_catalog::eval::load_queries(&dataset.join("queries.jsonl"))?
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, q)| q)
        .collect();
    let ids: Vec<String> = tools.iter().map(DatasetTool::id).collect();
    let texts = texts(&tools, &ids);
    let index = index_of(&texts);
    // The lexical index reads the whole tool; the embedded text may leave the parameters out.
    let lexical_texts = texts;
    let variant_descs: Vec<Option<String>> = tools
        .iter()
        .map(|t| doc_variant(t, &doc_text))
        .collect::<Result<_, _>>()?;
    let texts: Vec<ToolText<'_>> = lexical_texts
        .iter()
        .zip(&variant_descs)
        .map(|(t, d)| {
            let t = match doc_params {
                true => *t,
                false => t.with_input_schema(None),
            };
            match (doc_text.as_str(), d) {
                ("full", _) => t,
                ("params-only", d) => {
                    ToolText::new(t.id, t.server, "").with_description(d.as_deref())
                }
                (_, d) => t.with_description(d.as_deref()).with_input_schema(None),
            }
        })
        .collect();
    let lexical = mcp_catalog::eval::evaluate(&index, &queries);

    let rss_before = rss_mib();
    let embedder = embedder(&spec, input_type).await?;
    let mut config = HybridConfig::default();
    // Quality is measured here, not the fallback: a busy machine must not turn a slow answer
    // into a lexical one.
    config.query_timeout = std::time::Duration::from_secs(60);
    config.batch_timeout = std::time::Duration::from_secs(600);
    // Every query's embedding is timed fresh: repeated queries are not answered from memory.
    config.query_cache = 0;
    if let Some(w) = weight {
        config.semantic_weight = w;
    }
    if let Some(f) = fusion {
        config.fusion = f;
    }
    // Cold: every tool embedded, nothing cached (unless `--cache`).
    let cache = Arc::new(match &cache_dir {
        Some(dir) => EmbeddingCache::on_disk(dir.join("tools")),
        None => EmbeddingCache::in_memory(),
    });
    // Query vectors are cached only to compare fusions, never when timing the model.
    let query_cache = cache_dir
        .as_ref()
        .filter(|_| !variants.is_empty())
        .map(|dir| {
            let c = EmbeddingCache::on_disk(dir.join("queries"));
            let _ = c.load(embedder.model_id(), embedder.dimension());
            c
        });
    let mut hybrid = HybridIndex::new(embedder.clone(), cache.clone(), config.clone());
    let start = Instant::now();
    let warnings = hybrid.set_tools(texts.iter().copied()).await;
    let cold_s = start.elapsed().as_secs_f64();
    if let Some(w) = warnings.first() {
        return Err(format!("embedding the tools: {w}"));
    }
    // From the cache: what a catalog pays when its tools were embedded before.
    let start = Instant::now();
    let mut again = HybridIndex::new(embedder.clone(), cache.clone(), config.clone());
    let _ = again.set_tools(texts.iter().copied()).await;
    let from_cache_ms = start.elapsed().as_secs_f64() * 1000.0;

    let mut vectors = Vec::with_capacity(queries.len());
    let mut embed_ms = Vec::with_capacity(queries.len());
    let mut embed_cpu = Vec::with_capacity(queries.len());
    for q in &queries {
        let start = Instant::now();
        let cpu = cpu_ms();
        let cached = query_cache
            .as_ref()
            .and_then(|c| c.get(embedder.model_id(), query_key(&q.query)));
        let v = match cached {
            Some(v) => v.to_vec(),
            None => {
                let text = match strip_literals {
                    true => without_literals(&q.query),
                    false => q.query.clone(),
                };
                let v = hybrid
                    .embed_query(&text)
                    .await
                    .map_err(|e| format!("embedding a query: {e}"))?;
                if let Some(c) = &query_cache {
                    c.insert(embedder.model_id(), query_key(&q.query), v.clone());
                }
                v
            }
        };
        embed_cpu.push(cpu_ms() - cpu);
        embed_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        vectors.push(v);
    }
    if let Some(c) = &query_cache {
        c.save(embedder.model_id(), embedder.dimension())
            .map_err(|e| format!("saving the query vectors: {e}"))?;
    }
    let rss_after = rss_mib();
    if let Some(path) = &dump {
        return dump_rankings(path, &index, &hybrid, &ids, &queries, &vectors);
    }
    if !variants.is_empty() {
        println!("| variant | even hit@5 | even MRR | odd hit@5 | odd MRR |");
        println!("|---|---|---|---|---|");
        let halves: [Vec<usize>; 2] = [
            (0..queries.len()).filter(|i| i % 2 == 0).collect(),
            (0..queries.len()).filter(|i| i % 2 == 1).collect(),
        ];
        let mut row = String::from("| lexical |");
        for half in &halves {
            let qs: Vec<_> = half.iter().map(|&i| queries[i].clone()).collect();
            let r = mcp_catalog::eval::evaluate(&index, &qs);
            row.push_str(&format!(" {:.3} | {:.3} |", r.hit[1], r.mrr));
        }
        println!("{row}");
        for (name, f, w) in &variants {
            let mut c = config.clone();
            c.fusion = *f;
            c.semantic_weight = *w;
            let mut h = HybridIndex::new(embedder.clone(), cache.clone(), c);
            let _ = h.set_tools(texts.iter().copied()).await;
            let mut row = format!("| {name} |");
            for half in &halves {
                let qs: Vec<_> = half.iter().map(|&i| queries[i].clone()).collect();
                let r = mcp_catalog::eval::evaluate_with(index.len(), &qs, |i, q| {
                    h.rank(&index, &q.query, &vectors[half[i]], None, usize::MAX)
                });
                row.push_str(&format!(" {:.3} | {:.3} |", r.hit[1], r.mrr));
            }
            println!("{row}");
        }
        return Ok(());
    }
    for w in &sweep {
        let mut swept = config.clone();
        swept.semantic_weight = *w;
        let mut h = HybridIndex::new(embedder.clone(), cache.clone(), swept);
        let _ = h.set_tools(texts.iter().copied()).await;
        let r = mcp_catalog::eval::evaluate_with(index.len(), &queries, |i, q| {
            h.rank(&index, &q.query, &vectors[i], None, usize::MAX)
        });
        eprintln!(
            "weight {w}: hit@1 {:.3} hit@5 {:.3} hit@10 {:.3} MRR {:.3}",
            r.hit[0], r.hit[1], r.hit[2], r.mrr
        );
    }
    let hybrid_report = mcp_catalog::eval::evaluate_with(index.len(), &queries, |i, q| {
        hybrid.rank(&index, &q.query, &vectors[i], None, usize::MAX)
    });

    // Latency at scale: synthetic tools added up to `scale`, their vectors embedded (cold),
    // then queries ranked over the whole catalog.
    let mut scaled = serde_json::Value::Null;
    if scale > tools.len() {
        let extra = mcp_catalog::eval::synthetic_tools(scale - tools.len(), 7);
        let mut all = tools.clone();
        all.extend(extra);
        let all_ids: Vec<String> = all.iter().map(DatasetTool::id).collect();
        let all_texts = self::texts(&all, &all_ids);
        let big = index_of(&all_texts);
        let start = Instant::now();
        let mut big_hybrid = HybridIndex::new(embedder.clone(), cache.clone(), config.clone());
        let _ = big_hybrid.set_tools(all_texts.iter().copied()).await;
        let cold_big_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut rebuilt = HybridIndex::new(embedder.clone(), cache.clone(), config.clone());
        let _ = rebuilt.set_tools(all_texts.iter().copied()).await;
        let big_cache_ms = start.elapsed().as_secs_f64() * 1000.0;
        let mut rank_ms = Vec::new();
        let mut query_ms = Vec::new();
        let (mut rank_cpu, mut query_cpu) = (Vec::new(), Vec::new());
        for (i, q) in queries.iter().enumerate().take(500) {
            let start = Instant::now();
            let cpu = cpu_ms();
            let _ = big_hybrid.rank(&big, &q.query, &vectors[i], None, 10);
            rank_cpu.push(cpu_ms() - cpu);
            rank_ms.push(start.elapsed().as_secs_f64() * 1000.0);
            // The whole query: its embedding (timed above) and its ranking.
            query_ms.push(embed_ms[i] + rank_ms[i]);
            query_cpu.push(embed_cpu[i] + rank_cpu[i]);
        }
        scaled = serde_json::json!({
            "tools": big.len(),
            "rank_p50_ms": pct(rank_ms.clone(), 0.5),
            "rank_p99_ms": pct(rank_ms.clone(), 0.99),
            "rank_cpu_p50_ms": pct(rank_cpu.clone(), 0.5),
            "rank_cpu_per_wall": rank_cpu.iter().sum::<f64>() / rank_ms.iter().sum::<f64>(),
            "query_p50_ms": pct(query_ms.clone(), 0.5),
            "query_p99_ms": pct(query_ms, 0.99),
            "query_cpu_p50_ms": pct(query_cpu, 0.5),
            "from_cache_ms": big_cache_ms,
            "new_tools_embedded_s": cold_big_s,
        });
    }

    let embed_p50 = pct(embed_ms.clone(), 0.5);
    let out = serde_json::json!({
        "load_average": load_average(),
        "dataset": dataset.display().to_string(),
        "subset": subset,
        "model": embedder.model_id(),
        "semantic_weight": config.semantic_weight,
        "lexical": lexical.to_json(),
        "hybrid": hybrid_report.to_json(),
        "query_embed_p50_ms": embed_p50,
        "query_embed_p99_ms": pct(embed_ms.clone(), 0.99),
        "query_embed_cpu_p50_ms": pct(embed_cpu.clone(), 0.5),
        "query_embed_cpu_per_wall": embed_cpu.iter().sum::<f64>() / embed_ms.iter().sum::<f64>(),
        "cold_tools_per_s": texts.len() as f64 / cold_s,
        "index_from_cache_ms": from_cache_ms,
        "model_rss_mib": rss_after - rss_before,
        "scale": scaled,
    });
    if json {
        println!("{out}");
    } else {
        print_side_by_side(&lexical, &hybrid_report, &out);
    }
    Ok(())
}

/// Writes, as JSON lines, every tool's vector, then every query with its vector, its
/// expected tools and its lexical scores: the material to study fusions offline.
fn dump_rankings(
    path: &std::path::Path,
    index: &SearchIndex,
    hybrid: &HybridIndex,
    ids: &[String],
    queries: &[mcp_catalog::eval::DatasetQuery],
    vectors: &[Vec<f32>],
) -> Result<(), String> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut write = |v: serde_json::Value| writeln!(out, "{v}").map_err(|e| e.to_string());
    for id in ids {
        write(serde_json::json!({"tool": id, "v": hybrid.vector(id)}))?;
    }
    for (q, v) in queries.iter().zip(vectors) {
        let lexical = index.search(&q.query, None, usize::MAX);
        let lex: Vec<(&str, f32)> = lexical.hits.iter().map(|h| (&*h.id, h.score)).collect();
        write(serde_json::json!({
            "query": q.query, "expected": q.expected, "v": v, "lex": lex,
        }))?;
    }
    Ok(())
}

fn print_side_by_side(lexical: &EvalReport, hybrid: &EvalReport, out: &serde_json::Value) {
    println!(
        "dataset {} ({} tools, {} queries, subset {}), embedder {} (weight {})",
        out["dataset"].as_str().unwrap_or(""),
        lexical.tools,
        lexical.queries,
        out["subset"].as_str().unwrap_or(""),
        out["model"].as_str().unwrap_or(""),
        out["semantic_weight"]
    );
    println!("| metric | lexical | hybrid |");
    println!("|---|---|---|");
    for (i, k) in [1, 5, 10].iter().enumerate() {
        println!("| hit@{k} | {:.3} | {:.3} |", lexical.hit[i], hybrid.hit[i]);
    }
    for (i, k) in [1, 5, 10].iter().enumerate() {
        println!(
            "| recall@{k} | {:.3} | {:.3} |",
            lexical.recall[i], hybrid.recall[i]
        );
    }
    println!("| MRR | {:.3} | {:.3} |", lexical.mrr, hybrid.mrr);
    println!(
        "| ranking p50 ms | {:.3} | {:.3} |",
        lexical.p50_ms, hybrid.p50_ms
    );
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    println!(
        "query embedding: p50 {:.2} ms, p99 {:.2} ms, cpu p50 {:.2} ms, cpu/wall {:.2} (load average {:.2})",
        f(&out["query_embed_p50_ms"]),
        f(&out["query_embed_p99_ms"]),
        f(&out["query_embed_cpu_p50_ms"]),
        f(&out["query_embed_cpu_per_wall"]),
        f(&out["load_average"])
    );
    println!(
        "tools embedded cold: {:.0} tools/s (from the cache with --cache); index built from the cache in {:.1} ms; model RSS +{:.0} MiB",
        out["cold_tools_per_s"].as_f64().unwrap_or(0.0),
        out["index_from_cache_ms"].as_f64().unwrap_or(0.0),
        out["model_rss_mib"].as_f64().unwrap_or(0.0)
    );
    if !out["scale"].is_null() {
        println!(
            "at {} tools: query p50 {:.2} ms (embedding and ranking), hybrid ranking p50 {:.3} ms, index from the cache {:.1} ms, {} new tools embedded in {:.1} s",
            out["scale"]["tools"],
            out["scale"]["query_p50_ms"].as_f64().unwrap_or(0.0),
            out["scale"]["rank_p50_ms"].as_f64().unwrap_or(0.0),
            out["scale"]["from_cache_ms"].as_f64().unwrap_or(0.0),
            out["scale"]["tools"]
                .as_u64()
                .unwrap_or(0)
                .saturating_sub(lexical.tools as u64),
            out["scale"]["new_tools_embedded_s"].as_f64().unwrap_or(0.0)
        );
        let s = &out["scale"];
        println!(
            "at {} tools: query p99 {:.2} ms, cpu p50 {:.2} ms; ranking p99 {:.3} ms, cpu p50 {:.3} ms, cpu/wall {:.2}",
            s["tools"],
            f(&s["query_p99_ms"]),
            f(&s["query_cpu_p50_ms"]),
            f(&s["rank_p99_ms"]),
            f(&s["rank_cpu_p50_ms"]),
            f(&s["rank_cpu_per_wall"])
        );
    }
}
