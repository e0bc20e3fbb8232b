//! Measuring search quality on a tool-search dataset (`tools.jsonl` + `queries.jsonl`), as the
//! `search_eval` example, `cargo xtask search-eval` and the dataset test do.
//!
//! Metrics, per query then averaged (definitions of `datasets/README.md`):
//! `hit@k` — an expected id is in the top k; `recall@k` — the share of expected groups with a
//! member in the top k; `MRR` — 1 / rank of the first expected id (0 when none is returned).
//! Each query ranks the whole catalog.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use agent_core::JsonObject;
use serde::Deserialize;

use crate::search::{SearchIndex, SearchResults, ToolText};

/// One line of `tools.jsonl`.
#[derive(Debug, Clone, Deserialize)]
#[non_exhaustive]
pub struct DatasetTool {
    /// The server key.
    pub server: String,
    /// The tool's name on its server.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// Its input schema.
    #[serde(default)]
    pub input_schema: Option<JsonObject>,
}

impl DatasetTool {
    /// The catalog id, `server__name`.
    pub fn id(&self) -> String {
        format!("{}__{}", self.server, self.name)
    }
}

/// One line of `queries.jsonl`.
#[derive(Debug, Clone, Deserialize)]
#[non_exhaustive]
pub struct DatasetQuery {
    /// The query's id.
    pub id: String,
    /// What the user asked.
    pub query: String,
    /// Every tool id the query needs.
    pub expected: Vec<String>,
    /// One group per needed tool; a group lists interchangeable ids.
    pub expected_groups: Vec<Vec<String>>,
}

fn load_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Reads `tools.jsonl`.
pub fn load_tools(path: &Path) -> Result<Vec<DatasetTool>, String> {
    load_jsonl(path)
}

/// Reads `queries.jsonl`.
pub fn load_queries(path: &Path) -> Result<Vec<DatasetQuery>, String> {
    load_jsonl(path)
}

/// Indexes `tools`, grouped by server, in one batch.
pub fn index_tools(index: &mut SearchIndex, tools: &[DatasetTool]) {
    let ids: Vec<String> = tools.iter().map(DatasetTool::id).collect();
    let mut by_server: BTreeMap<&str, Vec<ToolText<'_>>> = BTreeMap::new();
    for (t, id) in tools.iter().zip(&ids) {
        by_server.entry(&t.server).or_default().push(
            ToolText::new(id, &t.server, &t.name)
                .with_description(t.description.as_deref())
                .with_input_schema(t.input_schema.as_ref()),
        );
    }
    index.replace_servers(by_server);
}

/// Search-quality figures over a set of queries.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct EvalReport {
    /// Number of queries.
    pub queries: usize,
    /// Number of tools in the catalog.
    pub tools: usize,
    /// Share of queries with an expected id in the top 1, 5, 10.
    pub hit: [f64; 3],
    /// Mean share of expected groups found in the top 1, 5, 10.
    pub recall: [f64; 3],
    /// Mean reciprocal rank of the first expected id.
    pub mrr: f64,
    /// Median latency of one query, in milliseconds.
    pub p50_ms: f64,
    /// 99th-percentile latency of one query, in milliseconds.
    pub p99_ms: f64,
}

const KS: [usize; 3] = [1, 5, 10];

impl EvalReport {
    /// The report as one JSON object with keys `hit@1`, `hit@5`, `hit@10`, `recall@1`,
    /// `recall@5`, `recall@10`, `mrr`, `p50_ms`, `p99_ms`, `queries`, `tools`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        for (i, k) in KS.iter().enumerate() {
            o.insert(format!("hit@{k}"), round(self.hit[i]).into());
        }
        for (i, k) in KS.iter().enumerate() {
            o.insert(format!("recall@{k}"), round(self.recall[i]).into());
        }
        o.insert("mrr".into(), round(self.mrr).into());
        o.insert("p50_ms".into(), round(self.p50_ms).into());
        o.insert("p99_ms".into(), round(self.p99_ms).into());
        o.insert("queries".into(), self.queries.into());
        o.insert("tools".into(), self.tools.into());
        o.into()
    }
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

impl fmt::Display for EvalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| metric | @1 | @5 | @10 |")?;
        writeln!(f, "|---|---|---|---|")?;
        writeln!(
            f,
            "| hit | {:.3} | {:.3} | {:.3} |",
            self.hit[0], self.hit[1], self.hit[2]
        )?;
        writeln!(
            f,
            "| recall | {:.3} | {:.3} | {:.3} |",
            self.recall[0], self.recall[1], self.recall[2]
        )?;
        writeln!(f, "MRR {:.3}", self.mrr)?;
        write!(
            f,
            "latency per query: p50 {:.3} ms, p99 {:.3} ms",
            self.p50_ms, self.p99_ms
        )
    }
}

/// Runs every query against `index`, ranking the whole catalog, and averages the metrics.
pub fn evaluate(index: &SearchIndex, queries: &[DatasetQuery]) -> EvalReport {
    evaluate_with(index.len(), queries, |_, q| {
        index.search(&q.query, None, usize::MAX)
    })
}

/// [`evaluate`] for any ranking of a catalog of `tools` tools: `rank(i, query)` ranks the whole
/// catalog for the `i`-th query, and its time is the query's latency.
pub fn evaluate_with(
    tools: usize,
    queries: &[DatasetQuery],
    mut rank: impl FnMut(usize, &DatasetQuery) -> SearchResults,
) -> EvalReport {
    let mut report = EvalReport {
        queries: queries.len(),
        tools,
        ..EvalReport::default()
    };
    let mut latencies = Vec::with_capacity(queries.len());
    for (i, q) in queries.iter().enumerate() {
        let start = Instant::now();
        let found = rank(i, q);
        latencies.push(start.elapsed().as_secs_f64() * 1000.0);
        let ranked: Vec<&Arc<str>> = found.hits.iter().map(|h| &h.id).collect();
        let rank_of = |id: &str| ranked.iter().position(|r| &***r == id);
        let first = q.expected.iter().filter_map(|id| rank_of(id)).min();
        if let Some(r) = first {
            report.mrr += 1.0 / (r as f64 + 1.0);
        }
        for (i, &k) in KS.iter().enumerate() {
            if first.is_some_and(|r| r < k) {
                report.hit[i] += 1.0;
            }
            if !q.expected_groups.is_empty() {
                let found = q
                    .expected_groups
                    .iter()
                    .filter(|g| g.iter().any(|id| rank_of(id).is_some_and(|r| r < k)))
                    .count();
                report.recall[i] += found as f64 / q.expected_groups.len() as f64;
            }
        }
    }
    let n = queries.len().max(1) as f64;
    for i in 0..3 {
        report.hit[i] /= n;
        report.recall[i] /= n;
    }
    report.mrr /= n;
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if latencies.is_empty() {
            0.0
        } else {
            latencies[((latencies.len() - 1) as f64 * p).round() as usize]
        }
    };
    report.p50_ms = pct(0.50);
    report.p99_ms = pct(0.99);
    report
}

/// A deterministic pseudo-random generator (SplitMix64), so synthetic catalogs are the same on
/// every machine and every run.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// An index skewed towards small values, for Zipf-like word frequencies.
    fn skewed(&mut self, n: usize) -> usize {
        let a = self.below(n);
        let b = self.below(n);
        a.min(b)
    }
}

const VERBS: &[&str] = &[
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "find",
    "fetch",
    "send",
    "read",
    "write",
    "move",
    "copy",
    "run",
    "start",
    "stop",
    "check",
    "compute",
    "convert",
    "upload",
    "download",
    "merge",
    "close",
    "open",
    "schedule",
    "cancel",
    "book",
    "translate",
    "render",
    "analyze",
];

const NOUNS: &[&str] = &[
    "issue",
    "file",
    "repository",
    "branch",
    "commit",
    "user",
    "message",
    "channel",
    "event",
    "calendar",
    "invoice",
    "payment",
    "order",
    "customer",
    "ticket",
    "project",
    "task",
    "note",
    "document",
    "image",
    "video",
    "table",
    "record",
    "database",
    "query",
    "report",
    "weather",
    "forecast",
    "flight",
    "hotel",
    "restaurant",
    "movie",
    "song",
    "playlist",
    "account",
    "email",
    "contact",
    "meeting",
    "deployment",
    "cluster",
    "container",
    "secret",
    "token",
    "metric",
    "alert",
    "log",
    "trace",
    "page",
    "comment",
    "label",
];

const FILLER: &[&str] = &[
    "the",
    "a",
    "of",
    "for",
    "with",
    "in",
    "by",
    "given",
    "from",
    "to",
    "and",
    "or",
    "its",
    "specified",
    "optional",
    "current",
    "new",
    "existing",
    "all",
    "one",
];

/// A made-up word, for the long tail of rare terms a real catalog has.
fn pseudo_word(rng: &mut SplitMix) -> String {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "so", "dra", "qui", "bel", "mon",
        "tor", "sen",
    ];
    let n = 2 + rng.below(3);
    (0..n)
        .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
        .collect()
}

fn sentence(rng: &mut SplitMix, words: usize) -> String {
    let mut out = Vec::with_capacity(words);
    for _ in 0..words {
        let w = match rng.below(10) {
            0..=2 => FILLER[rng.below(FILLER.len())].to_owned(),
            3 => VERBS[rng.skewed(VERBS.len())].to_owned(),
            4..=7 => NOUNS[rng.skewed(NOUNS.len())].to_owned(),
            _ => pseudo_word(rng),
        };
        out.push(w);
    }
    out.join(" ")
}

/// `n` synthetic tools spread over `n / 50 + 1` servers, with names, descriptions and
/// parameter schemas shaped like real MCP catalogs. Deterministic for a given `seed`; used by
/// the benchmarks and the latency tests.
///
/// ```
/// let tools = mcp_catalog::eval::synthetic_tools(100, 7);
/// assert_eq!(tools.len(), 100);
/// assert_eq!(tools[0].id(), mcp_catalog::eval::synthetic_tools(1, 7)[0].id());
/// ```
pub fn synthetic_tools(n: usize, seed: u64) -> Vec<DatasetTool> {
    let mut rng = SplitMix(seed);
    let servers = n / 50 + 1;
    (0..n)
        .map(|i| {
            let server = format!("server{}", i % servers);
            let name = format!(
                "{}_{}_{}{}",
                VERBS[rng.below(VERBS.len())],
                NOUNS[rng.below(NOUNS.len())],
                pseudo_word(&mut rng),
                i
            );
            let words = 8 + rng.below(20);
            let description = sentence(&mut rng, words);
            let mut properties = serde_json::Map::new();
            for _ in 0..1 + rng.below(5) {
                let param = format!(
                    "{}_{}",
                    NOUNS[rng.below(NOUNS.len())],
                    pseudo_word(&mut rng)
                );
                let words = 4 + rng.below(10);
                properties.insert(
                    param,
                    serde_json::json!({"type": "string", "description": sentence(&mut rng, words)}),
                );
            }
            let schema = serde_json::json!({"type": "object", "properties": properties});
            DatasetTool {
                server,
                name,
                description: Some(description),
                input_schema: schema.as_object().cloned(),
            }
        })
        .collect()
}

/// Queries for a synthetic catalog: a few words drawn from the descriptions of random tools.
pub fn synthetic_queries(tools: &[DatasetTool], n: usize, seed: u64) -> Vec<String> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|_| {
            let tool = &tools[rng.below(tools.len())];
            let words: Vec<&str> = tool
                .description
                .as_deref()
                .unwrap_or(&tool.name)
                .split(' ')
                .collect();
            let take = 2 + rng.below(5);
            let start = rng.below(words.len().saturating_sub(take).max(1));
            words[start..(start + take).min(words.len())].join(" ")
        })
        .collect()
}
