//! Load on a fleet: many MCP clients (rmcp on the workspace's HTTP transport, as a product's
//! client is) calling one tool, every call timed and its outcome kept, so that a test can say
//! which calls failed, when, and that none hung.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
use mcp_connector::{ConnectionHandle, Connector as _};
use mcp_transport_http::{HttpConnector, HttpOptions};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::{ClientLifecycleMode, ClientServiceExt as _, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::{Semaphore, watch};

/// How a client speaks to the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// MCP 2026-07-28: `server/discover`, then self-contained requests, so any replica can
    /// answer any of them.
    Stateless,
    /// MCP 2025-11-25: `initialize`, then the session's id on every request; a replica that
    /// does not hold the session answers `404`.
    Session,
}

/// One MCP client of the fleet.
pub struct Client {
    service: RunningService<RoleClient, ()>,
    handle: Box<dyn ConnectionHandle>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("closed", &self.service.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to `url` and does the handshake of `protocol`. `Err`: why, in words.
    pub async fn connect(
        connector: &HttpConnector,
        url: &str,
        protocol: Protocol,
    ) -> Result<Self, String> {
        let spec = ServerSpec::new(
            "fleet",
            TransportSpec::StreamableHttp(HttpSpec::new(url.parse().map_err(|e| format!("{e}"))?)),
        );
        let connection = connector.connect(&spec).await.map_err(|e| e.to_string())?;
        let handle = connection.handle;
        let started = match protocol {
            Protocol::Stateless => {
                let mode = ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                };
                ().serve_with_lifecycle(connection.transport, mode).await
            }
            Protocol::Session => rmcp::serve_client((), connection.transport).await,
        };
        match started {
            Ok(service) => Ok(Self { service, handle }),
            Err(e) => Err(cause(&e.to_string(), handle.as_ref())),
        }
    }

    /// Calls `name` with `arguments`: `Ok` for a result that is not an error, `Err` (why)
    /// for a failed request or an `isError` result.
    pub async fn call(&self, name: &str, arguments: &Map<String, Value>) -> Result<(), String> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments.clone());
        match self.service.call_tool(params).await {
            Ok(result) if result.is_error == Some(true) => {
                let text = serde_json::to_string(&result.content).unwrap_or_default();
                Err(format!(
                    "isError: {}",
                    text.chars().take(500).collect::<String>()
                ))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(cause(&e.to_string(), self.handle.as_ref())),
        }
    }

    /// True once the client's transport has ended (a new client is needed).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// How many times the transport renewed its session on its own (a 2025-11-25 session
    /// answered `404` is initialised again and its request resent): a session that survived
    /// a replica's end shows none.
    pub fn renewals(&self) -> u64 {
        self.handle
            .renewals()
            .map_or(0, |renewals| *renewals.borrow())
    }

    /// Ends the client (for a session, `DELETE`s it).
    pub async fn close(self) {
        let _ = self.service.cancel().await;
        self.handle.shutdown(Duration::from_secs(1)).await;
    }
}

/// rmcp's words plus the transport's own cause, when it recorded one.
fn cause(error: &str, handle: &dyn ConnectionHandle) -> String {
    match handle.failure() {
        Some(failure) => format!("{error} ({failure})"),
        None => error.to_owned(),
    }
}

/// How one call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result that is not an error.
    Answered,
    /// A failed request or connection, or an `isError` result: why.
    Failed(String),
    /// Nothing within the load's bound: the call hung.
    Hung,
}

/// One call of a load.
#[derive(Debug, Clone)]
pub struct Call {
    /// The client (worker) that made it.
    pub client: usize,
    /// When it was sent.
    pub started: Instant,
    /// When it ended (answer, error or the bound).
    pub ended: Instant,
    /// How it ended.
    pub outcome: Outcome,
}

impl Call {
    /// True when the call was under way at `at`.
    pub fn in_flight_at(&self, at: Instant) -> bool {
        self.started <= at && at <= self.ended
    }

    /// How long it took.
    pub fn took(&self) -> Duration {
        self.ended - self.started
    }
}

/// Every call of a load, and its wall time.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// The calls, in the order they ended.
    pub calls: Vec<Call>,
    /// From the first call's start to the last one's end.
    pub wall: Duration,
    /// Sessions the transport renewed on its own, over every client ([`Client::renewals`]).
    pub renewals: u64,
    /// Clients opened again after the one before had ended (its transport closed by a
    /// failure): how many clients had to start over.
    pub fresh_clients: usize,
}

impl LoadReport {
    /// The calls answered.
    pub fn answered(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| c.outcome == Outcome::Answered)
            .count()
    }

    /// The calls that failed or hung.
    pub fn failed(&self) -> Vec<&Call> {
        self.calls
            .iter()
            .filter(|c| c.outcome != Outcome::Answered)
            .collect()
    }

    /// The calls that hung.
    pub fn hung(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| c.outcome == Outcome::Hung)
            .count()
    }

    /// The wall time over the number of calls: what a call costs the fleet under this load.
    pub fn per_call(&self) -> Duration {
        self.wall / u32::try_from(self.calls.len().max(1)).unwrap_or(u32::MAX)
    }

    /// A few failures, for assertion messages.
    pub fn sample_failures(&self) -> String {
        self.failed()
            .iter()
            .take(5)
            .map(|c| format!("client {}: {:?}", c.client, c.outcome))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Counts while a load runs, for a test that waits on its progress.
#[derive(Debug, Default)]
pub struct Progress {
    answered: AtomicUsize,
    failed: AtomicUsize,
    /// When each client's latest answered call was sent, by client.
    latest_answered: std::sync::Mutex<Vec<Option<Instant>>>,
    changed: tokio::sync::Notify,
}

impl Progress {
    /// Calls answered so far.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    /// Calls failed (or hung) so far.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    /// How many clients had a call answered that was sent after `at`.
    pub fn clients_answered_since(&self, at: Instant) -> usize {
        let latest = self.latest_answered.lock().expect("progress lock");
        latest.iter().flatten().filter(|sent| **sent > at).count()
    }

    /// Waits until `check` holds on this progress, at most `bound`; whether it held.
    pub async fn until(&self, bound: Duration, check: impl Fn(&Self) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if check(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return check(self);
            }
        }
    }

    fn record(&self, client: usize, sent: Instant, outcome: &Outcome) {
        let counter = match outcome {
            Outcome::Answered => {
                let mut latest = self.latest_answered.lock().expect("progress lock");
                if latest.len() <= client {
                    latest.resize(client + 1, None);
                }
                latest[client] = Some(sent);
                &self.answered
            }
            _ => &self.failed,
        };
        counter.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// A load: `clients` MCP clients, each calling `tool` with `arguments`; each call bounded.
///
/// ```no_run
/// # async fn demo(url: &str) {
/// use integration_tests::fleet::{Load, Protocol};
///
/// let report = Load::new(url, "kit__echo").with_clients(300, 20).with_in_flight(32).run().await;
/// assert!(report.failed().is_empty(), "{}", report.sample_failures());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Load {
    url: String,
    tool: String,
    arguments: Map<String, Value>,
    protocol: Protocol,
    clients: usize,
    calls_per_client: usize,
    in_flight: usize,
    bound: Duration,
    connector: HttpConnector,
}

impl Load {
    /// One stateless client calling `tool` once with `{"text": "hello, fleet"}` on `url`,
    /// each call bounded by 20 s. An event stream cut off is resumed at most twice, 50 ms then
    /// 100 ms later (the default policy waits 1 s, doubling, five times: 31 s in all, beyond the
    /// bound), so a call whose stream no replica can resume fails well within the bound.
    pub fn new(url: &str, tool: &str) -> Self {
        let options = HttpOptions::default().with_sse_reconnect(
            2,
            Duration::from_millis(50),
            Duration::from_millis(200),
        );
        let connector = HttpConnector::new(options).expect("an HTTP connector");
        let mut arguments = Map::new();
        arguments.insert("text".into(), Value::from("hello, fleet"));
        Self {
            url: url.to_owned(),
            tool: tool.to_owned(),
            arguments,
            protocol: Protocol::Stateless,
            clients: 1,
            calls_per_client: 1,
            in_flight: 1,
            bound: Duration::from_secs(20),
            connector,
        }
    }

    /// The tool's arguments.
    pub fn with_arguments(mut self, arguments: Value) -> Self {
        self.arguments = arguments.as_object().cloned().unwrap_or_default();
        self
    }

    /// The clients' protocol.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// `clients` clients of `calls` calls each ([`run`](Self::run)); in
    /// [`run_until`](Self::run_until) `clients` clients call until stopped.
    pub fn with_clients(mut self, clients: usize, calls: usize) -> Self {
        self.clients = clients.max(1);
        self.calls_per_client = calls.max(1);
        self
    }

    /// At most `n` clients at work at once in [`run`](Self::run).
    pub fn with_in_flight(mut self, n: usize) -> Self {
        self.in_flight = n.max(1);
        self
    }

    /// How long one call may take before it counts as hung.
    pub fn with_bound(mut self, bound: Duration) -> Self {
        self.bound = bound;
        self
    }

    /// The clients one after another (at most `in_flight` at once), each opened, making its
    /// calls in sequence and closed; the report of every call.
    pub async fn run(&self) -> LoadReport {
        let slots = Arc::new(Semaphore::new(self.in_flight));
        let progress = Arc::new(Progress::default());
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for client in 0..self.clients {
            let load = self.clone();
            let slots = slots.clone();
            let progress = progress.clone();
            tasks.spawn(async move {
                let _slot = slots.acquire_owned().await.expect("open semaphore");
                load.client(client, &progress, None).await
            });
        }
        let mut workers = Vec::new();
        while let Some(done) = tasks.join_next().await {
            workers.push(done.expect("a load client panicked"));
        }
        LoadReport::of(workers, started)
    }

    /// `clients` clients calling without pause until `stop` turns true (a client whose
    /// transport ended is replaced by a fresh one). The progress is readable while it runs;
    /// the report comes when every client has ended its last call.
    pub fn run_until(&self, stop: watch::Receiver<bool>) -> Running {
        let progress = Arc::new(Progress::default());
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for client in 0..self.clients {
            let load = self.clone();
            let progress = progress.clone();
            let stop = stop.clone();
            tasks.spawn(async move { load.client(client, &progress, Some(stop)).await });
        }
        Running {
            progress,
            tasks,
            started,
        }
    }

    /// One client: `calls_per_client` calls, or calls until `stop`.
    async fn client(
        &self,
        index: usize,
        progress: &Progress,
        stop: Option<watch::Receiver<bool>>,
    ) -> Worker {
        let mut worker = Worker::default();
        let calls = &mut worker.calls;
        let mut client: Option<Client> = None;
        let mut opened: usize = 0;
        let mut made = 0;
        loop {
            let go_on = match &stop {
                Some(stop) => !*stop.borrow(),
                None => made < self.calls_per_client,
            };
            if !go_on {
                break;
            }
            made += 1;
            let started = Instant::now();
            if client.is_none() {
                opened += 1;
            }
            let outcome = match tokio::time::timeout(self.bound, self.once(&mut client)).await {
                Ok(Ok(())) => Outcome::Answered,
                Ok(Err(why)) => Outcome::Failed(why),
                Err(_) => Outcome::Hung,
            };
            progress.record(index, started, &outcome);
            let failed = outcome != Outcome::Answered;
            calls.push(Call {
                client: index,
                started,
                ended: Instant::now(),
                outcome,
            });
            if failed && client.as_ref().is_none_or(Client::is_closed) {
                // A fresh client next time; a pause so that a fleet refusing everything is
                // not asked in a tight loop.
                if let Some(old) = client.take() {
                    worker.renewals += old.renewals();
                    old.close().await;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        if let Some(client) = client {
            worker.renewals += client.renewals();
            client.close().await;
        }
        worker.fresh_clients = opened.saturating_sub(1);
        worker
    }

    /// One call, opening the client first when there is none.
    async fn once(&self, client: &mut Option<Client>) -> Result<(), String> {
        if client.is_none() {
            *client = Some(
                Client::connect(&self.connector, &self.url, self.protocol)
                    .await
                    .map_err(|e| format!("connect: {e}"))?,
            );
        }
        let client = client.as_ref().expect("opened above");
        client.call(&self.tool, &self.arguments).await
    }
}

/// What one client of a load did.
#[derive(Debug, Default)]
struct Worker {
    calls: Vec<Call>,
    renewals: u64,
    fresh_clients: usize,
}

impl LoadReport {
    /// The report of `workers`, started at `started`.
    fn of(workers: Vec<Worker>, started: Instant) -> Self {
        let mut report = Self {
            wall: started.elapsed(),
            ..Self::default()
        };
        for worker in workers {
            report.calls.extend(worker.calls);
            report.renewals += worker.renewals;
            report.fresh_clients += worker.fresh_clients;
        }
        report.calls.sort_by_key(|c| c.ended);
        report
    }
}

/// When a disruption of a load happened ([`Load::around`]): it began at `before` and was
/// done at `after`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// When the disruption began.
    pub before: Instant,
    /// When it was done.
    pub after: Instant,
}

impl Load {
    /// Runs this load's clients until they flow (each answered twice over, in all), then
    /// `disrupt`, then until every client has had a call answered that it sent after the
    /// disruption; the report and when the disruption happened. Panics when the calls do
    /// not flow, or do not go on, within a minute.
    pub async fn around(
        &self,
        disrupt: impl std::future::Future<Output = ()>,
    ) -> (LoadReport, Window) {
        let bound = Duration::from_secs(60);
        let (stop, stopped) = watch::channel(false);
        let running = self.run_until(stopped);
        let clients = self.clients;
        let flowing = running
            .progress()
            .until(bound, |p| p.answered() >= 2 * clients);
        assert!(flowing.await, "calls did not flow");
        let before = Instant::now();
        disrupt.await;
        let after = Instant::now();
        let went_on = running
            .progress()
            .until(bound, |p| p.clients_answered_since(after) == clients);
        let went_on = went_on.await;
        stop.send(true).expect("the load's clients listen");
        let report = running.report().await;
        assert!(
            went_on,
            "calls did not go on after the disruption: {}",
            report.sample_failures()
        );
        (report, Window { before, after })
    }
}

impl LoadReport {
    /// Asserts what a disruption in `window` may do to this load: no call hung, every call
    /// that failed was in flight during it, and every client's calls sent after it were
    /// answered.
    pub fn assert_only_in_flight_failed(&self, window: Window) {
        assert_eq!(self.hung(), 0, "{}", self.sample_failures());
        for call in self.failed() {
            assert!(
                call.started <= window.after && call.ended >= window.before,
                "failed but not in flight at the disruption ({:?} after it): {call:?}",
                call.started.saturating_duration_since(window.after)
            );
        }
        let clients = self.calls.iter().map(|c| c.client + 1).max().unwrap_or(0);
        for client in 0..clients {
            let next: Vec<_> = self
                .calls
                .iter()
                .filter(|c| c.client == client && c.started > window.after)
                .collect();
            assert!(
                !next.is_empty(),
                "client {client} made no call after the disruption"
            );
            assert!(
                next.iter().all(|c| c.outcome == Outcome::Answered),
                "client {client}: {next:?}"
            );
        }
    }
}

/// A load running until stopped ([`Load::run_until`]).
#[derive(Debug)]
pub struct Running {
    progress: Arc<Progress>,
    tasks: tokio::task::JoinSet<Worker>,
    started: Instant,
}

impl Running {
    /// The counts so far.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Waits for every client to end its last call (stop the load first): the report.
    pub async fn report(mut self) -> LoadReport {
        let mut workers = Vec::new();
        while let Some(done) = self.tasks.join_next().await {
            workers.push(done.expect("a load client panicked"));
        }
        LoadReport::of(workers, self.started)
    }
}
