//! The memory of idle gateway sessions: rounds of many downstream sessions held open on one
//! gateway, then closed, with the upstream in another process so that only the gateway's
//! memory is counted.
//!
//! A downstream session is what a 2025-11-25 client opens: `initialize` (which opens the
//! session's upstream run, as `mcp-agent serve` does: one upstream session, its catalog, its
//! governed layer), `notifications/initialized` and `tools/list`; it then stays idle, with no
//! connection and no event stream open, until `DELETE` ends it (and closes its run). The
//! requests are sent with the workspace's HTTP client (rmcp's `StreamableHttpClient`), 16
//! sessions at a time, and its connections closed before anything is read.
//!
//! Two gateways are measured:
//!
//! - `in_process`: `mcp-serve`'s per-session server on streamable HTTP in this process, built
//!   as `mcp-agent serve` builds it (lazy exposure, the configuration's engine, the
//!   list-change watcher per session). `live` is what the allocator has handed out and not
//!   taken back (counted by this binary's global allocator): it tells a leak (growing round
//!   after round) from retention (`live` back at its baseline while `VmRSS` is not). After
//!   each round glibc is asked to return its free pages (`malloc_trim`) and `VmRSS` read again.
//! - `in_process_parked`: the same gateway with idle sessions parked after 1 s
//!   (`HttpOptions::park_after`), each round measured once its sessions have been idle that
//!   long: a parked session holds its record, not its handler, its run or rmcp's session.
//! - each `mcp-agent` binary named in `$MCP_AGENT_MEMORY_BINS` (`label=path,…`), else
//!   `$MCP_AGENT_BIN` (`cargo xtask bench` builds it in release): `mcp-agent serve --http` in
//!   a process of its own, its `VmRSS` read from `/proc` (its allocator decides what returns),
//!   and, beside it, the cost of a call through it against the same call made directly:
//!   rounds of 100 sequential calls (and of calls 16 in flight) on every path in rotating
//!   order, the median of the per-round ratios; and each binary again as `LABEL_parked`, with
//!   `park_idle_sessions_seconds = 1`, and as `LABEL_no_tcache`, on glibc without its
//!   per-thread caches (`GLIBC_TUNABLES=glibc.malloc.tcache_count=0`). Without either
//!   variable this part is left out.
//!
//! `cargo bench -p integration-tests --bench gateway_memory` (1,000 sessions, 4 rounds;
//! figures printed, and written as JSON to `$MCP_AGENT_BENCH_PAIRED` when set); under
//! `cargo test --benches` one round of 20. `MCP_AGENT_MEMORY_RUNS=SESSIONSxROUNDS` for a heap
//! profiler's smaller run, `MCP_AGENT_MEMORY_PAUSE=SECONDS` to hold the sessions open that long
//! in each round (`vgdb detailed_snapshot FILE` under `valgrind --tool=massif --vgdb=yes`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_core::{ApprovalDecision, ApprovalGate, ApprovalRequest, Redactor, RunInput};
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use integration_tests::bench::{echo_args, median, run_paired, runtime};
use integration_tests::fleet::Replica;
use integration_tests::harness::object;
use integration_tests::memory::{self, BenchAllocator, kib, rss, rss_of, settle, trim};
use mcp_agent::serve::{RunTools, ToolNames};
use mcp_catalog::CatalogConfig;
use mcp_client::McpClient;
use mcp_config::{Config, HttpSpec, ServerSpec, TransportSpec};
use mcp_connector::Connector as _;
use mcp_serve::{OpenError, OpenTools, SessionTools, ToolServer};
use mcp_transport_http::{HttpClient, HttpConnector, HttpOptions};
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientJsonRpcMessage, ClientNotification,
    ClientRequest, Implementation, InitializeRequest, InitializeRequestParams,
    InitializedNotification, ListToolsRequest, ProtocolVersion, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::service::RunningService;
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpPostResponse};
use serde_json::{Value, json};

/// The allocator of this binary: the system's `malloc`, counting what it hands out and takes
/// back.
#[global_allocator]
static ALLOCATOR: BenchAllocator = BenchAllocator::new();

/// The bytes handed out and not yet freed.
fn live() -> usize {
    ALLOCATOR.live()
}

/// Downstream sessions opened or closed at once.
const CONCURRENCY: usize = 16;
/// Sequential calls per path in one round of the per-call comparison.
const CALLS: usize = 100;

fn http_spec(name: &str, url: &str) -> ServerSpec {
    ServerSpec::new(
        name,
        TransportSpec::StreamableHttp(HttpSpec::new(url.parse().expect("URL"))),
    )
}

// --- Downstream sessions -------------------------------------------------------------------

/// Opens and closes idle downstream sessions on one endpoint, request by request (no session
/// worker, no event stream): what each holds afterwards is its id, here, and its state in the
/// gateway.
struct Downstream {
    client: HttpClient,
    uri: Arc<str>,
}

impl Downstream {
    /// A client of `url` whose connections close when it is dropped. Requests after the
    /// handshake do not wait for an event stream this client never opens.
    fn new(url: &str) -> Self {
        let options = HttpOptions::default().with_event_stream_wait(Duration::ZERO);
        let connector = HttpConnector::new(options).expect("HTTP connector");
        let client = connector
            .client(&http_spec("gateway", url))
            .expect("HTTP client");
        Self {
            client,
            uri: Arc::from(url),
        }
    }

    /// The one message of a POST's answer (JSON, or the first event with data of its stream),
    /// and the session id it gave.
    async fn answer(
        response: StreamableHttpPostResponse,
    ) -> (ServerJsonRpcMessage, Option<String>) {
        match response {
            StreamableHttpPostResponse::Json(message, session) => (message, session),
            StreamableHttpPostResponse::Sse(stream, session) => {
                let mut events = stream.try_filter(|e| {
                    std::future::ready(e.data.as_deref().is_some_and(|d| !d.trim().is_empty()))
                });
                let event = events
                    .next()
                    .await
                    .expect("an event with the answer")
                    .expect("a well-formed event");
                let data = event.data.expect("data");
                let message = serde_json::from_str(&data).expect("a JSON-RPC message");
                (message, session)
            }
            other => panic!("a request answered {other:?}"),
        }
    }

    /// `initialize`, `notifications/initialized`, `tools/list`: an open, idle session.
    async fn open(&self) -> Arc<str> {
        let params = InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("gateway-memory", "0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25);
        let initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(params)),
            RequestId::Number(1),
        );
        let response = self
            .client
            .post_message(self.uri.clone(), initialize, None, None, HashMap::new())
            .await
            .expect("initialize");
        let (message, session) = Self::answer(response).await;
        match message.into_result() {
            Some((Ok(ServerResult::InitializeResult(_)), _)) => {}
            other => panic!("not an initialize result: {other:?}"),
        }
        let session: Arc<str> = Arc::from(session.expect("a session id"));
        let headers = || {
            HashMap::from([(
                HEADER_MCP_PROTOCOL_VERSION.parse().expect("header name"),
                "2025-11-25".parse().expect("header value"),
            )])
        };
        let initialized = ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(InitializedNotification::default()),
        );
        let response = self
            .client
            .post_message(
                self.uri.clone(),
                initialized,
                Some(session.clone()),
                None,
                headers(),
            )
            .await
            .expect("notifications/initialized");
        assert!(matches!(response, StreamableHttpPostResponse::Accepted));
        let list = ClientJsonRpcMessage::request(
            ClientRequest::ListToolsRequest(ListToolsRequest::default()),
            RequestId::Number(2),
        );
        let response = self
            .client
            .post_message(
                self.uri.clone(),
                list,
                Some(session.clone()),
                None,
                headers(),
            )
            .await
            .expect("tools/list");
        let (message, _) = Self::answer(response).await;
        match message.into_response() {
            Some((ServerResult::ListToolsResult(list), _)) => {
                assert!(!list.tools.is_empty(), "the gateway lists tools")
            }
            other => panic!("not a tools/list result: {other:?}"),
        }
        session
    }

    /// `DELETE`s the session.
    async fn close(&self, session: Arc<str>) {
        let headers = HashMap::from([(
            HEADER_MCP_PROTOCOL_VERSION.parse().expect("header name"),
            "2025-11-25".parse().expect("header value"),
        )]);
        self.client
            .delete_session(self.uri.clone(), session, None, headers)
            .await
            .expect("DELETE the session");
    }
}

/// Opens `n` idle sessions on `url`, [`CONCURRENCY`] at a time; the client's connections are
/// closed when it returns.
async fn open_sessions(url: &str, n: usize) -> Vec<Arc<str>> {
    let downstream = Downstream::new(url);
    let d = &downstream;
    futures::stream::iter(0..n)
        .map(|_| d.open())
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// Closes `sessions` on `url`, [`CONCURRENCY`] at a time.
async fn close_sessions(url: &str, sessions: Vec<Arc<str>>) {
    let downstream = Downstream::new(url);
    let d = &downstream;
    futures::stream::iter(sessions)
        .map(|s| d.close(s))
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
}

// --- The in-process gateway, as `mcp-agent serve` builds it --------------------------------

/// Refuses every call that needs approval (`[serve] approve` unset).
struct Deny;

#[async_trait]
impl ApprovalGate for Deny {
    async fn request(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Rejected {
            reason: "nobody to ask".to_owned(),
        }
    }
}

/// Opens one upstream run per downstream session.
struct Gateway {
    client: McpClient,
    runs: AtomicU64,
}

#[async_trait]
impl OpenTools for Gateway {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let id = format!("serve-{}-{n}", std::process::id());
        let runner = self.client.open_runner(&RunInput::new(id, "")).await?;
        Ok(Arc::new(RunTools::new(runner, ToolNames::Prefixed)))
    }
}

/// The gateway in front of the upstream at `url`, as `mcp-agent serve --http` with a config
/// naming only that server serves it; idle sessions parked after `park` when given.
async fn in_process_gateway(url: &str, park: Option<Duration>) -> mcp_serve::HttpServer {
    let connectors = mcp_agent::connectors().expect("the transports");
    let gate: Arc<dyn ApprovalGate> = Arc::new(Deny);
    let client = McpClient::builder(Config::new(vec![http_spec("kit", url)]).expect("valid spec"))
        .connectors(connectors)
        .agent("mcp-agent-serve")
        .catalog(CatalogConfig::default())
        .govern(|layer| layer.approval_gate(gate).redactor(Redactor::new()))
        .build();
    let opener = Arc::new(Gateway {
        client,
        runs: AtomicU64::new(0),
    });
    ToolServer::per_session(opener)
        .name("mcp-agent", "bench")
        .instructions(
            "The tools of the configured MCP servers: find one with `mcp_search_tools`, run it \
             with `mcp_call_tool`.",
        )
        .serve_http(match park {
            Some(after) => mcp_serve::HttpOptions::default().with_park_after(after),
            None => mcp_serve::HttpOptions::default(),
        })
        .await
        .expect("the gateway")
}

// --- Rounds ----------------------------------------------------------------------------------

/// The figures of one round, in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    rss_open: usize,
    live_open: usize,
    /// How long the memory took to stop falling after the last `DELETE` was answered.
    settled: Duration,
    rss_closed: usize,
    live_closed: usize,
    /// `VmRSS` after `malloc_trim` (in process only).
    rss_trimmed: usize,
    /// How long `malloc_trim` took (in process only).
    trim_took: Duration,
}

/// A round on the in-process gateway at `url`; with `park`, the sessions are measured once
/// they have been idle that long (and so parked).
async fn in_process_round(url: &str, sessions: usize, park: Option<Duration>) -> Round {
    let opened = open_sessions(url, sessions).await;
    if let Some(after) = park {
        // Parked within a quarter of `after` of becoming due.
        tokio::time::sleep(after + after / 2).await;
    }
    // The gateway's side of the client's connections ends as they close.
    settle(Duration::from_millis(100), 2, Duration::from_secs(5), live).await;
    let (rss_open, live_open) = (rss(), live());
    memory::pause().await;
    close_sessions(url, opened).await;
    let settled = settle(Duration::from_millis(100), 2, Duration::from_secs(10), live).await;
    let (rss_closed, live_closed) = (rss(), live());
    let trim_took = trim();
    Round {
        rss_open,
        live_open,
        settled,
        rss_closed,
        live_closed,
        rss_trimmed: rss(),
        trim_took,
    }
}

/// A round on a gateway process `pid` at `url`: its `VmRSS` only; with `park`, measured once
/// the sessions have been idle that long (and so parked).
async fn process_round(pid: &str, url: &str, sessions: usize, park: Option<Duration>) -> Round {
    let of = || rss_of(pid).expect("the gateway is running");
    let opened = open_sessions(url, sessions).await;
    if let Some(after) = park {
        tokio::time::sleep(after + after / 2).await;
    }
    settle(Duration::from_millis(250), 2, Duration::from_secs(5), of).await;
    let rss_open = of();
    close_sessions(url, opened).await;
    // An allocator may give pages back on a timer (jemalloc's decay): read until `VmRSS` has
    // not fallen for 5 s, at most 30 s.
    let settled = settle(Duration::from_secs(1), 5, Duration::from_secs(30), of).await;
    Round {
        rss_open,
        settled,
        rss_closed: of(),
        ..Round::default()
    }
}

/// The rows of `rounds` against the baseline, printed under `label` and as JSON.
fn report(
    label: &str,
    sessions: usize,
    (rss0, live0): (usize, usize),
    rounds: &[Round],
    counted: bool,
) -> Value {
    let per = |b: usize, base: usize| kib(b.saturating_sub(base)) / sessions as f64;
    let change = |b: usize| (b as f64 / rss0 as f64 - 1.0) * 100.0;
    println!(
        "{label}: baseline RSS {:.0} KiB{}",
        kib(rss0),
        if counted {
            format!(", live {:.0} KiB", kib(live0))
        } else {
            String::new()
        }
    );
    let mut rows = Vec::new();
    for (i, r) in rounds.iter().enumerate() {
        let mut line = format!(
            "{label} round {}: {sessions} sessions open: RSS +{:.1} KiB/session",
            i + 1,
            per(r.rss_open, rss0)
        );
        let mut row = json!({
            "rss_open_per_session_kib": per(r.rss_open, rss0),
            "rss_closed_kib": kib(r.rss_closed),
            "rss_closed_change_pct": change(r.rss_closed),
            "settled_s": r.settled.as_secs_f64(),
        });
        if counted {
            line += &format!(
                ", live +{:.1} KiB/session; closed (settled in {:.1} s): live {:.0} KiB, RSS {:.0} KiB ({:+.1}%), trimmed {:.0} KiB ({:+.1}%) in {:.1} ms",
                per(r.live_open, live0),
                r.settled.as_secs_f64(),
                kib(r.live_closed),
                kib(r.rss_closed),
                change(r.rss_closed),
                kib(r.rss_trimmed),
                change(r.rss_trimmed),
                r.trim_took.as_secs_f64() * 1e3,
            );
            row["live_open_per_session_kib"] = json!(per(r.live_open, live0));
            row["live_closed_kib"] = json!(kib(r.live_closed));
            row["rss_trimmed_kib"] = json!(kib(r.rss_trimmed));
            row["rss_trimmed_change_pct"] = json!(change(r.rss_trimmed));
            row["trim_ms"] = json!(r.trim_took.as_secs_f64() * 1e3);
        } else {
            line += &format!(
                "; closed (settled in {:.1} s): RSS {:.0} KiB ({:+.1}%)",
                r.settled.as_secs_f64(),
                kib(r.rss_closed),
                change(r.rss_closed),
            );
        }
        println!("{line}");
        rows.push(row);
    }
    let mut out = json!({"baseline_rss_kib": kib(rss0), "rounds": rows});
    if counted {
        out["baseline_live_kib"] = json!(kib(live0));
    }
    out
}

// --- `mcp-agent` processes -------------------------------------------------------------------

/// The `mcp-agent` binaries to measure: `$MCP_AGENT_MEMORY_BINS` (`label=path,…`), else
/// `$MCP_AGENT_BIN` as `mcp-agent`.
fn binaries() -> Vec<(String, PathBuf)> {
    if let Ok(list) = std::env::var("MCP_AGENT_MEMORY_BINS") {
        return list
            .split(',')
            .filter(|e| !e.is_empty())
            .map(|entry| {
                let (label, path) = entry
                    .split_once('=')
                    .expect("MCP_AGENT_MEMORY_BINS entries are `label=path`");
                (label.to_owned(), PathBuf::from(path))
            })
            .collect();
    }
    std::env::var_os("MCP_AGENT_BIN")
        .map(|path| vec![("mcp-agent".to_owned(), PathBuf::from(path))])
        .unwrap_or_default()
}

/// How many sessions a measured `mcp-agent serve` admits (its default is 64).
const MAX_SESSIONS: usize = 4096;

/// `mcp-agent serve --http` of `binary` in front of the upstream at `url`, with the
/// configuration's defaults but for approval (calls allowed) and [`MAX_SESSIONS`], and idle
/// sessions parked after `park` when given; with `env` as its whole environment.
async fn replica(
    binary: &std::path::Path,
    dir: &std::path::Path,
    url: &str,
    park: Option<Duration>,
    env: &[(String, String)],
) -> Replica {
    let config = dir.join(format!("gateway-{}.toml", unique()));
    let park = park.map_or_else(String::new, |after| {
        format!("park_idle_sessions_seconds = {}\n", after.as_secs_f64())
    });
    std::fs::write(
        &config,
        format!(
            "[[servers]]\nname = \"kit\"\nurl = {url:?}\n\n[serve]\napprove = \"allow\"\n\
             max_sessions = {MAX_SESSIONS}\n{park}"
        ),
    )
    .expect("write the gateway's config");
    Replica::start_binary(binary, &config, env).await
}

/// A number no other config file of this process has.
fn unique() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An rmcp client session on `url`.
async fn session(connector: &HttpConnector, url: &str) -> RunningService<RoleClient, ()> {
    let connection = connector
        .connect(&http_spec("peer", url))
        .await
        .expect("HTTP transport");
    rmcp::serve_client((), connection.transport)
        .await
        .expect("rmcp handshake")
}

/// `echo` directly, or through a gateway's lazy surface (`mcp_call_tool`).
async fn call(client: &RunningService<RoleClient, ()>, through_gateway: bool) {
    let params = if through_gateway {
        CallToolRequestParams::new("mcp_call_tool").with_arguments(object(
            json!({"tool_name": "kit__echo", "arguments": echo_args()}),
        ))
    } else {
        CallToolRequestParams::new("echo").with_arguments(object(echo_args()))
    };
    let out = client.call_tool(params).await.expect("the call");
    assert_ne!(out.is_error, Some(true), "{out:?}");
}

/// Rounds of [`CALLS`] sequential calls, and of as many 16 at a time, on each path (the
/// upstream directly first, then each gateway), in rotating order: µs per call, the median
/// per path, and the median of the per-round ratios to the direct path.
async fn per_call(
    connector: &HttpConnector,
    upstream: &str,
    gateways: &[(String, String)],
    rounds: usize,
) -> Value {
    let mut clients = vec![(String::from("direct"), session(connector, upstream).await)];
    for (label, url) in gateways {
        clients.push((label.clone(), session(connector, url).await));
    }
    let mut out = json!({"rounds": rounds, "calls_per_round": CALLS});
    for in_flight in [1, 16] {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); clients.len()];
        for r in 0..=rounds {
            for i in 0..clients.len() {
                let k = (i + r) % clients.len();
                let (_, client) = &clients[k];
                let started = Instant::now();
                for _ in 0..CALLS / in_flight {
                    futures::future::join_all((0..in_flight).map(|_| call(client, k > 0))).await;
                }
                // The first round warms every path up.
                if r > 0 {
                    times[k].push(started.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
                }
            }
        }
        let mut figures = json!({"direct_us_per_call": median(times[0].clone())});
        for (k, (label, _)) in clients.iter().enumerate().skip(1) {
            let ratios = times[k].iter().zip(&times[0]).map(|(a, b)| a / b).collect();
            figures[label] = json!({
                "us_per_call": median(times[k].clone()),
                "overhead": median(ratios),
            });
        }
        println!("per call, {in_flight} in flight: {figures}");
        out[if in_flight == 1 {
            "sequential"
        } else {
            "in_flight_16"
        }] = figures;
    }
    for (_, client) in clients {
        let _ = client.cancel().await;
    }
    out
}

// --- The measurement ---------------------------------------------------------------------------

/// How long a session of the parking gateway stays idle before it is parked.
const PARK_AFTER: Duration = Duration::from_secs(1);

fn measure(full: bool) -> Value {
    let (mut sessions, mut rounds) = if full { (1_000, 4) } else { (20, 1) };
    if let Some((s, n)) = std::env::var("MCP_AGENT_MEMORY_RUNS").ok().and_then(|v| {
        let (s, n) = v.split_once('x')?;
        Some((s.parse().ok()?, n.parse().ok()?))
    }) {
        (sessions, rounds) = (s, n);
    }
    let (mut child, url) = memory::upstream();
    let rt = runtime();
    let figures = rt.block_on(async {
        let mut out = json!({ "sessions": sessions });
        for (label, park) in [
            ("in_process", None),
            ("in_process_parked", Some(PARK_AFTER)),
        ] {
            let gateway = in_process_gateway(&url, park).await;
            let at = gateway.url().to_string();
            // One session first, so that what every later one shares (the connector's pools,
            // the runtime's threads) is in the baseline.
            let one = open_sessions(&at, 1).await;
            close_sessions(&at, one).await;
            settle(Duration::from_millis(100), 2, Duration::from_secs(5), live).await;
            trim();
            let base = (rss(), live());
            let mut all = Vec::new();
            for _ in 0..rounds {
                all.push(in_process_round(&at, sessions, park).await);
            }
            gateway.shutdown().await;
            out[label] = report(label, sessions, base, &all, true);
        }

        let binaries = binaries();
        if binaries.is_empty() {
            println!(
                "note: no mcp-agent binary (MCP_AGENT_BIN or MCP_AGENT_MEMORY_BINS): processes \
                 not measured"
            );
            return out;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut replicas = Vec::new();
        for (label, binary) in &binaries {
            replicas.push((
                label.clone(),
                None,
                replica(binary, dir.path(), &url, None, &[]).await,
            ));
            let park = Some(PARK_AFTER);
            let parked = replica(binary, dir.path(), &url, park, &[]).await;
            replicas.push((format!("{label}_parked"), park, parked));
            // glibc without its per-thread caches of freed blocks, whose pages a trim cannot
            // give back.
            let no_tcache = [(
                "GLIBC_TUNABLES".to_owned(),
                "glibc.malloc.tcache_count=0".to_owned(),
            )];
            let lean = replica(binary, dir.path(), &url, None, &no_tcache).await;
            replicas.push((format!("{label}_no_tcache"), None, lean));
        }
        let mut processes = serde_json::Map::new();
        for (label, park, replica) in &replicas {
            let pid = replica.pid().to_string();
            let at = replica.url();
            let one = open_sessions(&at, 1).await;
            close_sessions(&at, one).await;
            settle(Duration::from_secs(1), 5, Duration::from_secs(30), || {
                rss_of(&pid).expect("running")
            })
            .await;
            let base = (rss_of(&pid).expect("running"), 0);
            let mut all = Vec::new();
            for _ in 0..rounds {
                all.push(process_round(&pid, &at, sessions, *park).await);
            }
            processes.insert(label.clone(), report(label, sessions, base, &all, false));
        }
        let connector = HttpConnector::new(HttpOptions::default()).expect("HTTP connector");
        let gateways: Vec<(String, String)> = replicas
            .iter()
            .map(|(label, _, replica)| (label.clone(), replica.url()))
            .collect();
        let calls = per_call(&connector, &url, &gateways, if full { 20 } else { 1 }).await;
        out["processes"] = Value::Object(processes);
        out["per_call"] = calls;
        out
    });
    drop(child.stdin.take());
    let _ = child.wait();
    figures
}

fn main() {
    if std::env::var_os(memory::UPSTREAM).is_some() {
        return memory::serve_upstream();
    }
    run_paired(measure);
}
