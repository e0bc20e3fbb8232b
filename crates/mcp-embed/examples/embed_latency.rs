//! One query at a time through the local model: p50/p99 of the embedding, and (with `--check`)
//! the cosine of each vector against vectors saved by an earlier run (`--save`).
//!
//! ```text
//! cargo run --release -p mcp-embed --features local --example embed_latency -- \
//!     --model PATH --queries datasets/bfcl/queries.jsonl [--n 200] [--save F | --check F]
//! ```

use std::time::Instant;

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut model, mut queries, mut n, mut save, mut check) = (None, None, 200, None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model = args.next(),
            "--queries" => queries = args.next(),
            "--n" => n = args.next().ok_or("--n N")?.parse()?,
            "--save" => save = args.next(),
            "--check" => check = args.next(),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let e = mcp_embed::LocalEmbedder::load(model.ok_or("--model PATH")?)?;
    let text = std::fs::read_to_string(queries.ok_or("--queries FILE")?)?;
    let qs: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| Some(v.get("query")?.as_str()?.to_owned()))
        .take(n)
        .collect();
    for q in qs.iter().take(20) {
        e.embed_blocking(std::slice::from_ref(q))?;
    }
    let mut ms = Vec::with_capacity(qs.len());
    let mut out = Vec::with_capacity(qs.len());
    for q in &qs {
        let start = Instant::now();
        let v = e.embed_blocking(std::slice::from_ref(q))?;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
        out.extend(v);
    }
    println!(
        "{} queries: embedding p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
        qs.len(),
        pct(ms.clone(), 0.5),
        pct(ms.clone(), 0.99),
        ms.iter().sum::<f64>() / ms.len() as f64
    );
    if let Some(path) = save {
        std::fs::write(path, serde_json::to_string(&out)?)?;
    }
    if let Some(path) = check {
        let reference: Vec<Vec<f32>> = serde_json::from_str(&std::fs::read_to_string(path)?)?;
        let cos = |a: &[f32], b: &[f32]| {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
            let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
            dot / (na * nb)
        };
        let c: Vec<f32> = reference.iter().zip(&out).map(|(a, b)| cos(a, b)).collect();
        let min = c.iter().copied().fold(f32::INFINITY, f32::min);
        println!(
            "cosine against the reference: min {min:.6} over {}",
            c.len()
        );
    }
    Ok(())
}
