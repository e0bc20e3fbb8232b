//! `[serve] metrics` (`--metrics ADDR`): the gateway's own listener for operators, apart from
//! the MCP endpoint and its authentication (loopback unless configured otherwise). It answers
//! `GET /metrics` with the Prometheus text of everything the library counts (the recorder is
//! `metrics-exporter-prometheus`, installed for the process before anything is counted),
//! `/healthz` with `200` while the process answers, and `/readyz` with `200` while the gateway
//! accepts sessions (and the fleet's Redis answers a `PING` in time, when `[serve] state` is
//! set), `503` with the reason otherwise: starting, draining, stopped, Redis failing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use mcp_agent::{Redactor, telemetry};
use mcp_serve::ServeState;
use mcp_state::RedisState;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use super::exit::Exit;
use super::term::{chain, say};

/// How long `/readyz` waits for Redis's `PING`.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 256;

/// How long a client may take to send a request head (and, kept alive, to send the next).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the recorder drops what it no longer needs, between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MonitorError {
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The Prometheus recorder cannot be built or installed.
    #[error("the Prometheus recorder: {0}")]
    Recorder(String),
}

/// What `/readyz` asks: set once the gateway serves (before, it is starting), and whether it
/// is leaving (told to stop, still serving through `[serve] drain_delay_seconds`).
#[derive(Clone, Default)]
struct Readiness(Arc<OnceLock<Serving>>, Arc<AtomicBool>);

struct Serving {
    state: watch::Receiver<ServeState>,
    redis: Option<RedisState>,
}

impl Readiness {
    /// From now on ready while `state` is [`ServeState::Serving`] and `redis` (the fleet's
    /// state, when configured) answers.
    fn serving(&self, state: watch::Receiver<ServeState>, redis: Option<RedisState>) {
        let _ = self.0.set(Serving { state, redis });
    }

    /// `Ok` when ready, else why not.
    async fn check(&self) -> Result<(), String> {
        let Some(serving) = self.0.get() else {
            return Err("starting".into());
        };
        if self.1.load(Ordering::Relaxed) {
            return Err("draining".into());
        }
        match *serving.state.borrow() {
            ServeState::Serving => {}
            ServeState::Draining => return Err("draining".into()),
            _ => return Err("stopped".into()),
        }
        if let Some(redis) = &serving.redis {
            redis
                .ping_within(PING_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// The running listener; dropping it stops it.
pub(crate) struct Monitor {
    addr: SocketAddr,
    readiness: Readiness,
    tasks: [JoinHandle<()>; 2],
}

/// Starts the listener on `bind`, when set, and says where (warning when the address is not
/// loopback: nothing there is authenticated). A failure is the configuration's: its exit code.
pub(crate) async fn start(
    bind: Option<SocketAddr>,
    secrets: &Redactor,
) -> Result<Option<Monitor>, ExitCode> {
    let Some(bind) = bind else {
        return Ok(None);
    };
    match Monitor::start(bind).await {
        Ok(monitor) => {
            let addr = monitor.addr();
            say(format_args!(
                "metrics on {addr} (/metrics, /healthz, /readyz)"
            ));
            if !addr.ip().is_loopback() {
                say(format_args!(
                    "warning: metrics on {addr}, which is not loopback: whoever reaches it reads \
                     the servers' and tools' names and counts (it has no authentication)"
                ));
            }
            Ok(Some(monitor))
        }
        Err(e) => {
            say(format_args!(
                "error: [serve] metrics: {}",
                chain(secrets, &e)
            ));
            Err(Exit::InvalidConfig.into())
        }
    }
}

impl Monitor {
    /// Installs the Prometheus recorder for the process, describes the metrics, and serves
    /// them with the health checks on `bind`.
    async fn start(bind: SocketAddr) -> Result<Self, MonitorError> {
        let readiness = Readiness::default();
        let recorder =
            |e: metrics_exporter_prometheus::BuildError| MonitorError::Recorder(e.to_string());
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| MonitorError::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MonitorError::Bind { addr: bind, source })?;
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full(telemetry::TOOL_CALL_DURATION.into()),
                telemetry::DURATION_BUCKETS,
            )
            .map_err(recorder)?
            .install_recorder()
            .map_err(recorder)?;
        telemetry::describe();
        let upkeep = {
            let handle = handle.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(UPKEEP_EVERY).await;
                    handle.run_upkeep();
                }
            })
        };
        let serve = tokio::spawn(accept(listener, handle, readiness.clone()));
        Ok(Self {
            addr,
            readiness,
            tasks: [upkeep, serve],
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The gateway was told to stop: from now on `/readyz` says it is draining, though it still
    /// serves until its drain begins.
    pub(crate) fn leaving(&self) {
        self.readiness.1.store(true, Ordering::Relaxed);
    }

    /// The gateway serves, in `state`: `/readyz` says so while it does, and while `redis`
    /// (the fleet's shared state, when configured) answers.
    pub(crate) fn serving(&self, state: watch::Receiver<ServeState>, redis: Option<RedisState>) {
        self.readiness.serving(state, redis);
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Serves each connection on its own task, at most [`MAX_CONNECTIONS`] at once.
async fn accept(listener: TcpListener, handle: PrometheusHandle, readiness: Readiness) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            // A failed accept (out of descriptors) is retried after a pause.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (handle, readiness) = (handle.clone(), readiness.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (handle, readiness) = (handle.clone(), readiness.clone());
                async move { Ok::<_, Infallible>(answer(&request, &handle, &readiness).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(slot);
        });
    }
}

/// The answer to one request (its body is never read).
async fn answer(
    request: &Request<Incoming>,
    handle: &PrometheusHandle,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, handle.render());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match readiness.check().await {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /healthz, /readyz\n".into(),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
