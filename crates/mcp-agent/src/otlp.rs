//! Traces over OTLP (feature `otlp`): the `tracing` spans of the libraries (a run, each
//! call, a gateway's calls) as OpenTelemetry spans, sent in batches over HTTP/protobuf, for
//! an application that has no OpenTelemetry set-up of its own (the `mcp-agent` binary uses
//! it). One that has one needs only the `otel` feature: its own tracing-opentelemetry layer
//! then gives the calls their trace context.
//!
//! Configured by the standard variables only: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns it on — unset or empty, [`OtlpTraces::from_env`]
//! makes nothing: no exporter, no background thread, no layer; `OTEL_SERVICE_NAME` (default
//! `mcp-agent`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`,
//! `OTEL_EXPORTER_OTLP_HEADERS` and the batch processor's `OTEL_BSP_*` as the OpenTelemetry
//! SDK reads them; `OTEL_SDK_DISABLED=true` turns it off. Spans still queued are flushed when
//! the [`OtlpTraces`] is dropped.
//!
//! The exporter's HTTP client is hyper's (no reqwest, no gRPC); the SDK exports from a thread
//! of its own, where hyper finds no runtime, so its requests run on a one-thread runtime kept
//! for them, apart from the application's.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt as _;
//! use tracing_subscriber::util::SubscriberInitExt as _;
//!
//! // Kept until the process ends: dropping it flushes what is queued.
//! let traces = match mcp_agent::otlp::OtlpTraces::from_env() {
//!     Some(Ok(traces)) => Some(traces),
//!     Some(Err(e)) => { eprintln!("warning: traces are not exported: {e}"); None }
//!     None => None,
//! };
//! tracing_subscriber::registry()
//!     .with(traces.as_ref().map(|t| t.layer()))
//!     .init();
//! ```

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{Filtered, LevelFilter, Targets};
use tracing_subscriber::registry::LookupSpan;

/// Why traces could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The runtime of the exporter's requests could not start.
    #[error("the OTLP export runtime could not start: {0}")]
    Runtime(#[source] std::io::Error),
    /// The OTLP exporter refused its configuration (e.g. an endpoint that is no URL).
    #[error("the OTLP exporter could not be made: {0}")]
    Exporter(String),
}

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
const SERVICE_NAME: &str = "mcp-agent";

/// How long one export request may take (OTLP's default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the flush at the end of a command may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The tracer provider of the process and the runtime its exports run on. Dropping it
/// flushes what is queued (for at most 5 s) and stops both.
pub struct OtlpTraces {
    provider: SdkTracerProvider,
    runtime: Option<tokio::runtime::Runtime>,
}

impl fmt::Debug for OtlpTraces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpTraces").finish_non_exhaustive()
    }
}

impl OtlpTraces {
    /// The traces the environment asks for: `None` without an OTLP endpoint (or with
    /// `OTEL_SDK_DISABLED=true`), else the provider, or why it could not be made.
    pub fn from_env() -> Option<Result<Self, OtlpError>> {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        let disabled =
            std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if disabled
            || !(set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        {
            return None;
        }
        Some(Self::start(None))
    }

    /// Traces sent to `endpoint` (the full URL of the traces path, e.g.
    /// `http://collector:4318/v1/traces`) whatever `OTEL_EXPORTER_OTLP_*ENDPOINT` says; the
    /// other variables as [`from_env`](Self::from_env) reads them.
    ///
    /// ```no_run
    /// let traces = mcp_agent::otlp::OtlpTraces::with_endpoint("http://127.0.0.1:4318/v1/traces")?;
    /// # Ok::<(), mcp_agent::otlp::OtlpError>(())
    /// ```
    pub fn with_endpoint(endpoint: &str) -> Result<Self, OtlpError> {
        Self::start(Some(endpoint))
    }

    fn start(endpoint: Option<&str>) -> Result<Self, OtlpError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()
            .map_err(OtlpError::Runtime)?;
        let client = OnRuntime {
            client: HyperClient::with_default_connector(EXPORT_TIMEOUT, None),
            runtime: runtime.handle().clone(),
        };
        let mut exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client);
        if let Some(endpoint) = endpoint {
            exporter = exporter.with_endpoint(endpoint);
        }
        let exporter = exporter
            .build()
            .map_err(|e| OtlpError::Exporter(e.to_string()))?;
        let mut resource = Resource::builder();
        if !names_service() {
            resource = resource.with_service_name(SERVICE_NAME);
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Self {
            provider,
            runtime: Some(runtime),
        })
    }

    /// The `tracing` layer that turns spans at `info` and above into this provider's
    /// OpenTelemetry spans (events in them become span events), rmcp's aside (its spans wrap
    /// each message, not what a call does). Whatever filters the log leaves it alone.
    pub fn layer<S>(&self) -> Filtered<OpenTelemetryLayer<S, SdkTracer>, Targets, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let spans = Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("rmcp", LevelFilter::OFF);
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("mcp-agent"))
            .with_filter(spans)
    }
}

impl Drop for OtlpTraces {
    fn drop(&mut self) {
        // Best effort: an unreachable collector costs at most the flush timeout.
        let _ = self.provider.shutdown_with_timeout(FLUSH_TIMEOUT);
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// True when the environment names the service (`OTEL_SERVICE_NAME`, or `service.name` in
/// `OTEL_RESOURCE_ATTRIBUTES`), which the SDK then reads itself.
fn names_service() -> bool {
    std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|attrs| {
            attrs
                .split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        })
}

/// hyper's client, its requests spawned on a runtime of their own: the SDK's batch
/// processor exports from a plain thread, where hyper finds no runtime.
#[derive(Debug)]
struct OnRuntime {
    client: HyperClient,
    runtime: tokio::runtime::Handle,
}

#[async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await
            .map_err(|e| -> HttpError { Box::new(e) })?
    }
}
